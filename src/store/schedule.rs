//! The `schedules` and `schedule_runs` tables: schedules with their next fire time, and every
//! run from queued to done, failed or missed. The records are here; what they mean in time
//! (cron, time zones, fires) is the scheduler's (`impl Schedule` in `scheduler.rs`).

use hearth_channel::{ChatRef, Inbound};
use sqlx::FromRow;
use sqlx::any::AnyRow;

use super::{Store, StoreError, StoreResult, text_enum, to_i64};
use crate::config::OnConfirmation;

/// The sender id of every scheduled inbox entry. No platform hands out this id (Telegram and
/// Discord ids are numbers, Matrix ids start with `@`, email senders contain `@`).
pub const SENDER_ID: &str = "schedule";

/// A scheduled run as the turn that carries it out sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduledRun {
    pub run_id: i64,
    pub schedule_id: i64,
    pub name: String,
    /// The agent that must answer, whatever the keywords say.
    pub agent: String,
    /// What to do when a tool asks for confirmation with nobody watching.
    pub on_confirmation: OnConfirmation,
    /// With [`OnConfirmation::Allow`]: the only tools that run without asking.
    pub allow_tools: Vec<String>,
    /// A cron schedule, as opposed to a one-shot reminder.
    pub recurring: bool,
}

impl ScheduledRun {
    /// The first line of the replies of a recurring schedule's run, naming the schedule, so
    /// whoever reads it knows what sent it (and what to `hearth schedule disable`). A reminder
    /// is its own explanation.
    pub fn note(&self) -> Option<String> {
        self.recurring.then(|| format!("⏰ {}", self.name))
    }
}

/// A stored schedule: a cron schedule (`cron`) or a one-shot reminder (`one_shot_at`).
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    pub id: i64,
    /// Unique.
    pub name: String,
    /// Seconds field first; `None` for a one-shot.
    pub cron: Option<String>,
    /// IANA name the cron expression is read in.
    pub timezone: String,
    pub agent: String,
    pub prompt: String,
    /// Where the reply goes.
    pub channel: String,
    pub chat: ChatRef,
    pub on_confirmation: OnConfirmation,
    pub allow_tools: Vec<String>,
    pub catch_up_minutes: i64,
    /// False once a one-shot fired or a config schedule left the file.
    pub enabled: bool,
    /// Set by `hearth schedule disable`: kept, but not fired until enabled again. Written only
    /// by [`Store::pause_schedule`] and [`Store::resume_schedule`], never by a save.
    pub paused: bool,
    pub source: ScheduleSource,
    /// When a one-shot fires (Unix ms).
    pub one_shot_at: Option<i64>,
    pub created_by: Option<i64>,
    pub last_fire_at: Option<i64>,
    pub next_fire_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Schedule {
    /// A schedule made in chat at `now` that sends `prompt` to `agent`, the answer going to
    /// `chat` on `channel`: enabled, refusing every tool that asks, a missed fire caught up
    /// within an hour. Not stored yet (`id` 0), and with no time to fire: the caller sets
    /// `cron` or `one_shot_at`, and `next_fire_at`.
    pub fn new(
        name: String,
        timezone: String,
        agent: String,
        prompt: String,
        (channel, chat): (String, ChatRef),
        now: i64,
    ) -> Self {
        Self {
            id: 0,
            name,
            cron: None,
            timezone,
            agent,
            prompt,
            channel,
            chat,
            on_confirmation: OnConfirmation::Deny,
            allow_tools: Vec::new(),
            catch_up_minutes: 60,
            enabled: true,
            paused: false,
            source: ScheduleSource::Chat,
            one_shot_at: None,
            created_by: None,
            last_fire_at: None,
            next_fire_at: None,
            created_at: now,
            updated_at: now,
        }
    }
}

text_enum! {
    /// How a run went.
    pub enum RunStatus {
        /// Its inbox entry is waiting for the dispatcher.
        Queued = "queued",
        Running = "running",
        Done = "done",
        Failed = "failed",
        /// hearth was down at the time and it was too old to catch up.
        Missed = "missed",
    }
}

text_enum! {
    /// Where a schedule came from.
    pub enum ScheduleSource {
        /// A `[[schedules]]` entry of the config file: changed there, not by a tool.
        Config = "config",
        /// Made by a tool or the CLI.
        Chat = "chat",
    }
}

/// One recorded fire of a schedule.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct ScheduleRun {
    pub id: i64,
    pub schedule_id: i64,
    pub scheduled_for: i64,
    pub status: RunStatus,
    pub inbox_id: Option<i64>,
    pub error: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

