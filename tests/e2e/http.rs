//! The real `hearth run` binary with `[channels.http]`: the turns API over raw HTTP against
//! the fake LLM. A turn is stored before it is acknowledged and answered once; a retry with
//! the same Idempotency-Key gets the same turn; events resume with Last-Event-ID across a
//! SIGKILL or after the client closed the stream; confirmations are decided over the API or
//! expire; a running turn is cancelled, and so is one waiting for approval;
//! tokens missing, wrong, revoked, out of scope or in the URL are refused; bodies have a limit.

use std::time::Duration;

use futures::StreamExt;
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::support::{HearthProcess, llm_sections};

const WAIT: Duration = Duration::from_secs(20);

/// The agents of the HTTP channel's tests (the OpenAI endpoint lists them as models).
const AGENTS: &str = r#"
[[agent]]
id = "general"
name = "General"
emoji = "🏠"
description = "Everything else"
system_prompt = "PROMPT:general"
tool_groups = ["tasks"]
tool_mode = "direct"

[[agent]]
id = "finance"
name = "Finance"
emoji = "💰"
description = "Money"
system_prompt = "PROMPT:finance"
[agent.triggers]
keywords = ["spent", "budget"]
"#;

/// A hearth process with `[channels.http]` against a fake LLM, and a client of its API;
/// `openai_api.rs` adds the calls of the OpenAI-compatible endpoint.
pub(crate) struct Api {
    pub(crate) process: HearthProcess,
    pub(crate) llm: FakeOpenAi,
    pub(crate) client: reqwest::Client,
    /// The owner's token (scope admin).
    pub(crate) owner: String,
}

/// One Server-Sent Event as a client reads it.
#[derive(Clone, Debug)]
pub(crate) struct Sse {
    pub(crate) id: i64,
    pub(crate) event: String,
    pub(crate) data: Value,
}

impl Api {
    /// Configured with `extra` appended to `[channels.http]`, not started.
    pub(crate) async fn new(extra: &str) -> Self {
        Self::build("http:owner", &[], extra).await
    }

