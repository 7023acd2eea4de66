//! Scheduled triggers: cron schedules and one-shot reminders that run an agent unattended.
//!
//! Schedules live in the database (`schedules`, with their next fire time) and every fire is
//! recorded in `schedule_runs`. A fire is a synthetic inbox entry (docs/architecture.md, "The path
//! of a message"): the prompt as a message from the sender `schedule` in the schedule's target
//! chat, so the reply takes the same path as any other (dispatcher, turn, outbox, channel). The
//! turn side asks [`Store::scheduled_run_for_inbox`] which agent to use and what to do about
//! confirmations.
//!
//! The loop wakes at least once a second (so `hearth schedule run` and a test moving a
//! `ManualClock` are noticed quickly) and fires every enabled schedule whose time has come.
//! Fire times are computed in the schedule's local time ([`timing`]), not with a fixed UTC
//! offset, so daylight-saving changes are followed.
//!
//! A fire is idempotent: its run row is unique per (schedule, scheduled time) and its inbox
//! entry's platform id is `schedule:<id>:<scheduled_for_ms>`, unique per channel. If hearth dies
//! between the writes, the next tick finds both and only completes what is missing.

pub mod timing;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use hearth_channel::{ChatRef, Inbound, Sender, SinkError};
use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::config::ScheduleConfig;
use crate::store::{Store, StoreError};
use crate::time::parse_timezone;
use timing::CronExpr;

pub(crate) use crate::store::schedule::on_confirmation_str;
pub use crate::store::schedule::{
    RunStatus, SENDER_ID, Schedule, ScheduleRun, ScheduleSource, ScheduledRun,
};

/// Late fires up to this old are still normal fires, whatever the catch-up window: the loop
/// ticks every second and a slow database must not turn a fire into a missed one.
const LATE_GRACE_MS: i64 = 60_000;

/// At most this many missed fires are recorded per schedule after a long downtime.
const MAX_MISSED_RECORDED: usize = 100;

impl Schedule {
    /// `channel:chat_id`, as targets are written.
    pub fn target(&self) -> String {
        format!("{}:{}", self.channel, self.chat.chat_id)
    }

    pub fn tz(&self) -> Result<Tz, String> {
        parse_timezone(&self.timezone)
    }

    /// The first fire strictly after `after_ms`; `None` when there is none (a one-shot in the
    /// past, a cron whose year field has passed).
    pub fn next_fire_after(&self, after_ms: i64) -> Result<Option<i64>, String> {
        match &self.cron {
            Some(cron) => {
                let expr = CronExpr::parse(cron)?;
                Ok(expr
                    .next_after(ms_to_utc(after_ms), self.tz()?)
                    .map(|t| t.timestamp_millis()))
            }
            None => Ok(self.one_shot_at.filter(|at| *at > after_ms)),
        }
    }

    /// Fires in `(after_ms, until_ms]`, oldest first, at most `limit`.
    fn fires_between(
        &self,
        after_ms: i64,
        until_ms: i64,
        limit: usize,
    ) -> Result<Vec<i64>, String> {
        match &self.cron {
            Some(cron) => Ok(CronExpr::parse(cron)?
                .between(ms_to_utc(after_ms), ms_to_utc(until_ms), self.tz()?, limit)
                .iter()
                .map(DateTime::timestamp_millis)
                .collect()),
            None => Ok(self
                .one_shot_at
                .filter(|at| *at > after_ms && *at <= until_ms)
                .into_iter()
                .collect()),
        }
    }

    /// A fire time shown in the schedule's own timezone, e.g. `2026-03-30 07:30 CEST`.
    pub fn local_time(&self, ms: i64) -> String {
        match self.tz() {
            Ok(tz) => ms_to_utc(ms)
                .with_timezone(&tz)
                .format("%Y-%m-%d %H:%M %Z")
                .to_string(),
            Err(_) => ms_to_utc(ms).format("%Y-%m-%d %H:%M UTC").to_string(),
        }
    }

    /// The synthetic inbox entry of the fire at `scheduled_for`.
    pub fn event(&self, scheduled_for: i64) -> Inbound {
        Inbound::message(
            format!("schedule:{}:{scheduled_for}", self.id),
            self.chat.clone(),
            Sender::new(SENDER_ID).with_name(self.name.clone()),
            self.prompt.clone(),
        )
    }
}

