//! Background tasks over the real `hearth run` binary, the fake Discord and the fake LLM driven
//! by rules: the answer at once and the report later as a reply to the message that asked; a
//! SIGKILL between the two still reports exactly once; `/tasks` lists a task and `/cancel N`
//! stops it with no report after, also while it waits for an approval (the prompt withdrawn);
//! at the budget cap the task stops with a note; a fourth task is refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hearth_testkit::discord::{FakeDiscord, UserMessage};
use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use crate::support::{HearthProcess, general_agent, last_user_text, llm_sections, process_harness};

const TOKEN: &str = "MTIz.SECRET-discord-token-bg";
const OWNER: u64 = 111_111_111_111_111_111;
const DM: u64 = 500_000_000_000_000_001;
const WAIT: Duration = Duration::from_secs(20);
const ASK: &str = "Find three flats near the station and tell me tonight";
const ANSWER: &str = "I'll look into it and report back here.";
const REPORT: &str = "REPORT: the flat on Bahnhofstraße is the best of three.";

struct BgHearth {
    process: HearthProcess,
    llm: FakeOpenAi,
    dc: FakeDiscord,
    /// The model calls of task runs so far.
    runs: Arc<AtomicUsize>,
}

process_harness!(BgHearth);

/// The role of the last message the model was sent.
fn last_role(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["role"].as_str())
        .unwrap_or_default()
        .to_string()
}

impl BgHearth {
    /// Hearth on Discord whose model starts a task when asked for one in words, answers the
    /// start at once, and writes the report in the task's run; `run_reply` makes the run's
    /// reply from the run's number (1 for its first model call).
    async fn new(extra: &str, prices: (f64, f64), run_reply: fn(usize) -> Reply) -> Self {
        Self::with_groups("\"background\"", extra, prices, run_reply).await
    }

    /// As [`BgHearth::new`], the agent having the tool groups `groups`.
    async fn with_groups(
        groups: &str,
        extra: &str,
        prices: (f64, f64),
        run_reply: fn(usize) -> Reply,
    ) -> Self {
        let process = HearthProcess::new("discord", "SECRET-discord-token").env("DC_TOKEN", TOKEN);
        let llm = FakeOpenAi::start().await;
        let dc = FakeDiscord::start(TOKEN).await;
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        llm.set_responder(move |request| {
            let text = last_user_text(request);
            if text.contains("[Background task #") {
                let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
                return run_reply(n);
            }
            if last_role(request) == "tool" {
                return Reply::text(ANSWER).usage(1_000, 10);
            }
            if text.contains("tell me tonight") {
                let args = json!({"title": "Flats", "instructions": "Compare three flats near the station"});
                return Reply::call("c1", "start_background_task", args.to_string()).usage(10, 10);
            }
            Reply::text(format!("echo: {text}"))
        });
        let config = format!(
            r#"{llm}
[channels.discord]
token_env = "DC_TOKEN"
api_url = "{dc}"
allowed_users = ["{OWNER}"]
{extra}
"#,
            llm = llm_sections(&llm, true, false, prices),
            dc = dc.api_url(),
        );
        process.write_config(
            &format!("discord:{OWNER}"),
            &config,
            &general_agent(&format!("tool_groups = [{groups}]\ntool_mode = \"direct\"")),
        );
        Self {
            process,
            llm,
            dc,
            runs,
        }
    }

    /// The bot's messages in the DM once `n` are there and nothing new arrived for a moment.
    async fn dm(&self, n: usize) -> Vec<hearth_testkit::discord::FakeMessage> {
        let messages = self.dc.wait_for_bot_messages(DM, n, WAIT).await;
        assert!(
            messages.len() >= n,
            "expected {n} bot messages, got {messages:#?}\n{}",
            self.logs()
        );
        tokio::time::sleep(Duration::from_millis(800)).await;
        self.dc.bot_messages(DM)
    }

    /// The bot's messages in the DM that contain `text`.
    fn said(&self, text: &str) -> usize {
        self.dc
            .bot_messages(DM)
            .iter()
            .filter(|m| m.content.contains(text))
            .count()
    }
}

