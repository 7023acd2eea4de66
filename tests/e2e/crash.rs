//! Crash safety under load (docs/architecture.md, "The path of a message"): the real binary, the
//! fake Telegram and the fake LLM; many messages across many chats, some calling a tool with a side
//! effect; SIGKILL at random moments, restart each time; then every message has its reply, in order
//! per chat, and no side effect happened twice.
//!
//! The CI size is bounded; `scripts/soak` runs the same check longer (more messages, more kills)
//! through the ignored `soak` test and the HEARTH_SOAK_* variables.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use hearth_testkit::Reply;
use rand::Rng;
use serde_json::{Value, json};

use crate::support::last_user_text;
use crate::telegram::{OWNER, TgHearth};

struct Load {
    chats: i64,
    per_chat: i64,
    kills: usize,
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test]
async fn crash_safety_under_load() {
    run(Load {
        chats: 50,
        per_chat: 20,
        kills: 5,
    })
    .await;
}

#[tokio::test]
#[ignore = "minutes long; run by scripts/soak"]
async fn soak() {
    run(Load {
        chats: i64::try_from(env_or("HEARTH_SOAK_CHATS", 100)).unwrap_or(100),
        per_chat: i64::try_from(env_or("HEARTH_SOAK_PER_CHAT", 100)).unwrap_or(100),
        kills: usize::try_from(env_or("HEARTH_SOAK_KILLS", 30)).unwrap_or(30),
    })
    .await;
}

async fn run(load: Load) {
    let mut h = TgHearth::new("pacing = false\n").await;
    // Every chat is its user's private chat; allow them all.
    let users: Vec<String> = (0..load.chats).map(|c| (1000 + c).to_string()).collect();
    let path = h.dir.path().join("hearth.toml");
    let text = std::fs::read_to_string(&path).expect("config");
    let text = text.replace(
        &format!("allowed_users = [{OWNER}, 43]"),
        &format!("allowed_users = [{}]", users.join(", ")),
    );
    std::fs::write(&path, text).expect("config");

    // The model echoes each message; every fifth one first adds a task named after it (a side
    // effect that must not happen twice).
    h.llm.set_responder(|request: &Value| {
        let text = last_user_text(request);
        let answered_tool = request["messages"]
            .as_array()
            .is_some_and(|m| m.last().is_some_and(|m| m["role"] == "tool"));
        if text.ends_with("-note") && !answered_tool {
            let args = json!({"title": text}).to_string();
            return Reply::call("c1", "add_task", args);
        }
        Reply::text(format!("echo: {text}"))
    });

    h.start().await;
    let total = load.chats * load.per_chat;
    for i in 0..load.per_chat {
        for c in 0..load.chats {
            let suffix = if i % 5 == 4 { "-note" } else { "" };
            h.tg.push_text(1000 + c, 1000 + c, &format!("c{c}-m{i}{suffix}"));
        }
    }
    let started = Instant::now();
    for _ in 0..load.kills {
        let pause = rand::rng().random_range(150..700);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        h.kill().await;
        h.start().await;
    }

    // Wait for every reply.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let replies: HashMap<i64, Vec<String>> = (0..load.chats)
            .map(|c| {
                (
                    c,
                    h.tg.messages(1000 + c)
                        .into_iter()
                        .map(|m| m.text)
                        .collect(),
                )
            })
            .collect();
        let count: usize = replies.values().map(Vec::len).sum();
        if count >= usize::try_from(total).unwrap_or(usize::MAX) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let elapsed = started.elapsed();

    // Deliveries interrupted by a kill are sent again and flagged: the only replies that may
    // show twice.
    let db = hearth::store::Store::connect(&format!(
        "sqlite://{}",
        h.dir.path().join("data/hearth.db").display()
    ))
    .await
    .expect("database");
    let in_doubt: Vec<String> = sqlx::query_scalar("SELECT payload FROM outbox WHERE in_doubt = 1")
        .fetch_all(db.pool())
        .await
        .expect("in-doubt rows")
        .into_iter()
        .map(|payload: String| {
            serde_json::from_str::<Value>(&payload)
                .map(|v| v["text"].as_str().unwrap_or_default().to_string())
                .unwrap_or_default()
        })
        .collect();
    let duplicate_tasks: Vec<String> =
        sqlx::query_scalar("SELECT title FROM tasks GROUP BY title HAVING COUNT(*) > 1")
            .fetch_all(db.pool())
            .await
            .expect("tasks");
    db.close().await;

    let mut missing = Vec::new();
    let mut doubled = Vec::new();
    for c in 0..load.chats {
        let seen =
            h.tg.messages(1000 + c)
                .into_iter()
                .map(|m| m.text)
                .collect::<Vec<_>>();
        let mut last_index = -1i64;
        for i in 0..load.per_chat {
            let suffix = if i % 5 == 4 { "-note" } else { "" };
            let expected = format!("echo: c{c}-m{i}{suffix}");
            let positions: Vec<usize> = seen
                .iter()
                .enumerate()
                .filter(|(_, t)| **t == expected)
                .map(|(p, _)| p)
                .collect();
            match positions.len() {
                0 => missing.push(expected.clone()),
                1 => {}
                _ => doubled.push(expected.clone()),
            }
            if let Some(first) = positions.first() {
                let first = i64::try_from(*first).unwrap_or(i64::MAX);
                assert!(
                    first > last_index,
                    "chat {c}: {expected} arrived out of order: {seen:?}"
                );
                last_index = first;
            }
        }
    }
    eprintln!(
        "crash test: {total} messages, {} kills, {:.1} s, {} replies shown twice (in doubt after a kill: {})",
        load.kills,
        elapsed.as_secs_f64(),
        doubled.len(),
        in_doubt.len()
    );
    assert!(
        missing.is_empty(),
        "{} messages never answered, e.g. {:?}\n{}",
        missing.len(),
        &missing[..missing.len().min(5)],
        tail(&h.logs())
    );
    for reply in &doubled {
        assert!(
            in_doubt.contains(reply),
            "{reply} was answered twice without a crash in its delivery"
        );
    }
    assert!(
        duplicate_tasks.is_empty(),
        "side effects happened twice: {duplicate_tasks:?}"
    );
    h.stop().await;
}

fn tail(logs: &str) -> String {
    let lines: Vec<&str> = logs.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
