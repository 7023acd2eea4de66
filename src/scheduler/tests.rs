//! The scheduler against a real (temporary SQLite) database and a manual clock: storage, the
//! turn-side interface, firing, catch-up after downtime and idempotence after a crash.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use hearth_channel::{ChatRef, Inbound, SinkError};

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::config::OnConfirmation;
use crate::store::test_support::temp_store;

/// Stores fires in the inbox like the real sink, without a dispatcher, and counts new entries.
struct StoreSink {
    store: Store,
    new_entries: Mutex<Vec<i64>>,
}

#[async_trait]
impl FireSink for StoreSink {
    async fn store_event(&self, channel: &str, event: Inbound) -> Result<Option<i64>, SinkError> {
        let id = self
            .store
            .insert_inbox(channel, &event, 0)
            .await
            .map_err(|err| SinkError(err.to_string()))?;
        if let Some(id) = id {
            self.new_entries.lock().expect("lock").push(id);
        }
        Ok(id)
    }
}

struct Setup {
    store: Store,
    clock: Arc<ManualClock>,
    sink: Arc<StoreSink>,
    scheduler: Scheduler,
    _dir: tempfile::TempDir,
}

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("rfc3339")
        .with_timezone(&Utc)
}

fn ms(text: &str) -> i64 {
    utc(text).timestamp_millis()
}

async fn setup(start: &str) -> Setup {
    let (store, dir) = temp_store().await;
    let clock = ManualClock::new(utc(start));
    let sink = Arc::new(StoreSink {
        store: store.clone(),
        new_entries: Mutex::new(Vec::new()),
    });
    let scheduler = Scheduler::new(store.clone(), clock.clone(), sink.clone());
    Setup {
        store,
        clock,
        sink,
        scheduler,
        _dir: dir,
    }
}

fn config(name: &str, cron: &str) -> ScheduleConfig {
    ScheduleConfig {
        name: name.into(),
        cron: cron.into(),
        timezone: Some(chrono_tz::Europe::Berlin),
        agent: "general".into(),
        prompt: format!("prompt of {name}"),
        target: "telegram:42".into(),
        on_confirmation: OnConfirmation::Allow,
        allow_tools: vec!["list_tasks".into()],
        catch_up_minutes: 60,
    }
}

impl Setup {
    async fn sync(&self, configs: &[ScheduleConfig]) {
        sync_config(&self.store, configs, chrono_tz::UTC, self.clock.now_ms())
            .await
            .expect("sync");
    }

    async fn schedule(&self, name: &str) -> Schedule {
        self.store
            .schedule_by_name(name)
            .await
            .expect("db")
            .expect("schedule exists")
    }

    async fn runs(&self, name: &str) -> Vec<ScheduleRun> {
        let id = self.schedule(name).await.id;
        let mut runs = self.store.schedule_runs(id, 1000).await.expect("runs");
        runs.reverse();
        runs
    }

    fn fired(&self) -> usize {
        self.sink.new_entries.lock().expect("lock").len()
    }
}

#[tokio::test]
async fn config_schedules_are_synced_by_name_and_removed_ones_disabled() {
    let s = setup("2026-03-27T12:00:00Z").await;
    s.sync(&[config("a", "0 30 7 * * *"), config("b", "0 0 9 * * *")])
        .await;
    let a = s.schedule("a").await;
    assert_eq!(a.source, ScheduleSource::Config);
    assert_eq!(a.target(), "telegram:42");
    assert_eq!(a.allow_tools, vec!["list_tasks".to_string()]);
    assert_eq!(
        a.next_fire_at,
        Some(ms("2026-03-28T06:30:00Z")),
        "07:30 CET"
    );

    // Unchanged timing keeps the stored next fire (the catch-up needs it); a new cron moves it.
    s.clock.set(utc("2026-03-30T12:00:00Z"));
    let mut changed = config("b", "0 0 10 * * *");
    changed.prompt = "new prompt".into();
    s.sync(&[config("a", "0 30 7 * * *"), changed]).await;
    assert_eq!(s.schedule("a").await.next_fire_at, a.next_fire_at);
    let b = s.schedule("b").await;
    assert_eq!(b.prompt, "new prompt");
    assert_eq!(
        b.next_fire_at,
        Some(ms("2026-03-31T08:00:00Z")),
        "10:00 CEST"
    );

    s.sync(&[config("b", "0 0 10 * * *")]).await;
    assert!(!s.schedule("a").await.enabled, "removed from the file");
    s.sync(&[config("a", "0 30 7 * * *"), config("b", "0 0 10 * * *")])
        .await;
    let a = s.schedule("a").await;
    assert!(a.enabled, "back in the file");
    assert_eq!(
        a.next_fire_at,
        Some(ms("2026-03-31T05:30:00Z")),
        "recomputed"
    );
}

