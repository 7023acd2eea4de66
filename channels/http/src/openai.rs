//! The OpenAI-compatible endpoint: `GET /v1/models` and `POST /v1/chat/completions`, so chat
//! UIs (Open WebUI, LobeChat), editors and scripts that speak OpenAI can talk to hearth's
//! agents. A completion is a turn of the native API underneath: stored in the inbox before it
//! is answered, answered once, its events read from the database.
//!
//! **One conversation per client chat.** Clients send the whole chat every time. Its key is the
//! `X-Hearth-Conversation` header, else Open WebUI's `X-OpenWebUI-Chat-Id`, else the `user`
//! field, else one derived from the token and the chat's first user message. Only the trailing
//! user message is new; the messages before it are compared with what hearth stored for the
//! conversation (the user messages, and the assistant text hearth sent, where it knows it).
//! When they differ (an earlier message edited, an answer regenerated), the request starts a
//! *branch*: a conversation keyed by the conversation and the history up to the first
//! difference, whose first turn carries the client's transcript so the model sees what the
//! user sees. The same history later finds the same branch. The same request again gets the
//! same turn's answer while that answer was never sent in full (a retry after a dropped
//! connection), and is a regeneration (a branch) once it was.
//!
//! **Approvals.** A turn that needs one says so in the answer (the tool, what it would do, the
//! short code) and keeps the response open with keep-alives up to `[channels.http]
//! confirm_wait_secs`; decided meanwhile (over the native API, in the owner's chat, or by a
//! typed code), the answer goes on in the same response; otherwise it ends saying the turn
//! waits. A later message `approve CODE` / `deny CODE` decides it and its answer carries the
//! resumed turn's.
//!
//! **Stop.** A client that closes a streamed answer before its end (Open WebUI's Stop button)
//! cancels the turn it followed, unless that turn ended meanwhile; the reason is recorded as
//! the turn's `turn.cancelling` event. A cancelled turn is never an answer to attach a retry
//! to: the same request again gets a new turn. A non-streamed request's client that gives up
//! cancels nothing (its retry gets the same turn's answer).
//!
//! **Background requests** of chat UIs (Open WebUI's title, tags and follow-up prompts, whose
//! last user message starts with `### Task:`) get one plain model call: no tools, no history,
//! not stored as a turn.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use hearth_channel::confirmation::{code_attempt_in, is_decision_text};

use crate::Shared;
use crate::auth::hex;
use crate::backend::TurnState;
use crate::backend::{ChatMessage, ChatTurn, Scope, Token, TurnRecord, Usage};
use crate::common::{ApiError, KEEP_ALIVE, POLL, body_bytes, check_name, need, random_id};
use crate::turns::{Opening, deliver_turn, open_turn, request_cancel, resolve_agent};
use hearth_channel::TurnEventKind;

/// The model that routes by keywords, as `/v1/models` lists it.
const ROUTED_MODEL: &str = "hearth";
/// The most branches followed to place one request; past it, a fresh conversation is started.
const MAX_BRANCH_HOPS: usize = 64;
/// What starts the last user message of a chat UI's background request (Open WebUI's title,
/// tags and follow-up templates).
const TASK_PREFIX: &str = "### Task:";

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/v1/models", get(list_models))
        .route("/v1/chat/completions", post(chat_completions))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn list_models(
    State(shared): State<Arc<Shared>>,
    Extension(token): Extension<Token>,
) -> Response {
    let backend = match shared.backend() {
        Ok(backend) => backend.clone(),
        Err(err) => return ApiError::unavailable(err).for_openai().into_response(),
    };
    let agents = match backend.agents().await {
        Ok(agents) => agents,
        Err(err) => return ApiError::unavailable(err).for_openai().into_response(),
    };
    let model = |id: String, name: String, description: String| {
        json!({
            "id": id, "object": "model", "created": 0, "owned_by": "hearth",
            "name": name, "description": description,
        })
    };
    let mut data = Vec::new();
    // `hearth` routes by keywords; a token limited to several agents must name one.
    if token.agents.len() <= 1 {
        data.push(model(
            ROUTED_MODEL.into(),
            "hearth".into(),
            "hearth picks the agent by the message's keywords".into(),
        ));
    }
    for agent in agents.into_iter().filter(|a| token.may_use(&a.id)) {
        data.push(model(
            format!("{ROUTED_MODEL}/{}", agent.id),
            agent.name,
            agent.description,
        ));
    }
    Json(json!({ "object": "list", "data": data })).into_response()
}

/// The request: what hearth reads of it. Other fields (temperature, max_tokens …) are
/// accepted and ignored: the agent's configuration decides them.
#[derive(Deserialize)]
struct CompletionRequest {
    model: String,
    messages: Vec<RequestMessage>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    tools: Option<Value>,
    #[serde(default)]
    functions: Option<Value>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

#[derive(Deserialize)]
struct RequestMessage {
    role: String,
    #[serde(default)]
    content: Option<Value>,
}

fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::openai(StatusCode::BAD_REQUEST, code, message)
}