#[tokio::test]
async fn the_answer_comes_at_once_and_the_report_once_as_a_reply_even_across_a_kill() {
    // The run's first model call hangs until the daemon is killed; after the restart the
    // resumed turn asks again and reports.
    let mut h = BgHearth::new("", (0.0, 0.0), |n| {
        if n == 1 {
            Reply::text("too late").delay(Duration::from_secs(120))
        } else {
            Reply::text(REPORT)
        }
    })
    .await;
    h.start().await;
    let asked = h.dc.send(UserMessage::new(DM, OWNER, ASK));
    let first = h.dm(1).await;
    assert_eq!(first[0].content, ANSWER, "{first:#?}");
    assert_eq!(first[0].reply_to, Some(asked));

    // The task's run is under way (its model call hangs): kill the daemon.
    let started = crate::support::poll(WAIT, async || {
        (h.runs.load(Ordering::SeqCst) >= 1).then_some(())
    })
    .await;
    assert!(started.is_some(), "the task never ran:\n{}", h.logs());
    h.kill().await;
    h.start().await;

    let messages = h.dm(2).await;
    let reports: Vec<_> = messages
        .iter()
        .filter(|m| m.content.contains(REPORT))
        .collect();
    assert_eq!(reports.len(), 1, "one report: {messages:#?}");
    assert_eq!(
        reports[0].content,
        format!("📋 Background task #1 “Flats”\n\n{REPORT}")
    );
    assert_eq!(
        reports[0].reply_to,
        Some(asked),
        "the report replies to the message that asked"
    );
    assert_eq!(h.said(ANSWER), 1, "the answer was not repeated");

    // Listed as done; a second restart sends nothing again.
    h.dc.send(UserMessage::new(DM, OWNER, "/tasks"));
    let listed = h.dm(3).await;
    let tasks = &listed.last().expect("the /tasks answer").content;
    assert!(tasks.contains("#1 “Flats” – done"), "{tasks}");
    h.stop().await;
    h.start().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(h.said(REPORT), 1, "still one report after another restart");
    h.stop().await;
}

#[tokio::test]
async fn tasks_lists_a_running_task_and_cancel_n_stops_it_without_a_report() {
    let mut h = BgHearth::new("", (0.0, 0.0), |_| {
        Reply::text(REPORT).delay(Duration::from_secs(60))
    })
    .await;
    h.start().await;
    let asked = h.dc.send(UserMessage::new(DM, OWNER, ASK));
    h.dm(1).await;
    let running = crate::support::poll(WAIT, async || {
        (h.runs.load(Ordering::SeqCst) >= 1).then_some(())
    })
    .await;
    assert!(running.is_some(), "the task never ran:\n{}", h.logs());

    h.dc.send(UserMessage::new(DM, OWNER, "/tasks"));
    let listed = h.dm(2).await;
    let tasks = &listed[1].content;
    assert!(
        tasks.starts_with("Background tasks:\n#1 “Flats” – running"),
        "{tasks}"
    );
    assert!(tasks.contains("Stop one with /cancel N."), "{tasks}");

    h.dc.send(UserMessage::new(DM, OWNER, "/cancel 9"));
    let unknown = h.dm(3).await;
    assert_eq!(
        unknown[2].content,
        "There is no background task #9 of yours. /tasks lists them."
    );

    h.dc.send(UserMessage::new(DM, OWNER, "/cancel 1"));
    let stopped = h.dm(5).await;
    let texts: Vec<&str> = stopped.iter().map(|m| m.content.as_str()).collect();
    assert!(
        texts.contains(&"⏹ Stopped background task #1 “Flats”."),
        "{texts:#?}"
    );
    let cancelled = stopped
        .iter()
        .find(|m| m.content == "📋 Background task #1 “Flats”\n\n⏹ Cancelled.")
        .unwrap_or_else(|| panic!("the task's own end: {texts:#?}"));
    assert_eq!(cancelled.reply_to, Some(asked));

    // The model's late answer never becomes a report.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(h.said(REPORT), 0);
    h.dc.send(UserMessage::new(DM, OWNER, "/tasks"));
    let after = h.dm(6).await;
    let tasks = &after.last().expect("the /tasks answer").content;
    assert!(tasks.contains("#1 “Flats” – cancelled"), "{tasks}");
    assert!(tasks.contains("stopped with /cancel"), "{tasks}");
    h.stop().await;
}

