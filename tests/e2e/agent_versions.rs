//! Agent versions with the real `hearth run` binary and the fake Telegram Bot API: the agents
//! file edited and reloaded with SIGHUP becomes version 2, the next turn runs it, and
//! `hearth agents history ID` lists both with what changed.

use std::time::Duration;

use hearth_testkit::Reply;

use crate::support::{Signal, TASK_TOOLS, general_agent};
use crate::telegram::{OWNER, TgHearth};

const WAIT: Duration = Duration::from_secs(15);

/// The Telegram tests' Finance agent (`telegram::FINANCE_AGENT`), edited: one keyword replaced
/// and its prompt changed.
const EDITED_FINANCE: &str = r#"
[[agent]]
id = "finance"
name = "Finance"
emoji = "💰"
system_prompt = "PROMPT:finance-v2"
[agent.triggers]
keywords = ["spent", "receipt"]
"#;

#[tokio::test]
async fn an_edited_agent_reloaded_with_sighup_is_version_2_and_the_next_turn_runs_it() {
    let mut h = TgHearth::new("").await;
    h.start().await;
    h.llm.push(Reply::text("Noted."));
    h.tg.push_text(OWNER, OWNER, "I spent 12 euros");
    h.wait(OWNER, 1).await;

    let history = h.cli(&["agents", "history", "finance"]);
    assert!(
        history.contains("versions of agent `finance`, newest first:"),
        "{history}"
    );
    let lines: Vec<&str> = history.lines().skip(1).collect();
    assert_eq!(lines.len(), 1, "{history}");
    assert!(lines[0].trim_start().starts_with("v1 "), "{history}");
    assert!(lines[0].contains("1 turn"), "{history}");
    assert!(lines[0].ends_with("first version"), "{history}");
    // The first start logs the agents' first versions once, as one line.
    let logs = h.logs();
    assert_eq!(logs.matches("new agent version").count(), 1, "{logs}");
    assert!(
        logs.lines().any(|l| l.contains("new agent versions")
            && l.contains("general v1 (first version)")
            && l.contains("finance v1 (first version)")),
        "{logs}"
    );

    // Unchanged agents file, SIGHUP: no new version.
    h.signal(Signal::HUP);
    h.wait_for(WAIT, "the first reload", async || {
        (h.logs().matches("agents reloaded").count() >= 1).then_some(())
    })
    .await;
    let again = h.cli(&["agents", "history", "finance"]);
    assert_eq!(again.lines().count(), 2, "{again}");

    h.write_agents(&(general_agent(TASK_TOOLS) + EDITED_FINANCE));
    h.signal(Signal::HUP);
    h.wait_for(WAIT, "the second reload", async || {
        (h.logs().matches("agents reloaded").count() >= 2).then_some(())
    })
    .await;
    // The next turn runs the new definition, and records it.
    h.llm.push(Reply::text("Receipt noted."));
    h.tg.push_text(OWNER, OWNER, "here is a receipt");
    let messages = h.wait(OWNER, 2).await;
    assert!(messages[1].text.contains("Receipt noted."), "{messages:?}");
    let prompt = h.llm.requests()[1]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(prompt.starts_with("PROMPT:finance-v2"), "{prompt}");

    let history = h.cli(&["agents", "history", "finance"]);
    let lines: Vec<&str> = history.lines().skip(1).collect();
    assert_eq!(lines.len(), 2, "{history}");
    assert!(lines[0].trim_start().starts_with("v2 "), "{history}");
    assert!(
        lines[0].ends_with("prompt changed; keywords added: receipt; keywords removed: budget"),
        "{history}"
    );
    assert!(lines[0].contains("1 turn"), "{history}");
    assert!(lines[1].trim_start().starts_with("v1 "), "{history}");
    assert!(lines[1].contains("1 turn"), "{history}");
    // General did not change.
    let general = h.cli(&["agents", "history", "general"]);
    assert_eq!(general.lines().count(), 2, "{general}");

    // An id hearth never saw: a clear error naming the agents it knows.
    let unknown = h.cli(&["agents", "history", "nobody"]);
    assert!(
        unknown
            .contains("there is no agent `nobody` in the database (agents seen: finance, general)"),
        "{unknown}"
    );
    h.stop().await;
}
