//! The real `hearth run` binary against the fake Telegram Bot API and the fake LLM: routing,
//! topics, group rules, confirmations with inline keyboards, formatting fallbacks, long replies,
//! rate-limit storms, a SIGKILL with updates pending, photos, a scheduled briefing — and the bot
//! token never in the logs.

use std::time::Duration;

use hearth_testkit::telegram::{BOT_ID, FakeMessage, FakeTelegram, Incoming};
use hearth_testkit::{FakeOpenAi, Reply};

use crate::support::{
    FREE, HearthProcess, Signal, TASK_TOOLS, general_agent, last_user_text, llm_sections,
    process_harness,
};

const TOKEN: &str = "123456:SECRET-telegram-token-xyz";
pub(crate) const OWNER: i64 = 42;
pub(crate) const FRIEND: i64 = 43;
const GROUP: i64 = -1001;
const WAIT: Duration = Duration::from_secs(15);

/// Beside the general agent (`general_agent(TASK_TOOLS)`).
pub(crate) const FINANCE_AGENT: &str = r#"
[[agent]]
id = "finance"
name = "Finance"
emoji = "💰"
system_prompt = "PROMPT:finance"
[agent.triggers]
keywords = ["spent", "budget"]
"#;

pub(crate) struct TgHearth {
    pub process: HearthProcess,
    pub llm: FakeOpenAi,
    pub tg: FakeTelegram,
}

process_harness!(TgHearth);

impl TgHearth {
    pub async fn new(extra: &str) -> Self {
        let process =
            HearthProcess::new("telegram", "SECRET-telegram-token").env("TG_TOKEN", TOKEN);
        let llm = FakeOpenAi::start().await;
        let tg = FakeTelegram::start(TOKEN).await;
        let config = format!(
            r#"{llm}
[channels.telegram]
token_env = "TG_TOKEN"
api_url = "{tg}"
allowed_users = [{OWNER}, {FRIEND}]
{extra}
"#,
            llm = llm_sections(&llm, true, false, FREE),
            tg = tg.api_url(),
        );
        process.write_config(
            &format!("telegram:{OWNER}"),
            &config,
            &(general_agent(TASK_TOOLS) + FINANCE_AGENT),
        );
        Self { process, llm, tg }
    }

    pub(crate) async fn wait(&self, chat: i64, n: usize) -> Vec<FakeMessage> {
        wait_messages(&self.tg, &self.process, chat, n, WAIT).await
    }
}

/// Waits up to `within` for `n` messages from the bot in `chat`; fails with `hearth`'s logs.
pub(crate) async fn wait_messages(
    tg: &FakeTelegram,
    hearth: &HearthProcess,
    chat: i64,
    n: usize,
    within: Duration,
) -> Vec<FakeMessage> {
    let messages = tg.wait_for_messages(chat, n, within).await;
    assert!(
        messages.len() >= n,
        "expected {n} messages in {chat}, got {messages:?}\n{}",
        hearth.logs()
    );
    messages
}

