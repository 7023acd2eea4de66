//! The core promise under faults on the intake side, against the real `hearth run`, the fake
//! Bot API and a real tmpfs: a full disk keeps messages waiting at Telegram (not acknowledged,
//! `/healthz` 503 with the reason) until space returns, then each is answered exactly once; a
//! turn whose answer cannot be stored is answered once space returns; a split reply whose
//! progress cannot be recorded waits and goes on once space returns, without a restart and
//! without showing a part twice; one undecodable update does not hold up the others.

use std::time::Duration;

use hearth_testkit::Reply;
use hearth_testkit::tmpfs::Tmpfs;
use serde_json::Value;

use crate::support::last_user_text;
use crate::telegram::{OWNER, TgHearth};

const WAIT: Duration = Duration::from_secs(20);
const DISK: u64 = 2 * 1024 * 1024;

/// Mounts a 2 MB tmpfs as the data directory (`./data`, where the database lives), or says
/// why not.
fn small_data_disk(h: &TgHearth) -> Option<Tmpfs> {
    let data = h.dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    match Tmpfs::mount(&data, DISK) {
        Ok(disk) => Some(disk),
        Err(why) => {
            eprintln!("skipped: a tmpfs is needed for a real full disk: {why}");
            None
        }
    }
}

/// Polls `/healthz` until `check(status, body)` holds; returns the last answer.
async fn health_until(h: &TgHearth, what: &str, check: impl Fn(u16, &Value) -> bool) -> Value {
    let what = format!("/healthz to show {what}");
    h.wait_for(WAIT, &what, async || {
        let (status, body) = h.healthz().await;
        check(status, &body).then_some(body)
    })
    .await
}

fn faults(body: &Value) -> Vec<String> {
    body["faults"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn texts(h: &TgHearth) -> Vec<String> {
    h.tg.messages(OWNER).into_iter().map(|m| m.text).collect()
}

fn echo(h: &TgHearth) {
    h.llm
        .set_responder(|request| Reply::text(format!("echo: {}", last_user_text(request))));
}

#[tokio::test]
async fn a_full_disk_keeps_messages_at_telegram_until_space_returns() {
    let mut h = TgHearth::new("").await;
    let Some(disk) = small_data_disk(&h) else {
        return;
    };
    echo(&h);
    h.start().await;
    h.tg.push_text(OWNER, OWNER, "before");
    h.wait(OWNER, 1).await;

    disk.fill().expect("fill the data disk");
    let ids: Vec<i64> = (1..=3)
        .map(|i| h.tg.push_text(OWNER, OWNER, &format!("while full {i}")))
        .collect();
    let body = health_until(&h, "the inbox failing", |status, body| {
        status == 503
            && faults(body)
                .iter()
                .any(|f| f == "inbox: database or disk is full")
    })
    .await;
    assert_eq!(body["status"], "degraded");
    // Not acknowledged: Telegram still holds all three, and nobody was answered.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        h.tg.confirmed_offset() <= ids[0],
        "offset {} moved past an unstored update {}",
        h.tg.confirmed_offset(),
        ids[0]
    );
    assert_eq!(h.tg.pending_updates(), 3);
    assert_eq!(texts(&h), ["echo: before"]);

    disk.free().expect("free the data disk");
    h.wait(OWNER, 4).await;
    health_until(&h, "ok again", |status, body| {
        status == 200 && faults(body).is_empty()
    })
    .await;
    // Give a second answer time to show up, if one were coming.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        texts(&h),
        [
            "echo: before",
            "echo: while full 1",
            "echo: while full 2",
            "echo: while full 3"
        ],
        "each message answered exactly once, in order"
    );
    assert_eq!(h.tg.pending_updates(), 0);
    let logs = h.logs();
    assert!(logs.contains("database or disk is full"), "{logs}");
    h.stop().await;
}

