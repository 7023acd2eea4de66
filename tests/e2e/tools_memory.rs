//! The memory tools through the runtime: the fake model remembers something in one message and
//! recalls it in a later one, forgets, and asks for statistics; the results it sees and the rows
//! stored are checked.

use hearth::config::Autonomy;
use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::Value;

use crate::support::{self, Hearth, general_agent};

async fn started() -> Hearth {
    let mut h = Hearth::new().await.with_agents(&general_agent(
        "description = \"Anything\"\ntool_groups = [\"memory\"]",
    ));
    h.config.tools.autonomy = Autonomy::Full;
    h.start().await;
    h
}

/// The tool results in LLM request number `index`, as parsed JSON (or the raw text as a string).
fn tool_results(h: &Hearth, index: usize) -> Vec<Value> {
    support::tool_results(&h.llm.requests()[index])
        .into_iter()
        .map(|(_, text)| serde_json::from_str(&text).unwrap_or(Value::String(text)))
        .collect()
}

/// Runs one message in which the model makes `calls` and then answers `answer`.
async fn turn(h: &Hearth, message: &str, calls: Vec<ToolCallSpec>, answer: &str) {
    h.llm.push(Reply::tool_calls(calls));
    h.llm.push(Reply::text(answer));
    let reply = h.say(message).await;
    assert!(reply.text.ends_with(answer), "{reply:?}");
}

#[tokio::test]
async fn a_memory_saved_in_one_message_is_recalled_in_a_later_one() {
    let h = started().await;
    turn(
        &h,
        "remember that my favourite tea is genmaicha",
        vec![ToolCallSpec::new(
            "c1",
            "remember",
            r#"{"content": "Favourite tea is genmaicha", "type": "preference", "importance": 0.8, "tags": ["drinks"]}"#,
        )],
        "Noted.",
    )
    .await;
    let saved = tool_results(&h, 1);
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(saved[0]["status"], "saved", "{saved:?}");
    let id = saved[0]["id"].as_i64().expect("id");

    turn(
        &h,
        "which tea do I like?",
        vec![ToolCallSpec::new(
            "c2",
            "recall",
            r#"{"query": "\"tea\" OR drinks*"}"#,
        )],
        "Genmaicha.",
    )
    .await;
    let found = tool_results(&h, 3);
    let found = found.last().expect("recall result");
    assert_eq!(found["count"], 1, "{found}");
    assert_eq!(found["memories"][0]["id"], id);
    assert_eq!(
        found["memories"][0]["content"],
        "Favourite tea is genmaicha"
    );

    let (user_id, access_count): (i64, i64) =
        sqlx::query_as("SELECT user_id, access_count FROM memories WHERE id = $1")
            .bind(id)
            .fetch_one(h.daemon().store().pool())
            .await
            .expect("stored row");
    assert_eq!(access_count, 1);
    // The memory is the sender's, ready for the prompt of their next turn.
    let context = hearth::tool::memory::prompt_context(
        h.daemon().store(),
        user_id,
        "tea",
        chrono::Utc::now().timestamp_millis(),
    )
    .await
    .expect("context")
    .expect("profile");
    assert!(
        context.contains(&format!(
            "- [preference] Favourite tea is genmaicha (#{id})"
        )),
        "{context}"
    );
}

#[tokio::test]
async fn forget_removes_a_memory_and_stats_count_what_is_left() {
    let h = started().await;
    turn(
        &h,
        "I live in Porto and I work at Acme",
        vec![ToolCallSpec::new(
            "c1",
            "batch_remember",
            r#"{"memories": [{"content": "Lives in Porto"}, {"content": "Works at Acme", "type": "fact", "importance": 0.6}, {"content": "Can juggle", "type": "skill"}]}"#,
        )],
        "Got it.",
    )
    .await;
    let saved = tool_results(&h, 1);
    assert_eq!(saved[0]["count"], 3, "{saved:?}");
    let acme = saved[0]["memories"][1]["id"].as_i64().expect("id");

    turn(
        &h,
        "I left Acme, forget that",
        vec![ToolCallSpec::new(
            "c2",
            "forget",
            format!(r#"{{"memory_id": {acme}}}"#),
        )],
        "Forgotten.",
    )
    .await;
    let forgotten = tool_results(&h, 3);
    assert_eq!(forgotten.last().expect("result")["forgotten"], acme);
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM memories")
        .fetch_one(h.daemon().store().pool())
        .await
        .expect("count");
    assert_eq!(left, 2);

    turn(
        &h,
        "what do you know about me, in numbers?",
        vec![
            ToolCallSpec::new("c3", "memory_stats", "{}"),
            ToolCallSpec::new("c4", "recall", r#"{"query": "acme"}"#),
        ],
        "Two things.",
    )
    .await;
    let results = tool_results(&h, 5);
    let stats = results
        .iter()
        .find(|r| r.get("total").is_some())
        .expect("stats result");
    assert_eq!(stats["total"], 2, "{stats}");
    assert_eq!(stats["by_type"]["fact"], 1);
    assert_eq!(stats["by_type"]["skill"], 1);
    let recall = results
        .iter()
        .find(|r| r.get("query_words").is_some())
        .expect("recall result");
    assert_eq!(recall["count"], 0, "forgotten for good: {recall}");
}