/// A message's text: a string, or the text parts of a list of parts.
fn text_of(content: Option<&Value>) -> Result<String, ApiError> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for part in parts {
                match (part["type"].as_str(), part["text"].as_str()) {
                    (Some("text"), Some(text)) => texts.push(text),
                    (kind, _) => {
                        return Err(bad_request(
                            "unsupported_content",
                            format!(
                                "a message part of type {}: hearth takes text only",
                                kind.unwrap_or("(none)")
                            ),
                        ));
                    }
                }
            }
            Ok(texts.join("\n"))
        }
        Some(_) => Err(bad_request(
            "invalid_request",
            "a message's content must be a string or a list of text parts",
        )),
    }
}

/// The request's messages as text, refusing what hearth cannot take (tool results, images).
fn read_messages(request: &CompletionRequest) -> Result<Vec<ChatMessage>, ApiError> {
    let mut messages = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        let role = match message.role.as_str() {
            "system" | "developer" => "system",
            "user" => "user",
            "assistant" => "assistant",
            "tool" | "function" => {
                return Err(bad_request(
                    "tools_not_supported",
                    "a message with role `tool`: hearth runs its own tools and takes no tool results from the client",
                ));
            }
            other => {
                return Err(bad_request(
                    "invalid_request",
                    format!("unknown message role `{other}`"),
                ));
            }
        };
        messages.push(ChatMessage {
            role: role.into(),
            content: text_of(message.content.as_ref())?,
        });
    }
    match messages.iter().rfind(|m| m.role != "system") {
        Some(last) if last.role == "user" && !last.content.trim().is_empty() => Ok(messages),
        Some(last) if last.role == "user" => Err(bad_request(
            "no_user_message",
            "the last user message is empty: there is nothing to answer",
        )),
        _ => Err(bad_request(
            "no_user_message",
            "no user message to answer: the last message must be the user's",
        )),
    }
}

/// Whether a client-supplied list of tools or functions is there (an empty list is as none).
fn has_entries(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Array(items)) => !items.is_empty(),
        Some(_) => true,
    }
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    Extension(token): Extension<Token>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match complete(shared, token, headers, body).await {
        Ok(response) => response,
        Err(err) => err.for_openai().into_response(),
    }
}

async fn complete(
    shared: Arc<Shared>,
    token: Token,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let bytes = body_bytes(&shared, body)?;
    let request: CompletionRequest = serde_json::from_slice(&bytes).map_err(|err| {
        bad_request(
            "invalid_json",
            format!("the body is not a chat completion request: {err}"),
        )
    })?;
    if has_entries(request.tools.as_ref()) || has_entries(request.functions.as_ref()) {
        return Err(bad_request(
            "tools_not_supported",
            "client-supplied `tools`/`functions` are not accepted: hearth's agents run their own tools (with approvals where needed); send the request without them",
        ));
    }
    let agent = model_agent(&shared, &token, &request.model).await?;
    let messages = read_messages(&request)?;
    let trailing = messages
        .last()
        .map(|m| m.content.clone())
        .unwrap_or_default();
    let include_usage = request
        .stream_options
        .as_ref()
        .is_some_and(|o| o.include_usage);
    let reply = Reply {
        id: String::new(),
        model: request.model.clone(),
        stream: request.stream,
        include_usage,
    };

    if trailing.trim_start().starts_with(TASK_PREFIX) {
        return background(&shared, &token, &agent, &messages, reply).await;
    }

    let backend = shared.backend().map_err(ApiError::unavailable)?.clone();
    let transcript: Vec<ChatMessage> = messages
        .iter()
        .filter(|m| m.role != "system")
        .map(|m| ChatMessage {
            role: m.role.clone(),
            content: m.content.trim().to_string(),
        })
        .collect();
    let key = conversation_key(&headers, request.user.as_deref(), &token, &transcript)?;

    // A typed decision of a pending confirmation: its answer goes on with the waiting turn's.
    // A token that may only chat decides nothing: refused here with the OpenAI error clients
    // show, before a turn is stored (the daemon would refuse it too).
    if is_decision_text(&trailing) {
        need(&token, Scope::Approve)?;
    }
    let decided = match code_attempt_in(&trailing).map(|attempt| attempt.code) {
        Some(code) => {
            let pending = backend
                .pending_confirmations(&token.name)
                .await
                .map_err(ApiError::unavailable)?;
            match pending
                .into_iter()
                .find(|c| c.code.as_deref() == Some(code.as_str()))
            {
                Some(found) => match &found.turn {
                    Some(turn) => Some(Resume {
                        turn: turn.clone(),
                        after: last_seq(&backend, turn).await?,
                        confirmation: found.id.clone(),
                        code: code.clone(),
                    }),
                    None => None,
                },
                None => None,
            }
        }
        None => None,
    };

    // Before the turn is placed, so a refused stream starts nothing.
    let open = if request.stream {
        Some(shared.open_stream(&token.name)?)
    } else {
        None
    };
    let record = place_turn(&shared, &token, &agent, &key, &transcript, &bytes).await?;
    let reply = Reply {
        id: format!("chatcmpl-{}", record.id),
        ..reply
    };
    let plan = Plan {
        turn: record,
        resume: decided,
        confirm_wait: Duration::from_secs(shared.config.confirm_wait_secs),
        stop_on_close: reply.stream,
    };
    Ok(answer(shared, plan, reply, open).await)
}