#[tokio::test]
async fn at_the_budget_cap_the_task_stops_with_a_note() {
    // $1 per million tokens in: the start's answer (1,000 tokens at most) stays under the cap of
    // a thousandth of a dollar only until the answer; the run then finds it reached.
    let mut h = BgHearth::new(
        "[budget]\ndaily_usd = 0.001\nwarn_at = 1.0\n",
        (1.0, 0.0),
        |_| Reply::text(REPORT),
    )
    .await;
    h.start().await;
    let asked = h.dc.send(UserMessage::new(DM, OWNER, ASK));
    let messages = h.dm(2).await;
    assert_eq!(messages[0].content, ANSWER, "{messages:#?}");
    let note = messages
        .iter()
        .find(|m| {
            m.content
                .starts_with("📋 Background task #1 “Flats”\n\n💸 Today's budget")
        })
        .unwrap_or_else(|| panic!("a budget note: {messages:#?}"));
    assert_eq!(note.reply_to, Some(asked));
    assert_eq!(
        h.runs.load(Ordering::SeqCst),
        0,
        "the run never asked the model"
    );
    assert_eq!(h.said(REPORT), 0);

    h.dc.send(UserMessage::new(DM, OWNER, "/tasks"));
    let listed = h.dm(messages.len() + 1).await;
    let tasks = &listed.last().expect("the /tasks answer").content;
    assert!(tasks.contains("#1 “Flats” – failed"), "{tasks}");
    assert!(tasks.contains("Today's budget"), "{tasks}");
    h.stop().await;
}

#[tokio::test]
async fn a_fourth_task_is_refused_naming_the_three_running() {
    let mut h = BgHearth::new("", (0.0, 0.0), |_| {
        Reply::text(REPORT).delay(Duration::from_secs(60))
    })
    .await;
    h.start().await;
    for n in 1..=3 {
        h.dc.send(UserMessage::new(DM, OWNER, ASK));
        h.dm(n).await;
    }
    h.dc.send(UserMessage::new(DM, OWNER, ASK));
    h.dm(4).await;
    // The model saw the refusal as the tool's result.
    let refusal = h
        .llm
        .requests()
        .iter()
        .filter_map(|r| r["messages"].as_array().and_then(|m| m.last()).cloned())
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .next_back()
        .unwrap_or_default();
    assert!(
        refusal.contains("3 background tasks going already (#1 “Flats”, #2 “Flats”, #3 “Flats”)"),
        "{refusal}"
    );
    h.dc.send(UserMessage::new(DM, OWNER, "/tasks"));
    let listed = h.dm(5).await;
    let tasks = &listed.last().expect("the /tasks answer").content;
    assert_eq!(tasks.matches("– running").count(), 3, "{tasks}");
    assert!(!tasks.contains("#4"), "{tasks}");
    h.stop().await;
}

#[tokio::test]
async fn cancel_n_withdraws_the_approval_a_task_waits_for() {
    // The run wants to add a task: a write, which waits for the owner's Approve in a task.
    let mut h = BgHearth::with_groups("\"background\", \"tasks\"", "", (0.0, 0.0), |n| {
        if n == 1 {
            Reply::call("t1", "add_task", r#"{"title": "Viewing at Bahnhofstraße"}"#)
        } else {
            Reply::text(REPORT)
        }
    })
    .await;
    h.start().await;
    let asked = h.dc.send(UserMessage::new(DM, OWNER, ASK));
    let messages = h.dm(2).await;
    let prompt = messages
        .iter()
        .find(|m| !m.buttons.is_empty())
        .unwrap_or_else(|| panic!("an approval prompt: {messages:#?}"))
        .clone();
    assert!(prompt.content.contains("add_task"), "{}", prompt.content);

    h.dc.send(UserMessage::new(DM, OWNER, "/tasks"));
    let listed = h.dm(3).await;
    let tasks = &listed.last().expect("the /tasks answer").content;
    assert!(
        tasks.contains("#1 “Flats” – waiting for your approval"),
        "{tasks}"
    );

    h.dc.send(UserMessage::new(DM, OWNER, "/cancel 1"));
    h.wait_for(WAIT, "the task's end as a reply", async || {
        h.dc.bot_messages(DM)
            .into_iter()
            .find(|m| m.content == "📋 Background task #1 “Flats”\n\n⏹ Cancelled.")
            .filter(|m| m.reply_to == Some(asked))
    })
    .await;
    assert_eq!(h.said("⏹ Stopped background task #1 “Flats”."), 1);
    h.wait_for(WAIT, "the prompt to say it was withdrawn", async || {
        h.dc.bot_messages(DM)
            .into_iter()
            .find(|m| m.id == prompt.id && m.content.contains("Withdrawn"))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(h.said(REPORT), 0, "no report after /cancel");
    assert_eq!(h.runs.load(Ordering::SeqCst), 1, "the run did not go on");
    h.stop().await;
}