#[tokio::test]
async fn a_due_schedule_fires_once_with_a_linked_inbox_entry_and_moves_on() {
    let s = setup("2026-03-27T12:00:00Z").await;
    s.sync(&[config("a", "0 30 7 * * *")]).await;
    assert_eq!(s.scheduler.tick().await.expect("tick"), 0, "not due yet");

    // Several days, one fire per day at 07:30 local, across the change to summer time.
    let mut fires = Vec::new();
    for day in ["2026-03-28", "2026-03-29", "2026-03-30"] {
        let due = s.schedule("a").await.next_fire_at.expect("next");
        s.clock
            .set(Utc.timestamp_millis_opt(due).single().expect("valid"));
        assert_eq!(s.scheduler.tick().await.expect("tick"), 1, "{day}");
        assert_eq!(s.scheduler.tick().await.expect("tick"), 0, "only once");
        fires.push(s.schedule("a").await.local_time(due));
    }
    assert_eq!(
        fires,
        vec![
            "2026-03-28 07:30 CET",
            "2026-03-29 07:30 CEST",
            "2026-03-30 07:30 CEST"
        ]
    );

    let runs = s.runs("a").await;
    assert_eq!(runs.len(), 3);
    let run = &runs[0];
    assert_eq!(run.status, RunStatus::Queued);
    let inbox_id = run.inbox_id.expect("linked");
    let entry = s
        .store
        .inbox_entry(inbox_id)
        .await
        .expect("db")
        .expect("entry");
    let schedule = s.schedule("a").await;
    assert_eq!(entry.channel, "telegram");
    assert_eq!(
        entry.platform_id,
        format!("schedule:{}:{}", schedule.id, ms("2026-03-28T06:30:00Z"))
    );
    let event = entry.event.expect("readable");
    assert_eq!(event.sender.id, "schedule");
    assert_eq!(event.sender.name.as_deref(), Some("a"));
    assert_eq!(event.chat, ChatRef::new("42"));
    assert!(
        matches!(event.kind, hearth_channel::InboundKind::Message { ref text, .. } if text == "prompt of a")
    );
    assert_eq!(schedule.last_fire_at, Some(s.clock.now_ms()));
}

#[tokio::test]
async fn the_turn_side_finds_its_run_and_records_the_outcome() {
    let s = setup("2026-03-28T06:00:00Z").await;
    s.sync(&[config("a", "0 30 7 * * *")]).await;
    s.clock.set(utc("2026-03-28T06:30:00.200Z"));
    assert_eq!(s.scheduler.tick().await.expect("tick"), 1);
    let run = s.runs("a").await.remove(0);
    let inbox_id = run.inbox_id.expect("linked");

    let scheduled = s
        .store
        .scheduled_run_for_inbox(inbox_id)
        .await
        .expect("db")
        .expect("a scheduled run");
    assert_eq!(
        scheduled,
        ScheduledRun {
            run_id: run.id,
            schedule_id: run.schedule_id,
            name: "a".into(),
            agent: "general".into(),
            on_confirmation: OnConfirmation::Allow,
            allow_tools: vec!["list_tasks".into()],
            recurring: true,
        }
    );
    s.store
        .start_schedule_run(run.id, 1_000)
        .await
        .expect("start");
    let running = s.runs("a").await.remove(0);
    assert_eq!(
        (running.status, running.started_at),
        (RunStatus::Running, Some(1_000))
    );
    s.store
        .finish_schedule_run(run.id, false, Some("provider down"), 2_000)
        .await
        .expect("finish");
    let failed = s.runs("a").await.remove(0);
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!(failed.error.as_deref(), Some("provider down"));
    assert_eq!(failed.finished_at, Some(2_000));
    // A late start does not reopen a finished run.
    s.store
        .start_schedule_run(run.id, 3_000)
        .await
        .expect("start");
    assert_eq!(s.runs("a").await[0].status, RunStatus::Failed);

    // An ordinary message is no scheduled run.
    let ordinary = s
        .store
        .insert_inbox("telegram", &ordinary_message(), 0)
        .await
        .expect("db")
        .expect("new");
    assert_eq!(
        s.store.scheduled_run_for_inbox(ordinary).await.expect("db"),
        None
    );
}