/// The sequence number of the last event stored for `turn` (0: none).
async fn last_seq(backend: &Arc<dyn crate::Backend>, turn: &str) -> Result<i64, ApiError> {
    let mut after = 0;
    loop {
        let events = backend
            .events_after(turn, after)
            .await
            .map_err(ApiError::unavailable)?;
        match events.last() {
            Some(last) => after = last.seq,
            None => return Ok(after),
        }
    }
}

/// `hearth` (keyword routing) or `hearth/<agent>`; the agent the token gets for it.
async fn model_agent(shared: &Shared, token: &Token, model: &str) -> Result<String, ApiError> {
    let requested = if model == ROUTED_MODEL {
        "auto"
    } else {
        model
            .strip_prefix("hearth/")
            .filter(|agent| !agent.is_empty() && *agent != "auto")
            .ok_or_else(|| {
                ApiError::openai(
                    StatusCode::NOT_FOUND,
                    "model_not_found",
                    format!(
                        "there is no model `{model}`: use `hearth` (keyword routing) or `hearth/<agent>` (GET /v1/models lists them)"
                    ),
                )
            })?
    };
    if requested != "auto" {
        let backend = shared.backend().map_err(ApiError::unavailable)?;
        let agents = backend.agents().await.map_err(ApiError::unavailable)?;
        if !agents.iter().any(|a| a.id == requested) {
            return Err(ApiError::openai(
                StatusCode::NOT_FOUND,
                "model_not_found",
                format!(
                    "there is no model `{model}`: no agent `{requested}` (GET /v1/models lists them)"
                ),
            ));
        }
    }
    resolve_agent(shared, token, requested)
        .await
        .map_err(|err| {
            if err.status == StatusCode::FORBIDDEN && requested == "auto" {
                ApiError::openai(
                    StatusCode::FORBIDDEN,
                    "model_not_allowed",
                    format!(
                        "{}; pick `hearth/<agent>` (GET /v1/models lists yours)",
                        err.message
                    ),
                )
            } else {
                err
            }
        })
}

fn sha_hex(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hex(&hasher.finalize())
}

