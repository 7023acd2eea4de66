//! Long conversations and spending (docs/long-conversations.md): compaction keeps a
//! 200-turn conversation within a small window without losing an early fact, a failed summary
//! keeps the history, an overflow is compacted and retried once, a crash mid-compaction loses
//! nothing; costs follow the reported usage and the prices, and each budget cap stops what it
//! should and nothing else.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use chrono::TimeZone;
use hearth::clock::ManualClock;
use hearth::config::{OnConfirmation, ScheduleConfig};
use hearth::store::{ModelCall, Payer, Store};
use hearth::tool::{Risk, ToolInfo, ToolRegistry};
use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use crate::support::{CHAT, Hearth, TestTool, USER, WAIT, hearth_command, run_cli_async};

/// What the summariser's instructions start with; the fake answers those requests as one.
pub(crate) const SUMMARY_MARK: &str = "You keep the record of a long conversation";

pub(crate) const AGENTS: &str = r#"
[[agent]]
id = "general"
name = "General"
system_prompt = "PROMPT:general"
tools = ["save_fact"]
tool_mode = "direct"
"#;

pub(crate) fn tools() -> ToolRegistry {
    let mut registry = ToolRegistry::with_builtin();
    let info = ToolInfo::new(
        "save_fact",
        "notes",
        "Save a fact",
        json!({"type": "object", "properties": {"text": {"type": "string"}}}),
    )
    .risk(Risk::Write);
    let next_id = AtomicI64::new(0);
    registry
        .register(TestTool::answering(info, move |_| {
            // A write that returns a new id each time, like the organiser tools.
            let id = next_id.fetch_add(1, Ordering::SeqCst) + 100;
            Ok(json!({"id": id, "saved": true}).to_string())
        }))
        .expect("register");
    registry
}

pub(crate) fn system_of(request: &Value) -> &str {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
}

pub(crate) fn is_summary(request: &Value) -> bool {
    system_of(request).starts_with(SUMMARY_MARK)
}

pub(crate) fn last_message(request: &Value) -> &Value {
    request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .unwrap_or(&Value::Null)
}

/// The summariser as the fake plays it: the fixed headings, every ledger id as `#id`, and the
/// locker code carried over from the turns or the previous summary.
pub(crate) fn fake_summary(request: &Value) -> Reply {
    let text = request["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    let ids: Vec<String> = text
        .match_indices("(id ")
        .filter_map(|(at, _)| {
            let rest = &text[at + 4..];
            rest.split(')').next().map(|id| format!("#{id}"))
        })
        .collect();
    let code = text
        .split("locker code is ")
        .nth(1)
        .and_then(|rest| rest.get(..4))
        .map(|code| format!("The user's locker code is {code}."))
        .unwrap_or_default();
    Reply::text(format!(
        "## Decisions\nNone.\n## Facts and identifiers\n{code} Saved facts: {}.\n## Earlier requests (already handled)\nThe user told facts; all saved.",
        ids.join(", ")
    ))
}

/// Every tool result follows the assistant message that called it, and every call has one.
pub(crate) fn assert_pairs_whole(request: &Value) {
    let mut open: Vec<String> = Vec::new();
    for message in request["messages"].as_array().into_iter().flatten() {
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().unwrap_or_default();
            let at = open.iter().position(|o| o == id);
            assert!(at.is_some(), "orphan tool result {id} in {request}");
            open.retain(|o| o != id);
            continue;
        }
        assert!(open.is_empty(), "calls without results {open:?}");
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            open.push(call["id"].as_str().unwrap_or_default().to_string());
        }
    }
    assert!(open.is_empty(), "calls without results {open:?}");
}

pub(crate) async fn summaries(store: &Store) -> i64 {
    sqlx::query_scalar("SELECT CAST(COUNT(*) AS BIGINT) FROM conversation_summaries")
        .fetch_one(store.pool())
        .await
        .expect("count")
}

#[tokio::test]
async fn two_hundred_turns_fit_a_small_window_and_keep_an_early_fact() {
    small_window_keeps_an_early_fact(None, 200).await;
}