pub(crate) fn on_confirmation_str(value: OnConfirmation) -> &'static str {
    match value {
        OnConfirmation::Deny => "deny",
        OnConfirmation::Ask => "ask",
        OnConfirmation::Allow => "allow",
    }
}

/// The stored `on_confirmation` text read back.
fn stored_on_confirmation(text: &str) -> StoreResult<OnConfirmation> {
    Ok(match text.trim().to_lowercase().as_str() {
        "deny" => OnConfirmation::Deny,
        "ask" => OnConfirmation::Ask,
        "allow" => OnConfirmation::Allow,
        _ => {
            return Err(StoreError::Corrupt(format!(
                "unknown on_confirmation {text:?}"
            )));
        }
    })
}

const COLUMNS: &str = "id, name, cron, timezone, agent, prompt, channel, chat_id, thread_id, \
     on_confirmation, allow_tools, catch_up_minutes, enabled, paused, source, one_shot_at, \
     created_by, last_fire_at, next_fire_at, created_at, updated_at";

const RUN_COLUMNS: &str =
    "id, schedule_id, scheduled_for, status, inbox_id, error, created_at, started_at, finished_at";

/// A `schedules` row as stored: `thread_id` is `""` for none, `allow_tools` JSON text, the
/// flags 0 or 1.
#[derive(sqlx::FromRow)]
struct ScheduleRow {
    id: i64,
    name: String,
    cron: Option<String>,
    timezone: String,
    agent: String,
    prompt: String,
    channel: String,
    chat_id: String,
    thread_id: String,
    on_confirmation: String,
    allow_tools: String,
    catch_up_minutes: i64,
    enabled: i64,
    paused: i64,
    source: ScheduleSource,
    one_shot_at: Option<i64>,
    created_by: Option<i64>,
    last_fire_at: Option<i64>,
    next_fire_at: Option<i64>,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<ScheduleRow> for Schedule {
    type Error = StoreError;

    fn try_from(row: ScheduleRow) -> StoreResult<Self> {
        Ok(Schedule {
            id: row.id,
            name: row.name,
            cron: row.cron,
            timezone: row.timezone,
            agent: row.agent,
            prompt: row.prompt,
            channel: row.channel,
            chat: ChatRef {
                chat_id: row.chat_id,
                thread_id: (!row.thread_id.is_empty()).then_some(row.thread_id),
            },
            on_confirmation: stored_on_confirmation(&row.on_confirmation)?,
            allow_tools: serde_json::from_str(&row.allow_tools)?,
            catch_up_minutes: row.catch_up_minutes,
            enabled: row.enabled != 0,
            paused: row.paused != 0,
            source: row.source,
            one_shot_at: row.one_shot_at,
            created_by: row.created_by,
            last_fire_at: row.last_fire_at,
            next_fire_at: row.next_fire_at,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

/// What a turn needs of a run and its schedule, as the join reads it.
#[derive(sqlx::FromRow)]
struct ScheduledRunRow {
    run_id: i64,
    schedule_id: i64,
    name: String,
    agent: String,
    on_confirmation: String,
    allow_tools: String,
    cron: Option<String>,
}

impl TryFrom<ScheduledRunRow> for ScheduledRun {
    type Error = StoreError;

    fn try_from(row: ScheduledRunRow) -> StoreResult<Self> {
        Ok(ScheduledRun {
            run_id: row.run_id,
            schedule_id: row.schedule_id,
            name: row.name,
            agent: row.agent,
            on_confirmation: stored_on_confirmation(&row.on_confirmation)?,
            allow_tools: serde_json::from_str(&row.allow_tools)?,
            recurring: row.cron.is_some(),
        })
    }
}

/// Binds what a user can set on a schedule, the columns insert and save both write, to `$1`
/// (`name`) to `$14` (`one_shot_at`) in the order of the schedules table.
fn bind_settings<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    schedule: &'q Schedule,
) -> StoreResult<sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>> {
    Ok(query
        .bind(&schedule.name)
        .bind(schedule.cron.as_deref())
        .bind(&schedule.timezone)
        .bind(&schedule.agent)
        .bind(&schedule.prompt)
        .bind(&schedule.channel)
        .bind(&schedule.chat.chat_id)
        .bind(schedule.chat.thread_id.as_deref().unwrap_or(""))
        .bind(on_confirmation_str(schedule.on_confirmation))
        .bind(serde_json::to_string(&schedule.allow_tools)?)
        .bind(schedule.catch_up_minutes)
        .bind(i64::from(schedule.enabled))
        .bind(schedule.source)
        .bind(schedule.one_shot_at))
}

/// The schedule id and fire time a scheduler platform id (`schedule:<id>:<ms>`) names.
pub(crate) fn parse_platform_id(platform_id: &str) -> Option<(i64, i64)> {
    let rest = platform_id.strip_prefix("schedule:")?;
    let (id, ms) = rest.split_once(':')?;
    Some((id.parse().ok()?, ms.parse().ok()?))
}

impl Store {
    /// Adds a schedule; `schedule.id` and the timestamps are ignored. Returns the new id.
    pub async fn insert_schedule(&self, schedule: &Schedule, now_ms: i64) -> StoreResult<i64> {
        // A transaction, so a failed commit (a full disk) is an error and not a returned id of a
        // schedule that was never stored (SQLite's autocommit hands back RETURNING rows first).
        let mut tx = self.begin().await?;
        let insert = sqlx::query(
            "INSERT INTO schedules (name, cron, timezone, agent, prompt, channel, chat_id, thread_id,
                 on_confirmation, allow_tools, catch_up_minutes, enabled, source, one_shot_at,
                 created_by, last_fire_at, next_fire_at, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $18)
             RETURNING id",
        );
        let row = bind_settings(insert, schedule)?
            .bind(schedule.created_by)
            .bind(schedule.last_fire_at)
            .bind(schedule.next_fire_at)
            .bind(now_ms)
            .fetch_one(&mut *tx)
            .await?;
        let (id,) = <(i64,) as FromRow<AnyRow>>::from_row(&row)?;
        tx.commit().await?;
        Ok(id)
    }

    /// Writes every changeable field of `schedule` (by id); false when it no longer exists.
    pub async fn save_schedule(&self, schedule: &Schedule, now_ms: i64) -> StoreResult<bool> {
        let update = sqlx::query(
            "UPDATE schedules SET name = $1, cron = $2, timezone = $3, agent = $4, prompt = $5,
                 channel = $6, chat_id = $7, thread_id = $8, on_confirmation = $9, allow_tools = $10,
                 catch_up_minutes = $11, enabled = $12, source = $13, one_shot_at = $14,
                 next_fire_at = $15, updated_at = $16
             WHERE id = $17",
        );
        let done = bind_settings(update, schedule)?
            .bind(schedule.next_fire_at)
            .bind(now_ms)
            .bind(schedule.id)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    pub async fn schedule_by_name(&self, name: &str) -> StoreResult<Option<Schedule>> {
        let row: Option<ScheduleRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM schedules WHERE name = $1"
        )))
        .bind(name)
        .fetch_optional(self.pool())
        .await?;
        row.map(Schedule::try_from).transpose()
    }

    pub async fn schedule_by_id(&self, id: i64) -> StoreResult<Option<Schedule>> {
        let row: Option<ScheduleRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM schedules WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        row.map(Schedule::try_from).transpose()
    }

    /// Every schedule, by name.
    pub async fn schedules(&self) -> StoreResult<Vec<Schedule>> {
        let rows: Vec<ScheduleRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM schedules ORDER BY name"
        )))
        .fetch_all(self.pool())
        .await?;
        rows.into_iter().map(Schedule::try_from).collect()
    }

    /// Enabled schedules whose next fire time has come, the most overdue first.
    pub async fn due_schedules(&self, now_ms: i64) -> StoreResult<Vec<Schedule>> {
        let rows: Vec<ScheduleRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM schedules
             WHERE enabled = 1 AND paused = 0 AND next_fire_at IS NOT NULL AND next_fire_at <= $1
             ORDER BY next_fire_at, id"
        )))
        .bind(now_ms)
        .fetch_all(self.pool())
        .await?;
        rows.into_iter().map(Schedule::try_from).collect()
    }

    /// The soonest fire time of any enabled schedule.
    pub async fn next_schedule_due(&self) -> StoreResult<Option<i64>> {
        Ok(sqlx::query_scalar(
            "SELECT MIN(next_fire_at) FROM schedules
             WHERE enabled = 1 AND paused = 0 AND next_fire_at IS NOT NULL",
        )
        .fetch_one(self.pool())
        .await?)
    }

    /// Makes an enabled, unpaused schedule due now (`run_schedule_now`, `hearth schedule run`);
    /// the scheduler fires it within a second. False when there is no such schedule.
    pub async fn make_schedule_due(&self, id: i64, now_ms: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE schedules SET next_fire_at = $1, updated_at = $1
             WHERE id = $2 AND enabled = 1 AND paused = 0",
        )
        .bind(now_ms)
        .bind(id)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Pauses a schedule (`hearth schedule disable`): it keeps its place and history but does
    /// not fire, across restarts and config syncs, until [`Store::resume_schedule`].
    pub async fn pause_schedule(&self, id: i64, now_ms: i64) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE schedules SET paused = 1, updated_at = $1 WHERE id = $2")
            .bind(now_ms)
            .bind(id)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Resumes a paused schedule with `next_fire_at` (the first fire after now), so the fires
    /// it slept through are neither caught up nor recorded as missed.
    pub async fn resume_schedule(
        &self,
        id: i64,
        next_fire_at: Option<i64>,
        now_ms: i64,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE schedules SET paused = 0, next_fire_at = $1, updated_at = $2 WHERE id = $3",
        )
        .bind(next_fire_at)
        .bind(now_ms)
        .bind(id)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Deletes a schedule and its run history; false when there was none.
    pub async fn delete_schedule(&self, id: i64) -> StoreResult<bool> {
        let mut tx = self.begin().await?;
        sqlx::query("DELETE FROM schedule_runs WHERE schedule_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query("DELETE FROM schedules WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }

    /// Disables the config schedules whose names are not in `keep` (removed from the file).
    pub async fn disable_config_schedules_except(
        &self,
        keep: &[String],
        now_ms: i64,
    ) -> StoreResult<Vec<String>> {
        let names: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM schedules WHERE source = 'config' AND enabled = 1",
        )
        .fetch_all(self.pool())
        .await?;
        let mut disabled = Vec::new();
        for name in names.into_iter().filter(|n| !keep.contains(n)) {
            sqlx::query("UPDATE schedules SET enabled = 0, updated_at = $1 WHERE name = $2")
                .bind(now_ms)
                .bind(&name)
                .execute(&mut *self.write().await?)
                .await?;
            disabled.push(name);
        }
        Ok(disabled)
    }

    /// The run of one fire, created as `queued` if it does not exist yet. A fire that was
    /// begun before a crash finds its run (and maybe its inbox entry) here again.
    pub async fn begin_schedule_run(
        &self,
        schedule_id: i64,
        scheduled_for: i64,
        now_ms: i64,
    ) -> StoreResult<ScheduleRun> {
        sqlx::query(
            "INSERT INTO schedule_runs (schedule_id, scheduled_for, status, created_at)
             VALUES ($1, $2, 'queued', $3)
             ON CONFLICT (schedule_id, scheduled_for) DO NOTHING",
        )
        .bind(schedule_id)
        .bind(scheduled_for)
        .bind(now_ms)
        .execute(&mut *self.write().await?)
        .await?;
        self.schedule_run_at(schedule_id, scheduled_for)
            .await?
            .ok_or_else(|| StoreError::Corrupt("schedule run vanished after insert".into()))
    }

    pub async fn schedule_run_at(
        &self,
        schedule_id: i64,
        scheduled_for: i64,
    ) -> StoreResult<Option<ScheduleRun>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM schedule_runs WHERE schedule_id = $1 AND scheduled_for = $2"
        )))
        .bind(schedule_id)
        .bind(scheduled_for)
        .fetch_optional(self.pool())
        .await?)
    }

    /// The inbox entry the scheduler made under `platform_id`, if there is one. An entry with
    /// that id from anyone else (a platform id is not always ours to choose, e.g. an email
    /// Message-ID) is not taken for the scheduler's: the sender of a fire is always `schedule`,
    /// an id no platform hands out.
    pub async fn scheduler_inbox_id(
        &self,
        channel: &str,
        platform_id: &str,
    ) -> StoreResult<Option<i64>> {
        let row: Option<(i64, String)> =
            sqlx::query_as("SELECT id, payload FROM inbox WHERE channel = $1 AND platform_id = $2")
                .bind(channel)
                .bind(platform_id)
                .fetch_optional(self.pool())
                .await?;
        let Some((id, payload)) = row else {
            return Ok(None);
        };
        let ours = serde_json::from_str::<Inbound>(&payload)
            .is_ok_and(|event| event.sender.id == SENDER_ID);
        Ok(ours.then_some(id))
    }

    /// Links a fire's run to its inbox entry (or fails it when it has none), records the fire
    /// on the schedule and moves it to its next fire time, all at once.
    pub async fn complete_fire(
        &self,
        run_id: i64,
        inbox_id: Option<i64>,
        schedule_id: i64,
        next_fire_at: Option<i64>,
        enabled: bool,
        now_ms: i64,
    ) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        match inbox_id {
            Some(inbox_id) => {
                sqlx::query("UPDATE schedule_runs SET inbox_id = $1 WHERE id = $2")
                    .bind(inbox_id)
                    .bind(run_id)
                    .execute(&mut *tx)
                    .await?;
            }
            None => {
                sqlx::query(
                    "UPDATE schedule_runs SET status = 'failed', error = $1, finished_at = $2 WHERE id = $3",
                )
                .bind("the run's inbox id is taken by another event")
                .bind(now_ms)
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
            }
        }
        sqlx::query(
            "UPDATE schedules SET last_fire_at = $1, next_fire_at = $2, enabled = $3, updated_at = $1
             WHERE id = $4",
        )
        .bind(now_ms)
        .bind(next_fire_at)
        .bind(i64::from(enabled))
        .bind(schedule_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records fires the daemon was down for (and too late to catch up) as `missed`; a run
    /// already recorded for one of them is left as it is.
    pub async fn record_missed_runs(
        &self,
        schedule_id: i64,
        scheduled_for: &[i64],
        now_ms: i64,
    ) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        for at in scheduled_for {
            sqlx::query(
                "INSERT INTO schedule_runs (schedule_id, scheduled_for, status, error, created_at, finished_at)
                 VALUES ($1, $2, 'missed', 'hearth was not running', $3, $3)
                 ON CONFLICT (schedule_id, scheduled_for) DO NOTHING",
            )
            .bind(schedule_id)
            .bind(*at)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Moves a schedule to its next fire time without firing (after only missed runs).
    pub async fn advance_schedule(
        &self,
        schedule_id: i64,
        next_fire_at: Option<i64>,
        enabled: bool,
        now_ms: i64,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE schedules SET next_fire_at = $1, enabled = $2, updated_at = $3 WHERE id = $4",
        )
        .bind(next_fire_at)
        .bind(i64::from(enabled))
        .bind(now_ms)
        .bind(schedule_id)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }

    /// A schedule's runs, newest first.
    pub async fn schedule_runs(
        &self,
        schedule_id: i64,
        limit: usize,
    ) -> StoreResult<Vec<ScheduleRun>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM schedule_runs WHERE schedule_id = $1
             ORDER BY scheduled_for DESC, id DESC LIMIT $2"
        )))
        .bind(schedule_id)
        .bind(to_i64(limit))
        .fetch_all(self.pool())
        .await?)
    }

    /// The scheduled run an inbox entry carries out, for the turn that handles it: which
    /// agent, and what to do about confirmations. `None` for ordinary messages.
    ///
    /// Normally the run is found by its `inbox_id`. If the daemon died between storing the
    /// inbox entry and linking it, the entry may be handled before the scheduler links it; the
    /// entry's platform id (`schedule:<id>:<ms>`) then names the run, and it is linked here.
    pub async fn scheduled_run_for_inbox(
        &self,
        inbox_id: i64,
    ) -> StoreResult<Option<ScheduledRun>> {
        let run_id: Option<i64> =
            sqlx::query_scalar("SELECT id FROM schedule_runs WHERE inbox_id = $1")
                .bind(inbox_id)
                .fetch_optional(self.pool())
                .await?;
        let run_id = match run_id {
            Some(id) => id,
            None => {
                let Some(entry) = self.inbox_entry(inbox_id).await? else {
                    return Ok(None);
                };
                let Some((schedule_id, at)) = parse_platform_id(&entry.platform_id) else {
                    return Ok(None);
                };
                let ours = entry
                    .event
                    .as_ref()
                    .is_ok_and(|event| event.sender.id == SENDER_ID);
                let Some(run) = self.schedule_run_at(schedule_id, at).await? else {
                    return Ok(None);
                };
                // Linked meanwhile to this very entry is fine; linked to another one is not.
                if !ours || run.inbox_id.is_some_and(|linked| linked != inbox_id) {
                    return Ok(None);
                }
                sqlx::query(
                    "UPDATE schedule_runs SET inbox_id = $1 WHERE id = $2 AND inbox_id IS NULL",
                )
                .bind(inbox_id)
                .bind(run.id)
                .execute(&mut *self.write().await?)
                .await?;
                run.id
            }
        };
        let row: Option<ScheduledRunRow> = sqlx::query_as(
            "SELECT r.id AS run_id, s.id AS schedule_id, s.name, s.agent, s.on_confirmation,
                    s.allow_tools, s.cron
             FROM schedule_runs r JOIN schedules s ON s.id = r.schedule_id WHERE r.id = $1",
        )
        .bind(run_id)
        .fetch_optional(self.pool())
        .await?;
        row.map(ScheduledRun::try_from).transpose()
    }

    /// Marks a run as running (its turn began). A run already finished stays finished.
    pub async fn start_schedule_run(&self, run_id: i64, now_ms: i64) -> StoreResult<()> {
        sqlx::query(
            "UPDATE schedule_runs SET status = 'running', started_at = COALESCE(started_at, $1)
             WHERE id = $2 AND status IN ('queued', 'running')",
        )
        .bind(now_ms)
        .bind(run_id)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }

    /// Records how a run ended: `done`, or `failed` with the error.
    pub async fn finish_schedule_run(
        &self,
        run_id: i64,
        ok: bool,
        error: Option<&str>,
        now_ms: i64,
    ) -> StoreResult<()> {
        let status = if ok {
            RunStatus::Done
        } else {
            RunStatus::Failed
        };
        sqlx::query(
            "UPDATE schedule_runs SET status = $1, error = $2, finished_at = $3,
                 started_at = COALESCE(started_at, $3)
             WHERE id = $4",
        )
        .bind(status)
        .bind(error)
        .bind(now_ms)
        .bind(run_id)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }

    /// Where the answer of run `run_id` stands: its outbox row (the reply of the run's inbox
    /// entry, `seq` 0) and how its delivery went. `None` when the run left nothing to deliver.
    pub async fn run_answer(&self, run_id: i64) -> StoreResult<Option<(i64, AnswerDelivery)>> {
        let row: Option<(i64, String, Option<String>)> = sqlx::query_as(
            "SELECT o.id, o.status, o.last_error
             FROM schedule_runs r JOIN outbox o ON o.inbox_id = r.inbox_id AND o.seq = 0
             WHERE r.id = $1",
        )
        .bind(run_id)
        .fetch_optional(self.pool())
        .await?;
        row.map(|(id, status, error)| Ok((id, AnswerDelivery::of(&status, error)?)))
            .transpose()
    }

    /// The platform refused outbox row `outbox_id` for good: if it is a run's answer and the run
    /// is `done`, the run becomes `failed` with `error`. Returns that run, for the caller to
    /// count and report once; `None` when the row answers no run, or its run is not done
    /// (already failed, or still running: its end then finds the failure).
    pub async fn fail_undelivered_run(
        &self,
        outbox_id: i64,
        error: &str,
        now_ms: i64,
    ) -> StoreResult<Option<ScheduledRun>> {
        let inbox_id: Option<i64> = sqlx::query_scalar(
            "SELECT r.inbox_id FROM outbox o JOIN schedule_runs r ON r.inbox_id = o.inbox_id
             WHERE o.id = $1 AND o.seq = 0 AND r.status = 'done'",
        )
        .bind(outbox_id)
        .fetch_optional(self.pool())
        .await?;
        let Some(inbox_id) = inbox_id else {
            return Ok(None);
        };
        // Only the writer that moves it from done reports it: a second one finds it failed.
        let moved = sqlx::query(
            "UPDATE schedule_runs SET status = 'failed', error = $1, finished_at = $2
             WHERE inbox_id = $3 AND status = 'done'",
        )
        .bind(error)
        .bind(now_ms)
        .bind(inbox_id)
        .execute(&mut *self.write().await?)
        .await?;
        if moved.rows_affected() == 0 {
            return Ok(None);
        }
        self.scheduled_run_for_inbox(inbox_id).await
    }
}

/// How the delivery of a run's answer went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnswerDelivery {
    /// Waiting, being sent, or waiting to be retried.
    OnItsWay,
    Delivered,
    /// Refused for good, with the platform's reason.
    Failed(String),
}

impl AnswerDelivery {
    /// Reads an outbox row's stored status and last error.
    fn of(status: &str, error: Option<String>) -> StoreResult<Self> {
        Ok(match status {
            "pending" | "sending" => Self::OnItsWay,
            "sent" => Self::Delivered,
            "failed" => Self::Failed(error.unwrap_or_else(|| "the platform refused it".into())),
            other => {
                return Err(StoreError::Corrupt(format!(
                    "unknown outbox status {other:?}"
                )));
            }
        })
    }
}
