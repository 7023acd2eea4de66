//! The `background_tasks` table: work a person asked for "later", run unattended after the
//! answer and reported back as a reply to the message that started it (docs/architecture.md,
//! "Background tasks").
//!
//! A task is a row from the moment `start_background_task` runs, so nothing about it lives only
//! in memory: its run is a synthetic inbox entry (`inbox_id`), its turn is stored and resumed as
//! any turn is, and its state moves only along the transitions below, each guarded by the state
//! it comes from, so two paths (a `/cancel` and the turn's end) never both win.

use hearth_channel::ChatRef;

use super::query::Sql;
use super::{Store, StoreResult, text_enum};

/// The sender of a background task's run: its synthetic inbox entry is a message from
/// `background`, as a schedule's fire is one from `schedule`.
pub const SENDER_ID: &str = "background";

/// The platform id of task `id`'s run: unique per channel, so the run is stored once.
pub fn run_platform_id(id: i64) -> String {
    format!("background:{id}")
}

/// Whether `event` is a background task's run (its sender and the shape of its platform id);
/// the handler then finds the task by the entry, which no platform can write.
pub fn is_run_event(event: &hearth_channel::Inbound) -> bool {
    event.sender.id == SENDER_ID && event.platform_id.starts_with("background:")
}

text_enum! {
    /// Where a background task stands.
    pub enum BackgroundState {
        /// Stored; runs once the answer that started it is given.
        Queued = "queued",
        /// Its run is in the inbox or its turn is under way.
        Running = "running",
        /// Its turn waits for the owner's Approve or Deny.
        WaitingApproval = "waiting_approval",
        /// Reported.
        Succeeded = "succeeded",
        /// Ended without its report (a budget cap, a model error, its report-by time passed).
        Failed = "failed",
        /// Stopped with `/cancel N` (or the turn that started it was cancelled).
        Cancelled = "cancelled",
        /// Its run was lost (set aside after repeated database errors) and cannot resume; the
        /// owner was told.
        Interrupted = "interrupted",
    }
}

impl BackgroundState {
    /// States of a task not yet ended: they count against `[plans] max_background_tasks`.
    pub const ACTIVE: &'static [BackgroundState] = &[
        BackgroundState::Queued,
        BackgroundState::Running,
        BackgroundState::WaitingApproval,
    ];

    pub fn is_active(self) -> bool {
        Self::ACTIVE.contains(&self)
    }

    /// How `/tasks` and the owner's page say it.
    pub fn label(self) -> &'static str {
        match self {
            BackgroundState::Queued => "queued",
            BackgroundState::Running => "running",
            BackgroundState::WaitingApproval => "waiting for your approval",
            BackgroundState::Succeeded => "done",
            BackgroundState::Failed => "failed",
            BackgroundState::Cancelled => "cancelled",
            BackgroundState::Interrupted => "interrupted",
        }
    }
}

/// A stored background task.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct BackgroundTask {
    pub id: i64,
    pub user_id: i64,
    pub conversation_id: i64,
    /// The inbox entry of the message that started it; the report replies to it.
    pub origin_inbox_id: i64,
    pub channel: String,
    pub chat_id: String,
    pub thread_id: Option<String>,
    /// The platform id of the message that started it, quoted by the report.
    pub origin_message_id: Option<String>,
    /// The platform user id of whoever asked: they (or the owner) decide its confirmations.
    pub requester: String,
    /// The starting message's reply context (JSON), handed back on the report.
    pub reply_context: Option<String>,
    pub agent_id: String,
    pub title: String,
    pub instructions: String,
    /// Unix milliseconds: the report is due by then, and the task stops if it is not done.
    pub report_by: Option<i64>,
    pub state: BackgroundState,
    /// The synthetic inbox entry its run is (set when it starts running).
    pub inbox_id: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

const COLUMNS: &str = "id, user_id, conversation_id, origin_inbox_id, channel, chat_id, thread_id, \
    origin_message_id, requester, reply_context, agent_id, title, instructions, report_by, state, \
    inbox_id, last_error, created_at, started_at, finished_at";

impl BackgroundTask {
    /// The chat it reports to.
    pub fn chat(&self) -> ChatRef {
        ChatRef {
            chat_id: self.chat_id.clone(),
            thread_id: self.thread_id.clone(),
        }
    }

    /// The starting message's reply context, as the channel gave it.
    pub fn reply_context(&self) -> Option<serde_json::Value> {
        self.reply_context
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
    }
}

/// A task to store, as `start_background_task` made it from the turn it runs in.
#[derive(Clone, Debug)]
pub struct NewBackgroundTask {
    pub user_id: i64,
    pub conversation_id: i64,
    pub origin_inbox_id: i64,
    pub channel: String,
    pub chat: ChatRef,
    pub origin_message_id: Option<String>,
    pub requester: String,
    pub reply_context: Option<serde_json::Value>,
    pub agent_id: String,
    pub title: String,
    pub instructions: String,
    pub report_by: Option<i64>,
}

