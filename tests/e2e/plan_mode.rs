//! Plan mode (issue 48): an agent with `mode = "plan"` writes a plan with `write_plan`, runs
//! each step on its own with only that step's tools, within `[plans] max_tool_calls` and
//! `step_timeout_secs`, retries a failed step once and rewrites the rest of the plan once, and
//! answers from the steps' results. The plan shows as the `update_plan` plan does.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hearth_channel::SentMessage;
use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::plans::{Runs, registry};
use crate::support::{CHAT, Hearth, USER, WAIT, eventually, general_agent, postgres_url};

/// Longer than the least time between two edits of a plan message (2 s).
const SLOW: Duration = Duration::from_millis(2_300);

/// A plan-mode agent with the plan tests' tools: `lookup` reads, `wipe` deletes (asks first),
/// `flaky` fails its first call.
async fn planner(runs: &Arc<Runs>) -> Hearth {
    let tools = runs.clone();
    let agents = general_agent("mode = \"plan\"\ntools = [\"lookup\", \"wipe\", \"flaky\"]");
    Hearth::new()
        .await
        .with_agents(&agents)
        .with_tools(move || registry(&tools))
}

/// The planner's answer: these steps, each with its tools.
fn write_plan(id: &str, steps: &[(&str, &[&str])]) -> Reply {
    let steps: Vec<Value> = steps
        .iter()
        .map(|(title, tools)| json!({"title": title, "tools": tools}))
        .collect();
    Reply::call(id, "write_plan", json!({ "steps": steps }).to_string())
}

/// The names of the tools a model request offered.
fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// The roles of a request's messages after the system prompt.
fn roles(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["role"].as_str())
        .filter(|r| *r != "system")
        .map(str::to_string)
        .collect()
}

/// Waits for a sent message with exactly `text`.
async fn sent_text(h: &Hearth, text: &str) -> SentMessage {
    crate::support::poll(WAIT, async || {
        h.channel.sent().into_iter().find(|m| m.text == text)
    })
    .await
    .unwrap_or_else(|| panic!("{text:?} never sent: {:#?}", h.channel.sent()))
}

/// Waits for a sent message whose text has `part`.
async fn sent_with(h: &Hearth, part: &str) -> SentMessage {
    crate::support::poll(WAIT, async || {
        h.channel.sent().into_iter().find(|m| m.text.contains(part))
    })
    .await
    .unwrap_or_else(|| panic!("nothing with {part:?} sent: {:#?}", h.channel.sent()))
}

/// Every text the plan message showed: as first sent, then each edit.
fn plan_texts(h: &Hearth) -> Vec<String> {
    let Some(plan) = h
        .channel
        .sent()
        .into_iter()
        .find(|m| m.text.starts_with("📋 Plan ("))
    else {
        return Vec::new();
    };
    crate::plans::shown(h, &plan)
}

