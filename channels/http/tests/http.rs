//! The conformance suite against the HTTP channel, driven over its real API: the channel's
//! router served by axum on 127.0.0.1, reqwest as the client, and an in-memory [`Backend`] in
//! the daemon's place.
//!
//! The suite's words map onto the turns API like this. The *platform* is the API's clients: a
//! user's message is `POST /api/v1/turns`, which a client sends again with the same
//! Idempotency-Key until it is accepted (a 503 while hearth cannot store it, or no answer), and
//! sends once more when an acknowledgement was lost. What the platform *shows* in a chat (a
//! conversation) is what `GET /api/v1/turns/{id}/events` tells of its turns: each turn's answer
//! is one message, its `text.delta` preview until its final text replaces it. The daemon sends
//! on this channel only in answer to a turn, so the harness addresses the suite's sends to one
//! ([`Harness::address`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use hearth_channel::testkit::{
    Document, Harness, MemoryState, PATIENCE, RecordingSink, Running, Shown,
};
use hearth_channel::{Channel, ChatRef, InboundKind, OutboundMessage, Sender};
use hearth_http::{
    Agent, Backend, BackendError, ChatMessage, ChatTurn, Completion, Confirmation,
    ConfirmationStatus, Event, HttpChannel, HttpConfig, NewEvent, NewTurn, Outcome, Scope, Started,
    Token, TurnRecord, TurnState, hash_token,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The token the harness's client uses; its identity is `http:conformance`.
const TOKEN_NAME: &str = "conformance";
/// The conversation the suite's chat is.
const CONVERSATION: &str = "suite";
/// How long a client waits for an answer before it sends the request again.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long reading a running turn's events waits for one more before it shows what it has.
const IDLE_READ: Duration = Duration::from_millis(300);

// ----- the daemon's side, in memory -----

/// The daemon's side of the channel for the suite: tokens, turns and their events, in memory.
/// A turn starts running as soon as it is stored (nothing queues here); no confirmations wait
/// and no model answers.
#[derive(Default)]
struct Memory {
    state: Mutex<Stored>,
}

#[derive(Default)]
struct Stored {
    tokens: HashMap<String, Token>,
    /// Turns in the order they were started, with their Idempotency-Key and request hash.
    turns: Vec<(TurnRecord, String, String)>,
    /// `(turn, event, dedup key)`, in order.
    events: Vec<(String, Event, Option<String>)>,
    chat_turns: Vec<(String, String, ChatTurn)>,
    /// The confirmations a test makes wait, as the daemon would store them.
    confirmations: Vec<Confirmation>,
    clock: i64,
}

impl Memory {
    fn lock(&self) -> MutexGuard<'_, Stored> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The turns of the chat `token/conversation`, oldest first.
    fn turns_of(&self, chat: &ChatRef) -> Vec<TurnRecord> {
        self.lock()
            .turns
            .iter()
            .filter(|(t, _, _)| format!("{}/{}", t.token, t.conversation) == chat.chat_id)
            .map(|(t, _, _)| t.clone())
            .collect()
    }
}

#[async_trait]
impl Backend for Memory {
    async fn authenticate(&self, hash: &str) -> Result<Option<Token>, BackendError> {
        Ok(self.lock().tokens.get(hash).cloned())
    }

    async fn start_turn(&self, turn: &NewTurn) -> Result<Started, BackendError> {
        let mut stored = self.lock();
        if let Some((record, _, sha)) = stored
            .turns
            .iter()
            .find(|(t, key, _)| t.token == turn.token && *key == turn.idem_key)
        {
            return Ok(if *sha == turn.body_sha {
                Started::Existing(record.clone())
            } else {
                Started::Conflict
            });
        }
        stored.clock += 1;
        let record = TurnRecord {
            id: turn.id.clone(),
            token: turn.token.clone(),
            conversation: turn.conversation.clone(),
            agent: turn.agent.clone(),
            platform_id: turn.platform_id.clone(),
            state: TurnState::Running,
            final_text: None,
            created_at: stored.clock,
        };
        stored
            .turns
            .push((record.clone(), turn.idem_key.clone(), turn.body_sha.clone()));
        Ok(Started::New(record))
    }

    async fn turn(&self, id: &str) -> Result<Option<TurnRecord>, BackendError> {
        Ok(self
            .lock()
            .turns
            .iter()
            .find(|(t, _, _)| t.id == id)
            .map(|(t, _, _)| t.clone()))
    }

    async fn append(&self, turn: &str, event: &NewEvent) -> Result<(), BackendError> {
        let mut stored = self.lock();
        if event.dedup.is_some()
            && stored
                .events
                .iter()
                .any(|(t, _, dedup)| t == turn && *dedup == event.dedup)
        {
            return Ok(());
        }
        let seq = i64::try_from(stored.events.len()).unwrap_or(i64::MAX) + 1;
        stored.events.push((
            turn.to_string(),
            Event {
                seq,
                kind: event.kind,
                data: event.data.clone(),
            },
            event.dedup.clone(),
        ));
        if let Some(state) = event.state
            && let Some((record, _, _)) = stored.turns.iter_mut().find(|(t, _, _)| t.id == turn)
            && !record.state.has_ended()
        {
            record.state = state;
            if event.final_text.is_some() {
                record.final_text = event.final_text.clone();
            }
        }
        Ok(())
    }

    async fn running_turn(&self, chat_id: &str) -> Result<Option<String>, BackendError> {
        Ok(self
            .lock()
            .turns
            .iter()
            .rev()
            .find(|(t, _, _)| {
                format!("{}/{}", t.token, t.conversation) == chat_id
                    && t.state == TurnState::Running
            })
            .map(|(t, _, _)| t.id.clone()))
    }

    async fn events_after(&self, turn: &str, after: i64) -> Result<Vec<Event>, BackendError> {
        Ok(self
            .lock()
            .events
            .iter()
            .filter(|(t, e, _)| t == turn && e.seq > after)
            .map(|(_, e, _)| e.clone())
            .collect())
    }

    async fn outcome(&self, _platform_id: &str) -> Result<Option<Outcome>, BackendError> {
        // No model runs here: every answer is as a chat command's (no turn of the daemon).
        Ok(None)
    }

    async fn confirmation(
        &self,
        _token: &str,
        id: &str,
    ) -> Result<Option<Confirmation>, BackendError> {
        Ok(self
            .lock()
            .confirmations
            .iter()
            .find(|c| c.id == id)
            .cloned())
    }

    async fn pending_confirmations(&self, _token: &str) -> Result<Vec<Confirmation>, BackendError> {
        Ok(self
            .lock()
            .confirmations
            .iter()
            .filter(|c| c.status == ConfirmationStatus::Pending && c.may_decide)
            .cloned()
            .collect())
    }

    async fn agents(&self) -> Result<Vec<Agent>, BackendError> {
        Ok(vec![Agent {
            id: "general".into(),
            name: "General".into(),
            description: "Everything".into(),
            keywords: Vec::new(),
            version: None,
        }])
    }

    async fn record_chat_turn(
        &self,
        turn: &TurnRecord,
        messages: &[ChatMessage],
    ) -> Result<(), BackendError> {
        self.lock().chat_turns.push((
            turn.token.clone(),
            turn.conversation.clone(),
            ChatTurn {
                turn: turn.id.clone(),
                state: turn.state,
                messages: messages.to_vec(),
                shown: None,
            },
        ));
        Ok(())
    }

    async fn chat_shown(&self, turn: &str, shown: &str) -> Result<(), BackendError> {
        for (_, _, chat_turn) in &mut self.lock().chat_turns {
            if chat_turn.turn == turn {
                chat_turn.shown = Some(shown.to_string());
            }
        }
        Ok(())
    }

    async fn chat_turns(
        &self,
        token: &str,
        conversation: &str,
    ) -> Result<Vec<ChatTurn>, BackendError> {
        Ok(self
            .lock()
            .chat_turns
            .iter()
            .filter(|(t, c, _)| t == token && c == conversation)
            .map(|(_, _, chat_turn)| chat_turn.clone())
            .collect())
    }

    async fn plain_completion(
        &self,
        _token: &Token,
        _agent: Option<&str>,
        _messages: &[ChatMessage],
    ) -> Result<Completion, BackendError> {
        Err(BackendError(
            "no model answers in the conformance suite".into(),
        ))
    }
}

// ----- the platform: the API's clients -----

struct HttpHarness {
    channel: Arc<HttpChannel>,
    backend: Arc<Memory>,
    base: String,
    token: String,
    client: reqwest::Client,
    /// The body sent under each Idempotency-Key, to send it again.
    bodies: Mutex<HashMap<String, Value>>,
    /// The turn a reply with a delivery id answers, so a resend goes to the same turn.
    by_delivery: Mutex<HashMap<String, String>>,
    /// The client's requests, sent in order, each until it is accepted.
    queue: mpsc::UnboundedSender<(String, Value)>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for HttpHarness {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn unique_key() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!("key-{}", COUNTER.fetch_add(1, Ordering::Relaxed))
}

impl HttpHarness {
    async fn start() -> Self {
        let backend = Arc::new(Memory::default());
        let token = hearth_http::new_token();
        backend.lock().tokens.insert(
            hash_token(&token),
            Token {
                name: TOKEN_NAME.into(),
                scope: Scope::Approve,
                agents: Vec::new(),
            },
        );
        let channel = Arc::new(HttpChannel::new(HttpConfig::default()));
        let router = channel.api().router(backend.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port on 127.0.0.1");
        let base = format!("http://{}", listener.local_addr().expect("its address"));
        let server = tokio::spawn(async move {
            let app = router.into_make_service_with_connect_info::<SocketAddr>();
            if let Err(err) = axum::serve(listener, app).await {
                panic!("the API server stopped: {err}");
            }
        });
        let client = reqwest::Client::new();
        let (queue, requests) = mpsc::unbounded_channel();
        let sender = tokio::spawn(send_in_order(
            client.clone(),
            format!("{base}/api/v1/turns"),
            token.clone(),
            requests,
        ));
        Self {
            channel,
            backend,
            base,
            token,
            client,
            bodies: Mutex::new(HashMap::new()),
            by_delivery: Mutex::new(HashMap::new()),
            queue,
            tasks: vec![server, sender],
        }
    }

    /// A turn in `chat` as a client's earlier message started it, for a reply to answer.
    async fn new_turn(&self, chat: &ChatRef) -> String {
        let conversation = conversation_of(chat).unwrap_or(CONVERSATION).to_string();
        let key = unique_key();
        let turn = NewTurn {
            id: format!("t_{key}"),
            token: TOKEN_NAME.into(),
            idem_key: key.clone(),
            body_sha: key.clone(),
            platform_id: format!("{TOKEN_NAME}/{key}"),
            conversation,
            agent: "auto".into(),
        };
        match self.backend.start_turn(&turn).await {
            Ok(Started::New(record)) => record.id,
            other => panic!("the in-memory backend did not start a turn: {other:?}"),
        }
    }

    /// What the events API tells of `turn`: its events until it ends or, while it runs, until
    /// none comes for a moment.
    async fn events(&self, turn: &str) -> Vec<(String, Value)> {
        let response = self
            .client
            .get(format!("{}/api/v1/turns/{turn}/events", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap_or_else(|e| panic!("reading the events of {turn} failed: {e}"));
        assert_eq!(response.status(), 200, "events of {turn}");
        let mut stream = response.bytes_stream();
        let mut buffer = String::new();
        let mut events = Vec::new();
        while let Ok(Some(Ok(chunk))) = tokio::time::timeout(IDLE_READ, stream.next()).await {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                let (mut kind, mut data) = (None, String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        kind = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if let Some(kind) = kind {
                    events.push((kind, serde_json::from_str(&data).unwrap_or(Value::Null)));
                }
            }
        }
        events
    }
}

/// The conversation of a chat of the harness's token (`conformance/<conversation>`).
fn conversation_of(chat: &ChatRef) -> Option<&str> {
    chat.chat_id
        .strip_prefix(TOKEN_NAME)
        .and_then(|rest| rest.strip_prefix('/'))
}

/// A client that sends its requests in order, each again (same key, same body) until hearth
/// accepts it: after a 503, or when no answer comes in time. A refusal (another 4xx) is final.
async fn send_in_order(
    client: reqwest::Client,
    url: String,
    token: String,
    mut requests: mpsc::UnboundedReceiver<(String, Value)>,
) {
    while let Some((key, body)) = requests.recv().await {
        loop {
            let sent = client
                .post(&url)
                .bearer_auth(&token)
                .header("Idempotency-Key", &key)
                .json(&body)
                .timeout(CLIENT_TIMEOUT)
                .send()
                .await;
            match sent {
                Ok(response) if response.status() == 202 => break,
                Ok(response) if response.status().is_client_error() => {
                    // The check waiting for this message then names it as never arrived.
                    eprintln!(
                        "the API refused {body}: {} {}",
                        response.status(),
                        response.text().await.unwrap_or_default()
                    );
                    break;
                }
                // Not stored yet (503), or no answer: the same request again, as clients do.
                Ok(_) | Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
}

#[async_trait]
impl Harness for HttpHarness {
    fn channel(&self) -> Arc<dyn Channel> {
        self.channel.clone()
    }

    fn chat(&self) -> ChatRef {
        ChatRef::new(format!("{TOKEN_NAME}/{CONVERSATION}"))
    }

    fn sender(&self) -> Sender {
        Sender::new(TOKEN_NAME)
    }

    async fn address(&self, mut message: OutboundMessage) -> OutboundMessage {
        // The daemon answers a turn with the turn on the reply (the inbound event's context);
        // its reply quotes the turn's message, whose id is the turn's.
        let turn = match (&message.reply_to, &message.delivery_id) {
            (Some(turn), _) => turn.clone(),
            (None, Some(delivery)) => {
                let known = self
                    .by_delivery
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(delivery)
                    .cloned();
                match known {
                    Some(turn) => turn,
                    None => {
                        let turn = self.new_turn(&message.chat).await;
                        self.by_delivery
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(delivery.clone(), turn.clone());
                        turn
                    }
                }
            }
            (None, None) => self.new_turn(&message.chat).await,
        };
        message.reply_context = Some(json!({ "turn": turn }));
        message
    }

    async fn inject_text(&self, chat: &ChatRef, sender: &Sender, text: &str) -> Result<(), String> {
        let conversation =
            conversation_of(chat).ok_or_else(|| format!("{chat} is no chat of this token"))?;
        if sender.id != TOKEN_NAME {
            return Err(format!(
                "only the token's own identity writes here, not {}",
                sender.id
            ));
        }
        let key = unique_key();
        let body = json!({ "text": text, "conversation": conversation });
        self.bodies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone(), body.clone());
        self.queue
            .send((key, body))
            .map_err(|_| "the client stopped".to_string())
    }

    async fn inject_document(
        &self,
        _chat: &ChatRef,
        _sender: &Sender,
        _caption: &str,
        _document: &Document,
    ) -> Result<(), String> {
        Err("the turns API takes text only".into())
    }

    async fn redeliver(&self, platform_id: &str) -> Result<(), String> {
        // The platform id is `<token>/<Idempotency-Key>`: the client sends that request again.
        let key = platform_id
            .strip_prefix(TOKEN_NAME)
            .and_then(|rest| rest.strip_prefix('/'))
            .ok_or_else(|| format!("{platform_id} is not a turn of this token"))?;
        let body = self
            .bodies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
            .ok_or_else(|| format!("no request was sent with the key {key}"))?;
        self.queue
            .send((key.to_string(), body))
            .map_err(|_| "the client stopped".to_string())
    }

    async fn shown(&self, chat: &ChatRef) -> Vec<Shown> {
        let mut shown = Vec::new();
        for turn in self.backend.turns_of(chat) {
            let answer = |text: String| Shown {
                id: format!("reply:{}", turn.id),
                text,
                reply_to: Some(turn.id.clone()),
                ..Shown::default()
            };
            // The answer's preview, until its final text replaces it.
            let mut preview: Option<String> = None;
            for (kind, data) in self.events(&turn.id).await {
                let text = data["text"].as_str().unwrap_or_default().to_string();
                match kind.as_str() {
                    "text.delta" => {
                        let so_far = preview.get_or_insert_with(String::new);
                        if data["reset"].as_bool() == Some(true) {
                            so_far.clear();
                        }
                        so_far.push_str(&text);
                    }
                    "turn.completed" | "turn.failed" | "message" => {
                        preview = None;
                        shown.push(answer(text));
                    }
                    "confirmation.required" => shown.push(Shown {
                        id: format!("confirm:{}:{}", turn.id, data["id"].as_str().unwrap_or("")),
                        text,
                        reply_to: Some(turn.id.clone()),
                        ..Shown::default()
                    }),
                    _ => {}
                }
            }
            if let Some(preview) = preview {
                shown.push(answer(preview));
            }
        }
        shown
    }

    async fn refuse_login(&self) -> Result<(), String> {
        Err("the channel logs in nowhere: it serves, and checks each client's token".into())
    }
}

async fn harness() -> HttpHarness {
    HttpHarness::start().await
}

mod conformance {
    hearth_channel::conformance_tests!(
        super::harness,
        skip {
            check_edit: "edits exist for confirmation prompts only (their outcome becomes a \
            confirmation.decided event); a turn's answer, once an event, is never rewritten",
            check_inbound_edits: "a client cannot edit a turn it started; it starts another",
            check_attachments_in: "the turns API takes text only",
            check_state_failed_when_login_refused: "the channel logs in nowhere: it serves, and \
            each request's token is checked (401s: tests/e2e/http.rs)",
        }
    );
}

// ----- what the suite does not cover: prompts and bad requests -----

impl HttpHarness {
    async fn post(&self, path: &str, key: Option<&str>, body: reqwest::Body) -> (u16, Value) {
        let mut request = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .header("Content-Type", "application/json")
            .body(body);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        read(request).await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        read(
            self.client
                .get(format!("{}{path}", self.base))
                .bearer_auth(&self.token),
        )
        .await
    }
}

async fn read(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.expect("the API answers");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test]
async fn a_prompt_shows_with_its_code_and_a_decision_over_the_api_arrives_as_a_press() {
    let h = HttpHarness::start().await;
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    let chat = h.chat();
    let turn = h.new_turn(&chat).await;
    h.backend.lock().confirmations.push(Confirmation {
        id: "conf-1".into(),
        code: Some("K7Q2MX".into()),
        tool: "delete_task".into(),
        arguments: json!({ "task_id": 1 }),
        status: ConfirmationStatus::Pending,
        expires_at: 0,
        turn: Some(turn.clone()),
        may_decide: true,
        own: true,
    });

    // The daemon's prompt for the turn: a `confirmation.required` event with its code.
    let mut prompt = OutboundMessage::text(
        chat.clone(),
        "Delete task 1? Reply APPROVE K7Q2MX to let it run or DENY K7Q2MX to refuse.",
    );
    prompt.reply_to = Some(turn.clone());
    let prompt = h.address(prompt).await;
    let sent = h.channel.send(&prompt).await.expect("the prompt is sent");
    assert_eq!(sent.message_id, format!("confirm:{turn}:conf-1"));
    let events = h.events(&turn).await;
    let (_, required) = events
        .iter()
        .find(|(kind, _)| kind == "confirmation.required")
        .unwrap_or_else(|| panic!("no confirmation.required: {events:?}"));
    assert_eq!(required["code"], "K7Q2MX");
    assert_eq!(required["tool"], "delete_task");
    // The arguments as JSON, not the text the chat shows.
    assert_eq!(required["arguments"], json!({ "task_id": 1 }));
    let (_, state) = h.get(&format!("/api/v1/turns/{turn}")).await;
    assert_eq!(state["state"], "awaiting_confirmation");
    let (_, pending) = h.get("/api/v1/confirmations").await;
    assert_eq!(pending["confirmations"][0]["id"], "conf-1");

    // A bad decision is refused and decides nothing.
    let (status, body) = h
        .post(
            "/api/v1/confirmations/conf-1",
            None,
            json!({ "decision": "maybe" }).to_string().into(),
        )
        .await;
    assert_eq!(status, 400, "{body}");

    // Decided over the API: the daemon gets the press a button would make.
    let decide = tokio::spawn({
        let (client, url, token) = (
            h.client.clone(),
            format!("{}/api/v1/confirmations/conf-1", h.base),
            h.token.clone(),
        );
        async move {
            read(
                client
                    .post(url)
                    .bearer_auth(token)
                    .json(&json!({ "decision": "approve" })),
            )
            .await
        }
    });
    let press = running
        .sink
        .wait_for_event(|e| matches!(e.kind, InboundKind::Press(_)), PATIENCE)
        .await
        .expect("the decision reaches the inbox as a press");
    let InboundKind::Press(press) = &press.kind else {
        unreachable!("matched above")
    };
    assert_eq!(press.data, "c:conf-1:a", "the approve button's data");
    // The daemon's resolver stores the decision; the request answers with it.
    h.backend.lock().confirmations[0].status = ConfirmationStatus::Approved;
    let (status, decided) = decide.await.expect("the request ends");
    assert_eq!(
        (status, &decided["status"]),
        (200, &json!("approved")),
        "{decided}"
    );
    let (status, again) = h
        .post(
            "/api/v1/confirmations/conf-1",
            None,
            json!({ "decision": "deny" }).to_string().into(),
        )
        .await;
    assert_eq!(status, 409, "{again}");

    // The daemon edits the prompt with the outcome: `confirmation.decided`, and the turn runs.
    h.channel
        .edit(
            &sent,
            &h.address(OutboundMessage::text(
                chat.clone(),
                "✅ Approved by conformance",
            ))
            .await,
        )
        .await
        .expect("the prompt takes its outcome");
    let events = h.events(&turn).await;
    let (_, decided) = events
        .iter()
        .find(|(kind, _)| kind == "confirmation.decided")
        .unwrap_or_else(|| panic!("no confirmation.decided: {events:?}"));
    assert_eq!(decided["decision"], "approved");
    let (_, state) = h.get(&format!("/api/v1/turns/{turn}")).await;
    assert_eq!(state["state"], "running");
    running.stop().await;
}

#[tokio::test]
async fn bad_requests_are_refused_saying_why_and_deliver_nothing() {
    let h = HttpHarness::start().await;
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    let turns = "/api/v1/turns";
    let good = json!({ "text": "hello", "conversation": CONVERSATION }).to_string();

    let (status, body) = read(
        h.client
            .post(format!("{}{turns}", h.base))
            .header("Idempotency-Key", "k")
            .body(good.clone()),
    )
    .await;
    assert_eq!(status, 401, "no token: {body}");
    let (status, _) = read(
        h.client
            .post(format!("{}{turns}", h.base))
            .bearer_auth("hth_not-a-token")
            .header("Idempotency-Key", "k")
            .body(good.clone()),
    )
    .await;
    assert_eq!(status, 401, "a wrong token");

    let refused: [(&str, Option<&str>, String, u16, &str); 7] = [
        ("no key", None, good.clone(), 400, "Idempotency-Key"),
        ("not JSON", Some("k1"), "{text".into(), 400, "JSON"),
        (
            "a typo",
            Some("k2"),
            json!({ "txt": "hi" }).to_string(),
            400,
            "txt",
        ),
        (
            "empty text",
            Some("k3"),
            json!({ "text": "  " }).to_string(),
            400,
            "empty",
        ),
        (
            "a bad conversation",
            Some("k4"),
            json!({ "text": "hi", "conversation": "two words" }).to_string(),
            400,
            "conversation",
        ),
        (
            "an unknown agent",
            Some("k5"),
            json!({ "text": "hi", "agent": "nobody" }).to_string(),
            400,
            "no agent",
        ),
        (
            "too large",
            Some("k6"),
            json!({ "text": "x".repeat(HttpConfig::default().max_body_bytes) }).to_string(),
            413,
            "larger than",
        ),
    ];
    for (what, key, body, status, says) in refused {
        let (got, answer) = h.post(turns, key, body.into()).await;
        assert_eq!(got, status, "{what}: {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(says)),
            "{what}: the error does not say {says:?}: {answer}"
        );
    }

    // The same key for another request: 409, and only the first is delivered.
    let (status, _) = h.post(turns, Some("k7"), good.clone().into()).await;
    assert_eq!(status, 202);
    let other = json!({ "text": "other", "conversation": CONVERSATION }).to_string();
    let (status, conflict) = h.post(turns, Some("k7"), other.into()).await;
    assert_eq!(status, 409, "{conflict}");
    running.sink.wait_text("hello", PATIENCE).await;
    assert_eq!(
        running.sink.attempts().len(),
        1,
        "only the good request reached the inbox: {:?}",
        running.sink.attempts()
    );
    running.stop().await;
}