    /// A process whose `daemon.owner` is `owner`, with `env` set, `extra` appended to
    /// `[channels.http]`; not started.
    pub(crate) async fn build(owner: &str, env: &[(&'static str, &str)], extra: &str) -> Self {
        // No token may ever reach a log line: they all start with `hth_`.
        let mut process = HearthProcess::new("http", "hth_");
        for (key, value) in env {
            process = process.env(key, value);
        }
        let llm = FakeOpenAi::start().await;
        let config = format!(
            "{llm}\n[channels.http]\nmax_body_bytes = 4096\n{extra}\n",
            llm = llm_sections(&llm, false, true, (1.0, 2.0)),
        );
        process.write_config(owner, &config, AGENTS);
        // `daemon.owner` names the identity, so it exists before its token: the token is its.
        let owner = token_of(&process.cli(&[
            "token",
            "create",
            "owner",
            "--scope",
            "admin",
            "--same-user",
        ]));
        Self {
            process,
            llm,
            client: reqwest::Client::new(),
            owner,
        }
    }

    pub(crate) fn create_token(&self, args: &[&str]) -> String {
        let mut all = vec!["token", "create"];
        all.extend_from_slice(args);
        token_of(&self.process.cli(&all))
    }

    async fn post(&self, token: &str, path: &str, key: Option<&str>, body: Value) -> (u16, Value) {
        let mut request = self
            .client
            .post(self.process.url(path))
            .bearer_auth(token)
            .json(&body);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        answer(request).await
    }

    /// Starts a turn as the owner with Idempotency-Key `key`; the turn's id (after checking the
    /// 202).
    pub(crate) async fn start_turn(&self, key: &str, text: &str) -> String {
        let (status, started) = self
            .post(
                &self.owner,
                "/api/v1/turns",
                Some(key),
                json!({ "text": text }),
            )
            .await;
        assert_eq!(status, 202, "{started}");
        started["turn"].as_str().expect("turn").to_string()
    }

    /// The owner's turn `text` in `conversation` with Idempotency-Key `key`, run to its end:
    /// all its events (after checking the 202 and that the turn stayed in the conversation).
    async fn turn_in(&self, key: &str, conversation: &str, text: &str) -> Vec<Sse> {
        let (status, started) = self
            .post(
                &self.owner,
                "/api/v1/turns",
                Some(key),
                json!({ "text": text, "conversation": conversation }),
            )
            .await;
        assert_eq!(status, 202, "{started}");
        assert_eq!(started["conversation"], conversation);
        self.events(started["turn"].as_str().expect("turn"), None, None)
            .await
    }

    async fn get(&self, token: &str, path: &str) -> (u16, Value) {
        answer(self.client.get(self.process.url(path)).bearer_auth(token)).await
    }

    /// Reads the turn's events after `last` until the turn ends, or until `stop_after` events
    /// (then the connection is dropped, as a client that lost it).
    pub(crate) async fn events(
        &self,
        turn: &str,
        last: Option<i64>,
        stop_after: Option<usize>,
    ) -> Vec<Sse> {
        let mut request = self
            .client
            .get(self.process.url(&format!("/api/v1/turns/{turn}/events")))
            .bearer_auth(&self.owner);
        if let Some(last) = last {
            request = request.header("Last-Event-ID", last.to_string());
        }
        let response = request.send().await.expect("events answer");
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"],
            "text/event-stream",
            "SSE"
        );
        let mut stream = response.bytes_stream();
        let mut buffer = String::new();
        let mut events = Vec::new();
        let read = async {
            while let Some(chunk) = stream.next().await {
                let Ok(chunk) = chunk else { break };
                buffer.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buffer.find("\n\n") {
                    let block: String = buffer.drain(..end + 2).collect();
                    if let Some(event) = parse_sse(&block) {
                        events.push(event);
                        if stop_after.is_some_and(|n| events.len() >= n) {
                            return;
                        }
                    }
                }
            }
        };
        if tokio::time::timeout(WAIT, read).await.is_err() {
            panic!(
                "the event stream did not end: {events:?}\n{}",
                self.process.logs()
            );
        }
        events
    }
}

/// The token `hearth token create` printed.
fn token_of(output: &str) -> String {
    output
        .lines()
        .find(|line| line.starts_with("hth_"))
        .unwrap_or_else(|| panic!("no token printed: {output}"))
        .to_string()
}

/// A request's status and its body: JSON, or the text as a JSON string.
pub(crate) async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.expect("answers");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn parse_sse(block: &str) -> Option<Sse> {
    let (mut id, mut event, mut data) = (None, None, String::new());
    for line in block.lines() {
        if let Some(v) = line.strip_prefix("id:") {
            id = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("event:") {
            event = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.trim_start());
        }
    }
    Some(Sse {
        id: id?,
        event: event?,
        data: serde_json::from_str(&data).unwrap_or(Value::Null),
    })
}

fn kinds(events: &[Sse]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e.event.as_str())
        .filter(|k| *k != "text.delta")
        .collect()
}