/// What the per-user cap decided about a new task.
#[derive(Clone, Debug)]
pub enum Admitted {
    /// Stored as queued, with its id.
    Stored(i64),
    /// The user has this many tasks going already (listed): nothing stored.
    Full(Vec<BackgroundTask>),
}

fn push_states(sql: &mut Sql, states: &[BackgroundState]) {
    sql.push(" state IN (");
    for state in states {
        sql.value(*state);
    }
    sql.push(")");
}

impl Store {
    /// Stores a queued task unless the user has `max_active` tasks going already, checked and
    /// inserted in one transaction so two starts at once cannot both pass the cap.
    pub async fn start_background_task(
        &self,
        task: &NewBackgroundTask,
        max_active: usize,
        now: i64,
    ) -> StoreResult<Admitted> {
        let mut tx = self.begin().await?;
        let mut sql = Sql::new(&format!(
            "SELECT {COLUMNS} FROM background_tasks WHERE user_id = "
        ));
        sql.bind(task.user_id).push(" AND");
        push_states(&mut sql, BackgroundState::ACTIVE);
        sql.push(" ORDER BY id");
        let (text, arguments) = sql.into_parts()?;
        let active: Vec<BackgroundTask> = sqlx::query_as_with(sqlx::AssertSqlSafe(text), arguments)
            .fetch_all(&mut *tx)
            .await?;
        if active.len() >= max_active {
            tx.rollback().await?;
            return Ok(Admitted::Full(active));
        }
        let mut insert = Sql::insert(
            "background_tasks",
            "user_id, conversation_id, origin_inbox_id, channel, chat_id, thread_id, \
             origin_message_id, requester, reply_context, agent_id, title, instructions, \
             report_by, state, created_at, updated_at",
        );
        insert
            .value(task.user_id)
            .value(task.conversation_id)
            .value(task.origin_inbox_id)
            .value(task.channel.clone())
            .value(task.chat.chat_id.clone())
            .value(task.chat.thread_id.clone())
            .value(task.origin_message_id.clone())
            .value(task.requester.clone())
            .value(task.reply_context.as_ref().map(ToString::to_string))
            .value(task.agent_id.clone())
            .value(task.title.clone())
            .value(task.instructions.clone())
            .value(task.report_by)
            .value(BackgroundState::Queued)
            .value(now)
            .value(now)
            .push(") RETURNING id");
        let (text, arguments) = insert.into_parts()?;
        let (id,): (i64,) = sqlx::query_as_with(sqlx::AssertSqlSafe(text), arguments)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Admitted::Stored(id))
    }

    pub async fn background_task(&self, id: i64) -> StoreResult<Option<BackgroundTask>> {
        let mut sql = Sql::new(&format!(
            "SELECT {COLUMNS} FROM background_tasks WHERE id = "
        ));
        sql.bind(id);
        sql.fetch_optional(self).await
    }

    /// The task whose run is inbox entry `inbox_id`.
    pub async fn background_task_for_inbox(
        &self,
        inbox_id: i64,
    ) -> StoreResult<Option<BackgroundTask>> {
        let mut sql = Sql::new(&format!(
            "SELECT {COLUMNS} FROM background_tasks WHERE inbox_id = "
        ));
        sql.bind(inbox_id);
        sql.fetch_optional(self).await
    }

    /// The user's tasks (everyone's with `None`): those going first, then the most recent,
    /// at most `limit`.
    pub async fn background_tasks(
        &self,
        user: Option<i64>,
        limit: i64,
    ) -> StoreResult<Vec<BackgroundTask>> {
        let mut sql = Sql::new(&format!(
            "SELECT {COLUMNS} FROM background_tasks WHERE 1 = 1"
        ));
        if let Some(user) = user {
            sql.push(" AND user_id = ").bind(user);
        }
        sql.push(" ORDER BY CASE WHEN");
        push_states(&mut sql, BackgroundState::ACTIVE);
        sql.push(" THEN 0 ELSE 1 END, id DESC LIMIT ")
            .bind(limit.max(1));
        sql.fetch_all(self).await
    }

    /// Tasks in `states` on `channels` (the ones this process runs), oldest first.
    pub async fn background_tasks_in(
        &self,
        states: &[BackgroundState],
        channels: &[String],
    ) -> StoreResult<Vec<BackgroundTask>> {
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM background_tasks WHERE"));
        push_states(&mut sql, states);
        sql.push(" AND channel IN (");
        for channel in channels {
            sql.value(channel.clone());
        }
        sql.push(") ORDER BY id");
        sql.fetch_all(self).await
    }

    /// Tasks on `channels` whose run entry is pending: those the dispatcher is to run (again).
    pub async fn background_runs_pending(
        &self,
        channels: &[String],
    ) -> StoreResult<Vec<BackgroundTask>> {
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::new(&format!(
            "SELECT {COLUMNS} FROM background_tasks WHERE inbox_id IN \
             (SELECT id FROM inbox WHERE status = "
        ));
        sql.bind(super::InboxStatus::Pending)
            .push(") AND channel IN (");
        for channel in channels {
            sql.value(channel.clone());
        }
        sql.push(") ORDER BY id");
        sql.fetch_all(self).await
    }

    /// Queued tasks on `channels` whose starting message is answered (its inbox entry no longer
    /// pending): they may run now.
    pub async fn ready_background_tasks(
        &self,
        channels: &[String],
    ) -> StoreResult<Vec<BackgroundTask>> {
        let queued = self
            .background_tasks_in(&[BackgroundState::Queued], channels)
            .await?;
        let mut ready = Vec::with_capacity(queued.len());
        for task in queued {
            let answered = self
                .inbox_entry(task.origin_inbox_id)
                .await?
                .is_none_or(|entry| entry.status != super::InboxStatus::Pending);
            if answered {
                ready.push(task);
            }
        }
        Ok(ready)
    }

    /// A queued task's run is stored as inbox entry `inbox_id`: it is running. False when the
    /// task is no longer queued (cancelled meanwhile).
    pub async fn launch_background_task(
        &self,
        id: i64,
        inbox_id: i64,
        now: i64,
    ) -> StoreResult<bool> {
        let mut sql = Sql::new("UPDATE background_tasks SET state = ");
        sql.bind(BackgroundState::Running)
            .push(", inbox_id = ")
            .bind(inbox_id)
            .push(", started_at = ")
            .bind(now)
            .push(", updated_at = ")
            .bind(now)
            .push(" WHERE id = ")
            .bind(id)
            .push(" AND state = ")
            .bind(BackgroundState::Queued);
        let mut conn = self.write().await?;
        Ok(sql.execute_in(&mut conn).await? > 0)
    }

    /// Moves task `id` to `to` if it is in one of `from`, with `error` as its last error (kept
    /// when `None`); an ended state records when. False when the task was elsewhere: another
    /// path moved it first.
    pub async fn move_background_task(
        &self,
        id: i64,
        from: &[BackgroundState],
        to: BackgroundState,
        error: Option<&str>,
        now: i64,
    ) -> StoreResult<bool> {
        let mut sql = Sql::new("UPDATE background_tasks SET state = ");
        sql.bind(to).push(", updated_at = ").bind(now);
        if let Some(error) = error {
            sql.push(", last_error = ").bind(error.to_string());
        }
        if !to.is_active() {
            sql.push(", finished_at = ").bind(now);
        }
        sql.push(" WHERE id = ").bind(id).push(" AND");
        push_states(&mut sql, from);
        let mut conn = self.write().await?;
        Ok(sql.execute_in(&mut conn).await? > 0)
    }

    /// Makes a task's run entry pending again (its turn resumes after a decision), for the
    /// dispatcher to run under the run's own key.
    pub async fn reopen_background_run(&self, inbox_id: i64) -> StoreResult<()> {
        let mut sql = Sql::new("UPDATE inbox SET status = ");
        sql.bind(super::InboxStatus::Pending)
            .push(" WHERE id = ")
            .bind(inbox_id);
        let mut conn = self.write().await?;
        sql.execute_in(&mut conn).await?;
        Ok(())
    }

    /// What the task's run has cost so far, in billionths of a USD: its turn's model calls.
    /// `None` before it ran.
    pub async fn background_task_cost(&self, task: &BackgroundTask) -> StoreResult<Option<i64>> {
        let Some(inbox_id) = task.inbox_id else {
            return Ok(None);
        };
        let cost: Option<i64> = sqlx::query_scalar(
            "SELECT CAST(SUM(m.cost_nusd) AS BIGINT) FROM model_calls m JOIN turns t ON m.turn_id = t.id \
             WHERE t.inbox_id = $1",
        )
        .bind(inbox_id)
        .fetch_one(self.pool())
        .await?;
        Ok(cost)
    }

    /// The turn of the task's run, once it has started.
    pub async fn background_task_turn(&self, task: &BackgroundTask) -> StoreResult<Option<i64>> {
        let Some(inbox_id) = task.inbox_id else {
            return Ok(None);
        };
        let turn: Option<(i64,)> =
            sqlx::query_as("SELECT id FROM turns WHERE inbox_id = $1 ORDER BY id DESC LIMIT 1")
                .bind(inbox_id)
                .fetch_optional(self.pool())
                .await?;
        Ok(turn.map(|(id,)| id))
    }

    /// The last tool the task's turn called and how that call stands (`web_search`, `done`):
    /// its latest progress.
    pub async fn background_task_last_call(
        &self,
        task: &BackgroundTask,
    ) -> StoreResult<Option<(String, String)>> {
        let Some(inbox_id) = task.inbox_id else {
            return Ok(None);
        };
        Ok(sqlx::query_as(
            "SELECT c.name, c.status FROM tool_calls c JOIN turns t ON c.turn_id = t.id \
             WHERE t.inbox_id = $1 ORDER BY c.id DESC LIMIT 1",
        )
        .bind(inbox_id)
        .fetch_optional(self.pool())
        .await?)
    }
}

#[cfg(test)]
mod tests;
