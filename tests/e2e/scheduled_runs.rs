//! What a scheduled run does: its agent answers in the target chat acting for the owner,
//! confirmations follow `on_confirmation` (deny / ask / allow), the outcome is recorded, and a
//! failing provider is reported to the owner.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::TimeZone;
use hearth::clock::ManualClock;
use hearth::config::{OnConfirmation, ScheduleConfig};
use hearth::tool::{Risk, ToolInfo, ToolRegistry};
use hearth_testkit::Reply;
use serde_json::json;

use crate::support::{CHAT, Hearth, TestTool, USER, WAIT, poll};

const AGENTS: &str = r#"
[[agent]]
id = "general"
name = "General"
system_prompt = "PROMPT:general"

[[agent]]
id = "janitor"
name = "Janitor"
system_prompt = "PROMPT:janitor"
tools = ["wipe"]
"#;

fn schedule(on_confirmation: OnConfirmation, allow_tools: &[&str]) -> ScheduleConfig {
    ScheduleConfig {
        name: "nightly-cleanup".into(),
        cron: "0 0 9 * * *".into(),
        timezone: Some(chrono_tz::UTC),
        agent: "janitor".into(),
        prompt: "Clean up the old files.".into(),
        target: format!("memory:{CHAT}"),
        on_confirmation,
        allow_tools: allow_tools.iter().map(|t| t.to_string()).collect(),
        catch_up_minutes: 60,
    }
}

/// A hearth one second before the schedule is due, with the owner as the memory user.
async fn hearth(runs: &Arc<AtomicUsize>, config: ScheduleConfig) -> (Hearth, Arc<ManualClock>) {
    let clock = ManualClock::new(
        chrono::Utc
            .with_ymd_and_hms(2026, 11, 21, 8, 59, 59)
            .unwrap(),
    );
    let runs = runs.clone();
    let mut h = Hearth::new()
        .await
        .with_agents(AGENTS)
        .with_clock(clock.clone())
        .with_tools(move || {
            let mut registry = ToolRegistry::with_builtin();
            let info = ToolInfo::new(
                "wipe",
                "files",
                "Delete old files",
                json!({"type": "object"}),
            )
            .risk(Risk::Destructive);
            let runs = runs.clone();
            registry
                .register(TestTool::answering(info, move |_| {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok("wiped".into())
                }))
                .expect("register");
            registry
        });
    h.config.daemon.owner = Some(format!("memory:{USER}").into());
    h.config.schedules = vec![config];
    h.start().await;
    (h, clock)
}

async fn runs_of(h: &Hearth) -> Vec<(String, Option<String>)> {
    let rows: Vec<(String, Option<String>)> =
        sqlx::query_as("SELECT status, error FROM schedule_runs ORDER BY id")
            .fetch_all(h.daemon().store().pool())
            .await
            .expect("runs");
    rows
}

async fn wait_for_run_status(h: &Hearth, status: &str) -> Vec<(String, Option<String>)> {
    let reached = poll(WAIT, async || {
        let runs = runs_of(h).await;
        runs.last().is_some_and(|r| r.0 == status).then_some(runs)
    })
    .await;
    match reached {
        Some(runs) => runs,
        // The caller's assertion says what the runs are instead.
        None => runs_of(h).await,
    }
}