#[tokio::test]
async fn a_turn_is_answered_once_and_a_retry_with_its_key_gets_the_same_turn() {
    let mut h = Api::new("").await;
    h.process.start().await;
    // Written slowly, so the stream shows it as it comes.
    h.llm
        .push(Reply::text("You spent **12 euros**.").pace(Duration::from_millis(100)));
    let body = json!({ "text": "what have I spent this week?" });
    let (status, first) = h
        .post(&h.owner, "/api/v1/turns", Some("key-1"), body.clone())
        .await;
    assert_eq!(status, 202, "{first}");
    let turn = first["turn"].as_str().expect("turn id").to_string();
    assert_eq!(first["events"], format!("/api/v1/turns/{turn}/events"));

    let (status, again) = h
        .post(&h.owner, "/api/v1/turns", Some("key-1"), body.clone())
        .await;
    assert_eq!(
        (status, &again),
        (202, &first),
        "a retry gets the same turn"
    );
    let (status, conflict) = h
        .post(
            &h.owner,
            "/api/v1/turns",
            Some("key-1"),
            json!({ "text": "other" }),
        )
        .await;
    assert_eq!(status, 409, "{conflict}");
    assert!(
        conflict["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("different request"))
    );
    let (status, missing) = h.post(&h.owner, "/api/v1/turns", None, body.clone()).await;
    assert_eq!(status, 400, "{missing}");
    assert!(
        missing["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Idempotency-Key"))
    );

    let events = h.events(&turn, None, None).await;
    assert_eq!(
        kinds(&events),
        ["agent.selected", "turn.completed"],
        "{events:?}"
    );
    assert_eq!(events[0].data["agent"], "finance");
    assert_eq!(events[0].data["keywords"], json!(["spent"]));
    let done = &events[events.len() - 1];
    assert_eq!(done.data["text"], "You spent **12 euros**.");
    assert_eq!(done.data["usage"]["input_tokens"], 12);
    assert_eq!(done.data["usage"]["output_tokens"], 7);
    assert!(
        done.data["cost_usd"].as_f64().is_some_and(|c| c > 0.0),
        "{done:?}"
    );
    let streamed: String = events
        .iter()
        .filter(|e| e.event == "text.delta")
        .filter_map(|e| e.data["text"].as_str())
        .collect();
    assert!(
        !streamed.is_empty() && "You spent **12 euros**.".starts_with(&streamed),
        "text.delta pieces: {events:?}"
    );
    let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids grow: {ids:?}");

    let (status, state) = h.get(&h.owner, &format!("/api/v1/turns/{turn}")).await;
    assert_eq!(status, 200);
    assert_eq!(state["state"], "completed");
    assert_eq!(state["text"], "You spent **12 euros**.");
    assert_eq!(h.llm.request_count(), 1, "answered exactly once");

    // The conversation goes on when the client names it.
    h.llm.push(Reply::text("And 3 more."));
    let conversation = first["conversation"].as_str().expect("conversation");
    let events = h.turn_in("key-2", conversation, "and today?").await;
    assert_eq!(events[events.len() - 1].data["text"], "And 3 more.");
    let history = h.llm.last_request().expect("request")["messages"].to_string();
    assert!(history.contains("what have I spent"), "{history}");

    let (status, agents) = h.get(&h.owner, "/api/v1/agents").await;
    assert_eq!(status, 200);
    assert_eq!(agents["agents"][1]["id"], "finance");
    assert_eq!(agents["agents"][1]["keywords"], json!(["spent", "budget"]));
    h.process.stop().await;
}

