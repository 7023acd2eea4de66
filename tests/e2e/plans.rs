//! Visible plans (issue 48): the model keeps a checklist with `update_plan`, and the chat shows it
//! as one message edited as the steps change, above the answer: a tool step, a step waiting
//! for approval (across a restart), a failed step that is retried. `/plan` shows it; a plain
//! request makes no plan message and no extra model call.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hearth::tool::{Risk, ToolError, ToolInfo, ToolRegistry};
use hearth_channel::SentMessage;
use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use crate::support::{CHAT, Hearth, TestTool, USER, WAIT, eventually, general_agent, tool_results};

/// Longer than the least time between two edits of a plan message (2 s): a reply this slow
/// lets the plan's state before it show.
const SLOW: Duration = Duration::from_millis(2_300);

/// Runs of each test tool.
#[derive(Default)]
pub(crate) struct Runs {
    pub(crate) lookup: AtomicUsize,
    pub(crate) wipe: AtomicUsize,
    pub(crate) flaky: AtomicUsize,
}

/// The tools of a plan: `lookup` reads, `wipe` deletes (asks first), `flaky` fails its first
/// call.
pub(crate) fn registry(runs: &Arc<Runs>) -> ToolRegistry {
    let mut registry = ToolRegistry::with_builtin();
    let schema = json!({"type": "object", "properties": {}});
    let counted = runs.clone();
    let lookup = TestTool::answering(
        ToolInfo::new("lookup", "files", "Find flats", schema.clone()),
        move |_| {
            counted.lookup.fetch_add(1, Ordering::SeqCst);
            Ok("3 flats under 900 €".into())
        },
    );
    let counted = runs.clone();
    let wipe = TestTool::answering(
        ToolInfo::new("wipe", "files", "Delete old listings", schema.clone())
            .risk(Risk::Destructive),
        move |_| {
            counted.wipe.fetch_add(1, Ordering::SeqCst);
            Ok("wiped".into())
        },
    );
    let counted = runs.clone();
    let flaky = TestTool::answering(
        ToolInfo::new("flaky", "files", "Send the summary", schema),
        move |_| match counted.flaky.fetch_add(1, Ordering::SeqCst) {
            0 => Err(ToolError::Failed("the mail server timed out".into())),
            _ => Ok("sent".into()),
        },
    );
    for tool in [lookup, wipe, flaky] {
        registry.register(tool).expect("register");
    }
    registry
}

/// An `update_plan` call with the three steps at these statuses (and notes).
pub(crate) fn plan_call(id: &str, steps: [(&str, Option<&str>); 3]) -> Reply {
    let names = ["Look up the flats", "Wipe old listings", "Send the summary"];
    let plan: Vec<Value> = names
        .iter()
        .zip(steps)
        .map(|(name, (status, note))| match note {
            Some(note) => json!({"step": name, "status": status, "note": note}),
            None => json!({"step": name, "status": status}),
        })
        .collect();
    Reply::call(id, "update_plan", json!({ "plan": plan }).to_string())
}

