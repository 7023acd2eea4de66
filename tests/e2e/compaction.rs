//! A conversation never dies (README "Long conversations and cost"): 150 turns at a 5,000-token
//! window against summarisers that answer in one plain line, with nothing, too late, or under
//! the headings; a provider whose server takes less than configured; a 4k-window agent that is
//! offered the meta-tools. Every request must fit by the fake server's own token count.

use std::time::Duration;

use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use crate::context::{
    AGENTS, assert_pairs_whole, fake_summary, is_summary, last_message, summaries, system_of, tools,
};
use crate::support::Hearth;

/// The window of the long chats, in tokens, as configured and as the fake server counts it.
const WINDOW: u64 = 5_000;

/// How the fake model answers a summary request.
#[derive(Clone, Copy, Debug)]
enum Summariser {
    /// One line in its own words, no headings.
    PlainLine,
    /// An empty answer.
    Empty,
    /// The headings, but after the summary timeout.
    TooSlow,
    /// The headings, every ledger id, the fact.
    Headings,
}

fn summary_reply(kind: Summariser, request: &Value) -> Reply {
    match kind {
        Summariser::PlainLine => Reply::text("The user chatted about the garden and saved facts."),
        Summariser::Empty => Reply::text(""),
        Summariser::TooSlow => fake_summary(request).delay(Duration::from_millis(1_500)),
        Summariser::Headings => fake_summary(request),
    }
}

/// What the chat model answers: a tool call when asked to save, the fact when it is anywhere in
/// the request, otherwise a reply of a few sentences.
fn chat_reply(request: &Value) -> Reply {
    let last = last_message(request);
    if last["role"] == "tool" {
        return Reply::text("Saved.");
    }
    let text = last["content"].as_str().unwrap_or_default();
    if text == "what is my locker code?" {
        let known = request.to_string().contains("4711");
        return Reply::text(if known { "4711" } else { "I do not know." });
    }
    if text.ends_with("save it") {
        let args = json!({ "text": text }).to_string();
        return Reply::call("call_0", "save_fact", args);
    }
    Reply::text(format!(
        "Noted: {text}. {}",
        "The garden is doing well this season. ".repeat(6)
    ))
}

/// 150 turns with `kind` as the summariser: a fact saved with a tool at turn 3, a tool call
/// every tenth turn, the fact asked for at turn 150. Returns the hearth and the number of
/// summary requests.
async fn long_chat(kind: Summariser, database_url: Option<String>) -> (Hearth, usize) {
    let mut h = Hearth::new().await.with_agents(AGENTS).with_tools(tools);
    h.config.daemon.database_url = database_url;
    h.config.providers[0].context_window = Some(WINDOW as u32);
    h.config.providers[0].max_tokens = 500;
    h.config.context.summary_timeout_secs = 1;
    h.llm.set_context_window(WINDOW);
    h.llm.set_responder(move |request: &Value| {
        if is_summary(request) {
            summary_reply(kind, request)
        } else {
            chat_reply(request)
        }
    });
    h.start().await;

    for turn in 1..150 {
        let text = match turn {
            3 => "My locker code is 4711, save it".to_string(),
            t if t % 10 == 0 => format!("fact number {t}, save it"),
            t => format!("fact number {t} about the garden"),
        };
        let reply = h.say(&text).await.text;
        assert!(
            !reply.trim().is_empty() && !reply.contains('⚠'),
            "{kind:?}, turn {turn}: {reply}"
        );
    }
    assert_eq!(
        h.say("what is my locker code?").await.text,
        "4711",
        "{kind:?}: the fact of turn 3 reaches turn 150"
    );
    // Summaries run after the reply: let the last one end before counting.
    crate::support::settle(&h).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let requests = h.llm.requests();
    let mut summary_requests = 0;
    for request in &requests {
        let tokens = FakeOpenAi::count_tokens(request);
        assert!(
            tokens <= WINDOW,
            "{kind:?}: a request of {tokens} tokens by the server's count"
        );
        if is_summary(request) {
            summary_requests += 1;
            continue;
        }
        assert!(system_of(request).starts_with("PROMPT:general"));
        assert_pairs_whole(request);
    }
    let store = h.daemon().store().clone();
    let users: i64 =
        sqlx::query_scalar("SELECT CAST(COUNT(*) AS BIGINT) FROM messages WHERE role = 'user'")
            .fetch_one(store.pool())
            .await
            .expect("count");
    assert_eq!(users, 150, "every message stays stored");
    (h, summary_requests)
}