#[tokio::test]
async fn tokens_missing_wrong_revoked_out_of_scope_or_in_the_url_are_refused() {
    let mut h = Api::new("").await;
    let chat = h.create_token(&["webui", "--scope", "chat", "--agents", "general"]);
    let listed = h.process.cli(&["token", "list"]);
    assert!(
        listed.contains("webui  live  scope=chat  agents=general"),
        "{listed}"
    );
    assert!(!listed.contains("hth_"), "only hashes are kept: {listed}");
    h.process.start().await;

    let url = h.process.url("/api/v1/agents");
    let missing = h.client.get(&url).send().await.expect("answers");
    assert_eq!(missing.status(), 401);
    assert_eq!(missing.headers()["www-authenticate"], "Bearer");
    let (status, _) = h.get("hth_wrong", "/api/v1/agents").await;
    assert_eq!(status, 401);
    let (status, body) = answer(h.client.get(format!("{url}?token={chat}"))).await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Authorization"))
    );

    // The chat token sees only its agent, may not pick another, and may not decide.
    let (status, agents) = h.get(&chat, "/api/v1/agents").await;
    assert_eq!(status, 200);
    assert_eq!(agents["agents"].as_array().map(Vec::len), Some(1));
    let (status, body) = h
        .post(
            &chat,
            "/api/v1/turns",
            Some("k"),
            json!({ "text": "hi", "agent": "finance" }),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = h
        .post(
            &chat,
            "/api/v1/confirmations/abc",
            None,
            json!({ "decision": "approve" }),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("approve"))
    );
    // Other tokens' turns do not exist for it.
    h.llm.push(Reply::text("Hello."));
    let (_, own) = h
        .post(
            &h.owner,
            "/api/v1/turns",
            Some("o"),
            json!({ "text": "hi" }),
        )
        .await;
    let (status, _) = h
        .get(
            &chat,
            &format!("/api/v1/turns/{}", own["turn"].as_str().expect("turn")),
        )
        .await;
    assert_eq!(status, 404);

    // Too large a body: 413, saying the limit.
    let (status, body) = h
        .post(
            &h.owner,
            "/api/v1/turns",
            Some("big"),
            json!({ "text": "x".repeat(5000) }),
        )
        .await;
    assert_eq!(status, 413, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("4096"))
    );
    let (status, body) = h
        .post(
            &h.owner,
            "/api/v1/turns",
            Some("bad"),
            json!({ "txt": "typo" }),
        )
        .await;
    assert_eq!(status, 400, "{body}");

    // Revoked: 401 at once, while the daemon runs.
    let revoked = h.process.cli(&["token", "revoke", "webui"]);
    assert!(revoked.contains("revoked token webui"), "{revoked}");
    let (status, _) = h.get(&chat, "/api/v1/agents").await;
    assert_eq!(status, 401);

    // Failed attempts slow the address down: after five, its wrong tokens get 429 with
    // Retry-After; a valid token is never held up (http_doors tests more).
    for _ in 0..5 {
        h.get("hth_guess", "/api/v1/agents").await;
    }
    let slowed = h
        .client
        .get(&url)
        .bearer_auth("hth_guess")
        .send()
        .await
        .expect("answers");
    assert_eq!(slowed.status(), 429);
    assert!(slowed.headers().contains_key("retry-after"));
    let (status, _) = h.get(&h.owner, "/api/v1/agents").await;
    assert_eq!(status, 200);
    h.process.stop().await;
}

#[tokio::test]
async fn events_resume_with_last_event_id_across_a_sigkill() {
    let mut h = Api::new("").await;
    h.process.start().await;
    // The model is slow: hearth is killed while it thinks.
    h.llm
        .push(Reply::text("too late").delay(Duration::from_secs(30)));
    let turn = h.start_turn("k1", "my budget?").await;
    let first = h.events(&turn, None, Some(1)).await;
    assert_eq!(first[0].event, "agent.selected");
    h.llm.wait_for_requests(1, WAIT).await;
    h.process.kill().await;

    // After the restart the turn resumes; the stream picks up after the last event seen.
    h.llm.push(Reply::text("Your budget is fine."));
    h.process.start().await;
    let rest = h.events(&turn, Some(first[0].id), None).await;
    assert!(
        rest.iter().all(|e| e.event != "agent.selected"),
        "nothing seen is sent again: {rest:?}"
    );
    let done = rest.last().expect("events");
    assert_eq!(done.event, "turn.completed");
    assert_eq!(done.data["text"], "Your budget is fine.");
    assert!(done.id > first[0].id);
    // Reading again from the start gives everything, in order, once.
    let all = h.events(&turn, None, None).await;
    assert_eq!(kinds(&all), ["agent.selected", "turn.completed"], "{all:?}");
    h.process.stop().await;
}