/// The summaries' and costs' SQL on PostgreSQL: a shorter conversation that still compacts.
#[tokio::test]
async fn summaries_and_costs_work_on_postgres() {
    let Some(server) = hearth_testkit::postgres::TestPostgres::start() else {
        return;
    };
    let url = server
        .create_database("hearth_context")
        .expect("create database");
    let h = small_window_keeps_an_early_fact(Some(url), 60).await;
    let (summary_calls, turn_calls): (i64, i64) = sqlx::query_as(
        "SELECT CAST(SUM(CASE WHEN purpose = 'summary' THEN 1 ELSE 0 END) AS BIGINT),
                CAST(SUM(CASE WHEN purpose = 'turn' THEN 1 ELSE 0 END) AS BIGINT)
         FROM model_calls",
    )
    .fetch_one(h.daemon().store().pool())
    .await
    .expect("model calls");
    assert!(
        summary_calls > 0 && turn_calls >= 60,
        "{summary_calls} {turn_calls}"
    );
}

/// `turns` exchanges (every fifth saves a fact with a tool) in a 4,000-token window: every
/// request fits, the tool pairs stay whole, the system prompt stays, and a fact from the first
/// message is still known at the end. Returns the running daemon for more checks.
async fn small_window_keeps_an_early_fact(database_url: Option<String>, turns: usize) -> Hearth {
    const WINDOW: u64 = 4_000;
    let mut h = Hearth::new().await.with_agents(AGENTS).with_tools(tools);
    h.config.daemon.database_url = database_url;
    h.config.providers[0].context_window = Some(WINDOW as u32);
    h.config.providers[0].max_tokens = 500;
    h.config.context.keep_turns = 4;
    h.llm.set_context_window(WINDOW);
    h.llm.set_responder(|request: &Value| {
        if is_summary(request) {
            return fake_summary(request);
        }
        let last = last_message(request);
        if last["role"] == "tool" {
            return Reply::text("Saved.");
        }
        let text = last["content"].as_str().unwrap_or_default();
        if text == "what is my locker code?" {
            let known = request.to_string().contains("locker code is 4711");
            return Reply::text(if known { "4711" } else { "I do not know." });
        }
        if text.ends_with("save it") {
            let args = json!({"text": text}).to_string();
            return Reply::call("call_0", "save_fact", args);
        }
        Reply::text(format!("Noted: {text}. {}", "All clear. ".repeat(12)))
    });
    h.start().await;

    assert!(
        h.say("My locker code is 4711.")
            .await
            .text
            .starts_with("Noted")
    );
    for turn in 2..turns {
        let text = if turn % 5 == 0 {
            format!("fact number {turn}, save it")
        } else {
            format!("fact number {turn} about the garden")
        };
        let reply = h.say(&text).await.text;
        assert!(!reply.contains('⚠'), "turn {turn}: {reply}");
    }
    assert_eq!(h.say("what is my locker code?").await.text, "4711");

    let store = h.daemon().store().clone();
    let requests = h.llm.requests();
    assert!(summaries(&store).await > 0, "older turns were summarised");
    for request in &requests {
        let tokens = FakeOpenAi::count_tokens(request);
        assert!(tokens <= WINDOW, "a request of {tokens} tokens: {request}");
        if is_summary(request) {
            assert!(request.get("tools").is_none(), "a summary has no tools");
            continue;
        }
        assert!(
            system_of(request).starts_with("PROMPT:general"),
            "the system prompt is kept"
        );
        assert_pairs_whole(request);
    }
    let last = requests.last().expect("requests").to_string();
    assert!(
        !last.contains("fact number 2 about"),
        "early turns are summarised, not sent"
    );
    assert!(last.contains("Earlier in this conversation (reference, already handled)"));
    // Nothing was deleted: all 200 user messages are still stored.
    let users: i64 =
        sqlx::query_scalar("SELECT CAST(COUNT(*) AS BIGINT) FROM messages WHERE role = 'user'")
            .fetch_one(store.pool())
            .await
            .expect("count");
    assert_eq!(users, turns as i64);
    h
}

/// A conversation of `turns` short exchanges, with a roomy window so nothing compacts by itself.
async fn chatted(turns: usize) -> Hearth {
    let mut h = Hearth::new().await.with_agents(AGENTS).with_tools(tools);
    h.config.context.keep_turns = 2;
    h.config.context.summary_timeout_secs = 1;
    h.start().await;
    for turn in 1..=turns {
        h.llm.push(Reply::text(format!("answer {turn}")));
        h.say(&format!("turn {turn}: the boat is called Aurora"))
            .await;
    }
    h
}