#[tokio::test]
async fn a_turn_whose_answer_cannot_be_stored_is_answered_once_space_returns() {
    let mut h = TgHearth::new("").await;
    let Some(disk) = small_data_disk(&h) else {
        return;
    };
    // The model takes a moment, long enough to fill the disk while it thinks.
    h.llm.set_responder(|request| {
        Reply::text(format!("echo: {}", last_user_text(request))).delay(Duration::from_millis(700))
    });
    h.start().await;
    h.tg.push_text(OWNER, OWNER, "think while the disk fills");
    h.llm.wait_for_requests(1, WAIT).await;
    disk.fill().expect("fill the data disk");

    // The message is stored; its answer is not: /healthz says so and nothing is sent.
    health_until(&h, "the turns failing", |status, body| {
        status == 503
            && faults(body)
                .iter()
                .any(|f| f == "turns: database or disk is full")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(texts(&h).is_empty(), "{:?}", texts(&h));

    disk.free().expect("free the data disk");
    h.wait(OWNER, 1).await;
    health_until(&h, "ok again", |status, body| {
        status == 200 && faults(body).is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(texts(&h), ["echo: think while the disk fills"]);
    h.stop().await;
}

#[tokio::test]
async fn a_split_reply_whose_progress_cannot_be_recorded_goes_on_once_space_returns() {
    let mut h = TgHearth::new("pacing = false\n").await;
    let Some(disk) = small_data_disk(&h) else {
        return;
    };
    // Four messages' worth: about 3,000 characters per paragraph.
    let paragraphs: Vec<String> = (1..=4)
        .map(|k| {
            format!(
                "PART-{k} {}",
                format!("part{k}word ").repeat(300).trim_end()
            )
        })
        .collect();
    h.llm.push(Reply::text(paragraphs.join("\n\n")));
    h.start().await;
    // Telegram is slow to take part 1; the disk fills meanwhile, so that hearth cannot write
    // down that part 1 was shown.
    h.tg.hold("sendMessage");
    h.tg.push_text(OWNER, OWNER, "tell me everything");
    h.wait_for(WAIT, "the first send", async || {
        (!h.tg.requests_of("sendMessage").is_empty()).then_some(())
    })
    .await;
    disk.fill().expect("fill the data disk");
    h.tg.release("sendMessage");
    h.wait(OWNER, 1).await;
    // Part 2 waits for part 1 to be recorded: going on could not be recorded either.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(texts(&h), paragraphs[..1], "{}", h.logs());

    disk.free().expect("free the data disk");
    h.wait(OWNER, 4).await;
    // Long enough for a repeated part to show up if one were coming.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(texts(&h), paragraphs, "each part exactly once, in order");
    assert!(
        h.logs()
            .contains("recording a delivery failed; trying again"),
        "{}",
        h.logs()
    );
    h.stop().await;
}

#[tokio::test]
async fn one_undecodable_update_does_not_hold_up_the_others() {
    let mut h = TgHearth::new("").await;
    echo(&h);
    // One batch, waiting before hearth starts: a good text, a text with a lone UTF-16
    // surrogate, an update with a number out of range (nothing decodes it), a good text.
    h.tg.push_text(OWNER, OWNER, "first");
    h.tg.push_raw_text(OWNER, OWNER, r#""broken \ud800 text""#);
    let poison = h.tg.push_raw_update(&format!(
        r#"{{"message":{{"message_id":99,"date":1e400,"text":"never",
        "chat":{{"id":{OWNER},"type":"private"}},"from":{{"id":{OWNER},"is_bot":false,"first_name":"U"}}}}}}"#
    ));
    let last = h.tg.push_text(OWNER, OWNER, "last");
    h.start().await;
    h.wait(OWNER, 3).await;
    h.wait_for(WAIT, "the batch to be confirmed", async || {
        (h.tg.confirmed_offset() > last).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        texts(&h),
        ["echo: first", "echo: broken \u{fffd} text", "echo: last"],
        "the others answered once each; the broken character shows as U+FFFD"
    );
    assert_eq!(h.tg.pending_updates(), 0);
    let (status, _) = h.healthz().await;
    assert_eq!(status, 200);
    let logs = h.logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("cannot be decoded; skipped")
                && l.contains("WARN")
                && l.contains(&poison.to_string())),
        "no warning naming update {poison}:\n{logs}"
    );
    h.stop().await;
}