/// The walk's M4: a turn killed while its answer streamed resumes after the restart, and the
/// resumed model call's first delta says `"reset": true`, so a client that appends deltas
/// shows the answer once, not its first words twice.
#[tokio::test]
async fn a_turn_resumed_after_a_crash_starts_its_streamed_answer_over_with_reset() {
    let mut h = Api::new("").await;
    h.process.start().await;
    h.llm.push(
        Reply::text("part0 part1 part2 part3 part4 part5 part6 part7")
            .delta_chars(6)
            .pace(Duration::from_millis(700)),
    );
    let turn = h.start_turn("k1", "tell me slowly").await;
    // Killed once the answer has begun to show.
    let before = h.events(&turn, None, Some(2)).await;
    assert_eq!(
        (before[0].event.as_str(), before[1].event.as_str()),
        ("agent.selected", "text.delta"),
        "{before:?}"
    );
    h.process.kill().await;

    h.llm
        .push(Reply::text("part0 part1 part2 done").delta_chars(6));
    h.process.start().await;
    let all = h.events(&turn, None, None).await;
    let done = all.last().expect("events");
    assert_eq!(done.event, "turn.completed", "{all:?}");
    assert_eq!(done.data["text"], "part0 part1 part2 done");
    let last_before = all
        .iter()
        .filter(|e| e.event == "text.delta" && e.id <= before[1].id)
        .count();
    assert!(last_before >= 1, "{all:?}");
    // The deltas written by the resumed call: the first starts the reply over.
    let resumed: Vec<&Sse> = all
        .iter()
        .filter(|e| e.event == "text.delta")
        .skip_while(|e| e.data["reset"] != true)
        .collect();
    let Some(first) = resumed.first() else {
        panic!("no delta says reset: {all:?}\n{}", h.process.logs());
    };
    assert!(
        first.data["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("part0")),
        "{all:?}"
    );
    // A client that appends deltas, and starts over on reset, shows the answer once.
    let mut shown = String::new();
    for event in all.iter().filter(|e| e.event == "text.delta") {
        if event.data["reset"] == true {
            shown.clear();
        }
        shown.push_str(event.data["text"].as_str().unwrap_or_default());
    }
    assert!(
        "part0 part1 part2 done".starts_with(&shown) && shown.starts_with("part0"),
        "{shown:?}: {all:?}"
    );
    h.process.stop().await;
}

#[tokio::test]
async fn a_confirmation_is_approved_over_the_api_and_another_expires() {
    let mut h = Api::new("[tools]\nconfirmation_timeout_secs = 4\n").await;
    let chat = h.create_token(&["webui", "--scope", "chat"]);
    h.process.start().await;
    h.llm.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1",
        "delete_task",
        r#"{"task_id": 1}"#,
    )]));
    h.llm.push(Reply::text("Deleted (or tried)."));
    let turn = h.start_turn("k1", "delete task 1").await;
    let asked = h.events(&turn, None, Some(2)).await;
    assert_eq!(asked[1].event, "confirmation.required", "{asked:?}");
    let required = &asked[1].data;
    assert_eq!(required["tool"], "delete_task");
    assert!(
        required["code"].as_str().is_some_and(|c| c.len() == 6),
        "{required}"
    );
    // The call's arguments as JSON (issue 50), not the text the chat shows.
    assert!(required["arguments"]["task_id"].is_number(), "{required}");
    let id = required["id"].as_str().expect("id").to_string();
    let (_, state) = h.get(&h.owner, &format!("/api/v1/turns/{turn}")).await;
    assert_eq!(state["state"], "awaiting_confirmation");

    let (status, pending) = h.get(&h.owner, "/api/v1/confirmations").await;
    assert_eq!(status, 200);
    assert_eq!(pending["confirmations"][0]["id"], id.as_str());
    assert_eq!(pending["confirmations"][0]["turn"], turn.as_str());
    let (_, theirs) = h.get(&chat, "/api/v1/confirmations").await;
    assert_eq!(
        theirs["confirmations"],
        json!([]),
        "not the chat token's to see"
    );

    let (status, decided) = h
        .post(
            &h.owner,
            &format!("/api/v1/confirmations/{id}"),
            None,
            json!({ "decision": "approve" }),
        )
        .await;
    assert_eq!(
        (status, &decided["status"]),
        (200, &json!("approved")),
        "{decided}"
    );
    let (status, again) = h
        .post(
            &h.owner,
            &format!("/api/v1/confirmations/{id}"),
            None,
            json!({ "decision": "deny" }),
        )
        .await;
    assert_eq!(status, 409, "{again}");
    let rest = h.events(&turn, Some(asked[1].id), None).await;
    assert_eq!(
        kinds(&rest),
        [
            "confirmation.decided",
            "tool.started",
            "tool.finished",
            "turn.completed"
        ],
        "{rest:?}"
    );
    assert_eq!(rest[0].data["decision"], "approved");
    assert_eq!(rest[1].data["tool"], "delete_task");
    // The arguments are JSON a client reads, not a string of JSON.
    assert_eq!(
        rest[1].data["arguments"],
        json!({ "task_id": 1 }),
        "{rest:?}"
    );
    // The turn names the agent that answered, beside the `auto` it was asked for.
    let (_, done) = h.get(&h.owner, &format!("/api/v1/turns/{turn}")).await;
    assert_eq!(
        (&done["agent"], &done["requested_agent"]),
        (&json!("general"), &json!("auto")),
        "{done}"
    );

    // A code typed as a later turn of the same conversation decides too (the path email uses),
    // and that turn answers with the outcome.
    h.llm.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c3",
        "delete_task",
        r#"{"task_id": 3}"#,
    )]));
    h.llm.push(Reply::text("Deleted task 3."));
    let (status, started) = h
        .post(
            &h.owner,
            "/api/v1/turns",
            Some("k3"),
            json!({ "text": "delete task 3" }),
        )
        .await;
    assert_eq!(status, 202, "{started}");
    let waiting = started["turn"].as_str().expect("turn").to_string();
    let conversation = started["conversation"].as_str().expect("conversation");
    let asked = h.events(&waiting, None, Some(2)).await;
    let code = asked[1].data["code"].as_str().expect("code").to_string();
    // Typed by a token that may only chat, the code decides nothing.
    let (status, refused) = h
        .post(
            &chat,
            "/api/v1/turns",
            Some("k4-chat"),
            json!({ "text": format!("approve {code}") }),
        )
        .await;
    assert_eq!(status, 403, "{refused}");
    let answer = h
        .turn_in("k4", conversation, &format!("approve {code}"))
        .await;
    let answer = answer.last().expect("events");
    assert_eq!(answer.event, "turn.completed");
    assert!(
        answer.data["text"]
            .as_str()
            .is_some_and(|t| t.contains("Approved")),
        "{answer:?}"
    );
    let rest = h.events(&waiting, Some(asked[1].id), None).await;
    assert_eq!(rest.last().expect("events").data["text"], "Deleted task 3.");

    // Nobody answers the next one: it expires and the turn ends saying so.
    h.llm.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c2",
        "delete_task",
        r#"{"task_id": 2}"#,
    )]));
    h.llm.push(Reply::text("Nobody approved, so I left it."));
    let turn = h.start_turn("k2", "delete task 2").await;
    let events: Vec<Sse> = h
        .events(&turn, None, None)
        .await
        .into_iter()
        .filter(|e| e.event != "text.delta")
        .collect();
    assert_eq!(
        kinds(&events),
        [
            "agent.selected",
            "confirmation.required",
            "confirmation.decided",
            "turn.completed"
        ],
        "{events:?}"
    );
    assert_eq!(events[2].data["decision"], "expired");
    assert_eq!(events[3].data["text"], "Nobody approved, so I left it.");
    h.process.stop().await;
}