#[tokio::test]
async fn two_schedules_due_in_the_same_second_both_fire_once() {
    let s = setup("2026-03-27T12:00:00Z").await;
    s.sync(&[config("a", "0 30 7 * * *"), config("b", "0 30 7 * * *")])
        .await;
    s.clock.set(utc("2026-03-28T06:30:00.500Z"));
    assert_eq!(s.scheduler.tick().await.expect("tick"), 2);
    assert_eq!(s.scheduler.tick().await.expect("tick"), 0);
    assert_eq!(s.fired(), 2);
    assert_eq!(s.runs("a").await.len(), 1);
    assert_eq!(s.runs("b").await.len(), 1);
}

#[tokio::test]
async fn after_downtime_a_fire_within_the_window_runs_once_at_start() {
    let s = setup("2026-03-28T05:00:00Z").await;
    s.sync(&[config("a", "0 30 7 * * *")]).await;
    // Down from 06:00 to 07:45 local (fire at 07:30 missed by 15 minutes).
    s.clock.set(utc("2026-03-28T06:45:00Z"));
    s.sync(&[config("a", "0 30 7 * * *")]).await;
    assert_eq!(s.scheduler.tick().await.expect("catch-up"), 1);
    assert_eq!(s.fired(), 1);
    let runs = s.runs("a").await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].scheduled_for, ms("2026-03-28T06:30:00Z"));
    assert_eq!(runs[0].status, RunStatus::Queued);
    assert_eq!(
        s.schedule("a").await.next_fire_at,
        Some(ms("2026-03-29T05:30:00Z")),
        "tomorrow 07:30 CEST"
    );
}

#[tokio::test]
async fn after_downtime_older_misses_are_recorded_not_fired() {
    let s = setup("2026-03-28T05:00:00Z").await;
    s.sync(&[config("a", "0 30 7 * * *")]).await;
    // 07:30 missed by 90 minutes: outside the 60-minute window.
    s.clock.set(utc("2026-03-28T08:00:00Z"));
    assert_eq!(s.scheduler.tick().await.expect("catch-up"), 0);
    assert_eq!(s.fired(), 0);
    let runs = s.runs("a").await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Missed);
    assert_eq!(runs[0].inbox_id, None);
    assert_eq!(
        s.schedule("a").await.next_fire_at,
        Some(ms("2026-03-29T05:30:00Z"))
    );
}

#[tokio::test]
async fn after_days_of_downtime_only_the_newest_fire_in_the_window_runs() {
    let s = setup("2026-03-27T05:00:00Z").await;
    s.sync(&[config("a", "0 30 7 * * *")]).await;
    // Back on the 30th at 07:40 CEST: the 27th, 28th and 29th were missed; the 30th fires.
    s.clock.set(utc("2026-03-30T05:40:00Z"));
    assert_eq!(s.scheduler.tick().await.expect("catch-up"), 1);
    let runs = s.runs("a").await;
    let shown: Vec<(String, RunStatus)> = runs
        .iter()
        .map(|r| (utc_text(r.scheduled_for), r.status))
        .collect();
    assert_eq!(
        shown,
        vec![
            ("2026-03-27T06:30:00+00:00".to_string(), RunStatus::Missed),
            ("2026-03-28T06:30:00+00:00".to_string(), RunStatus::Missed),
            ("2026-03-29T05:30:00+00:00".to_string(), RunStatus::Missed),
            ("2026-03-30T05:30:00+00:00".to_string(), RunStatus::Queued),
        ]
    );
}

fn ordinary_message() -> Inbound {
    Inbound::message(
        "m1",
        ChatRef::new("42"),
        hearth_channel::Sender::new("7"),
        "hi",
    )
}

fn utc_text(ms: i64) -> String {
    Utc.timestamp_millis_opt(ms)
        .single()
        .expect("valid")
        .to_rfc3339()
}