/// Three steps, one answer: the plan is written with a forced `write_plan` call, each step's
/// executor is offered only its own tools and sees the earlier steps' results but not their
/// tool chatter, and the next message's history holds the answer, not the steps.
async fn three_steps_then_an_answer(mut h: Hearth, runs: Arc<Runs>) {
    h.start().await;
    h.llm.push(write_plan(
        "p1",
        &[
            ("Look up the flats", &["lookup"]),
            ("Compare them", &[]),
            ("Check the best one", &["lookup", "flaky"]),
        ],
    ));
    h.llm.push(Reply::call("l1", "lookup", "{}"));
    h.llm.push(Reply::text("Three flats: A, B and C."));
    h.llm.push(Reply::text("B is nearest the station."));
    h.llm.push(Reply::call("l2", "lookup", "{}"));
    h.llm.push(Reply::text("B is still free."));
    h.llm.push(Reply::text(
        "Flat B is the best: near the station and free.",
    ));
    h.channel
        .push_text(CHAT, USER, "find flats near the station and pick one");

    let answer = sent_text(&h, "Flat B is the best: near the station and free.").await;
    let settled =
        "📋 Plan (3/3 done)\n✅ Look up the flats\n✅ Compare them\n✅ Check the best one";
    eventually("the plan to settle", async || {
        h.channel.sent().iter().any(|m| m.text == settled)
    })
    .await;
    let plan = sent_text(&h, settled).await;
    assert!(plan.id < answer.id, "the plan sits above the answer");
    assert_eq!(runs.lookup.load(Ordering::SeqCst), 2);

    let requests = h.llm.requests();
    assert_eq!(requests.len(), 7, "one plan, five step calls, one answer");
    // The plan is asked for with its one tool, forced.
    assert_eq!(offered(&requests[0]), ["write_plan"]);
    assert_eq!(
        requests[0]["tool_choice"],
        json!({"type": "function", "function": {"name": "write_plan"}})
    );
    // Each step sees only its tools.
    assert_eq!(offered(&requests[1]), ["lookup"]);
    assert_eq!(offered(&requests[2]), ["lookup"]);
    assert!(offered(&requests[3]).is_empty(), "{}", requests[3]["tools"]);
    let mut third = offered(&requests[4]);
    third.sort();
    assert_eq!(third, ["flaky", "lookup"]);
    // A step sees the person's message and earlier results, not earlier steps' tool chatter.
    assert_eq!(roles(&requests[3]), ["user"]);
    let brief = crate::support::last_user_text(&requests[3]);
    assert!(brief.contains("find flats near the station"), "{brief}");
    assert!(brief.contains("step 2 of 3"), "{brief}");
    assert!(brief.contains("Three flats: A, B and C."), "{brief}");
    assert!(!brief.contains("3 flats under 900 €"), "{brief}");
    // The answer is written without tools, from every result.
    assert!(offered(&requests[6]).is_empty());
    let asked = crate::support::last_user_text(&requests[6]);
    for result in [
        "Three flats: A, B and C.",
        "B is nearest the station.",
        "B is still free.",
    ] {
        assert!(asked.contains(result), "{result:?} missing: {asked}");
    }

    // Every model call of the turn is counted: with the turn, and in the usage the budgets read.
    let pool = h.daemon().store().pool();
    let counted: i64 = sqlx::query_scalar("SELECT llm_calls FROM turns ORDER BY id LIMIT 1")
        .fetch_one(pool)
        .await
        .expect("turn");
    let billed: i64 = sqlx::query_scalar("SELECT CAST(COUNT(*) AS BIGINT) FROM model_calls")
        .fetch_one(pool)
        .await
        .expect("usage");
    assert_eq!((counted, billed), (7, 7));

    // The next message's history is the conversation: the question and the answer.
    h.llm.push(write_plan("p2", &[("Say thanks", &[])]));
    h.llm.push(Reply::text("You are welcome."));
    h.llm.push(Reply::text("You're welcome!"));
    h.channel.push_text(CHAT, USER, "thanks");
    sent_text(&h, "You're welcome!").await;
    let requests = h.llm.requests();
    assert_eq!(roles(&requests[7]), ["user", "assistant", "user"]);
    h.stop().await;
}

#[tokio::test]
async fn a_plan_mode_agent_runs_three_steps_each_with_only_its_tools_and_answers() {
    let runs = Arc::new(Runs::default());
    let h = planner(&runs).await;
    three_steps_then_an_answer(h, runs).await;
}

#[tokio::test]
async fn a_plan_mode_agent_runs_three_steps_on_postgres() {
    let Some((url, _server)) = postgres_url("hearth_plan_mode") else {
        return;
    };
    let runs = Arc::new(Runs::default());
    let mut h = planner(&runs).await;
    h.config.daemon.database_url = Some(url);
    three_steps_then_an_answer(h, runs).await;
}