#[tokio::test]
async fn a_running_turn_is_cancelled() {
    let mut h = Api::new("").await;
    h.process.start().await;
    h.llm
        .push(Reply::text("never").delay(Duration::from_secs(30)));
    let turn = h.start_turn("k1", "think hard").await;
    h.llm.wait_for_requests(1, WAIT).await;
    let (status, body) = h
        .post(
            &h.owner,
            &format!("/api/v1/turns/{turn}/cancel"),
            None,
            json!({}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let events = h.events(&turn, None, None).await;
    let end = events.last().expect("events");
    assert_eq!(end.event, "turn.failed", "{events:?}");
    assert_eq!(end.data["state"], "cancelled");
    let (_, state) = h.get(&h.owner, &format!("/api/v1/turns/{turn}")).await;
    assert_eq!(state["state"], "cancelled");
    let (status, _) = h
        .post(
            &h.owner,
            &format!("/api/v1/turns/{turn}/cancel"),
            None,
            json!({}),
        )
        .await;
    assert_eq!(status, 409, "an ended turn cannot be cancelled");
    h.process.stop().await;
}

#[tokio::test]
async fn a_turn_waiting_for_approval_is_cancelled_and_its_code_is_then_no_longer_pending() {
    let mut h = Api::new("").await;
    h.process.start().await;
    h.llm.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1",
        "delete_task",
        r#"{"task_id": 1}"#,
    )]));
    let (status, started) = h
        .post(
            &h.owner,
            "/api/v1/turns",
            Some("k1"),
            json!({ "text": "delete task 1" }),
        )
        .await;
    assert_eq!(status, 202, "{started}");
    let turn = started["turn"].as_str().expect("turn").to_string();
    let conversation = started["conversation"].as_str().expect("conversation");
    let asked = h.events(&turn, None, Some(2)).await;
    assert_eq!(asked[1].event, "confirmation.required", "{asked:?}");
    let code = asked[1].data["code"].as_str().expect("code").to_string();

    // Nothing runs while it waits, yet cancel works: the confirmation is decided as cancelled
    // and the turn ends as a running turn's cancel ends it.
    let (status, body) = h
        .post(
            &h.owner,
            &format!("/api/v1/turns/{turn}/cancel"),
            None,
            json!({}),
        )
        .await;
    assert_eq!((status, &body["cancelling"]), (202, &json!(true)), "{body}");
    let rest = h.events(&turn, Some(asked[1].id), None).await;
    assert_eq!(
        kinds(&rest),
        ["turn.cancelling", "confirmation.decided", "turn.failed"],
        "{rest:?}"
    );
    assert!(
        rest[0].data["reason"]
            .as_str()
            .is_some_and(|r| r.contains("cancelled over the API by owner")),
        "{rest:?}"
    );
    assert_eq!(rest[1].data["decision"], "denied");
    assert_eq!(rest[1].data["cancelled"], true);
    assert!(
        rest[1].data["text"]
            .as_str()
            .is_some_and(|t| t.contains("Cancelled by owner")),
        "{rest:?}"
    );
    assert_eq!(rest[2].data["state"], "cancelled");
    let (_, state) = h.get(&h.owner, &format!("/api/v1/turns/{turn}")).await;
    assert_eq!(state["state"], "cancelled");
    let (_, pending) = h.get(&h.owner, "/api/v1/confirmations").await;
    assert_eq!(
        pending["confirmations"],
        json!([]),
        "nothing waits any more"
    );
    assert_eq!(
        h.llm.request_count(),
        1,
        "the tool never ran, the model was not asked again"
    );

    // Ended, it cannot be cancelled again.
    let (status, again) = h
        .post(
            &h.owner,
            &format!("/api/v1/turns/{turn}/cancel"),
            None,
            json!({}),
        )
        .await;
    assert_eq!(status, 409, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already ended (cancelled)")),
        "{again}"
    );

    // The code typed later decides nothing and says why; the model never sees it.
    let answer = h
        .turn_in("k2", conversation, &format!("approve {code}"))
        .await;
    let answer = answer.last().expect("events");
    assert_eq!(answer.event, "turn.completed", "{answer:?}");
    assert!(
        answer.data["text"]
            .as_str()
            .is_some_and(|t| t.contains("no longer pending") && t.contains("denied")),
        "{answer:?}"
    );
    assert_eq!(h.llm.request_count(), 1);

    // The conversation goes on as usual.
    h.llm.push(Reply::text("Fine, I left it."));
    let events = h.turn_in("k3", conversation, "never mind").await;
    let done = events.last().expect("events");
    assert_eq!(
        (done.event.as_str(), &done.data["text"]),
        ("turn.completed", &json!("Fine, I left it.")),
        "{events:?}"
    );
    h.process.stop().await;
}