#[tokio::test]
async fn a_summariser_answering_one_plain_line_keeps_a_150_turn_chat_going() {
    let (h, asked) = long_chat(Summariser::PlainLine, None).await;
    assert!(asked > 0);
    // The plain line is used as the narrative, with hearth's ledger beside it.
    assert!(summaries(h.daemon().store()).await > 0);
    let last = h.llm.last_request().expect("request").to_string();
    assert!(last.contains("chatted about the garden"), "{last}");
    assert!(last.contains("save_fact"), "the ledger rides along: {last}");
}

#[tokio::test]
async fn a_summariser_answering_nothing_keeps_a_150_turn_chat_going() {
    let (h, _) = long_chat(Summariser::Empty, None).await;
    assert_eq!(summaries(h.daemon().store()).await, 0);
    // The request left out the oldest turns and said so, with the ledger of what they did.
    let last = h.llm.last_request().expect("request").to_string();
    assert!(last.contains("Earlier turns of this conversation were left out"));
    assert!(last.contains("My locker code is 4711"), "{last}");
}

#[tokio::test]
async fn a_summariser_slower_than_the_timeout_keeps_a_150_turn_chat_going() {
    let (h, _) = long_chat(Summariser::TooSlow, None).await;
    assert_eq!(summaries(h.daemon().store()).await, 0);
    let cut: i64 = sqlx::query_scalar(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM model_calls WHERE purpose = 'summary' AND cut_short = 1",
    )
    .fetch_one(h.daemon().store().pool())
    .await
    .expect("count");
    assert!(cut >= 1, "a summary given up is still counted");
}

#[tokio::test]
async fn a_summariser_following_the_headings_is_asked_at_most_every_third_turn() {
    let (h, asked) = long_chat(Summariser::Headings, None).await;
    assert!(
        asked > 0 && asked * 3 <= 150,
        "{asked} summaries in 150 turns"
    );
    assert!(summaries(h.daemon().store()).await > 0);
}

/// The key test on PostgreSQL: the summaries, the ledger and the left-out turns' SQL.
#[tokio::test]
async fn a_150_turn_chat_on_postgres() {
    let Some(server) = hearth_testkit::postgres::TestPostgres::start() else {
        return;
    };
    let url = server
        .create_database("hearth_long_chat")
        .expect("create database");
    let (h, asked) = long_chat(Summariser::Headings, Some(url)).await;
    assert!(asked > 0 && asked * 3 <= 150, "{asked}");
    let learned: i64 =
        sqlx::query_scalar("SELECT CAST(COUNT(*) AS BIGINT) FROM model_calibrations")
            .fetch_one(h.daemon().store().pool())
            .await
            .expect("count");
    assert_eq!(learned, 1, "the token calibration is stored");
}

/// Requests the fake server refused for their length.
fn refused(requests: &[Value], window: u64) -> usize {
    requests
        .iter()
        .filter(|r| FakeOpenAi::count_tokens(r) > window)
        .count()
}

