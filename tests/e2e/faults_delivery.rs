//! Delivery under faults, with the real `hearth run`, the fake Telegram Bot API and the fake
//! LLM: a split reply survives a 502, a 429 and a SIGKILL in the middle without showing a part
//! twice (only a part in flight at the kill may, flagged in doubt); a runaway 10 MB answer
//! becomes one capped reply; a hundred risky tool calls in one answer ask at most three times.

use std::time::Duration;

use hearth_testkit::telegram::FakeMessage;
use hearth_testkit::{Reply, ToolCallSpec};
use sqlx::Row;

use crate::support::poll;
use crate::telegram::{OWNER, TgHearth};

const WAIT: Duration = Duration::from_secs(30);

/// The paragraphs of a reply that Telegram shows as exactly four messages: about 3,000
/// characters each, starting `PART-1` … `PART-4`.
fn four_paragraphs() -> Vec<String> {
    (1..=4)
        .map(|k| {
            let body = format!("part{k}word ").repeat(300);
            format!("PART-{k} {}", body.trim_end())
        })
        .collect()
}

fn four_part_reply() -> String {
    four_paragraphs().join("\n\n")
}

/// The owner asks, and the model answers with the four-part reply.
fn ask_for_four_parts(h: &TgHearth) {
    h.llm.push(Reply::text(four_part_reply()));
    h.tg.push_text(OWNER, OWNER, "tell me everything");
}

/// The four parts as the chat shows them when part `twice` (counted from 0) was sent twice.
fn shown_twice(twice: usize) -> Vec<String> {
    let mut parts = four_paragraphs();
    parts.insert(twice, parts[twice].clone());
    parts
}

async fn wait_for(h: &TgHearth, n: usize) -> Vec<FakeMessage> {
    let messages = h.tg.wait_for_messages(OWNER, n, WAIT).await;
    assert!(
        messages.len() >= n,
        "expected {n} messages, got {}: {:?}\n{}",
        messages.len(),
        messages.iter().map(|m| short(&m.text)).collect::<Vec<_>>(),
        tail(&h.logs())
    );
    // Long enough for a repeated part to show up if one were coming.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    h.tg.messages(OWNER)
}

fn short(text: &str) -> String {
    text.chars().take(12).collect()
}