#[tokio::test]
async fn closing_the_event_stream_does_not_cancel_and_a_reconnect_gets_the_rest() {
    let mut h = Api::new("").await;
    h.process.start().await;
    // Written slowly, so the client sees the first pieces and goes away before the end.
    let text = "One two three four five six seven eight nine ten.";
    h.llm
        .push(Reply::text(text).pace(Duration::from_millis(150)));
    let turn = h.start_turn("k1", "count to ten").await;
    let first = h.events(&turn, None, Some(2)).await;
    assert_eq!(first[1].event, "text.delta", "{first:?}");
    // Dropped: the connection is closed. The turn goes on and completes.
    let done = h
        .process
        .wait_for(WAIT, "the turn to complete", async || {
            let (_, state) = h.get(&h.owner, &format!("/api/v1/turns/{turn}")).await;
            (state["state"] != "running").then_some(state)
        })
        .await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(done["text"], text);
    let rest = h.events(&turn, Some(first[1].id), None).await;
    assert!(rest.iter().all(|e| e.id > first[1].id), "{rest:?}");
    assert!(
        rest.iter().all(|e| e.event != "turn.cancelling"),
        "{rest:?}"
    );
    let end = rest.last().expect("events");
    assert_eq!(
        (end.event.as_str(), &end.data["text"]),
        ("turn.completed", &json!(text))
    );
    h.process.stop().await;
}