#[tokio::test]
async fn a_failed_summary_keeps_the_history() {
    let h = chatted(5).await;
    let store = h.daemon().store().clone();
    let failures = [
        (Reply::error(500, "summariser down"), "summary failed"),
        (Reply::text("   "), "came back empty"),
        (
            Reply::text(
                "## Decisions\n## Facts and identifiers\n## Earlier requests (already handled)",
            )
            .delay(Duration::from_secs(2)),
            "longer than 1s",
        ),
    ];
    for (reply, why) in failures {
        h.llm.push(reply);
        let answer = h.say("/compact").await.text;
        assert!(
            answer.contains("No summary made") && answer.contains(why),
            "{answer}"
        );
        assert_eq!(summaries(&store).await, 0);
        // The history is all there for the next turn.
        h.llm.push(Reply::text("still here"));
        h.say("and now?").await;
        let request = h.llm.last_request().expect("request").to_string();
        assert!(request.contains("turn 1: the boat"), "{request}");
    }
    // The summary that timed out was sent and may be billed: it is recorded, marked cut short.
    let (cut, purpose): (i64, String) =
        sqlx::query_as("SELECT cut_short, purpose FROM model_calls WHERE cut_short = 1")
            .fetch_one(store.pool())
            .await
            .expect("the timed-out summary is recorded");
    assert_eq!((cut, purpose.as_str()), (1, "summary"));
    // A summary in the model's own words, without the headings, is used as written; the
    // ledger rides beside it.
    h.llm.set_responder(|_: &Value| {
        Reply::text("The user talked about their boat, which is called Aurora.")
    });
    let answer = h.say("/compact the boat").await.text;
    assert!(answer.starts_with("🗜 Summarised"), "{answer}");
    let summary_request = h.llm.last_request().expect("summary request");
    assert!(
        system_of(&summary_request).contains("the boat"),
        "the focus is passed on"
    );
    h.llm.push(Reply::text("fine"));
    h.say("anything else?").await;
    let request = h.llm.last_request().expect("request").to_string();
    assert!(!request.contains("turn 1: the boat"), "{request}");
    assert!(request.contains("already handled"), "{request}");
    assert!(request.contains("which is called Aurora"), "{request}");
}

#[tokio::test]
async fn a_context_overflow_is_compacted_and_retried_once_then_the_user_is_told() {
    let h = chatted(6).await;
    let store = h.daemon().store().clone();
    // The next request would be a little larger than the last: make that too large.
    let last = h.llm.last_request().expect("request");
    h.llm
        .set_context_window(FakeOpenAi::count_tokens(&last) + 20);
    h.llm.set_responder(|request: &Value| {
        if is_summary(request) {
            fake_summary(request)
        } else {
            Reply::text("answered after compacting")
        }
    });
    let before = h.llm.request_count();
    let reply = h
        .say(&format!("turn 7: {}", "long words ".repeat(20)))
        .await;
    assert_eq!(reply.text, "answered after compacting");
    // Refused, summarised, retried.
    assert_eq!(h.llm.request_count(), before + 3);
    assert_eq!(summaries(&store).await, 1);

    // A window nothing fits: one line about /new, and no loop.
    h.llm.set_context_window(50);
    let before = h.llm.request_count();
    let reply = h.say("and another thing").await;
    assert!(reply.text.contains("/new"), "{}", reply.text);
    assert!(h.llm.request_count() - before <= 3);
}