#[tokio::test]
async fn deny_reports_the_tool_as_needing_a_human() {
    let wiped = Arc::new(AtomicUsize::new(0));
    let (h, clock) = hearth(&wiped, schedule(OnConfirmation::Deny, &[])).await;
    h.llm.push(Reply::call("c1", "wipe", "{}"));
    h.llm
        .push(Reply::text("I could not clean up: it needs your approval."));
    clock.advance(Duration::from_secs(2));
    let sent = h.channel.wait_for_sent(1, WAIT).await;
    // The reply names the schedule that sent it.
    assert_eq!(
        sent[0].text,
        "⏰ nightly-cleanup\n\nI could not clean up: it needs your approval."
    );
    assert_eq!(sent[0].chat.chat_id, CHAT);
    assert_eq!(wiped.load(Ordering::SeqCst), 0);
    let requests = h.llm.requests();
    assert!(
        requests[0]["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .starts_with("PROMPT:janitor"),
        "the schedule's agent answers"
    );
    assert!(
        requests[1].to_string().contains("nobody to ask"),
        "{}",
        requests[1]
    );
    assert_eq!(
        wait_for_run_status(&h, "done")
            .await
            .last()
            .map(|r| r.0.clone()),
        Some("done".into())
    );
}

#[tokio::test]
async fn allow_runs_the_listed_tools_without_asking() {
    let wiped = Arc::new(AtomicUsize::new(0));
    let (h, clock) = hearth(&wiped, schedule(OnConfirmation::Allow, &["wipe"])).await;
    h.llm.push(Reply::call("c1", "wipe", "{}"));
    h.llm.push(Reply::text("Cleaned up."));
    clock.advance(Duration::from_secs(2));
    let sent = h.channel.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0].text, "⏰ nightly-cleanup\n\nCleaned up.");
    assert_eq!(wiped.load(Ordering::SeqCst), 1);
    assert_eq!(schedules_of_model_calls(&h).await, ["nightly-cleanup"; 2]);
}

/// The schedule each model call's spending is counted under (`hearth usage --by schedule`).
async fn schedules_of_model_calls(h: &Hearth) -> Vec<String> {
    let rows: Vec<(Option<String>,)> =
        sqlx::query_as("SELECT schedule FROM model_calls WHERE purpose = 'turn' ORDER BY id")
            .fetch_all(h.daemon().store().pool())
            .await
            .expect("model calls");
    rows.into_iter()
        .map(|(schedule,)| schedule.unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn ask_sends_the_buttons_to_the_target_chat_and_waits() {
    let wiped = Arc::new(AtomicUsize::new(0));
    let (h, clock) = hearth(&wiped, schedule(OnConfirmation::Ask, &[])).await;
    h.llm.push(Reply::call("c1", "wipe", "{}"));
    clock.advance(Duration::from_secs(2));
    let prompt = h.channel.wait_for_sent(1, WAIT).await[0].clone();
    assert!(
        prompt.text.contains("wants to run `wipe`"),
        "{}",
        prompt.text
    );
    assert_eq!(wiped.load(Ordering::SeqCst), 0);
    h.llm.push(Reply::text("Cleaned up after your approval."));
    h.channel
        .push_press(&prompt.reference(), USER, &prompt.buttons[0].data);
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(
        sent[1].text,
        "⏰ nightly-cleanup\n\nCleaned up after your approval."
    );
    assert_eq!(wiped.load(Ordering::SeqCst), 1);
    // The turn resumed after the approval is still the schedule's.
    assert_eq!(schedules_of_model_calls(&h).await, ["nightly-cleanup"; 2]);
    assert_eq!(
        wait_for_run_status(&h, "done")
            .await
            .last()
            .map(|r| r.0.clone()),
        Some("done".into())
    );
}

#[tokio::test]
async fn a_failing_provider_is_recorded_and_reported_to_the_owner() {
    let wiped = Arc::new(AtomicUsize::new(0));
    let (h, clock) = hearth(&wiped, schedule(OnConfirmation::Deny, &[])).await;
    h.llm.push(Reply::error(400, "model not found"));
    clock.advance(Duration::from_secs(2));
    let runs = wait_for_run_status(&h, "failed").await;
    let (status, error) = runs.last().cloned().expect("a run");
    assert_eq!(status, "failed");
    assert!(error.unwrap_or_default().contains("model not found"));
    // The target chat got the error reply, and the owner a note in their own chat.
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    let note = sent
        .iter()
        .find(|m| m.chat.chat_id == USER)
        .expect("a note to the owner");
    assert!(
        note.text.contains("nightly-cleanup") && note.text.contains("failed"),
        "{}",
        note.text
    );
}
