//! Keyword routing through the whole daemon: the agent that answers is the one whose system
//! prompt the fake LLM received.

use std::time::Duration;

use chrono::TimeZone;
use hearth::clock::ManualClock;
use hearth_testkit::Reply;

use crate::support::Hearth;

#[tokio::test]
async fn keywords_pick_the_agent_and_the_reply_names_it() {
    let mut h = Hearth::new().await;
    h.start().await;
    h.llm.push(Reply::text("Noted the lunch."));
    let reply = h.say("I spent 12 euros on lunch").await;
    assert!(
        h.system_prompt(0).starts_with("PROMPT:finance"),
        "{}",
        h.system_prompt(0)
    );
    assert_eq!(reply.text, "💰 Finance\n\nNoted the lunch.");

    // A message without keywords stays with the agent (sticky) and no note is repeated.
    h.llm.push(Reply::text("Sure."));
    let reply = h.say("and what about yesterday?").await;
    assert!(h.system_prompt(1).starts_with("PROMPT:finance"));
    assert_eq!(reply.text, "Sure.");
    h.stop().await;
}

#[tokio::test]
async fn phrases_match_across_whitespace_and_unrelated_words_do_not() {
    let mut h = Hearth::new().await;
    h.start().await;
    h.llm.push(Reply::text("a"));
    h.say("the Grocery\n  Bill was high").await;
    assert!(h.system_prompt(0).starts_with("PROMPT:finance"));

    h.llm.push(Reply::text("b"));
    h.say("/reset").await; // back to the default agent; answered without the LLM
    h.say("my grocery list is long").await;
    assert!(
        h.system_prompt(1).starts_with("PROMPT:general"),
        "{}",
        h.system_prompt(1)
    );
    h.stop().await;
}

#[tokio::test]
async fn ties_go_to_the_current_agent_then_to_file_order() {
    let mut h = Hearth::new().await;
    h.start().await;
    // "budget" is a keyword of finance and tasks: with no current agent, file order wins.
    h.say("budget").await;
    assert!(h.system_prompt(0).starts_with("PROMPT:finance"));

    h.say("/reset").await;
    h.say("add a todo").await;
    assert!(h.system_prompt(1).starts_with("PROMPT:tasks"));
    // Now tasks is current, so the tie goes to it.
    h.say("budget").await;
    assert!(
        h.system_prompt(2).starts_with("PROMPT:tasks"),
        "{}",
        h.system_prompt(2)
    );
    h.stop().await;
}

#[tokio::test]
async fn stickiness_ends_after_the_idle_timeout() {
    let clock = ManualClock::new(chrono::Utc.with_ymd_and_hms(2026, 11, 21, 9, 0, 0).unwrap());
    let mut h = Hearth::new().await.with_clock(clock.clone());
    h.config.router.sticky_minutes = 30;
    h.start().await;
    h.say("I paid the rent").await;
    assert!(h.system_prompt(0).starts_with("PROMPT:finance"));

    clock.advance(Duration::from_secs(29 * 60));
    h.say("what else?").await;
    assert!(
        h.system_prompt(1).starts_with("PROMPT:finance"),
        "still sticky after 29 minutes"
    );

    clock.advance(Duration::from_secs(31 * 60));
    let reply = h.say("hello again").await;
    assert!(
        h.system_prompt(2).starts_with("PROMPT:general"),
        "idle conversation falls back"
    );
    assert_eq!(
        reply.text, "ok",
        "returning to the default agent is not announced"
    );
    h.stop().await;
}

#[tokio::test]
async fn agent_command_and_mentions_override_keywords() {
    let mut h = Hearth::new().await;
    h.start().await;
    let reply = h.say("/agent tasks").await;
    assert!(reply.text.contains("✅ Tasks"), "{}", reply.text);
    assert_eq!(h.llm.request_count(), 0, "commands do not call the model");

    // Pinned: a finance keyword does not move the conversation.
    h.say("I spent 5 on coffee").await;
    assert!(h.system_prompt(0).starts_with("PROMPT:tasks"));

    // A leading @id answers with that agent.
    let reply = h.say("@finance how much this month?").await;
    assert!(h.system_prompt(1).starts_with("PROMPT:finance"));
    assert!(reply.text.starts_with("💰 Finance"));
    let last = h.llm.last_request().expect("request");
    let user = last["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .expect("user message");
    assert_eq!(
        user["content"], "how much this month?",
        "the @mention is removed"
    );

    let reply = h.say("/agent nobody").await;
    assert!(
        reply.text.contains("There is no agent `nobody`"),
        "{}",
        reply.text
    );
    h.stop().await;
}

/// `hearth route TEXT --current ID` prints the decision the daemon makes for a conversation
/// talking to ID: the same tie-break, stickiness and mention handling.
#[tokio::test]
async fn hearth_route_shows_the_decision_the_daemon_makes() {
    let mut h = Hearth::new().await;
    h.start().await;
    let agents = hearth::agent::AgentSet::parse(&h.agents, "test agents").expect("agents parse");
    let cli = |text: &str, current: Option<&str>| {
        hearth::cli::route_report(&agents, &h.config, text, current)
    };

    // A new conversation: "budget" ties finance and tasks; file order wins.
    h.say("budget").await;
    assert!(h.system_prompt(0).starts_with("PROMPT:finance"));
    assert!(cli("budget", None).starts_with("→ 💰 Finance (finance)"));

    h.say("/reset").await;
    h.say("add a todo").await;
    assert!(h.system_prompt(1).starts_with("PROMPT:tasks"));
    // A sticky conversation with tasks: the tie goes to tasks, in the daemon and the CLI.
    h.say("budget").await;
    assert!(h.system_prompt(2).starts_with("PROMPT:tasks"));
    let report = cli("budget", Some("tasks"));
    assert!(report.starts_with("→ ✅ Tasks (tasks)"), "{report}");
    assert!(report.contains("the current agent wins"), "{report}");
    // No keyword: the conversation keeps its agent.
    h.say("and what about yesterday?").await;
    assert!(h.system_prompt(3).starts_with("PROMPT:tasks"));
    let report = cli("and what about yesterday?", Some("tasks"));
    assert!(
        report.starts_with(
            "→ ✅ Tasks (tasks): no keyword matched; the conversation keeps its agent"
        ),
        "{report}"
    );
    // A leading @id beats the keywords of the rest.
    h.say("@finance add a todo").await;
    assert!(h.system_prompt(4).starts_with("PROMPT:finance"));
    let report = cli("@finance add a todo", Some("tasks"));
    assert!(
        report.starts_with("→ 💰 Finance (finance): addressed with @finance"),
        "{report}"
    );
    h.stop().await;
}