/// The model's side of the three-step plan up to step two's `delete_task`, which waits for the
/// owner's approval: step one adds two tasks (slowly enough for a paced edit between them).
pub(crate) fn script_until_approval(llm: &FakeOpenAi) {
    llm.push(plan_call(
        "p1",
        [("in_progress", None), ("pending", None), ("pending", None)],
    ));
    llm.push(Reply::call("a1", "add_task", r#"{"title":"Viewing"}"#).delay(SLOW));
    llm.push(Reply::call("a2", "add_task", r#"{"title":"Old listing"}"#));
    llm.push(plan_call(
        "p2",
        [("done", None), ("in_progress", None), ("pending", None)],
    ));
    llm.push(Reply::call("d1", "delete_task", r#"{"task_id":2}"#));
}

/// The rest after the press: step three fails once (no task 99), is retried, and `answer` ends
/// the turn; each step slow enough that every plan revision is its own edit.
pub(crate) fn script_after_approval(llm: &FakeOpenAi, answer: &str) {
    llm.push(plan_call(
        "p3",
        [("done", None), ("done", None), ("in_progress", None)],
    ));
    llm.push(Reply::call("c1", "complete_task", r#"{"task_id":99}"#).delay(SLOW));
    llm.push(plan_call(
        "p4",
        [
            ("done", None),
            ("done", None),
            ("failed", Some("no task 99; trying again")),
        ],
    ));
    llm.push(Reply::call("c2", "complete_task", r#"{"task_id":1}"#).delay(SLOW));
    llm.push(plan_call(
        "p5",
        [("done", None), ("done", None), ("done", None)],
    ));
    llm.push(Reply::text(answer));
}

/// Every text the plan message showed, first to last: as it was sent, then each edit.
pub(crate) fn shown(h: &Hearth, message: &SentMessage) -> Vec<String> {
    let mut texts: Vec<String> = h
        .channel
        .send_attempts()
        .into_iter()
        .map(|m| m.text)
        .filter(|t| t.starts_with("📋 Plan ("))
        .take(1)
        .collect();
    texts.extend(message.edits.iter().cloned());
    texts
}

pub(crate) const FINAL_PLAN: &str =
    "📋 Plan (3/3 done)\n✅ Look up the flats\n✅ Wipe old listings\n✅ Send the summary";

#[tokio::test]
async fn a_plan_is_one_message_edited_as_its_steps_change_across_an_approval_and_a_restart() {
    let runs = Arc::new(Runs::default());
    let tools = runs.clone();
    let mut h = Hearth::new()
        .await
        .with_agents(&general_agent("tools = [\"lookup\", \"wipe\", \"flaky\"]"))
        .with_tools(move || registry(&tools));
    h.start().await;

    h.llm.push(plan_call(
        "p1",
        [("in_progress", None), ("pending", None), ("pending", None)],
    ));
    h.llm.push(Reply::call("l1", "lookup", "{}").delay(SLOW));
    h.llm.push(plan_call(
        "p2",
        [("done", None), ("in_progress", None), ("pending", None)],
    ));
    h.llm.push(Reply::call("w1", "wipe", "{}"));
    h.channel.push_text(
        CHAT,
        USER,
        "find flats, wipe the old listings and mail me a summary",
    );

    // The turn waits for the approval of `wipe`; the plan says so.
    let prompt = crate::support::poll(WAIT, async || {
        h.channel
            .sent()
            .into_iter()
            .find(|m| m.text.contains("wants to run `wipe`"))
    })
    .await
    .expect("the approval prompt");
    let waiting = "📋 Plan (1/3 done)\n✅ Look up the flats\n▶️ Wipe old listings — waiting for your approval\n▫️ Send the summary";
    eventually("the plan to show the wait", async || {
        h.channel.sent().iter().any(|m| m.text == waiting)
    })
    .await;
    let plan_message = h
        .channel
        .sent()
        .into_iter()
        .find(|m| m.text == waiting)
        .expect("plan message");
    assert!(
        plan_message.id < prompt.id,
        "the plan sits above the prompt"
    );
    assert_eq!(runs.lookup.load(Ordering::SeqCst), 1);
    let results = tool_results(&h.llm.requests()[2]);
    assert!(
        results
            .iter()
            .any(|(_, r)| r == "Plan updated (rev 1, 0/3 done)"),
        "the model gets a receipt, not its plan back: {results:?}"
    );

    // The plan survives a restart: the same message goes on being edited.
    h.stop().await;
    h.start().await;
    let answer = "Done: three flats found, old listings wiped, summary sent.";
    h.llm.push(plan_call(
        "p3",
        [("done", None), ("done", None), ("in_progress", None)],
    ));
    h.llm.push(Reply::call("f1", "flaky", "{}").delay(SLOW));
    h.llm.push(plan_call(
        "p4",
        [
            ("done", None),
            ("done", None),
            ("failed", Some("the mail server timed out; trying again")),
        ],
    ));
    h.llm.push(Reply::call("f2", "flaky", "{}").delay(SLOW));
    h.llm.push(plan_call(
        "p5",
        [("done", None), ("done", None), ("done", Some("sent"))],
    ));
    h.llm.push(Reply::text(answer));
    h.channel
        .push_press(&prompt.reference(), USER, &prompt.buttons[0].data);

    let reply = crate::support::poll(WAIT, async || {
        h.channel.sent().into_iter().find(|m| m.text == answer)
    })
    .await
    .expect("the answer");
    eventually("the plan to settle", async || {
        h.channel
            .sent()
            .iter()
            .any(|m| m.id == plan_message.id && m.text == FINAL_PLAN)
    })
    .await;
    let sent = h.channel.sent();
    let plans: Vec<&SentMessage> = sent.iter().filter(|m| m.text.starts_with("📋")).collect();
    assert_eq!(plans.len(), 1, "one plan message: {sent:#?}");
    let plan = plans[0];
    assert!(plan.id < reply.id, "the plan sits above the answer");
    let texts = shown(&h, plan);
    for expected in [
        "▶️ Look up the flats",
        "▶️ Wipe old listings — waiting for your approval",
        "▶️ Send the summary",
        "❌ Send the summary — the mail server timed out; trying again",
    ] {
        assert!(
            texts.iter().any(|t| t.contains(expected)),
            "{expected:?} never shown: {texts:#?}"
        );
    }
    assert!(
        !texts.windows(2).any(|w| w[0] == w[1]),
        "no edit repeats the text: {texts:#?}"
    );
    // Every step ran once; the failed one was retried once.
    assert_eq!(runs.lookup.load(Ordering::SeqCst), 1);
    assert_eq!(runs.wipe.load(Ordering::SeqCst), 1);
    assert_eq!(runs.flaky.load(Ordering::SeqCst), 2);

    // `/plan` shows it in full, notes and all.
    let before = h.channel.sent().len();
    h.channel.push_text(CHAT, USER, "/plan");
    let sent = h.channel.wait_for_sent(before + 1, WAIT).await;
    let full = &sent[before].text;
    assert!(full.starts_with("📋 Plan, revision 5 (3/3 done)"), "{full}");
    assert!(
        full.contains("3. ✅ Send the summary (done) — sent"),
        "{full}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_plain_request_makes_no_plan_message_and_no_extra_model_call() {
    let mut h = Hearth::new().await;
    h.start().await;
    h.llm.push(Reply::text("Hello!"));
    let reply = h.say("hi").await;
    assert!(reply.text.ends_with("Hello!"), "{}", reply.text);
    crate::support::settle(&h).await;
    assert_eq!(h.llm.request_count(), 1);
    let sent = h.channel.sent();
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert!(sent[0].edits.is_empty());
    // Every agent is offered the plan tool, whatever its tool groups.
    let request = h.llm.last_request().expect("request");
    let tools: Vec<&str> = request["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert!(tools.contains(&"update_plan"), "{tools:?}");
    let before = h.channel.sent().len();
    h.channel.push_text(CHAT, USER, "/plan");
    let sent = h.channel.wait_for_sent(before + 1, WAIT).await;
    assert!(
        sent[before]
            .text
            .starts_with("No plan in this conversation yet")
    );
    h.stop().await;
}

#[tokio::test]
async fn a_plan_that_drops_an_unfinished_step_keeps_it_as_skipped_and_bad_plans_are_refused() {
    let runs = Arc::new(Runs::default());
    let tools = runs.clone();
    let mut h = Hearth::new()
        .await
        .with_agents(&general_agent("tools = [\"lookup\"]"))
        .with_tools(move || registry(&tools));
    h.start().await;
    h.llm.push(plan_call(
        "p1",
        [("in_progress", None), ("pending", None), ("pending", None)],
    ));
    // Two steps in progress at once: refused, the plan unchanged.
    h.llm.push(Reply::call(
        "p2",
        "update_plan",
        json!({"plan": [
            {"step": "Look up the flats", "status": "in_progress"},
            {"step": "Wipe old listings", "status": "in_progress"},
            {"step": "Send the summary", "status": "pending"},
        ]})
        .to_string(),
    ));
    // The model forgets two steps.
    h.llm.push(Reply::call(
        "p3",
        "update_plan",
        json!({"plan": [{"step": "Look up the flats", "status": "done"}]}).to_string(),
    ));
    h.llm.push(Reply::text("Found them."));
    h.channel.push_text(CHAT, USER, "find flats");
    crate::support::poll(WAIT, async || {
        h.channel
            .sent()
            .into_iter()
            .find(|m| m.text == "Found them.")
    })
    .await
    .expect("the answer");
    let requests = h.llm.requests();
    let refused = tool_results(&requests[2]);
    assert!(
        refused
            .iter()
            .any(|(_, r)| r.contains("at most one step is in progress")),
        "{refused:?}"
    );
    let kept = tool_results(&requests[3]);
    assert!(
        kept.iter()
            .any(|(_, r)| r.starts_with("Plan updated (rev 2, 1/3 done)")
                && r.contains("“Wipe old listings”, “Send the summary”")),
        "{kept:?}"
    );
    let expected =
        "📋 Plan (1/3 done)\n✅ Look up the flats\n⏭️ Wipe old listings\n⏭️ Send the summary";
    eventually("the plan to keep the dropped steps", async || {
        h.channel.sent().iter().any(|m| m.text == expected)
    })
    .await;
    h.stop().await;
}

/// The HTTP turns API: the plan as `plan.updated` events on the turn's stream, resumable with
/// `Last-Event-ID`, and above the answer.
#[cfg(feature = "http")]
#[tokio::test]
async fn over_http_the_plan_comes_as_events_and_above_the_answer() {
    let mut h = crate::http::Api::new("").await;
    h.process.start().await;
    h.llm.push(plan_call(
        "p1",
        [("in_progress", None), ("pending", None), ("pending", None)],
    ));
    h.llm
        .push(Reply::call("a1", "add_task", r#"{"title":"Viewing"}"#));
    h.llm.push(plan_call(
        "p2",
        [("done", Some("3 found")), ("skipped", None), ("done", None)],
    ));
    h.llm.push(Reply::text("All done."));
    let turn = h
        .start_turn("plan-1", "find flats and book a viewing")
        .await;
    let all = h.events(&turn, None, None).await;
    let plans: Vec<_> = all.iter().filter(|e| e.event == "plan.updated").collect();
    assert_eq!(plans.len(), 2, "{all:#?}");
    assert_eq!(plans[0].data["revision"], 1);
    assert_eq!(plans[0].data["steps"][0]["status"], "in_progress");
    assert_eq!(plans[0].data["done"], 0);
    assert_eq!(plans[1].data["revision"], 2);
    assert_eq!(
        plans[1].data["steps"][0],
        json!({"step": "Look up the flats", "status": "done", "note": "3 found"})
    );
    assert_eq!(
        (
            plans[1].data["done"].clone(),
            plans[1].data["total"].clone()
        ),
        (json!(2), json!(3))
    );
    let done = all.last().expect("events");
    assert_eq!(done.event, "turn.completed");
    assert_eq!(
        done.data["text"],
        "📋 Plan (2/3 done)\n✅ Look up the flats\n⏭️ Wipe old listings\n✅ Send the summary\n\nAll done."
    );
    // A client that saw the first plan event reads on after it.
    let rest = h.events(&turn, Some(plans[0].id), None).await;
    let revisions: Vec<&Value> = rest
        .iter()
        .filter(|e| e.event == "plan.updated")
        .map(|e| &e.data["revision"])
        .collect();
    assert_eq!(revisions, [&json!(2)], "{rest:#?}");
    assert_eq!(
        rest.last().map(|e| e.event.as_str()),
        Some("turn.completed")
    );
    h.process.stop().await;
}

/// Telegram: one plan message edited in place, paced, through a step that waits for approval,
/// a SIGKILL in the middle of that step, and a failed step that is retried; no step's side
/// effect happens twice.
#[cfg(feature = "telegram")]
#[tokio::test]
async fn on_telegram_the_plan_message_is_edited_in_place_and_resumes_after_a_sigkill() {
    use crate::telegram::{OWNER, TgHearth};

    let mut h = TgHearth::new("").await;
    h.start().await;
    crate::plans::script_until_approval(&h.llm);
    h.tg.push_text(
        OWNER,
        OWNER,
        "find flats, wipe the old listing and mark the viewing",
    );
    let waiting = "📋 Plan (1/3 done)\n✅ Look up the flats\n▶️ Wipe old listings — waiting for your approval\n▫️ Send the summary";
    let (plan, prompt) = crate::support::poll(Duration::from_secs(20), async || {
        let messages = h.tg.messages(OWNER);
        let plan = messages.iter().find(|m| m.text == waiting)?.clone();
        let prompt = messages.iter().find(|m| !m.buttons.is_empty())?.clone();
        Some((plan, prompt))
    })
    .await
    .unwrap_or_else(|| panic!("{:#?}\n{}", h.tg.messages(OWNER), h.process.logs()));
    assert!(plan.id < prompt.id, "the plan sits above the prompt");

    // Killed while step two waits; the plan goes on in the same message after the restart.
    h.process.kill().await;
    h.start().await;
    let answer = "Done: the viewing is booked and the old listing is gone.";
    crate::plans::script_after_approval(&h.llm, answer);
    let approve = prompt.buttons[0][0].1.clone();
    h.tg.press(OWNER, OWNER, prompt.id, &approve);
    crate::support::poll(Duration::from_secs(30), async || {
        let messages = h.tg.messages(OWNER);
        let settled = messages
            .iter()
            .any(|m| m.id == plan.id && m.text == FINAL_PLAN);
        (settled && messages.iter().any(|m| m.text == answer)).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("{:#?}\n{}", h.tg.messages(OWNER), h.process.logs()));
    let messages = h.tg.messages(OWNER);
    let plans: Vec<_> = messages
        .iter()
        .filter(|m| m.text.starts_with("📋"))
        .collect();
    assert_eq!(plans.len(), 1, "one plan message: {messages:#?}");
    let edits: Vec<_> =
        h.tg.requests_of("editMessageText")
            .into_iter()
            .filter(|r| r.body["message_id"] == json!(plan.id))
            .collect();
    let texts: Vec<String> = edits
        .iter()
        .map(|r| r.body["text"].as_str().unwrap_or_default().to_string())
        .collect();
    for expected in [
        "▶️ Wipe old listings — waiting for your approval",
        "▶️ Send the summary",
        "❌ Send the summary — no task 99; trying again",
    ] {
        assert!(
            texts.iter().any(|t| t.contains(expected)),
            "{expected:?} never shown: {texts:#?}"
        );
    }
    // At most one edit of the plan every 2 s (a little less for the clocks' grain).
    for pair in edits.windows(2) {
        let gap = pair[1].at.duration_since(pair[0].at);
        assert!(
            gap >= Duration::from_millis(1_900),
            "edits {gap:?} apart: {texts:#?}"
        );
    }
    // No side effect twice: the two tasks were added once, the old one deleted once.
    h.stop().await;
    let db = hearth::store::Store::connect(&format!(
        "sqlite://{}",
        h.dir.path().join("data/hearth.db").display()
    ))
    .await
    .expect("database");
    let tasks: Vec<(String, String)> =
        sqlx::query_as("SELECT title, status FROM tasks ORDER BY id")
            .fetch_all(db.pool())
            .await
            .expect("tasks");
    assert_eq!(tasks, [("Viewing".to_string(), "done".to_string())]);
    let deletes: i64 = sqlx::query_scalar(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM tool_audit WHERE tool = 'delete_task' AND outcome = 'ok'",
    )
    .fetch_one(db.pool())
    .await
    .expect("audit");
    assert_eq!(deletes, 1);
    db.close().await;
}

/// Telegram refuses an edit of the plan message for good ("message can't be edited", as for a
/// message deleted or too old): the plan goes out as a new message, and the edits after that
/// change the new one.
#[cfg(feature = "telegram")]
#[tokio::test]
async fn on_telegram_a_refused_edit_sends_the_plan_anew_and_later_edits_follow_it() {
    use crate::telegram::{OWNER, TgHearth};

    let mut h = TgHearth::new("").await;
    h.start().await;
    h.tg.fail_next_with(
        "editMessageText",
        400,
        "Bad Request: message can't be edited",
    );
    h.llm.push(plan_call(
        "p1",
        [("in_progress", None), ("pending", None), ("pending", None)],
    ));
    h.llm
        .push(Reply::call("a1", "add_task", r#"{"title":"Viewing"}"#).delay(SLOW));
    h.llm.push(plan_call(
        "p2",
        [("done", None), ("in_progress", None), ("pending", None)],
    ));
    h.llm
        .push(Reply::call("a2", "add_task", r#"{"title":"Old listing"}"#).delay(SLOW));
    h.llm.push(plan_call(
        "p3",
        [("done", None), ("done", None), ("in_progress", None)],
    ));
    h.llm
        .push(Reply::call("a3", "add_task", r#"{"title":"Summary"}"#).delay(SLOW));
    h.llm.push(plan_call(
        "p4",
        [("done", None), ("done", None), ("done", None)],
    ));
    let answer = "All three done.";
    h.llm.push(Reply::text(answer));
    h.tg.push_text(OWNER, OWNER, "find flats, wipe the old listing, mail me");

    let first =
        "📋 Plan (0/3 done)\n▶️ Look up the flats\n▫️ Wipe old listings\n▫️ Send the summary";
    let plans = crate::support::poll(Duration::from_secs(30), async || {
        let messages = h.tg.messages(OWNER);
        let plans: Vec<_> = messages
            .iter()
            .filter(|m| m.text.starts_with("📋"))
            .cloned()
            .collect();
        let done = plans.last().is_some_and(|p| p.text == FINAL_PLAN)
            && messages.iter().any(|m| m.text == answer);
        done.then_some(plans)
    })
    .await
    .unwrap_or_else(|| panic!("{:#?}\n{}", h.tg.messages(OWNER), h.process.logs()));
    assert_eq!(plans.len(), 2, "the plan sent anew once: {plans:#?}");
    assert_eq!(plans[0].text, first, "the refused message keeps its text");
    assert!(plans[0].id < plans[1].id);
    // After the refusal every edit goes to the new message, and there are some.
    let edits = h.tg.requests_of("editMessageText");
    let to_new = edits
        .iter()
        .filter(|r| r.body["message_id"] == json!(plans[1].id))
        .count();
    let to_old = edits
        .iter()
        .filter(|r| r.body["message_id"] == json!(plans[0].id))
        .count();
    assert!(to_new >= 1, "{edits:#?}");
    assert!(
        to_old <= 1,
        "only the refused edit went to the old message: {edits:#?}"
    );
    let last = edits.last().expect("edits");
    assert_eq!(last.body["message_id"], json!(plans[1].id));
    h.stop().await;
}