fn ms_to_utc(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Reads a target `channel:chat_id` (the chat id may contain `:`, as Matrix room ids do).
pub fn parse_target(text: &str) -> Result<(String, ChatRef), String> {
    let example = "expected `channel:chat_id`, e.g. `telegram:123456789`";
    let Some((channel, chat)) = text.trim().split_once(':') else {
        return Err(format!("`{text}` is not a target: {example}"));
    };
    if channel.is_empty() || !channel.chars().all(|c| c.is_ascii_lowercase()) {
        return Err(format!("`{text}` has no valid channel name: {example}"));
    }
    if chat.trim().is_empty() {
        return Err(format!("`{text}` has no chat id after `{channel}:`"));
    }
    // Each channel crate knows its own chat ids.
    if let Some(Err(reason)) = crate::channels::check_chat_id(channel, chat.trim()) {
        return Err(reason);
    }
    Ok((channel.to_string(), ChatRef::new(chat.trim())))
}

#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("schedule `{name}`: {reason}")]
    Invalid { name: String, reason: String },
    #[error("cannot queue the run: {0}")]
    Sink(String),
}

/// Where fires go: the inbox (and from there the dispatcher; the pipeline implements it for its
/// `InboxSink`). A trait so unit tests can store entries without running turns.
#[async_trait]
pub trait FireSink: Send + Sync {
    /// Stores the event; its inbox id, or `None` when one with its platform id exists.
    async fn store_event(&self, channel: &str, event: Inbound) -> Result<Option<i64>, SinkError>;
}

/// Brings the `[[schedules]]` of the config into the table: new ones are added, changed ones
/// updated (by name), and config schedules no longer in the file disabled. A schedule whose
/// cron and timezone did not change keeps its next fire time, so a fire missed while hearth
/// was down is still seen by the catch-up.
pub async fn sync_config(
    store: &Store,
    configs: &[ScheduleConfig],
    default_timezone: Tz,
    now: i64,
) -> Result<(), SchedulerError> {
    let mut keep = Vec::new();
    for config in configs {
        keep.push(config.name.clone());
        if let Err(err) = sync_one(store, config, default_timezone, now).await {
            // `hearth check` catches these; one bad entry must not stop the others.
            tracing::error!(error = %err, "schedule from the config not loaded");
        }
    }
    for name in store.disable_config_schedules_except(&keep, now).await? {
        tracing::info!(schedule = %name, "schedule removed from the config: disabled");
    }
    Ok(())
}

async fn sync_one(
    store: &Store,
    config: &ScheduleConfig,
    default_timezone: Tz,
    now: i64,
) -> Result<(), SchedulerError> {
    let invalid = |reason: String| SchedulerError::Invalid {
        name: config.name.clone(),
        reason,
    };
    let timezone = config
        .timezone
        .unwrap_or(default_timezone)
        .name()
        .to_string();
    CronExpr::parse(&config.cron).map_err(invalid)?;
    let target = parse_target(&config.target).map_err(invalid)?;
    let existing = store.schedule_by_name(&config.name).await?;
    let (name, agent, prompt) = (
        config.name.clone(),
        config.agent.clone(),
        config.prompt.clone(),
    );
    let mut schedule = Schedule {
        id: existing.as_ref().map_or(0, |s| s.id),
        cron: Some(config.cron.trim().to_string()),
        on_confirmation: config.on_confirmation,
        allow_tools: config.allow_tools.clone(),
        catch_up_minutes: i64::try_from(config.catch_up_minutes).unwrap_or(i64::MAX),
        paused: existing.as_ref().is_some_and(|s| s.paused),
        source: ScheduleSource::Config,
        last_fire_at: existing.as_ref().and_then(|s| s.last_fire_at),
        ..Schedule::new(name, timezone, agent, prompt, target, now)
    };
    let unchanged_timing = existing
        .as_ref()
        .is_some_and(|s| s.enabled && s.cron == schedule.cron && s.timezone == schedule.timezone);
    schedule.next_fire_at = match &existing {
        Some(s) if unchanged_timing && s.next_fire_at.is_some() => s.next_fire_at,
        _ => schedule.next_fire_after(now).map_err(invalid)?,
    };
    match existing {
        Some(old) => {
            if old.source != ScheduleSource::Config {
                tracing::warn!(schedule = %config.name, "a schedule made in chat has the name of a config schedule; the config wins");
            }
            store.save_schedule(&schedule, now).await?;
        }
        None => {
            store.insert_schedule(&schedule, now).await?;
        }
    }
    Ok(())
}

/// The loop that fires due schedules (run [`sync_config`] first).
pub struct Scheduler {
    store: Store,
    clock: SharedClock,
    sink: Arc<dyn FireSink>,
}

impl Scheduler {
    pub fn new(store: Store, clock: SharedClock, sink: Arc<dyn FireSink>) -> Self {
        Self { store, clock, sink }
    }

    /// Fires (or records as missed) every schedule that is due; returns how many fired.
    pub async fn tick(&self) -> Result<usize, SchedulerError> {
        let now = self.clock.now_ms();
        let mut fired = 0;
        for schedule in self.store.due_schedules(now).await? {
            match self.process_due(&schedule, now).await {
                Ok(true) => fired += 1,
                Ok(false) => {}
                Err(err) => {
                    tracing::error!(schedule = %schedule.name, error = %err, "schedule not fired; will retry");
                }
            }
        }
        Ok(fired)
    }