/// The conversation of a client chat: `X-Hearth-Conversation`, else `X-OpenWebUI-Chat-Id`,
/// else `user`, else derived from the token and the first user message.
fn conversation_key(
    headers: &HeaderMap,
    user: Option<&str>,
    token: &Token,
    transcript: &[ChatMessage],
) -> Result<String, ApiError> {
    if let Some(value) = headers.get("x-hearth-conversation") {
        let key = value.to_str().unwrap_or_default().trim().to_string();
        check_name("X-Hearth-Conversation", &key)?;
        return Ok(key);
    }
    let named = headers
        .get("x-openwebui-chat-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|id| format!("owui-{id}"))
        .or_else(|| {
            user.map(str::trim)
                .filter(|u| !u.is_empty())
                .map(|u| format!("user-{u}"))
        });
    if let Some(named) = named {
        // Any name works: one that is not a short visible ASCII word is hashed.
        return Ok(if check_name("", &named).is_ok() {
            named
        } else {
            format!("n_{}", &sha_hex(&[&named])[..32])
        });
    }
    let first = transcript
        .iter()
        .find(|m| m.role == "user")
        .map_or("", |m| m.content.as_str());
    Ok(format!("d_{}", &sha_hex(&[&token.name, first])[..32]))
}

/// Where a request goes in its conversation.
#[derive(Debug, PartialEq, Eq)]
enum Placement {
    /// The stored history is the client's: the trailing message is the next turn.
    Continue,
    /// Nothing stored yet: a new conversation, carrying the client's earlier messages if any.
    Fresh,
    /// The same request again while its answer was not given in full (a retry after a dropped
    /// connection): the answer of that turn.
    Attach(String),
    /// The history differs: go to the branch keyed by the history up to the difference.
    Branch(String),
}

/// What a conversation stored, as entries of the transcript; `None` content: the assistant's
/// answer not (yet) known as shown, which any text matches.
fn stored_entries(turns: &[ChatTurn]) -> Vec<(&str, Option<&str>)> {
    let mut entries = Vec::new();
    for turn in turns {
        for message in &turn.messages {
            entries.push((message.role.as_str(), Some(message.content.as_str())));
        }
        entries.push(("assistant", turn.shown.as_deref()));
    }
    entries
}

fn entry_matches(entry: &(&str, Option<&str>), message: &ChatMessage) -> bool {
    entry.0 == message.role && entry.1.is_none_or(|c| c.trim() == message.content.trim())
}

fn same(entries: &[(&str, Option<&str>)], messages: &[ChatMessage]) -> bool {
    entries.len() == messages.len()
        && entries
            .iter()
            .zip(messages)
            .all(|(e, m)| entry_matches(e, m))
}

/// Where the client's `transcript` (ending with the new user message) goes in `conversation`,
/// which stored `turns`.
fn place(conversation: &str, turns: &[ChatTurn], transcript: &[ChatMessage]) -> Placement {
    let entries = stored_entries(turns);
    let prior = &transcript[..transcript.len() - 1];
    if entries.is_empty() {
        return Placement::Fresh;
    }
    if same(&entries, prior) {
        return Placement::Continue;
    }
    // The same request again: a retry when its answer never reached the client in full (it
    // runs still, or the connection broke before its end), which then gets that answer; a
    // regeneration once the client had it, or once the turn was cancelled (a stopped answer
    // asked again is answered anew).
    if let Some(last) = turns.last()
        && last.state != TurnState::Cancelled
        && (!last.state.has_ended() || last.shown.is_none())
        && same(&entries[..entries.len() - 1], transcript)
    {
        return Placement::Attach(last.turn.clone());
    }
    let common = entries
        .iter()
        .zip(transcript)
        .take_while(|(e, m)| entry_matches(e, m))
        .count();
    let upto = common.min(transcript.len() - 1);
    let history = serde_json::to_string(&transcript[..=upto]).unwrap_or_default();
    Placement::Branch(format!("b_{}", &sha_hex(&[conversation, &history])[..32]))
}

/// Finds the conversation the request continues (following branches), opens its turn and
/// hands the message to the inbox; or finds the turn a retry belongs to.
async fn place_turn(
    shared: &Shared,
    token: &Token,
    agent: &str,
    key: &str,
    transcript: &[ChatMessage],
    body: &[u8],
) -> Result<TurnRecord, ApiError> {
    let backend = shared.backend().map_err(ApiError::unavailable)?.clone();
    let unavailable = |err: crate::BackendError| ApiError::unavailable(err);
    let mut conversation = key.to_string();
    let mut hops = 0;
    let fresh = loop {
        let turns = backend
            .chat_turns(&token.name, &conversation)
            .await
            .map_err(unavailable)?;
        match place(&conversation, &turns, transcript) {
            Placement::Continue => break false,
            Placement::Fresh => break true,
            Placement::Attach(turn) => {
                let record = backend
                    .turn(&turn)
                    .await
                    .map_err(unavailable)?
                    .ok_or_else(|| ApiError::unavailable(format!("turn {turn} vanished")))?;
                return Ok(record);
            }
            Placement::Branch(next) => {
                hops += 1;
                conversation = if hops > MAX_BRANCH_HOPS {
                    // Dozens of regenerations of one chat: start afresh rather than walk on.
                    format!("b_{}", random_id())
                } else {
                    next
                };
            }
        }
    };
    let trailing = transcript.last().map_or("", |m| m.content.as_str());
    let prior = &transcript[..transcript.len() - 1];
    // A fresh conversation (a branch, or a chat hearth never saw) carries the client's earlier
    // messages; a typed decision stays as typed, for the daemon to read.
    let (covers, text) = if fresh && !prior.is_empty() && code_attempt_in(trailing).is_none() {
        (transcript.to_vec(), with_history(prior, trailing))
    } else {
        (
            transcript[transcript.len() - 1..].to_vec(),
            trailing.to_string(),
        )
    };
    let history = serde_json::to_string(transcript).unwrap_or_default();
    let request_sha = sha_hex(&[&conversation, &history]);
    let record = open_turn(
        shared,
        token,
        Opening {
            key: format!("oa-{}", &request_sha[..40]),
            body_sha: hex(&Sha256::digest(body)),
            conversation,
            agent: agent.to_string(),
        },
    )
    .await?;
    backend
        .record_chat_turn(&record, &covers)
        .await
        .map_err(unavailable)?;
    deliver_turn(shared, token, &record, &text).await?;
    Ok(record)
}

/// The message of a turn that starts a conversation from a client's history: the history as
/// the client shows it, then the new message.
fn with_history(prior: &[ChatMessage], trailing: &str) -> String {
    let mut text = String::from("[The chat so far, as my chat app shows it]\n");
    for message in prior {
        text.push_str(&format!("{}: {}\n", message.role, message.content));
    }
    text.push_str("[My new message]\n");
    text.push_str(trailing);
    text
}

/// How to answer: the completion's id and model, streamed or not, usage in the stream.
#[derive(Clone)]
struct Reply {
    id: String,
    model: String,
    stream: bool,
    include_usage: bool,
}

/// What a turn's answer is made of, as it comes.
enum Piece {
    Text(String),
    End(Usage),
    /// hearth stops: a stream ends with a comment saying so (its turn goes on after the
    /// restart, and is not cancelled as if the client had pressed Stop).
    Stopping,
}

fn usage_json(usage: &Usage) -> Value {
    json!({
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    })
}

impl Reply {
    fn chunk(&self, created: u64, delta: Value, finish: Option<&str>) -> SseEvent {
        let chunk = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": created,
            "model": self.model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        });
        SseEvent::default().data(chunk.to_string())
    }

    /// The stream's events for one piece of the answer.
    fn events(&self, created: u64, piece: Piece) -> Vec<SseEvent> {
        match piece {
            Piece::Text(text) => vec![self.chunk(created, json!({ "content": text }), None)],
            Piece::End(usage) => {
                let mut events = vec![self.chunk(created, json!({}), Some("stop"))];
                if self.include_usage {
                    let chunk = json!({
                        "id": self.id, "object": "chat.completion.chunk", "created": created,
                        "model": self.model, "choices": [], "usage": usage_json(&usage),
                    });
                    events.push(SseEvent::default().data(chunk.to_string()));
                }
                events.push(SseEvent::default().data("[DONE]"));
                events
            }
            Piece::Stopping => vec![SseEvent::default().comment(crate::STOPPING_COMMENT)],
        }
    }

    fn completion(&self, created: u64, text: &str, usage: &Usage) -> Response {
        Json(json!({
            "id": self.id, "object": "chat.completion", "created": created, "model": self.model,
            "choices": [{
                "index": 0,
                "message": { "role": "assistant", "content": text },
                "finish_reason": "stop",
            }],
            "usage": usage_json(usage),
        }))
        .into_response()
    }
}