#[tokio::test]
async fn usage_by_user_counts_a_linked_identitys_calls_as_its_persons() {
    let mut h = Api::new("").await;
    let laptop = h.create_token(&["laptop", "--scope", "chat"]);
    h.process.start().await;
    for (token, key) in [(&h.owner, "k-owner"), (&laptop, "k-laptop")] {
        h.llm.push(Reply::text("Hello."));
        let (status, started) = h
            .post(
                token,
                "/api/v1/turns",
                Some(key),
                json!({ "text": "hello" }),
            )
            .await;
        assert_eq!(status, 202, "{started}");
        let turn = started["turn"].as_str().expect("turn");
        let events = h.events(turn, None, None).await;
        assert_eq!(kinds(&events).last().copied(), Some("turn.completed"));
    }
    h.process.stop().await;
    let before = h.process.cli(&["usage", "--by", "user"]);
    assert!(
        before.contains("user #"),
        "two people before the link:\n{before}"
    );
    let linked = h
        .process
        .cli(&["pair", "link", "http:owner", "http:laptop"]);
    assert!(!linked.contains("rror"), "{linked}");
    let after = h.process.cli(&["usage", "--by", "user"]);
    // One person, both calls: none left under the user the link emptied.
    assert!(
        !after.contains("user #"),
        "before:\n{before}\nafter:\n{after}"
    );
    let rows: Vec<&str> = after
        .lines()
        .filter(|l| !l.starts_with("total") && l.split_whitespace().nth(1) == Some("2"))
        .collect();
    assert_eq!(rows.len(), 1, "before:\n{before}\nafter:\n{after}");
}