    /// Handles one due schedule: the newest due fire runs if it is within the catch-up window,
    /// the others are recorded as missed, and the schedule moves to its next future fire.
    async fn process_due(&self, schedule: &Schedule, now: i64) -> Result<bool, SchedulerError> {
        let invalid = |reason: String| SchedulerError::Invalid {
            name: schedule.name.clone(),
            reason,
        };
        let Some(first) = schedule.next_fire_at else {
            return Ok(false);
        };
        let window = schedule
            .catch_up_minutes
            .saturating_mul(60_000)
            .max(LATE_GRACE_MS);
        let window_start = now.saturating_sub(window);
        // The newest due fire: the stored next fire time (which `run now` may have set to a
        // time that is no cron occurrence) or a later occurrence up to now.
        let latest = schedule
            .fires_between(first.max(window_start), now, usize::MAX)
            .map_err(invalid)?
            .last()
            .copied()
            .unwrap_or(first);
        // A fire begun before a crash is completed, not fired again and not counted missed.
        let begun = self.store.schedule_run_at(schedule.id, first).await?;
        let to_fire = match begun {
            Some(run) if run.status != RunStatus::Missed => Some(first),
            _ if latest >= window_start => Some(latest),
            _ => None,
        };
        // Every other due fire did not happen and is recorded so.
        let mut missed = vec![first];
        missed.extend(
            schedule
                .fires_between(first, now, MAX_MISSED_RECORDED)
                .map_err(invalid)?,
        );
        missed.retain(|at| Some(*at) != to_fire);
        if !missed.is_empty() {
            tracing::warn!(schedule = %schedule.name, missed = missed.len(), "fires missed while hearth was down");
            self.store
                .record_missed_runs(schedule.id, &missed, now)
                .await?;
        }
        let next = schedule.next_fire_after(now).map_err(invalid)?;
        // A one-shot has no next fire; it stays in the table (history) but disabled.
        let enabled = schedule.cron.is_some();
        match to_fire {
            Some(at) => {
                self.fire(schedule, at, next, enabled, now).await?;
                Ok(true)
            }
            None => {
                self.store
                    .advance_schedule(schedule.id, next, enabled, now)
                    .await?;
                Ok(false)
            }
        }
    }

    /// One fire: the run row, the inbox entry, then (together) the link between them and the
    /// schedule's next fire time. Each step finds what an interrupted earlier attempt left.
    async fn fire(
        &self,
        schedule: &Schedule,
        scheduled_for: i64,
        next: Option<i64>,
        enabled: bool,
        now: i64,
    ) -> Result<(), SchedulerError> {
        let run = self
            .store
            .begin_schedule_run(schedule.id, scheduled_for, now)
            .await?;
        let inbox_id = match run.inbox_id {
            Some(id) => Some(id),
            None => {
                let event = schedule.event(scheduled_for);
                let platform_id = event.platform_id.clone();
                match self
                    .sink
                    .store_event(&schedule.channel, event)
                    .await
                    .map_err(|err| SchedulerError::Sink(err.to_string()))?
                {
                    Some(id) => Some(id),
                    // Stored by an attempt that died before linking it: that entry is already
                    // queued (the dispatcher picks up pending entries at start).
                    None => {
                        let found = self
                            .store
                            .scheduler_inbox_id(&schedule.channel, &platform_id)
                            .await?;
                        if found.is_none() {
                            tracing::error!(schedule = %schedule.name, %platform_id, "another event holds this fire's inbox id; run failed");
                        }
                        found
                    }
                }
            }
        };
        self.store
            .complete_fire(run.id, inbox_id, schedule.id, next, enabled, now)
            .await?;
        tracing::info!(schedule = %schedule.name, scheduled_for, ?inbox_id, "schedule fired");
        Ok(())
    }

    /// Runs until `shutdown`: the first tick is the catch-up after downtime, then one tick
    /// whenever a schedule is due, at least once a second.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            if let Err(err) = self.tick().await {
                tracing::warn!(error = %err, "scheduler tick failed; retrying");
            }
            let wait = match self.store.next_schedule_due().await {
                Ok(Some(due)) => {
                    let ms = due.saturating_sub(self.clock.now_ms()).clamp(10, 1000);
                    Duration::from_millis(u64::try_from(ms).unwrap_or(1000))
                }
                _ => Duration::from_secs(1),
            };
            // Real time, not the clock's: a test's ManualClock is moved from outside and the
            // loop only has to look again soon.
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = shutdown.cancelled() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests;