/// The chat turn whose answer a response carries: the text the client was sent is noted on
/// it once the end of the answer was handed to the connection.
struct ShownOn {
    backend: Arc<dyn crate::Backend>,
    turn: String,
}

impl ShownOn {
    async fn record(&self, text: &str) {
        if let Err(err) = self.backend.chat_shown(&self.turn, text).await {
            // The next request then matches any text for this answer.
            tracing::warn!(error = %err, turn = %self.turn, "noting the answer shown failed");
        }
    }
}

/// The answer to a request from the pieces `produce` sends: a stream of chunks, or one
/// completion at the end.
async fn respond(
    reply: Reply,
    mut pieces: mpsc::Receiver<Piece>,
    shown_on: Option<ShownOn>,
    open: Option<crate::OpenStream>,
) -> Response {
    let created = unix_now();
    if reply.stream {
        let first = reply.chunk(created, json!({ "role": "assistant", "content": "" }), None);
        // The connection pulls the next piece once it took the last: when it pulls the end,
        // everything before was handed to it.
        // `open` rides along: the stream keeps its token's place until it is dropped.
        let rest = futures::stream::unfold(
            (pieces, String::new(), shown_on, reply.clone(), open),
            move |(mut pieces, mut text, shown_on, reply, open)| async move {
                let piece = pieces.recv().await?;
                match &piece {
                    Piece::Text(more) => text.push_str(more),
                    Piece::End(_) => {
                        if let Some(shown_on) = &shown_on {
                            shown_on.record(&text).await;
                        }
                    }
                    Piece::Stopping => {}
                }
                let events = reply.events(created, piece);
                Some((events, (pieces, text, shown_on, reply, open)))
            },
        );
        let stream = futures::stream::once(async { vec![first] })
            .chain(rest)
            .flat_map(futures::stream::iter)
            .map(Ok::<_, std::convert::Infallible>);
        return Sse::new(stream)
            .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
            .into_response();
    }
    let mut text = String::new();
    let mut usage = Usage::default();
    while let Some(piece) = pieces.recv().await {
        match piece {
            Piece::Text(more) => text.push_str(&more),
            Piece::End(total) => {
                usage = total;
                if let Some(shown_on) = &shown_on {
                    shown_on.record(&text).await;
                }
            }
            // A whole answer ends with what it has; the turn goes on after the restart.
            Piece::Stopping => {}
        }
    }
    reply.completion(created, &text, &usage)
}

/// A background request: one plain model call, answered in the request's form.
async fn background(
    shared: &Shared,
    token: &Token,
    agent: &str,
    messages: &[ChatMessage],
    reply: Reply,
) -> Result<Response, ApiError> {
    let backend = shared.backend().map_err(ApiError::unavailable)?.clone();
    let agent = (agent != "auto").then_some(agent);
    let completion = backend
        .plain_completion(token, agent, messages)
        .await
        .map_err(|err| {
            ApiError::openai(
                StatusCode::BAD_GATEWAY,
                "model_call_failed",
                format!("the model call failed: {err}"),
            )
        })?;
    let reply = Reply {
        id: format!("chatcmpl-bg-{}", random_id()),
        ..reply
    };
    let (tx, rx) = mpsc::channel(4);
    // The channel holds both pieces: nothing waits here.
    let _ = tx.try_send(Piece::Text(completion.text));
    let _ = tx.try_send(Piece::End(completion.usage));
    drop(tx);
    Ok(respond(reply, rx, None, None).await)
}