#[tokio::test]
async fn a_crash_between_the_inbox_entry_and_the_link_does_not_fire_twice() {
    let s = setup("2026-03-28T05:00:00Z").await;
    s.sync(&[config("a", "0 30 7 * * *")]).await;
    let schedule = s.schedule("a").await;
    let due = schedule.next_fire_at.expect("next");
    s.clock.set(utc("2026-03-28T06:30:00.300Z"));

    // What `fire` had done when the process died: the run row and the inbox entry, no link,
    // no new next fire time.
    let now = s.clock.now_ms();
    s.store
        .begin_schedule_run(schedule.id, due, now)
        .await
        .expect("run");
    let first = s
        .sink
        .store_event("telegram", schedule.event(due))
        .await
        .expect("stored")
        .expect("new");

    // The dispatcher may handle the entry before the scheduler links it: the turn side still
    // finds its run, through the platform id.
    let found = s
        .store
        .scheduled_run_for_inbox(first)
        .await
        .expect("db")
        .expect("found by platform id");
    assert_eq!(found.name, "a");

    // The restarted scheduler completes the fire without a second entry.
    assert_eq!(s.scheduler.tick().await.expect("tick"), 1);
    assert_eq!(s.fired(), 1, "still one inbox entry");
    let runs = s.runs("a").await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].inbox_id, Some(first));
    assert_eq!(
        s.schedule("a").await.next_fire_at,
        Some(ms("2026-03-29T05:30:00Z"))
    );
    assert_eq!(s.scheduler.tick().await.expect("tick"), 0);
}

#[tokio::test]
async fn a_crash_after_the_run_row_only_still_fires_once_even_after_a_long_downtime() {
    let s = setup("2026-03-28T05:00:00Z").await;
    s.sync(&[config("a", "0 30 7 * * *")]).await;
    let schedule = s.schedule("a").await;
    let due = schedule.next_fire_at.expect("next");
    s.store
        .begin_schedule_run(schedule.id, due, due)
        .await
        .expect("run");
    // Back three hours later, outside the window: the begun fire is completed, not missed.
    s.clock.set(utc("2026-03-28T09:30:00Z"));
    assert_eq!(s.scheduler.tick().await.expect("tick"), 1);
    assert_eq!(s.fired(), 1);
    let runs = s.runs("a").await;
    assert_eq!(runs.len(), 1);
    assert!(runs[0].inbox_id.is_some());
}

#[tokio::test]
async fn an_event_from_elsewhere_with_the_same_platform_id_is_not_taken_for_the_fire() {
    let s = setup("2026-03-28T05:00:00Z").await;
    s.sync(&[config("a", "0 30 7 * * *")]).await;
    let schedule = s.schedule("a").await;
    let due = schedule.next_fire_at.expect("next");
    let mut spoof = schedule.event(due);
    spoof.sender = hearth_channel::Sender::new("attacker@example.org");
    let spoof_id = s
        .store
        .insert_inbox("telegram", &spoof, 0)
        .await
        .expect("db")
        .expect("new");
    s.clock.set(utc("2026-03-28T06:30:01Z"));
    s.scheduler.tick().await.expect("tick");
    let run = s.runs("a").await.remove(0);
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.inbox_id, None);
    assert_eq!(
        s.store.scheduled_run_for_inbox(spoof_id).await.expect("db"),
        None
    );
}

#[tokio::test]
async fn a_one_shot_fires_once_and_is_disabled() {
    let s = setup("2026-03-28T05:00:00Z").await;
    let at = ms("2026-03-28T05:20:00Z");
    let reminder = Schedule {
        one_shot_at: Some(at),
        next_fire_at: Some(at),
        ..Schedule::new(
            "reminder".into(),
            "UTC".into(),
            "general".into(),
            "Reminder for the user: call mum.".into(),
            ("memory".into(), ChatRef::new("chat-1")),
            0,
        )
    };
    s.store.insert_schedule(&reminder, 0).await.expect("insert");
    s.clock.set(utc("2026-03-28T05:21:00Z"));
    assert_eq!(s.scheduler.tick().await.expect("tick"), 1);
    let stored = s.schedule("reminder").await;
    assert!(!stored.enabled);
    assert_eq!(stored.next_fire_at, None);
    s.clock.set(utc("2026-03-29T05:21:00Z"));
    assert_eq!(s.scheduler.tick().await.expect("tick"), 0);
    assert_eq!(s.runs("reminder").await.len(), 1);
}

