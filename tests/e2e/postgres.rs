//! The whole pipeline on PostgreSQL: the same store code, migrations and tools as on SQLite.
//! Runs on a throwaway server (or the one `HEARTH_TEST_POSTGRES_URL` names); skipped with a note
//! when PostgreSQL is not installed.

use hearth_testkit::{Reply, ToolCallSpec};

use crate::support::{CHAT, Hearth, USER, WAIT, general_agent, postgres_url};

#[tokio::test]
async fn turns_tools_confirmations_and_restarts_work_on_postgres() {
    let Some((url, _server)) = postgres_url("hearth_e2e") else {
        return;
    };
    let mut h = Hearth::new().await.with_agents(&general_agent(
        "tool_groups = [\"tasks\", \"memory\"]\ntool_mode = \"direct\"",
    ));
    h.config.daemon.database_url = Some(url);
    h.start().await;

    // A tool loop with writes and a full-text memory.
    h.llm.push(Reply::tool_calls(vec![
        ToolCallSpec::new(
            "c1",
            "add_task",
            r#"{"title": "Renew passport", "priority": "high"}"#,
        ),
        ToolCallSpec::new(
            "c2",
            "remember",
            r#"{"content": "Passport number ends in 42", "importance": 0.8}"#,
        ),
    ]));
    h.llm.push(Reply::call("c3", "list_tasks", "{}"));
    h.llm.push(Reply::text("Task added."));
    assert_eq!(
        h.say("add a task to renew my passport").await.text,
        "Task added."
    );
    let listing = h.llm.requests()[2].to_string();
    assert!(listing.contains("Renew passport"), "{listing}");

    // A deletion asks first; the decision survives a restart.
    h.llm
        .push(Reply::call("c4", "delete_task", r#"{"task_id": 1}"#));
    h.channel.push_text(CHAT, USER, "delete that task");
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    let prompt = sent[1].clone();
    assert!(prompt.text.contains("delete_task"), "{}", prompt.text);
    h.stop().await;
    h.start().await;
    h.llm.push(Reply::text("Deleted."));
    h.channel
        .push_press(&prompt.reference(), USER, &prompt.buttons[0].data);
    let sent = h.channel.wait_for_sent(3, WAIT).await;
    assert_eq!(sent[2].text, "Deleted.");
    let remaining: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tasks")
        .fetch_one(h.daemon().store().pool())
        .await
        .expect("count");
    assert_eq!(remaining, 0);

    // The memory is found by full-text search and shows up in the next prompt.
    h.llm.push(Reply::text("It ends in 42."));
    h.say("what is my passport number?").await;
    let system = h.system_prompt(h.llm.requests().len() - 1);
    assert!(system.contains("Passport number ends in 42"), "{system}");
    h.stop().await;
}