fn tail(logs: &str) -> String {
    let lines: Vec<&str> = logs.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// How many `sendMessage` calls carried `needle`.
fn sends_containing(h: &TgHearth, needle: &str) -> usize {
    h.tg.requests_of("sendMessage")
        .iter()
        .filter(|r| r.body["text"].as_str().is_some_and(|t| t.contains(needle)))
        .count()
}

async fn database(h: &TgHearth) -> hearth::store::Store {
    hearth::store::Store::connect(&format!(
        "sqlite://{}",
        h.dir.path().join("data/hearth.db").display()
    ))
    .await
    .expect("database")
}

/// The stored parts of the reply whose text contains `needle`: (status, in_doubt) by index,
/// and whether the reply itself is flagged in doubt.
async fn stored_parts(h: &TgHearth, needle: &str) -> (Vec<(String, bool)>, bool, String) {
    let db = database(h).await;
    let row = sqlx::query(
        "SELECT id, in_doubt, status FROM outbox WHERE payload LIKE $1 ORDER BY id DESC LIMIT 1",
    )
    .bind(format!("%{needle}%"))
    .fetch_one(db.pool())
    .await
    .expect("the reply's outbox row");
    let id: i64 = row.try_get("id").expect("id");
    let row_in_doubt: i64 = row.try_get("in_doubt").expect("in_doubt");
    let status: String = row.try_get("status").expect("status");
    let parts = db
        .outbox_parts(id)
        .await
        .expect("parts")
        .into_iter()
        .map(|p| (format!("{:?}", p.status), p.in_doubt))
        .collect();
    db.close().await;
    (parts, row_in_doubt != 0, status)
}

fn texts(messages: &[FakeMessage]) -> Vec<String> {
    messages.iter().map(|m| m.text.clone()).collect()
}

#[tokio::test]
async fn a_502_on_the_second_part_resumes_there_and_shows_every_part_once_in_order() {
    let mut h = TgHearth::new("pacing = false\n").await;
    h.start().await;
    h.tg.fail_next_containing("sendMessage", "PART-2", 502, None);
    ask_for_four_parts(&h);
    let messages = wait_for(&h, 4).await;
    assert_eq!(
        texts(&messages),
        four_paragraphs(),
        "each part once, in order"
    );
    assert!(messages[0].reply_to.is_some(), "the first part quotes");
    assert!(messages[1..].iter().all(|m| m.reply_to.is_none()));
    assert_eq!(
        sends_containing(&h, "PART-1"),
        1,
        "part 1 was not sent again"
    );
    assert_eq!(
        sends_containing(&h, "PART-2"),
        2,
        "part 2: the 502, then the retry"
    );
    assert_eq!(sends_containing(&h, "PART-3"), 1);
    assert_eq!(sends_containing(&h, "PART-4"), 1);
    let (parts, in_doubt, status) = stored_parts(&h, "PART-1").await;
    assert_eq!(status, "sent");
    assert_eq!(parts, vec![("Sent".to_string(), false); 4]);
    assert!(!in_doubt);
    h.stop().await;
}

#[tokio::test]
async fn a_429_on_the_third_part_waits_retry_after_and_resumes_at_the_third() {
    let mut h = TgHearth::new("pacing = false\n").await;
    h.start().await;
    h.tg.fail_next_containing("sendMessage", "PART-3", 429, Some(1));
    ask_for_four_parts(&h);
    let messages = wait_for(&h, 4).await;
    assert_eq!(
        texts(&messages),
        four_paragraphs(),
        "each part once, in order"
    );
    assert_eq!(
        sends_containing(&h, "PART-1"),
        1,
        "part 1 was not sent again"
    );
    assert_eq!(
        sends_containing(&h, "PART-2"),
        1,
        "part 2 was not sent again"
    );
    assert_eq!(sends_containing(&h, "PART-4"), 1);
    let third: Vec<_> =
        h.tg.requests_of("sendMessage")
            .into_iter()
            .filter(|r| {
                r.body["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("PART-3"))
            })
            .collect();
    assert_eq!(third.len(), 2, "part 3: the 429, then the retry");
    // A lower bound only: Telegram said to wait a second.
    let waited = third[1].at.duration_since(third[0].at);
    assert!(
        waited >= Duration::from_millis(900),
        "retried after {waited:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_sigkill_while_part_3_of_4_hangs_repeats_no_earlier_part() {
    let mut h = TgHearth::new("pacing = false\n").await;
    h.start().await;
    // Part 3 reaches a server that never answers and never shows it.
    h.tg.hold_next_containing("sendMessage", "PART-3", false);
    ask_for_four_parts(&h);
    assert_eq!(h.tg.wait_for_held(1, WAIT).await, 1, "{}", tail(&h.logs()));
    assert_eq!(
        texts(&h.tg.messages(OWNER)),
        four_paragraphs()[..2],
        "parts 1 and 2 were accepted before the kill"
    );
    h.kill().await;
    h.start().await;
    let messages = wait_for(&h, 4).await;
    assert_eq!(
        texts(&messages),
        four_paragraphs(),
        "parts 1-2 not repeated, 3-4 delivered once"
    );
    assert_eq!(sends_containing(&h, "PART-1"), 1);
    assert_eq!(sends_containing(&h, "PART-2"), 1);
    assert_eq!(
        h.llm.request_count(),
        1,
        "the answer was not asked for again"
    );
    let (parts, in_doubt, status) = stored_parts(&h, "PART-1").await;
    assert_eq!(status, "sent");
    let flags: Vec<bool> = parts.iter().map(|(_, doubt)| *doubt).collect();
    assert_eq!(
        flags,
        [false, false, true, false],
        "only the part in flight at the kill is in doubt"
    );
    assert!(in_doubt, "the reply is flagged in doubt");
    h.stop().await;
}

#[tokio::test]
async fn a_sigkill_after_telegram_took_part_3_shows_only_part_3_twice_flagged_in_doubt() {
    let mut h = TgHearth::new("pacing = false\n").await;
    h.start().await;
    // Telegram shows part 3, but its answer never reaches hearth before the kill.
    h.tg.hold_next_containing("sendMessage", "PART-3", true);
    ask_for_four_parts(&h);
    assert_eq!(h.tg.wait_for_held(1, WAIT).await, 1, "{}", tail(&h.logs()));
    assert_eq!(texts(&h.tg.messages(OWNER)), four_paragraphs()[..3]);
    h.kill().await;
    h.start().await;
    let messages = wait_for(&h, 5).await;
    assert_eq!(
        texts(&messages),
        shown_twice(2),
        "only the part in flight shows twice"
    );
    let (parts, in_doubt, _) = stored_parts(&h, "PART-1").await;
    assert_eq!(parts[2], ("Sent".to_string(), true));
    assert!(in_doubt);
    h.stop().await;
}

/// The defect: a send that broke after Telegram took it was retried as a plain failure, so the
/// chat showed it twice while the outbox recorded a clean delivery.
#[tokio::test]
async fn a_reset_after_telegram_took_part_2_retries_it_flagged_in_doubt() {
    let mut h = TgHearth::new("pacing = false\n").await;
    h.start().await;
    h.tg.cut_next_containing("sendMessage", "PART-2");
    ask_for_four_parts(&h);
    let messages = wait_for(&h, 5).await;
    assert_eq!(
        texts(&messages),
        shown_twice(1),
        "only the part whose outcome was unknown shows twice"
    );
    let (parts, in_doubt, status) = stored_parts(&h, "PART-1").await;
    assert_eq!(status, "sent");
    assert_eq!(parts[1], ("Sent".to_string(), true));
    assert_eq!(parts[0], ("Sent".to_string(), false));
    assert!(in_doubt, "the reply is flagged in doubt");
    h.stop().await;
    assert!(
        h.logs()
            .contains("delivery failed after the platform may have shown it"),
        "{}",
        tail(&h.logs())
    );
}

/// About 10 MB of answer in paragraphs.
fn ten_megabytes() -> String {
    let paragraph = "All work and no play makes the model a dull writer. ".repeat(20);
    let mut text = String::with_capacity(10 * 1024 * 1024 + paragraph.len());
    while text.len() < 10 * 1024 * 1024 {
        text.push_str(paragraph.trim_end());
        text.push_str("\n\n");
    }
    text
}

/// Peak resident memory of a process, from /proc (Linux), for the report.
fn peak_rss_mib(pid: Option<u32>) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid?)).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// The reply as the chat shows it: at most the cap plus the note, in a few messages, ending
/// with the note.
fn assert_capped(messages: &[FakeMessage], answer: &str) {
    assert!(
        (4..=6).contains(&messages.len()),
        "a 16,000-character reply is a few messages, not thousands: {}",
        messages.len()
    );
    let last = &messages[messages.len() - 1].text;
    assert!(
        last.contains("✂️ The answer was cut here") && last.contains("daemon.max_reply_chars"),
        "{last}"
    );
    let shown: usize = messages.iter().map(|m| m.text.chars().count()).sum();
    assert!(shown < 16_500, "{shown} characters shown");
    assert!(answer.starts_with(&messages[0].text[..200]));
}

async fn stored_history_max_chars(h: &TgHearth) -> i64 {
    let db = database(h).await;
    let longest: i64 = sqlx::query_scalar("SELECT MAX(chars) FROM messages")
        .fetch_one(db.pool())
        .await
        .expect("messages");
    db.close().await;
    longest
}

#[tokio::test]
async fn a_10_mb_answer_becomes_one_capped_reply_with_a_note() {
    let mut h = TgHearth::new("pacing = false\n").await;
    h.start().await;
    let answer = ten_megabytes();
    h.llm.push(Reply::text(answer.clone()));
    h.tg.push_text(OWNER, OWNER, "write forever");
    let messages = wait_for(&h, 4).await;
    let rss = peak_rss_mib(h.pid());
    assert_capped(&messages, &answer);
    let history = stored_history_max_chars(&h).await;
    assert!(
        history < 16_500,
        "the history keeps the cut answer: {history}"
    );
    eprintln!(
        "10 MB answer: {} messages, peak RSS of hearth run {rss:?} MiB",
        messages.len()
    );
    h.stop().await;
}

#[tokio::test]
async fn a_streamed_10_mb_answer_previews_and_ends_as_one_capped_reply() {
    let mut h = TgHearth::new("").await;
    let path = h.dir.path().join("hearth.toml");
    let config = std::fs::read_to_string(&path).expect("config");
    std::fs::write(&path, config.replace("stream = false", "stream = true")).expect("config");
    h.start().await;
    let answer = ten_megabytes();
    h.llm.push(Reply::text(answer.clone()).delta_chars(4_096));
    h.tg.push_text(OWNER, OWNER, "write forever");
    let capped = poll(WAIT, async || {
        h.tg.messages(OWNER)
            .last()
            .is_some_and(|m| m.text.contains("✂️"))
            .then_some(())
    })
    .await;
    assert!(
        capped.is_some(),
        "no capped reply: {:?}\n{}",
        texts(&h.tg.messages(OWNER))
            .iter()
            .map(|t| short(t))
            .collect::<Vec<_>>(),
        tail(&h.logs())
    );
    let messages = wait_for(&h, 1).await;
    let rss = peak_rss_mib(h.pid());
    assert_capped(&messages, &answer);
    assert_eq!(
        messages[0].parse_mode.as_deref(),
        Some("HTML"),
        "the preview was replaced"
    );
    let calls = h.tg.requests_of("sendMessage").len() + h.tg.requests_of("editMessageText").len();
    assert!(calls < 60, "{calls} sends and edits for one reply");
    for edit in h.tg.requests_of("editMessageText") {
        let text = edit.body["text"].as_str().unwrap_or_default();
        assert!(
            text.encode_utf16().count() <= 4_200,
            "a preview of {} units",
            text.len()
        );
    }
    eprintln!(
        "streamed 10 MB answer: {} messages, {calls} sends and edits, peak RSS of hearth run {rss:?} MiB",
        messages.len()
    );
    h.stop().await;
}

#[tokio::test]
async fn a_hundred_risky_calls_in_one_answer_ask_three_times_and_refuse_the_rest() {
    let mut h = TgHearth::new("pacing = false\n").await;
    h.start().await;
    let calls: Vec<ToolCallSpec> = (1..=100)
        .map(|i| {
            ToolCallSpec::new(
                format!("c{i}"),
                "delete_task",
                format!(r#"{{"task_id": {i}}}"#),
            )
        })
        .collect();
    h.llm.push(Reply::tool_calls(calls));
    h.tg.push_text(OWNER, OWNER, "delete all my tasks, one by one");
    let prompts = wait_for(&h, 3).await;
    assert_eq!(
        prompts.len(),
        3,
        "at most three prompts: {:?}",
        texts(&prompts)
    );
    for prompt in &prompts {
        assert!(prompt.text.contains("delete_task"), "{}", prompt.text);
        assert_eq!(prompt.buttons[0].len(), 2, "Approve and Deny");
    }

    h.llm
        .push(Reply::text("I asked about three; the rest must wait."));
    for prompt in &prompts {
        let deny = prompt.buttons[0][1].1.clone();
        h.tg.press(OWNER, OWNER, prompt.id, &deny);
    }
    let requests = h.llm.wait_for_requests(2, WAIT).await;
    assert!(
        requests.len() >= 2,
        "the turn never resumed\n{}",
        tail(&h.logs())
    );
    let results: Vec<String> = requests[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(results.len(), 100, "every call has a result");
    let refused = results
        .iter()
        .filter(|r| {
            r.contains(
                "too many actions needing confirmation in one turn; ask again after these are decided",
            )
        })
        .count();
    let denied = results.iter().filter(|r| r.contains("denied")).count();
    assert_eq!((refused, denied), (97, 3), "{:?}", &results[..4]);

    let messages = wait_for(&h, 4).await;
    assert_eq!(messages.len(), 4, "{:?}", texts(&messages));
    assert_eq!(messages[3].text, "I asked about three; the rest must wait.");
    // The prompts' outcome edits go through the outbox beside the final reply; under load they
    // may land a little after it.
    let outcomes = poll(WAIT, async || {
        let messages = h.tg.messages(OWNER);
        messages[..3]
            .iter()
            .all(|p| p.text.contains("Denied by"))
            .then_some(messages)
    })
    .await;
    let messages = outcomes.unwrap_or(messages);
    for prompt in &messages[..3] {
        assert!(
            prompt.text.contains("Denied by"),
            "{}\n{}",
            prompt.text,
            tail(&h.logs())
        );
    }
    h.stop().await;
}