/// A confirmation decided by the request's typed code: its turn's answer follows.
struct Resume {
    turn: String,
    /// The last event of that turn seen before the code was delivered.
    after: i64,
    confirmation: String,
    /// Its code as typed (upper-cased): told again if the decision does not come in time.
    code: String,
}

struct Plan {
    turn: TurnRecord,
    resume: Option<Resume>,
    confirm_wait: Duration,
    /// Whether the client closing the response cancels the turn it follows: a streamed answer,
    /// which OpenAI clients (Open WebUI's Stop button) close to stop the generation. A client
    /// waiting for a whole answer that gives up is a retry to come, answered by the same turn.
    stop_on_close: bool,
}

async fn answer(
    shared: Arc<Shared>,
    plan: Plan,
    reply: Reply,
    open: Option<crate::OpenStream>,
) -> Response {
    let shown_on = shared.backend().ok().map(|backend| ShownOn {
        backend: backend.clone(),
        turn: plan.turn.id.clone(),
    });
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(produce(shared, plan, tx));
    respond(reply, rx, shown_on, open).await
}

/// The text sent so far and where it goes.
struct Out {
    tx: mpsc::Sender<Piece>,
    shown: String,
    /// Cancelled when hearth stops: the answer then ends (see `Piece::Stopping`).
    stopping: tokio_util::sync::CancellationToken,
}

impl Out {
    /// Sends `text`; false when the client is gone.
    async fn text(&mut self, text: &str) -> bool {
        if text.is_empty() {
            return true;
        }
        self.shown.push_str(text);
        self.tx.send(Piece::Text(text.to_string())).await.is_ok()
    }

    /// Sends `text` as a paragraph of its own.
    async fn paragraph(&mut self, text: &str) -> bool {
        if text.is_empty() {
            return true;
        }
        if !self.shown.is_empty() && !self.shown.ends_with("\n\n") {
            let separator = if self.shown.ends_with('\n') {
                "\n"
            } else {
                "\n\n"
            };
            if !self.text(separator).await {
                return false;
            }
        }
        self.text(text).await
    }
}

/// How following a turn ended.
enum Ended {
    /// The turn ended (completed, failed or cancelled), with its tokens.
    Done(Usage),
    /// It waits for a confirmation longer than the answer waits.
    Waiting(Usage),
    /// The client went away, or the events could not be read.
    Gone,
    /// hearth stops.
    Stopping,
}

/// Follows the answer's turn (and the turn a typed code resumed) and sends what it says.
async fn produce(shared: Arc<Shared>, plan: Plan, tx: mpsc::Sender<Piece>) {
    let mut out = Out {
        tx,
        shown: String::new(),
        stopping: shared.stopping(),
    };
    let mut following = plan.turn.id.clone();
    let mut ended = follow(&shared, &plan.turn, 0, None, plan.confirm_wait, &mut out).await;
    // The typed code's own turn ended; the waiting turn goes on once the daemon decided. If it
    // did not take the code (a typing mistake it read as a message, a token that may not
    // decide), the answer still ends within `confirm_wait_secs`, saying that it waits.
    if let (Ended::Done(_), Some(resume)) = (&ended, &plan.resume) {
        let waiting = match shared.backend() {
            Ok(backend) => backend.turn(&resume.turn).await.ok().flatten(),
            Err(_) => None,
        };
        if let Some(waiting) = waiting {
            following = waiting.id.clone();
            ended = follow(
                &shared,
                &waiting,
                resume.after,
                Some(resume),
                plan.confirm_wait,
                &mut out,
            )
            .await;
        }
    }
    let usage = match ended {
        Ended::Done(usage) | Ended::Waiting(usage) => usage,
        Ended::Stopping => {
            // Nobody may be listening any more: nothing to report.
            let _ = out.tx.send(Piece::Stopping).await;
            return;
        }
        Ended::Gone => {
            // A stream closed by hearth's own stop is no Stop button.
            if plan.stop_on_close && out.tx.is_closed() && !out.stopping.is_cancelled() {
                stop_closed(&shared, &following).await;
            }
            return;
        }
    };
    let _ = out.tx.send(Piece::End(usage)).await;
}

/// The client closed a streamed answer (a Stop button): the turn it followed is cancelled,
/// unless it ended meanwhile. One waiting for approval is cancelled too, its confirmation
/// decided as cancelled.
async fn stop_closed(shared: &Shared, turn: &str) {
    let record = match shared.backend() {
        Ok(backend) => backend.turn(turn).await,
        Err(err) => Err(crate::BackendError(err.to_string())),
    };
    let record = match record {
        Ok(Some(record)) if !record.state.has_ended() => record,
        Ok(_) => return,
        Err(err) => {
            tracing::warn!(error = %err, turn, "a client closed its streamed answer; reading its turn to cancel it failed");
            return;
        }
    };
    let reason = "the client closed the streamed completion (a Stop button)";
    if let Err(err) = request_cancel(shared, &record, reason).await {
        tracing::warn!(error = %err.message, turn, "a client closed its streamed answer; cancelling its turn failed");
    }
}