#[tokio::test]
async fn repeated_identical_tool_calls_stop_the_turn() {
    let mut h = Hearth::new().await.with_agents(AGENTS).with_tools(tools);
    h.config.runtime.max_repeated_calls = 3;
    h.llm.set_responder(|request: &Value| {
        if last_message(request)["content"] == "hello again" {
            return Reply::text("hi");
        }
        Reply::call("call_0", "save_fact", r#"{"text": "same"}"#)
    });
    h.start().await;
    let reply = h.say("save it forever").await;
    assert!(
        reply.text.contains("stopped") && reply.text.contains("save_fact"),
        "{}",
        reply.text
    );
    // Three runs, the fourth identical request is refused and ends the turn.
    assert_eq!(h.llm.request_count(), 4);
    let runs: i64 =
        sqlx::query_scalar("SELECT CAST(COUNT(*) AS BIGINT) FROM tool_calls WHERE status = 'done'")
            .fetch_one(h.daemon().store().pool())
            .await
            .expect("count");
    assert_eq!(runs, 3);
    // The next turn's request is well formed: every call has its result.
    assert_eq!(h.say("hello again").await.text, "hi");
    let request = h.llm.last_request().expect("request");
    assert_pairs_whole(&request);
    assert!(request.to_string().contains("do not call it again"));
}

#[tokio::test]
async fn costs_are_the_reported_usage_times_the_prices() {
    let mut h = Hearth::new().await.with_agents(AGENTS).with_tools(tools);
    h.config.providers[0].price_input_per_mtok = 2.0;
    h.config.providers[0].price_output_per_mtok = 10.0;
    h.config.daemon.owner = Some(format!("memory:{USER}").into());
    h.start().await;
    h.llm.push(Reply::text("one").usage(1_000, 500));
    h.say("hello").await;
    h.llm
        .push(Reply::call("c1", "save_fact", "{}").usage(2_000, 100));
    h.llm.push(Reply::text("saved").usage(3_000, 50));
    h.say("save it").await;

    let (calls, input, output, cost): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT CAST(COUNT(*) AS BIGINT), CAST(SUM(input_tokens) AS BIGINT), CAST(SUM(output_tokens) AS BIGINT),
                CAST(SUM(cost_nusd) AS BIGINT) FROM model_calls WHERE purpose = 'turn' AND agent_id = 'general'
                AND channel = 'memory' AND user_id IS NOT NULL",
    )
    .fetch_one(h.daemon().store().pool())
    .await
    .expect("usage");
    assert_eq!((calls, input, output), (3, 6_000, 650));
    // (6,000 × $2 + 650 × $10) per million tokens = $0.0185.
    assert_eq!(cost, 18_500_000);
    let usage = h.say("/usage").await.text;
    assert!(
        usage.contains("today: 3 model calls, 6000 tokens in, 650 out, $0.0185"),
        "{usage}"
    );
    assert!(usage.contains("fake/fake-model"), "{usage}");
}

/// 08:59:59 UTC on 2026-11-21; two schedules fire at 09:00.
fn morning() -> Arc<ManualClock> {
    ManualClock::new(
        chrono::Utc
            .with_ymd_and_hms(2026, 11, 21, 8, 59, 59)
            .unwrap(),
    )
}

fn schedule(name: &str) -> ScheduleConfig {
    ScheduleConfig {
        name: name.into(),
        cron: "0 0 9 * * *".into(),
        timezone: Some(chrono_tz::UTC),
        agent: "general".into(),
        prompt: format!("PROMPT of {name}"),
        target: format!("memory:{CHAT}"),
        on_confirmation: OnConfirmation::Deny,
        allow_tools: Vec::new(),
        catch_up_minutes: 60,
    }
}

/// Spending recorded before the test: `(day, schedule, USD)`.
async fn spent(store: &Store, rows: &[(&str, Option<&str>, f64)]) {
    for (day, schedule, usd) in rows {
        store
            .record_model_call(&ModelCall {
                at_ms: 1,
                day: day.to_string(),
                payer: Payer {
                    purpose: "turn",
                    schedule: schedule.map(str::to_string),
                    ..Payer::default()
                },
                provider: "fake".into(),
                model: "fake-model".into(),
                cost_nusd: (usd * 1e9) as i64,
                ..ModelCall::default()
            })
            .await
            .expect("seed spending");
    }
}

/// A hearth with the owner as the memory user and two schedules, configured by `configure`,
/// with `rows` spent already.
async fn budgeted(
    configure: impl FnOnce(&mut hearth::config::Config),
    rows: &[(&str, Option<&str>, f64)],
) -> (Hearth, Arc<ManualClock>) {
    let clock = morning();
    let mut h = Hearth::new()
        .await
        .with_agents(AGENTS)
        .with_tools(tools)
        .with_clock(clock.clone());
    h.config.daemon.owner = Some(format!("memory:{USER}").into());
    h.config.schedules = vec![schedule("brief-a"), schedule("brief-b")];
    configure(&mut h.config);
    h.start().await;
    spent(h.daemon().store(), rows).await;
    h.llm.set_responder(|request: &Value| {
        let prompt = last_message(request)["content"]
            .as_str()
            .unwrap_or_default();
        Reply::text(format!("model answer to {prompt}"))
    });
    (h, clock)
}