/// A step that asks for more tool calls than `[plans] max_tool_calls` is stopped before any of
/// them runs, tried once more, and then the rest of the plan is written anew, once.
#[tokio::test]
async fn a_step_over_its_tool_call_limit_is_stopped_retried_and_replanned_once() {
    let runs = Arc::new(Runs::default());
    let mut h = planner(&runs).await;
    h.config.plans.max_tool_calls = 2;
    h.start().await;
    let three = || {
        Reply::tool_calls(vec![
            ToolCallSpec::new("a", "lookup", "{}"),
            ToolCallSpec::new("b", "lookup", "{}"),
            ToolCallSpec::new("c", "lookup", "{}"),
        ])
    };
    h.llm.push(write_plan(
        "p1",
        &[("Look up every flat", &["lookup"]), ("Summarise", &[])],
    ));
    h.llm.push(three());
    // Slow enough for the plan message to show the retry (one edit per 2 s at most).
    h.llm.push(three().delay(SLOW));
    h.llm.push(write_plan(
        "p2",
        &[("Look up one flat", &["lookup"]), ("Summarise", &[])],
    ));
    h.llm.push(Reply::call("l1", "lookup", "{}"));
    h.llm.push(Reply::text("Flat B, 850 €."));
    h.llm.push(Reply::text("One flat: B."));
    h.llm.push(Reply::text("I found flat B for 850 €."));
    h.channel
        .push_text(CHAT, USER, "look up every flat in town");

    sent_text(&h, "I found flat B for 850 €.").await;
    let settled = "📋 Plan (2/3 done)\n❌ Look up every flat — it needed more than its 2 tool calls\n✅ Look up one flat\n✅ Summarise";
    eventually("the plan to settle", async || {
        h.channel.sent().iter().any(|m| m.text == settled)
    })
    .await;
    let texts = plan_texts(&h);
    assert!(
        texts.iter().any(|t| t.contains(
            "▶️ Look up every flat — it needed more than its 2 tool calls; trying again"
        )),
        "{texts:#?}"
    );
    // Only the rewritten step's one call ran.
    assert_eq!(runs.lookup.load(Ordering::SeqCst), 1);
    let requests = h.llm.requests();
    assert_eq!(requests.len(), 8);
    // The second run started afresh, not after the first one's calls.
    assert_eq!(roles(&requests[2]), ["user"]);
    let rewrite = requests[3]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(rewrite.contains("A step failed twice"), "{rewrite}");
    assert!(
        rewrite.contains("Look up every flat — it needed more than its 2 tool calls"),
        "{rewrite}"
    );
    assert!(rewrite.contains("At most 11 steps"), "{rewrite}");
    h.stop().await;
}

/// After its one rewrite, a plan whose step fails twice again ends: the answer says what failed.
#[tokio::test]
async fn a_plan_that_fails_again_after_its_rewrite_ends_saying_what_failed() {
    let runs = Arc::new(Runs::default());
    let mut h = planner(&runs).await;
    h.start().await;
    h.llm
        .push(write_plan("p1", &[("Book a viewing", &["lookup"])]));
    h.llm.push(Reply::text("STEP FAILED: the agency is closed"));
    h.llm.push(Reply::text("STEP FAILED: the agency is closed"));
    h.llm
        .push(write_plan("p2", &[("Book by phone", &["lookup"])]));
    h.llm.push(Reply::text("STEP FAILED: nobody answers"));
    h.llm.push(Reply::text("step failed: nobody answers"));
    h.llm
        .push(Reply::text("I could not book a viewing: nobody answers."));
    h.channel.push_text(CHAT, USER, "book a viewing");

    let answer = sent_with(&h, "I could not book a viewing").await;
    assert_eq!(
        answer.text,
        "⚠️ The plan could not finish: step 2 “Book by phone” failed: nobody answers.\n\nI could not book a viewing: nobody answers."
    );
    let settled = "📋 Plan (0/2 done)\n❌ Book a viewing — the agency is closed\n❌ Book by phone — nobody answers";
    eventually("the plan to settle", async || {
        h.channel.sent().iter().any(|m| m.text == settled)
    })
    .await;
    // No second rewrite: the plan, two runs, a rewrite, two runs and the answer.
    assert_eq!(h.llm.request_count(), 7);
    h.stop().await;
}

/// A step still running at `[plans] step_timeout_secs` is stopped (its model call cut short)
/// and counts as failed; its second run goes on.
#[tokio::test]
async fn a_step_past_its_time_is_stopped_and_tried_again() {
    let runs = Arc::new(Runs::default());
    let mut h = planner(&runs).await;
    h.config.plans.step_timeout_secs = 3;
    h.start().await;
    h.llm
        .push(write_plan("p1", &[("Look up the flats", &["lookup"])]));
    h.llm
        .push(Reply::text("too late").delay(Duration::from_secs(8)));
    // Within the step's time, and slow enough for the plan message to show the retry.
    h.llm.push(Reply::text("Three flats.").delay(SLOW));
    h.llm.push(Reply::text("There are three flats."));
    h.channel.push_text(CHAT, USER, "find flats");

    sent_text(&h, "There are three flats.").await;
    let texts = plan_texts(&h);
    assert!(
        texts.iter().any(
            |t| t.contains("▶️ Look up the flats — it did not finish within 3 s; trying again")
        ),
        "{texts:#?}"
    );
    eventually("the plan to settle", async || {
        h.channel
            .sent()
            .iter()
            .any(|m| m.text == "📋 Plan (1/1 done)\n✅ Look up the flats")
    })
    .await;
    h.stop().await;
}