fn usage_of(data: &Value) -> Usage {
    Usage {
        input_tokens: data["usage"]["input_tokens"].as_i64().unwrap_or(0),
        output_tokens: data["usage"]["output_tokens"].as_i64().unwrap_or(0),
    }
}

/// Sends the events of `turn` after `after` as text until it ends or waits too long for a
/// confirmation. For a turn `resumed` by a typed code, the wait for its decision counts from
/// now, and the decision is not told again (the code's own turn told it).
async fn follow(
    shared: &Shared,
    turn: &TurnRecord,
    mut after: i64,
    resumed: Option<&Resume>,
    confirm_wait: Duration,
    out: &mut Out,
) -> Ended {
    let skip_decided = resumed.map(|r| r.confirmation.as_str());
    let Ok(backend) = shared.backend().cloned() else {
        return Ended::Gone;
    };
    let mut appended = shared.appended.subscribe();
    // The text of the current model call, as shown so far.
    let mut draft = String::new();
    // The code and deadline of a confirmation the turn waits for: the resumed turn's
    // confirmation.required was before `after`, so without this it would wait unbounded.
    let mut waiting: Option<(String, Instant)> =
        resumed.map(|r| (r.code.clone(), Instant::now() + confirm_wait));
    loop {
        appended.borrow_and_update();
        let events = match backend.events_after(&turn.id, after).await {
            Ok(events) => events,
            Err(err) => {
                tracing::warn!(error = %err, turn = %turn.id, "reading a turn's events failed");
                out.paragraph(&format!("⚠️ hearth could not read this turn's progress ({err}); ask again to see its answer.")).await;
                return Ended::Waiting(Usage::default());
            }
        };
        if events.is_empty() {
            if out.tx.is_closed() {
                return Ended::Gone;
            }
            let mut pause = POLL;
            if let Some((code, deadline)) = &waiting {
                let now = Instant::now();
                if now >= *deadline {
                    let note = format!(
                        "⏳ Still waiting for approval. Send `approve {code}` (or `deny {code}`) here when you have decided; the answer then comes in this chat."
                    );
                    if !out.paragraph(&note).await {
                        return Ended::Gone;
                    }
                    let usage = match backend.outcome(&turn.platform_id).await {
                        Ok(Some(outcome)) => outcome.usage,
                        _ => Usage::default(),
                    };
                    return Ended::Waiting(usage);
                }
                pause = pause.min(*deadline - now);
            }
            tokio::select! {
                _ = appended.changed() => {}
                () = tokio::time::sleep(pause) => {}
                () = out.stopping.cancelled() => return Ended::Stopping,
            }
            continue;
        }
        for event in events {
            after = event.seq;
            let data = &event.data;
            let text = data["text"].as_str().unwrap_or_default();
            let sent = match event.kind {
                TurnEventKind::TextDelta => {
                    let reset = data["reset"].as_bool().unwrap_or(false);
                    let now = if reset {
                        text.to_string()
                    } else {
                        format!("{draft}{text}")
                    };
                    let sent = match now.strip_prefix(draft.as_str()) {
                        // The first words of a model call after an approval line or another
                        // call's text: a paragraph of their own, not glued to it.
                        Some(more) if draft.is_empty() => out.paragraph(more).await,
                        Some(more) => out.text(more).await,
                        // A new model call rewrote the preview: its text is a new paragraph.
                        None => out.paragraph(&now).await,
                    };
                    draft = now;
                    sent
                }
                TurnEventKind::ConfirmationRequired => {
                    let code = data["code"].as_str().unwrap_or_default().to_string();
                    let call = shown_call(data);
                    let note = format!(
                        "⏸ Needs approval: `{call}`.\nReply `approve {code}` to let it run or `deny {code}` to refuse (or use the approval in the owner's chat)."
                    );
                    draft.clear();
                    waiting = Some((code, Instant::now() + confirm_wait));
                    out.paragraph(&note).await
                }
                TurnEventKind::ConfirmationDecided => {
                    waiting = None;
                    draft.clear();
                    let id = data["id"].as_str().unwrap_or_default();
                    if skip_decided == Some(id) {
                        true
                    } else {
                        let note = match data["decision"].as_str().unwrap_or_default() {
                            "approved" => "✅ Approved.",
                            "denied" => "❌ Denied.",
                            "expired" => "⌛ The approval expired.",
                            _ => "The approval was decided.",
                        };
                        out.paragraph(note).await
                    }
                }
                TurnEventKind::Message => {
                    draft.clear();
                    out.paragraph(text).await
                }
                TurnEventKind::TurnCompleted | TurnEventKind::TurnFailed => {
                    let text = if event.kind == TurnEventKind::TurnFailed && text.is_empty() {
                        data["error"].as_str().unwrap_or("the turn failed")
                    } else {
                        text
                    };
                    let sent = match text.strip_prefix(draft.as_str()) {
                        Some(rest) if !draft.is_empty() => out.text(rest).await,
                        _ if draft.trim() == text.trim() => true,
                        // The answer with the turn's plan above it: the plan was not streamed,
                        // and the answer was.
                        _ if !draft.trim().is_empty()
                            && text.trim_end().ends_with(draft.trim()) =>
                        {
                            true
                        }
                        _ => out.paragraph(text).await,
                    };
                    if !sent {
                        return Ended::Gone;
                    }
                    return Ended::Done(usage_of(data));
                }
                // Progress a chat UI does not show.
                TurnEventKind::AgentSelected
                | TurnEventKind::ToolStarted
                | TurnEventKind::ToolFinished
                | TurnEventKind::PlanUpdated
                | TurnEventKind::TurnCancelling => true,
            };
            if !sent {
                return Ended::Gone;
            }
        }
    }
}