async fn runs(h: &Hearth) -> Vec<(String, String, Option<String>)> {
    sqlx::query_as(
        "SELECT s.name, r.status, r.error FROM schedule_runs r JOIN schedules s ON s.id = r.schedule_id ORDER BY s.name",
    )
    .fetch_all(h.daemon().store().pool())
    .await
    .expect("runs")
}

/// Fires both schedules and waits until both runs ended.
async fn fire(h: &Hearth, clock: &ManualClock) -> Vec<(String, String, Option<String>)> {
    clock.advance(Duration::from_secs(2));
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let runs = runs(h).await;
        let ended = runs.len() == 2 && runs.iter().all(|r| r.1 == "done" || r.1 == "failed");
        if ended || tokio::time::Instant::now() > deadline {
            return runs;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_daily_cap_stops_chats_and_schedules_until_the_owner_raises_it() {
    let (h, clock) = budgeted(
        |c| c.budget.daily_usd = Some(1.0),
        &[("2026-11-21", None, 1.0), ("2026-11-20", None, 50.0)],
    )
    .await;
    let reply = h.say("hello").await.text;
    assert!(
        reply.starts_with("💸 Today's budget of $1.00 is reached"),
        "{reply}"
    );
    assert!(reply.contains("/budget"), "says how to raise it: {reply}");
    assert_eq!(h.llm.request_count(), 0, "the model was not called");
    let runs = fire(&h, &clock).await;
    assert!(runs.iter().all(|r| r.1 == "failed"), "{runs:?}");
    assert!(
        runs.iter()
            .all(|r| r.2.as_deref().is_some_and(|e| e.contains("Today's budget"))),
        "{runs:?}"
    );
    assert_eq!(h.llm.request_count(), 0);

    let shown = h.say("/budget").await.text;
    assert!(
        shown.contains("Spent today: $1.00") && shown.contains("today $1.00"),
        "{shown}"
    );
    let raised = h.say("/budget 3").await.text;
    assert!(raised.contains("Today's cap is now $3.00"), "{raised}");
    assert_eq!(h.say("hello").await.text, "model answer to hello");
    assert!(h.say("/budget lots").await.text.contains("not an amount"));
}

#[tokio::test]
async fn the_monthly_cap_counts_every_day_of_the_month() {
    let (h, clock) = budgeted(
        |c| {
            c.budget.monthly_usd = Some(10.0);
            c.budget.daily_usd = Some(5.0);
        },
        // Earlier this month, and last month (which does not count).
        &[
            ("2026-11-02", None, 6.0),
            ("2026-11-20", Some("brief-a"), 4.0),
            ("2026-10-31", None, 100.0),
        ],
    )
    .await;
    let reply = h.say("hello").await.text;
    assert!(
        reply.starts_with("💸 This month's budget of $10.00 is reached"),
        "{reply}"
    );
    let runs = fire(&h, &clock).await;
    assert!(runs.iter().all(|r| r.1 == "failed"), "{runs:?}");
    assert_eq!(h.llm.request_count(), 0);
}

#[tokio::test]
async fn a_schedules_cap_skips_only_that_schedule() {
    let (h, clock) = budgeted(
        |c| {
            c.budget.schedule_daily_usd = Some(0.5);
            c.budget.daily_usd = Some(5.0);
        },
        &[
            ("2026-11-21", Some("brief-a"), 0.5),
            ("2026-11-21", None, 2.0),
        ],
    )
    .await;
    let runs = fire(&h, &clock).await;
    assert_eq!(runs[0].0, "brief-a");
    assert_eq!(runs[0].1, "failed", "{runs:?}");
    assert!(
        runs[0]
            .2
            .as_deref()
            .is_some_and(|e| e.contains("brief-a") && e.contains("skipped")),
        "{runs:?}"
    );
    assert_eq!(
        (runs[1].0.as_str(), runs[1].1.as_str()),
        ("brief-b", "done")
    );
    crate::support::eventually("brief-b's answer", async || {
        h.channel
            .sent_to(CHAT)
            .iter()
            .any(|m| m.text.ends_with("model answer to PROMPT of brief-b"))
    })
    .await;
    assert!(
        !h.channel
            .sent_to(CHAT)
            .iter()
            .any(|m| m.text.contains("brief-a")),
        "brief-a sent nothing"
    );
    assert_eq!(h.say("hello").await.text, "model answer to hello");
}

#[tokio::test]
async fn the_owner_is_warned_once_at_warn_at() {
    let (h, _clock) = budgeted(
        |c| {
            c.budget.daily_usd = Some(1.0);
            c.budget.warn_at = 0.8;
            // Each answer costs $0.005: 1,000 input tokens at $5 per million.
            c.providers[0].price_input_per_mtok = 5.0;
        },
        &[("2026-11-21", None, 0.79)],
    )
    .await;
    for n in 1..=4 {
        h.llm
            .push(Reply::text(format!("answer {n}")).usage(1_000, 0));
        h.channel.push_text(CHAT, USER, &format!("message {n}"));
        let answered = n as usize;
        crate::support::eventually("the answer", async || {
            h.channel.sent_to(CHAT).len() >= answered
        })
        .await;
    }
    crate::support::settle(&h).await;
    let answers: Vec<String> = h
        .channel
        .sent_to(CHAT)
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(answers, ["answer 1", "answer 2", "answer 3", "answer 4"]);
    let sent: Vec<String> = h
        .channel
        .sent_to(USER)
        .into_iter()
        .map(|m| m.text)
        .collect();
    let warned = sent
        .iter()
        .filter(|t| t.contains("of today's budget of $1.00 is spent"))
        .count();
    assert_eq!(warned, 1, "{sent:?}");
}

/// Runs `hearth chat` in `dir`, one line in, one line out.
struct Chat {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: BufReader<std::process::ChildStdout>,
}

impl Chat {
    fn start(dir: &std::path::Path) -> Self {
        let mut child = hearth_command(dir, &["chat"], &[])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("hearth starts");
        let input = child.stdin.take().expect("stdin");
        let output = BufReader::new(child.stdout.take().expect("stdout"));
        Self {
            child,
            input,
            output,
        }
    }

    fn say(&mut self, text: &str) -> String {
        writeln!(self.input, "{text}").expect("write");
        let mut line = String::new();
        self.output.read_line(&mut line).expect("read");
        line.trim_end().to_string()
    }
}

#[tokio::test]
async fn a_crash_in_the_middle_of_a_compaction_loses_nothing() {
    let llm = FakeOpenAi::start().await;
    // Counts real prompt tokens (nothing comes near the window).
    llm.set_context_window(100_000);
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("hearth.toml"),
        format!(
            "[[providers]]\nname = \"fake\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\ncontext_window = 2000\nmax_tokens = 200\n\n[context]\nkeep_turns = 2\n",
            llm.base_url()
        ),
    )
    .expect("config");
    std::fs::create_dir_all(dir.path().join("data")).expect("data dir");
    std::fs::write(
        dir.path().join("data/agents.toml"),
        "[[agent]]\nid = \"general\"\nname = \"General\"\nsystem_prompt = \"PROMPT:general\"\n",
    )
    .expect("agents");
    let llm = Arc::new(llm);
    // The summary hangs: the process is killed while it waits.
    llm.set_responder(|request: &Value| {
        if is_summary(request) {
            return Reply::text("never used").delay(Duration::from_secs(30));
        }
        let text = last_message(request)["content"]
            .as_str()
            .unwrap_or_default();
        let known = request.to_string().contains("locker code is 4711");
        Reply::text(format!("ok {} {known}", text.len()))
    });
    let path = dir.path().to_path_buf();
    let watched = llm.clone();
    let mut chat = tokio::task::spawn_blocking(move || {
        let mut chat = Chat::start(&path);
        assert!(chat.say("My locker code is 4711.").starts_with("ok"));
        // Long messages until the history passes compact_at of the window and the summary
        // (made after the reply) starts.
        for turn in 2..40 {
            chat.say(&format!("message {turn}: {}", "words ".repeat(80)));
            let started = (0..50).any(|_| {
                std::thread::sleep(Duration::from_millis(20));
                watched.requests().iter().any(is_summary)
            });
            if started {
                return chat;
            }
        }
        panic!("no compaction started");
    })
    .await
    .expect("join");
    chat.child.kill().expect("SIGKILL");
    chat.child.wait().expect("reaped");

    let url = format!("sqlite://{}", dir.path().join("data/hearth.db").display());
    let store = Store::connect(&url).await.expect("database");
    assert_eq!(summaries(&store).await, 0, "no half-made summary");
    let stored: i64 = sqlx::query_scalar("SELECT CAST(COUNT(*) AS BIGINT) FROM messages")
        .fetch_one(store.pool())
        .await
        .expect("count");
    store.close().await;

    // After the restart the whole history is there, and the next summary works.
    llm.set_responder(|request: &Value| {
        if is_summary(request) {
            return fake_summary(request);
        }
        let known = request.to_string().contains("locker code is 4711");
        Reply::text(format!("remembered {known}"))
    });
    let path = dir.path().to_path_buf();
    let answer = tokio::task::spawn_blocking(move || {
        let mut chat = Chat::start(&path);
        let answer = chat.say("what is my locker code?");
        let compacted = chat.say("/compact");
        drop(chat.input);
        let _ = chat.child.wait();
        (answer, compacted)
    })
    .await
    .expect("join");
    assert_eq!(answer.0, "remembered true");
    assert!(!answer.1.contains("No summary made"), "{}", answer.1);
    let store = Store::connect(&url).await.expect("database");
    let after: i64 = sqlx::query_scalar("SELECT CAST(COUNT(*) AS BIGINT) FROM messages")
        .fetch_one(store.pool())
        .await
        .expect("count");
    assert_eq!(after, stored + 2, "every message kept, the new turn added");
    assert!(summaries(&store).await >= 1);
    store.close().await;

    // `hearth usage` reads the same records; a wrong --by is a usage error.
    let usage = run_cli_async(
        dir.path(),
        &["usage", "--days", "7", "--by", "model"],
        &[],
        "",
    )
    .await;
    let stdout = String::from_utf8_lossy(&usage.stdout);
    assert_eq!(
        usage.status.code(),
        Some(0),
        "{stdout} {}",
        String::from_utf8_lossy(&usage.stderr)
    );
    assert!(
        stdout.contains("fake/m") && stdout.contains("total"),
        "{stdout}"
    );
    let wrong = run_cli_async(dir.path(), &["usage", "--by", "colour"], &[], "").await;
    assert_eq!(wrong.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("day, agent, schedule, user, model"));
}

#[tokio::test]
async fn old_tool_results_are_stubs_that_tool_result_fetches_back() {
    let agents = "[[agent]]\nid = \"general\"\nname = \"General\"\nsystem_prompt = \"PROMPT:general\"\ntools = [\"read_log\"]\ntool_mode = \"direct\"\n";
    let mut h = Hearth::new().await.with_agents(agents).with_tools(|| {
        let mut registry = ToolRegistry::with_builtin();
        let info = ToolInfo::new(
            "read_log",
            "files",
            "Read the log",
            json!({"type": "object"}),
        );
        registry
            .register(TestTool::answering(info, |_| {
                // A safe tool with a long result.
                Ok(format!("START {} END", "log line. ".repeat(500)))
            }))
            .expect("register");
        registry
    });
    h.start().await;
    h.llm.push(Reply::call("log1", "read_log", "{}"));
    h.llm.push(Reply::text("The log is fine."));
    h.say("check the log").await;
    for turn in 2..=4 {
        h.llm.push(Reply::text(format!("answer {turn}")));
        h.say(&format!("turn {turn}")).await;
    }
    let request = h.llm.last_request().expect("request").to_string();
    assert!(!request.contains(" END"), "the old result is a stub");
    assert!(
        request.contains("call tool_result with call_id"),
        "{request}"
    );
    assert!(
        request.contains("\"name\":\"tool_result\""),
        "the tool is offered"
    );

    h.llm.push(Reply::call(
        "fetch1",
        "tool_result",
        r#"{"call_id": "log1"}"#,
    ));
    h.llm.push(Reply::text("It ends with END."));
    assert_eq!(
        h.say("how did the log end?").await.text,
        "It ends with END."
    );
    let request = h.llm.last_request().expect("request");
    let fetched = last_message(&request)["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        fetched.starts_with("START") && fetched.ends_with(" END"),
        "{fetched}"
    );
}