#[tokio::test]
async fn a_server_with_a_smaller_window_than_configured_corrects_the_estimate_at_once() {
    const SERVER: u64 = 3_000;
    let mut h = Hearth::new().await.with_agents(AGENTS).with_tools(tools);
    // Configured for 16k; the server takes 3k (a local model started with a small context).
    h.config.providers[0].context_window = Some(16_000);
    h.config.providers[0].max_tokens = 500;
    h.config.context.summary_timeout_secs = 1;
    h.llm.set_context_window(SERVER);
    h.llm.set_responder(|request: &Value| {
        if is_summary(request) {
            fake_summary(request)
        } else {
            chat_reply(request)
        }
    });
    h.start().await;
    for turn in 1..=40 {
        let reply = h
            .say(&format!("fact number {turn} about the garden"))
            .await
            .text;
        assert!(reply.starts_with("Noted"), "turn {turn}: {reply}");
    }
    let requests = h.llm.requests();
    assert_eq!(refused(&requests, SERVER), 1, "refused once, then it fits");
    let (model, limit): (String, Option<i64>) =
        sqlx::query_as("SELECT model, prompt_limit FROM model_calibrations")
            .fetch_one(h.daemon().store().pool())
            .await
            .expect("the calibration is stored");
    assert_eq!((model.as_str(), limit), ("fake/fake-model", Some(3_000)));

    // After a restart the server's limit is still known: no request is refused again.
    h.stop().await;
    h.start().await;
    for turn in 41..=50 {
        let reply = h
            .say(&format!("fact number {turn} about the garden"))
            .await
            .text;
        assert!(reply.starts_with("Noted"), "turn {turn}: {reply}");
    }
    assert_eq!(refused(&h.llm.requests(), SERVER), 1);
}

#[tokio::test]
async fn a_4k_window_agent_with_every_tool_group_gets_the_meta_tools_and_use_tool_works() {
    let groups = hearth::tool::KNOWN_GROUPS
        .iter()
        .map(|g| format!("\"{g}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let agents = format!(
        "[[agent]]\nid = \"general\"\nname = \"General\"\nsystem_prompt = \"PROMPT:general\"\ntool_groups = [{groups}]\ntool_mode = \"direct\"\n"
    );
    let mut h = Hearth::new().await.with_agents(&agents);
    h.config.providers[0].context_window = Some(4_096);
    h.config.providers[0].max_tokens = 512;
    h.llm.set_context_window(4_096);
    h.start().await;
    h.llm.push(Reply::call(
        "c1",
        "use_tool",
        json!({"tool_name": "add_task", "arguments": {"title": "Buy seeds"}}).to_string(),
    ));
    h.llm.push(Reply::text("Added."));
    assert_eq!(h.say("remind me to buy seeds").await.text, "Added.");

    let requests = h.llm.requests();
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
        .collect();
    assert!(
        offered.contains(&"use_tool") && offered.contains(&"search_tools"),
        "{offered:?}"
    );
    assert!(!offered.contains(&"add_task"), "{offered:?}");
    for request in &requests {
        assert!(FakeOpenAi::count_tokens(request) <= 4_096);
    }
    let result = last_message(&requests[1]);
    assert_eq!(result["role"], "tool");
    assert!(
        result["content"]
            .as_str()
            .unwrap_or_default()
            .contains("Buy seeds"),
        "{result}"
    );
    let tasks: i64 = sqlx::query_scalar("SELECT CAST(COUNT(*) AS BIGINT) FROM tasks")
        .fetch_one(h.daemon().store().pool())
        .await
        .expect("count");
    assert_eq!(tasks, 1);
}

/// The same agent with a roomy window sees every schema, as configured.
#[tokio::test]
async fn a_roomy_window_keeps_the_direct_tools() {
    let agents = "[[agent]]\nid = \"general\"\nname = \"General\"\nsystem_prompt = \"PROMPT:general\"\ntool_groups = [\"tasks\"]\ntool_mode = \"direct\"\n";
    let mut h = Hearth::new().await.with_agents(agents);
    h.config.providers[0].context_window = Some(128_000);
    h.start().await;
    h.llm.push(Reply::text("ok"));
    h.say("hello").await;
    let request = h.llm.last_request().expect("request").to_string();
    assert!(request.contains("\"add_task\"") && !request.contains("\"use_tool\""));
}