/// The call a `confirmation.required` event waits on, as a chat shows it: the tool with its
/// arguments as compact JSON, e.g. `delete_task({"task_id":1})`, cut after 300 characters.
fn shown_call(data: &Value) -> String {
    let tool = data["tool"].as_str().unwrap_or("a tool");
    let arguments = match &data["arguments"] {
        Value::Null => return tool.to_string(),
        Value::String(text) => text.clone(),
        arguments => arguments.to_string(),
    };
    let arguments = match arguments.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &arguments[..cut]),
        None => arguments,
    };
    format!("{tool}({arguments})")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }

    fn turn(id: &str, state: &str, messages: Vec<ChatMessage>, shown: Option<&str>) -> ChatTurn {
        ChatTurn {
            turn: id.into(),
            state: TurnState::parse(state).expect("a turn state"),
            messages,
            shown: shown.map(str::to_string),
        }
    }

    #[test]
    fn a_chat_continues_while_its_history_is_what_hearth_stored() {
        let stored = [
            turn("t1", "completed", vec![msg("user", "hi")], Some("Hello!")),
            turn("t2", "completed", vec![msg("user", "more")], None),
        ];
        let transcript = [
            msg("user", "hi"),
            msg("assistant", " Hello! "),
            msg("user", "more"),
            msg("assistant", "anything: not known as shown"),
            msg("user", "next"),
        ];
        assert_eq!(place("c", &stored, &transcript), Placement::Continue);
        assert_eq!(place("c", &[], &transcript), Placement::Fresh);
    }

    #[test]
    fn an_edited_message_or_a_regenerated_answer_goes_to_a_branch_found_again_later() {
        let stored = [
            turn("t1", "completed", vec![msg("user", "hi")], Some("Hello!")),
            turn("t2", "completed", vec![msg("user", "more")], Some("More.")),
        ];
        let edited = [
            msg("user", "hi"),
            msg("assistant", "Hello!"),
            msg("user", "less"),
        ];
        let Placement::Branch(branch) = place("c", &stored, &edited) else {
            panic!("a branch")
        };
        let mut later = edited.to_vec();
        later.extend([msg("assistant", "Less."), msg("user", "again")]);
        assert_eq!(
            place("c", &stored, &later),
            Placement::Branch(branch.clone()),
            "the same history finds the same branch"
        );
        let branch_turns = [turn("t3", "completed", edited.to_vec(), Some("Less."))];
        assert_eq!(place(&branch, &branch_turns, &later), Placement::Continue);

        // The same last message again: a retry while its turn runs, a regeneration after.
        let running = [
            turn("t1", "completed", vec![msg("user", "hi")], Some("Hello!")),
            turn("t2", "running", vec![msg("user", "more")], None),
        ];
        let again = [
            msg("user", "hi"),
            msg("assistant", "Hello!"),
            msg("user", "more"),
        ];
        assert_eq!(place("c", &running, &again), Placement::Attach("t2".into()));
        let cut_short = [
            turn("t1", "completed", vec![msg("user", "hi")], Some("Hello!")),
            turn("t2", "completed", vec![msg("user", "more")], None),
        ];
        assert_eq!(
            place("c", &cut_short, &again),
            Placement::Attach("t2".into()),
            "an answer the client never got in full is given again"
        );
        assert!(matches!(place("c", &stored, &again), Placement::Branch(_)));

        // A stopped (cancelled) answer: asked again, it is answered anew; the chat goes on
        // with whatever the client kept of it.
        let stopped = [
            turn("t1", "completed", vec![msg("user", "hi")], Some("Hello!")),
            turn("t2", "cancelled", vec![msg("user", "more")], None),
        ];
        assert!(
            matches!(place("c", &stopped, &again), Placement::Branch(_)),
            "a stopped answer asked again gets a new turn, not the cancelled one"
        );
        let mut next = again.to_vec();
        next.extend([msg("assistant", "Half an ans"), msg("user", "next")]);
        assert_eq!(place("c", &stopped, &next), Placement::Continue);
    }
}