#[tokio::test]
async fn answers_in_the_right_chat_and_topic_with_keyword_routing() {
    let mut h = TgHearth::new("").await;
    h.start().await;
    h.llm.push(Reply::text("Noted **12 euros**."));
    h.tg.push_text(OWNER, OWNER, "I spent 12 euros on lunch");
    let messages = h.wait(OWNER, 1).await;
    assert_eq!(messages[0].text, "💰 Finance\n\nNoted 12 euros.");
    assert_eq!(messages[0].parse_mode.as_deref(), Some("HTML"));
    assert!(
        messages[0].raw.contains("<b>12 euros</b>"),
        "{}",
        messages[0].raw
    );
    assert!(
        h.llm.requests()[0]["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .starts_with("PROMPT:finance")
    );

    // A forum topic: the reply goes to the same topic and quotes the question.
    h.llm.push(Reply::text("Here, in the topic."));
    let update = Incoming::text(GROUP, OWNER, "where are you?")
        .mention()
        .in_thread(7);
    h.tg.push(update);
    let messages = h.wait(GROUP, 1).await;
    assert_eq!(messages[0].text, "Here, in the topic.");
    assert_eq!(messages[0].thread_id, Some(7));
    assert!(
        messages[0].reply_to.is_some(),
        "the reply quotes the message it answers"
    );
    assert!(!h.tg.chat_actions().is_empty(), "typing was shown");
    let commands = h.tg.commands().expect("commands registered");
    assert!(commands.to_string().contains("cancel"), "{commands}");
    // The menu is the daemon's command list, as Telegram has always received it.
    let menu: Vec<(String, String)> = commands
        .as_array()
        .expect("a list")
        .iter()
        .map(|c| {
            let field = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (field("command"), field("description"))
        })
        .collect();
    let want = [
        ("help", "What hearth can do"),
        ("agents", "List the agents"),
        ("agent", "Switch agent: /agent <id>"),
        ("new", "Start a new conversation"),
        ("reset", "Forget this conversation"),
        ("whoami", "Your identity and permissions"),
        ("cancel", "Stop the running turn"),
        ("tasks", "Background tasks; /cancel N stops one"),
        ("usage", "Tokens and cost, today and this month"),
        ("compact", "Summarise older turns now: /compact [focus]"),
        ("budget", "Today's spending and cap: /budget [USD]"),
        ("plan", "The current plan and its steps"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(c, d)| (c.to_string(), d.to_string()))
        .collect();
    assert_eq!(menu, want);
    h.stop().await;
}

#[tokio::test]
async fn groups_answer_only_mentions_replies_and_commands() {
    let mut h = TgHearth::new("").await;
    h.start().await;
    h.tg.push_text(GROUP, OWNER, "just chatting with friends");
    h.llm.push(Reply::text("You called?"));
    h.tg.push(Incoming::text(GROUP, OWNER, "hey bot").mention());
    let first = h.wait(GROUP, 1).await;
    assert_eq!(first[0].text, "You called?");
    h.llm.push(Reply::text("Replying to a reply."));
    h.tg.push(Incoming::text(GROUP, FRIEND, "and what about this?").reply_to(first[0].id));
    h.tg.push_text(GROUP, FRIEND, "/whoami@hearth_test_bot");
    let messages = h.wait(GROUP, 3).await;
    assert_eq!(messages[1].text, "Replying to a reply.");
    assert!(
        messages[2].text.contains(&format!("telegram:{FRIEND}")),
        "{}",
        messages[2].text
    );
    assert_eq!(
        h.llm.request_count(),
        2,
        "the chatter never reached the model"
    );
    h.stop().await;
}

#[tokio::test]
async fn confirmations_use_inline_buttons_refuse_strangers_and_expire() {
    let mut h = TgHearth::new("[tools]\nconfirmation_timeout_secs = 2\n").await;
    h.start().await;
    // Create a task first (no confirmation needed), then ask to delete it.
    h.llm
        .push(Reply::call("c1", "add_task", r#"{"title": "Old task"}"#));
    h.llm.push(Reply::text("Added."));
    h.tg.push(Incoming::text(GROUP, OWNER, "add a task").mention());
    h.wait(GROUP, 1).await;
    h.llm
        .push(Reply::call("c2", "delete_task", r#"{"task_id": 1}"#));
    h.tg.push(Incoming::text(GROUP, FRIEND, "delete task 1").mention());
    let prompt = h.wait(GROUP, 2).await[1].clone();
    assert!(
        prompt.text.contains("wants to run delete_task") || prompt.text.contains("delete_task"),
        "{}",
        prompt.text
    );
    assert_eq!(
        prompt.buttons[0].len(),
        2,
        "Approve and Deny: {:?}",
        prompt.buttons
    );
    let approve = prompt.buttons[0][0].1.clone();

    // Someone else presses: an alert, nothing happens.
    let stranger = h.tg.press(GROUP, 9999, prompt.id, &approve);
    h.llm.push(Reply::text("Deleted."));
    h.wait_for(WAIT, "the stranger's press to be answered", async || {
        h.tg.answered_callbacks()
            .iter()
            .any(|c| c.id == stranger)
            .then_some(())
    })
    .await;
    let answer =
        h.tg.answered_callbacks()
            .into_iter()
            .find(|c| c.id == stranger)
            .expect("answered");
    assert!(answer.show_alert && answer.text.unwrap_or_default().contains("isn't yours"));

    // The requester approves: answered, the prompt shows who decided, the keyboard goes away.
    h.tg.press(GROUP, FRIEND, prompt.id, &approve);
    let messages = h.wait(GROUP, 3).await;
    assert_eq!(messages[2].text, "Deleted.");
    let edited =
        h.tg.messages(GROUP)
            .into_iter()
            .find(|m| m.id == prompt.id)
            .expect("prompt");
    assert!(edited.text.contains("Approved by"), "{}", edited.text);
    assert!(
        edited.buttons.iter().all(|row| row.is_empty()),
        "{:?}",
        edited.buttons
    );

    // A prompt nobody answers expires and says so.
    h.llm
        .push(Reply::call("c3", "delete_task", r#"{"task_id": 2}"#));
    h.llm.push(Reply::text("Nobody approved, so I left it."));
    h.tg.push(Incoming::text(GROUP, OWNER, "delete task 2").mention());
    let messages = h.wait(GROUP, 5).await;
    assert_eq!(messages[4].text, "Nobody approved, so I left it.");
    let expired = h.tg.messages(GROUP)[3].clone();
    assert!(expired.text.contains("Expired"), "{}", expired.text);
    h.stop().await;
}

#[tokio::test]
async fn rejected_entities_fall_back_to_plain_text_and_long_replies_are_split() {
    let mut h = TgHearth::new("").await;
    h.start().await;
    h.tg.fail_next_with(
        "sendMessage",
        400,
        "Bad Request: can't parse entities: unexpected end tag",
    );
    h.llm.push(Reply::text("Some **bold** text."));
    h.tg.push_text(OWNER, OWNER, "format something");
    let messages = h.wait(OWNER, 1).await;
    assert!(
        messages[0].text.contains("bold") && messages[0].text.starts_with("Some"),
        "sent again as plain text, never dropped: {}",
        messages[0].text
    );
    assert_eq!(messages[0].parse_mode, None);

    let long = format!(
        "{}\n\n```rust\n{}\n```\n\n{}",
        "a ".repeat(1500),
        "let x = 1;\n".repeat(200),
        "b ".repeat(800)
    );
    h.llm.push(Reply::text(long.clone()));
    h.tg.push_text(OWNER, OWNER, "write a lot");
    let messages = h.wait(OWNER, 3).await;
    let parts = &messages[1..];
    assert_eq!(parts.len(), 2, "6,000 characters make two messages");
    for part in parts {
        assert!(
            part.raw.encode_utf16().count() <= 4096,
            "{} units",
            part.raw.encode_utf16().count()
        );
    }
    assert!(
        parts[0].raw.trim_end().ends_with("</pre>") || !parts[0].raw.contains("<pre"),
        "the fence is closed in the first part"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_429_storm_is_delivered_in_full_and_in_order() {
    let mut h = TgHearth::new("").await;
    h.start().await;
    h.llm
        .set_responder(|request| Reply::text(format!("echo: {}", last_user_text(request))));
    for _ in 0..3 {
        h.tg.fail_next("sendMessage", 429, Some(1));
    }
    for i in 1..=4 {
        h.tg.push_text(OWNER, OWNER, &format!("message {i}"));
    }
    let messages = h.wait(OWNER, 4).await;
    let texts: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "echo: message 1",
            "echo: message 2",
            "echo: message 3",
            "echo: message 4"
        ]
    );
    h.stop().await;
}

#[tokio::test]
async fn a_sigkill_with_updates_pending_and_replies_in_flight_loses_nothing_and_repeats_nothing() {
    let mut h = TgHearth::new("").await;
    h.llm.set_responder(|request| {
        Reply::text(format!("echo: {}", last_user_text(request))).delay(Duration::from_millis(300))
    });
    h.start().await;
    for i in 1..=5 {
        h.tg.push_text(OWNER, OWNER, &format!("before {i}"));
    }
    h.llm.wait_for_requests(1, WAIT).await;
    h.kill().await;
    for i in 1..=3 {
        h.tg.push_text(OWNER, OWNER, &format!("while down {i}"));
    }
    h.start().await;
    let messages = h.wait(OWNER, 8).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let texts: Vec<String> = h.tg.messages(OWNER).into_iter().map(|m| m.text).collect();
    let mut expected: Vec<String> = (1..=5).map(|i| format!("echo: before {i}")).collect();
    expected.extend((1..=3).map(|i| format!("echo: while down {i}")));
    assert_eq!(
        texts,
        expected,
        "every message answered exactly once, in order ({} seen)",
        messages.len()
    );
    h.stop().await;
}

#[tokio::test]
async fn a_photo_reaches_the_model_as_an_image() {
    let mut h = TgHearth::new("").await;
    h.start().await;
    h.llm.push(Reply::text("A tiny picture."));
    h.tg.push(
        Incoming::text(OWNER, OWNER, "what is this?").photo(vec![0xff, 0xd8, 0xff, 0xe0, 1, 2, 3]),
    );
    h.wait(OWNER, 1).await;
    let request = h.llm.requests()[0].to_string();
    assert!(
        request.contains("data:image/jpeg;base64,/9j/4AECAw=="),
        "{request}"
    );
    assert!(request.contains("what is this?"));
    h.stop().await;
}

/// The attack as a stranger would make it: five 8 MB photos in a private chat. Before, each was
/// downloaded, base64-encoded and stored in its inbox row for good (150 MB of database).
#[tokio::test]
async fn a_strangers_photos_are_never_downloaded_nor_stored() {
    const STRANGER: i64 = 666;
    let mut h = TgHearth::new("").await;
    h.start().await;
    for _ in 0..5 {
        h.tg.push(Incoming::text(STRANGER, STRANGER, "").photo(vec![0x5a; 8_000_000]));
    }
    // One pairing code, then silence.
    let answered = h.wait(STRANGER, 1).await;
    assert!(
        answered[0].text.contains("pairing code"),
        "{}",
        answered[0].text
    );
    h.wait_for(WAIT, "the inbox to drain", async || {
        (h.tg.pending_updates() == 0 && h.healthz().await.1["inbox_pending"] == 0).then_some(())
    })
    .await;
    assert!(
        h.tg.requests_of("getFile").is_empty(),
        "a stranger's file was looked up"
    );
    assert!(
        h.tg.requests_of("file").is_empty(),
        "a stranger's file was downloaded"
    );
    h.stop().await;
    let database = h.dir.path().join("data").join("hearth.db");
    let size = std::fs::metadata(&database).expect("database").len()
        + std::fs::metadata(database.with_extension("db-wal")).map_or(0, |m| m.len());
    assert!(size < 2_000_000, "the database grew to {size} bytes");
    assert_eq!(h.tg.messages(STRANGER).len(), 1);
}

#[tokio::test]
async fn a_scheduled_briefing_is_delivered_to_the_owner() {
    let schedule = format!(
        "[[schedules]]\nname = \"briefing\"\ncron = \"*/2 * * * * *\"\ntimezone = \"UTC\"\nagent = \"general\"\nprompt = \"Give me my briefing.\"\ntarget = \"telegram:{OWNER}\"\n"
    );
    let mut h = TgHearth::new(&schedule).await;
    h.llm
        .push(Reply::text("☀️ Good morning: nothing due today."));
    h.start().await;
    let messages = h.wait(OWNER, 1).await;
    // A recurring schedule's reply names the schedule that sent it.
    assert_eq!(
        messages[0].text,
        "⏰ briefing\n\n☀️ Good morning: nothing due today."
    );
    assert!(
        h.llm.requests()[0]
            .to_string()
            .contains("Give me my briefing.")
    );
    h.stop().await;
    let _ = BOT_ID; // the fake bot's id is part of the test kit's contract; unused here
}

/// The walk's M2, on a real platform: Telegram refuses a scheduled run's answer for good (400
/// "chat not found"). The run is failed with Telegram's reason in `schedule list` and in
/// `/metrics`, counted once, and the owner is told; the next run, delivered, is done.
#[tokio::test]
async fn a_scheduled_answer_the_platform_refuses_fails_its_run() {
    let schedule = format!(
        "[[schedules]]\nname = \"briefing\"\ncron = \"0 0 3 1 1 *\"\ntimezone = \"UTC\"\nagent = \"general\"\nprompt = \"Give me my briefing.\"\ntarget = \"telegram:{FRIEND}\"\n"
    );
    let mut h = TgHearth::new(&schedule).await;
    h.start().await;
    h.llm.push(Reply::text("Nothing due today."));
    h.tg.fail_next_containing("sendMessage", "Nothing due today", 400, None);
    let run = h.cli(&["schedule", "run", "briefing"]);
    assert!(run.contains("due now"), "{run}");
    let listed = h
        .wait_for(WAIT, "the run to fail", async || {
            let listed = h.cli(&["schedule", "list"]);
            listed.contains("last failed").then_some(listed)
        })
        .await;
    assert!(
        listed.contains("its answer could not be delivered") && listed.contains("chat not found"),
        "{listed}"
    );
    let note = h.wait(OWNER, 1).await.remove(0);
    assert!(
        note.text.contains("“briefing” failed") && note.text.contains("chat not found"),
        "{}",
        note.text
    );
    assert!(h.tg.messages(FRIEND).is_empty());
    let (_, metrics) = h.get("/metrics").await;
    assert!(
        metrics.contains(r#"hearth_schedule_runs_total{schedule="briefing",outcome="failed"} 1"#),
        "{metrics}"
    );
    assert!(!metrics.contains(r#"outcome="done""#), "{metrics}");

    // Delivered, the next run is done, and counted so.
    h.llm.push(Reply::text("Still nothing due."));
    let run = h.cli(&["schedule", "run", "briefing"]);
    assert!(run.contains("due now"), "{run}");
    let answer = h.wait(FRIEND, 1).await.remove(0);
    assert_eq!(answer.text, "⏰ briefing\n\nStill nothing due.");
    let metrics = h
        .wait_for(WAIT, "the delivered run to be counted", async || {
            let (_, metrics) = h.get("/metrics").await;
            metrics
                .contains(r#"hearth_schedule_runs_total{schedule="briefing",outcome="done"} 1"#)
                .then_some(metrics)
        })
        .await;
    assert!(
        metrics.contains(r#"hearth_schedule_runs_total{schedule="briefing",outcome="failed"} 1"#),
        "{metrics}"
    );
    let listed = h.cli(&["schedule", "list"]);
    assert!(listed.contains("last done"), "{listed}");
    h.stop().await;
}

#[tokio::test]
async fn sigterm_while_a_reply_is_being_sent_waits_for_the_send_to_finish() {
    let mut h = TgHearth::new("").await;
    h.start().await;
    h.llm.push(Reply::text("Here it is."));
    // Telegram is slow to answer the send, not gone.
    h.tg.hold("sendMessage");
    h.tg.push_text(OWNER, OWNER, "hello");
    h.wait_for(WAIT, "the send", async || {
        (!h.tg.requests_of("sendMessage").is_empty()).then_some(())
    })
    .await;
    h.signal(Signal::TERM);
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.tg.release("sendMessage");
    h.stop().await;
    // The stop waited for the send (within the 1 s grace) and recorded it: not cut off, so not
    // sent again by the next start.
    assert_eq!(h.tg.messages(OWNER).len(), 1, "{}", h.logs());
    h.start().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(h.tg.messages(OWNER).len(), 1, "answered exactly once");
    h.stop().await;
}

#[tokio::test]
async fn sigterm_during_a_busy_turn_exits_0_and_the_turn_completes_after_restart() {
    let mut h = TgHearth::new("").await;
    h.start().await;
    // The model takes longer than the shutdown grace (1 s): the turn is suspended, not lost.
    h.llm
        .push(Reply::text("too slow").delay(Duration::from_secs(5)));
    h.tg.push_text(OWNER, OWNER, "think hard");
    h.llm.wait_for_requests(1, WAIT).await;
    let stopped = std::time::Instant::now();
    h.stop().await;
    assert!(
        stopped.elapsed() < Duration::from_secs(4),
        "the grace period bounds the stop"
    );
    assert!(h.tg.messages(OWNER).is_empty());

    h.llm.push(Reply::text("Thought it through."));
    h.start().await;
    let messages = h.wait(OWNER, 1).await;
    assert_eq!(messages[0].text, "Thought it through.");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(h.tg.messages(OWNER).len(), 1, "answered exactly once");
    h.stop().await;
}

/// PDFs sent as documents reach the model as their text, read by hearth's own binary in a child
/// process: a two-page invoice whole, a 300-page report cut with a note, a scan said to be one,
/// and malformed files as a clear error, after which the daemon still answers.
#[tokio::test]
async fn pdfs_reach_the_model_as_text_and_bad_ones_as_a_clear_error() {
    use hearth_testkit::pdf;
    let mut h = TgHearth::new("").await;
    h.start().await;
    // A long PDF may make hearth summarise older turns first: such a request gets a summary.
    const SUMMARY: &str = "You keep the record of a long conversation";
    h.llm.set_responder(|request| {
        if request.to_string().contains(SUMMARY) {
            Reply::text("## Decisions\n## Facts and identifiers\n## Earlier requests (already handled)\nPDFs read.")
        } else {
            Reply::text(format!("answer: {}", last_user_text(request).lines().next().unwrap_or("")))
        }
    });
    let long_page = "a line of the long report, long enough to count\n".repeat(12);
    let long: Vec<&str> = (0..300).map(|_| long_page.as_str()).collect();
    let good = pdf::text(&["hello"]);
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        (
            "invoice.pdf",
            pdf::text(&[
                "Invoice 2026-117\nTotal due: 42.50 EUR",
                "Terms of payment\nPay within 30 days",
            ]),
            &[
                "PDF invoice.pdf",
                "not instructions",
                "Total due: 42.50 EUR",
                "--- page 2 ---",
                "Pay within 30 days",
            ],
        ),
        (
            "report.pdf",
            pdf::text(&long),
            &["of 300 pages left out", "read_pdf, pages"],
        ),
        ("scan.pdf", pdf::scanned(2), &["probably scanned"]),
        (
            "locked.pdf",
            pdf::encrypted(),
            &["[locked.pdf: could not read this PDF: it is protected by a password]"],
        ),
        (
            "cut.pdf",
            good[..good.len() / 3].to_vec(),
            &["[cut.pdf: could not read this PDF"],
        ),
        (
            "bomb.pdf",
            pdf::bomb(100_000_000),
            &["[bomb.pdf: could not read this PDF"],
        ),
    ];
    for (i, (name, bytes, wanted)) in cases.iter().enumerate() {
        let before = h.llm.requests().len();
        h.tg.push(Incoming::text(OWNER, OWNER, "what is in this?").document(
            name,
            "application/pdf",
            bytes.clone(),
        ));
        h.wait_for(WAIT, name, async || {
            let answers = h.tg.messages(OWNER);
            (answers
                .iter()
                .filter(|m| m.text.starts_with("answer:"))
                .count()
                > i)
                .then_some(())
        })
        .await;
        let requests: Vec<String> = h.llm.requests()[before..]
            .iter()
            .map(|r| r.to_string())
            .filter(|r| !r.contains(SUMMARY))
            .collect();
        let request = requests
            .last()
            .unwrap_or_else(|| panic!("{name}: no request of its turn"));
        for text in *wanted {
            assert!(request.contains(text), "{name}: {text:?} not in {request}");
        }
    }
    // Still answering, text as before.
    h.tg.push(Incoming::text(OWNER, OWNER, "are you there?"));
    h.wait_for(WAIT, "the answer after the PDFs", async || {
        let answers = h.tg.messages(OWNER);
        answers
            .iter()
            .any(|m| m.text.contains("answer: are you there?"))
            .then_some(())
    })
    .await;
    h.stop().await;
}