#[tokio::test]
async fn the_loop_notices_a_moved_manual_clock_within_a_second() {
    let s = setup("2026-03-28T05:00:00Z").await;
    s.sync(&[config("a", "0 30 7 * * *")]).await;
    let shutdown = CancellationToken::new();
    let scheduler = Scheduler::new(s.store.clone(), s.clock.clone(), s.sink.clone());
    let task = tokio::spawn(scheduler.run(shutdown.clone()));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(s.fired(), 0);
    s.clock.set(utc("2026-03-28T06:30:00Z"));
    let started = std::time::Instant::now();
    while s.fired() == 0 && started.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(s.fired(), 1, "fired within {:?}", started.elapsed());
    shutdown.cancel();
    task.await.expect("loop stops");
}

#[test]
fn targets_are_checked() {
    assert_eq!(
        parse_target("matrix:!room:example.org").expect("ok"),
        ("matrix".to_string(), ChatRef::new("!room:example.org"))
    );
    assert!(parse_target("telegram:-100123").is_ok());
    assert!(parse_target("telegram:abc").is_err());
    assert!(parse_target("telegram").is_err());
    assert!(parse_target(":42").is_err());
    assert_eq!(
        crate::store::schedule::parse_platform_id("schedule:3:1700"),
        Some((3, 1700))
    );
    assert_eq!(crate::store::schedule::parse_platform_id("tg:3:1700"), None);
}

/// A run's answer is the reply of its inbox entry (seq 0): while it is on its way the run stays
/// done; refused for good it fails the run once, with the reason. A refused prompt (another
/// seq) is no answer and fails nothing.
#[tokio::test]
async fn a_refused_answer_fails_its_done_run_once() {
    use crate::store::schedule::AnswerDelivery;
    use crate::store::{NewOutbox, OutboxKind};

    let s = setup("2026-03-28T06:00:00Z").await;
    s.sync(&[config("a", "0 30 7 * * *")]).await;
    s.clock.set(utc("2026-03-28T06:30:00.200Z"));
    assert_eq!(s.scheduler.tick().await.expect("tick"), 1);
    let run = s.runs("a").await.remove(0);
    let inbox_id = run.inbox_id.expect("linked");
    assert_eq!(s.store.run_answer(run.id).await.expect("db"), None);

    let reply = |seq| NewOutbox {
        inbox_id: Some(inbox_id),
        seq,
        channel: "telegram".into(),
        kind: OutboxKind::Send,
        message: hearth_channel::OutboundMessage::text(ChatRef::new("42"), "the answer"),
    };
    let ids = s
        .store
        .enqueue_outbox(&[reply(7), reply(0)], 1_000)
        .await
        .expect("enqueue");
    let (prompt, answer) = (ids[0], ids[1]);
    s.store
        .finish_schedule_run(run.id, true, None, 2_000)
        .await
        .expect("done");
    assert_eq!(
        s.store.run_answer(run.id).await.expect("db"),
        Some((answer, AnswerDelivery::OnItsWay))
    );

    let refuse = async |id| {
        s.store
            .mark_outbox_failed(id, "Forbidden: bot was blocked by the user")
            .await
            .expect("fail");
        s.store
            .fail_undelivered_run(id, "its answer could not be delivered", 3_000)
            .await
            .expect("db")
    };
    assert_eq!(refuse(prompt).await, None, "a prompt is no answer");
    assert_eq!(s.runs("a").await[0].status, RunStatus::Done);

    let failed = refuse(answer).await.expect("the run failed");
    assert_eq!(failed.run_id, run.id);
    let stored = s.runs("a").await.remove(0);
    assert_eq!(stored.status, RunStatus::Failed);
    assert_eq!(
        stored.error.as_deref(),
        Some("its answer could not be delivered")
    );
    assert_eq!(
        s.store.run_answer(run.id).await.expect("db"),
        Some((
            answer,
            AnswerDelivery::Failed("Forbidden: bot was blocked by the user".into())
        ))
    );
    assert_eq!(refuse(answer).await, None, "reported once");
}