/// A step's call that needs approval parks the turn with the step shown waiting; after a
/// restart and the approval the plan goes on from that step: the finished step is not run
/// again, the approved call runs once.
#[tokio::test]
async fn a_step_waits_for_approval_across_a_restart_without_running_finished_steps_again() {
    let runs = Arc::new(Runs::default());
    let mut h = planner(&runs).await;
    h.start().await;
    h.llm.push(write_plan(
        "p1",
        &[
            ("Look up the flats", &["lookup"]),
            ("Wipe old listings", &["wipe"]),
        ],
    ));
    h.llm.push(Reply::call("l1", "lookup", "{}"));
    h.llm.push(Reply::text("Three flats."));
    h.llm.push(Reply::call("w1", "wipe", "{}"));
    h.channel
        .push_text(CHAT, USER, "find flats and wipe the old listings");

    let prompt = sent_with(&h, "wants to run `wipe`").await;
    let waiting = "📋 Plan (1/2 done)\n✅ Look up the flats\n▶️ Wipe old listings — waiting for your approval";
    eventually("the plan to show the wait", async || {
        h.channel.sent().iter().any(|m| m.text == waiting)
    })
    .await;
    assert_eq!(runs.wipe.load(Ordering::SeqCst), 0);

    h.stop().await;
    h.start().await;
    h.llm.push(Reply::text("Old listings wiped."));
    h.llm
        .push(Reply::text("Found three flats and wiped the old listings."));
    h.channel
        .push_press(&prompt.reference(), USER, &prompt.buttons[0].data);
    sent_text(&h, "Found three flats and wiped the old listings.").await;
    eventually("the plan to settle", async || {
        h.channel
            .sent()
            .iter()
            .any(|m| m.text == "📋 Plan (2/2 done)\n✅ Look up the flats\n✅ Wipe old listings")
    })
    .await;
    assert_eq!(runs.lookup.load(Ordering::SeqCst), 1, "step 1 ran once");
    assert_eq!(
        runs.wipe.load(Ordering::SeqCst),
        1,
        "the approved call ran once"
    );
    let requests = h.llm.requests();
    assert_eq!(requests.len(), 6, "no model call repeated");
    // The resumed step saw its own call and result.
    assert_eq!(roles(&requests[4]), ["user", "assistant", "tool"]);
    h.stop().await;
}

/// A plan naming a tool the agent does not have is refused back once with the tools there are;
/// a second bad plan ends the turn with a clear answer.
#[tokio::test]
async fn a_plan_with_unknown_tools_is_refused_once_then_the_turn_says_so() {
    let runs = Arc::new(Runs::default());
    let mut h = planner(&runs).await;
    h.start().await;
    h.llm
        .push(write_plan("p1", &[("Mail the landlord", &["send_mail"])]));
    h.llm.push(Reply::text("I would mail the landlord."));
    h.channel.push_text(CHAT, USER, "mail the landlord");

    let answer = sent_with(&h, "could not make a workable plan").await;
    assert_eq!(
        answer.text,
        "⚠️ I could not make a workable plan for this: no plan was written: call write_plan with the steps. Ask again, perhaps in other words."
    );
    let requests = h.llm.requests();
    assert_eq!(requests.len(), 2);
    let refused = crate::support::last_tool_result(&requests[1]);
    assert!(
        refused.starts_with(
            "Refused: step 1 names tools that do not exist here: send_mail (the tools: flaky, lookup, wipe)"
        ),
        "{refused}"
    );
    assert!(h.channel.sent().iter().all(|m| !m.text.starts_with("📋")));
    h.stop().await;
}
