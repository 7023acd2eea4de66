//! The work of one process's channels as a whole: how much of it waits, and closing what a
//! session left behind.
//!
//! `hearth chat` is a session: what it was doing when it ended (Ctrl-C, a closed terminal, a
//! crash) is not carried into the next chat, where an answer to a question asked an hour ago
//! would be printed as the answer to the first new line. [`Store::abandon_channel_work`] closes
//! it instead, the way `/cancel` closes a turn: open tool calls get a result saying they did not
//! run (so the history stays well-formed for the model), the turn is cancelled, its confirmations
//! expire, and replies not yet printed are dropped.

use super::turn::insert_message;
use super::{Store, StoreResult, placeholders};
use crate::provider::ChatMessage;

/// What [`Store::abandon_channel_work`] closed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Abandoned {
    pub turns: u64,
    pub inbox: u64,
    pub outbox: u64,
}

impl Abandoned {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// An unfinished turn to close.
#[derive(sqlx::FromRow)]
struct OpenTurn {
    id: i64,
    inbox_id: i64,
    conversation_id: i64,
    user_id: Option<i64>,
    agent_id: String,
}

/// A tool call of an unfinished turn that has no result yet.
#[derive(sqlx::FromRow)]
struct OpenCall {
    id: i64,
    call_id: String,
    name: String,
    arguments: String,
}

impl Store {
    /// Replies of `channels` not yet delivered: waiting, or being sent right now (a stop waits
    /// for those too, so a send is not cut off between the platform's answer and its record).
    pub async fn outbox_depth_of(&self, channels: &[String]) -> StoreResult<i64> {
        if channels.is_empty() {
            return Ok(0);
        }
        let sql = format!(
            "SELECT COUNT(*) FROM outbox WHERE status IN ('pending', 'sending') AND channel IN ({})",
            placeholders(1, channels.len())
        );
        let mut query = sqlx::query_scalar(sqlx::AssertSqlSafe(sql));
        for channel in channels {
            query = query.bind(channel);
        }
        Ok(query.fetch_one(self.pool()).await?)
    }

    /// Per channel with anything waiting: (channel, pending inbox entries, pending replies).
    pub async fn pending_work_by_channel(&self) -> StoreResult<Vec<(String, i64, i64)>> {
        Ok(sqlx::query_as(
            "SELECT channel, SUM(inbox) AS inbox, SUM(outbox) AS outbox FROM (
               SELECT channel, 1 AS inbox, 0 AS outbox FROM inbox WHERE status = 'pending'
               UNION ALL
               SELECT channel, 0 AS inbox, 1 AS outbox FROM outbox WHERE status = 'pending'
             ) AS work GROUP BY channel ORDER BY channel",
        )
        .fetch_all(self.pool())
        .await?)
    }

    /// Closes the unfinished work of `channels`, in one transaction: running and suspended turns
    /// are cancelled (their open tool calls answered with `reason`, their confirmations
    /// expired), pending inbox entries and undelivered replies are marked failed with `reason`.
    /// Scheduled fires that have not started are kept: they were not part of the session.
    pub async fn abandon_channel_work(
        &self,
        channels: &[String],
        reason: &str,
        now_ms: i64,
    ) -> StoreResult<Abandoned> {
        if channels.is_empty() {
            return Ok(Abandoned::default());
        }
        let list = |first| placeholders(first, channels.len());
        let mut tx = self.begin().await?;

        let sql = format!(
            "SELECT t.id, t.inbox_id, t.conversation_id, t.user_id, t.agent_id FROM turns t
             JOIN inbox i ON i.id = t.inbox_id
             WHERE t.status IN ('running', 'suspended') AND i.channel IN ({}) ORDER BY t.id",
            list(1)
        );
        let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql));
        for channel in channels {
            query = query.bind(channel);
        }
        let turns: Vec<OpenTurn> = query.fetch_all(&mut *tx).await?;
        let note = format!("Not run: {reason}.");
        for turn in &turns {
            let OpenTurn {
                id: turn_id,
                inbox_id,
                conversation_id,
                user_id,
                ref agent_id,
            } = *turn;
            let session: Option<i64> = sqlx::query_scalar(
                "SELECT session FROM messages WHERE turn_id = $1 ORDER BY id LIMIT 1",
            )
            .bind(turn_id)
            .fetch_optional(&mut *tx)
            .await?;
            let session = match session {
                Some(session) => session,
                None => {
                    sqlx::query_scalar("SELECT session FROM conversations WHERE id = $1")
                        .bind(conversation_id)
                        .fetch_one(&mut *tx)
                        .await?
                }
            };
            let calls: Vec<OpenCall> = sqlx::query_as(
                "SELECT id, call_id, name, arguments FROM tool_calls
                 WHERE turn_id = $1 AND status IN ('pending', 'running', 'waiting', 'approved')
                 ORDER BY message_id, position",
            )
            .bind(turn_id)
            .fetch_all(&mut *tx)
            .await?;
            for call in calls {
                let OpenCall {
                    id,
                    call_id,
                    name,
                    arguments,
                } = call;
                let message = ChatMessage::Tool {
                    call_id,
                    name: name.clone(),
                    content: note.clone(),
                    is_error: true,
                };
                sqlx::query(
                    "UPDATE tool_calls SET status = 'cancelled', result = $1, finished_at = $2 WHERE id = $3",
                )
                .bind(&note)
                .bind(now_ms)
                .bind(id)
                .execute(&mut *tx)
                .await?;
                insert_message(
                    &mut tx,
                    conversation_id,
                    session,
                    turn_id,
                    None,
                    &message,
                    now_ms,
                )
                .await?;
                sqlx::query(
                    "INSERT INTO tool_audit (user_id, turn_id, agent_id, tool, arguments, outcome, summary, duration_ms, created_at)
                     VALUES ($1, $2, $3, $4, $5, 'cancelled', $6, 0, $7)",
                )
                .bind(user_id)
                .bind(turn_id)
                .bind(agent_id)
                .bind(&name)
                .bind(&arguments)
                .bind(&note)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            }
            sqlx::query(
                "UPDATE confirmations SET status = 'expired', decided_by = 'hearth', decided_at = $1
                 WHERE turn_id = $2 AND status = 'pending'",
            )
            .bind(now_ms)
            .bind(turn_id)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE turns SET status = 'cancelled', error = $1, finished_at = $2 WHERE id = $3",
            )
            .bind(reason)
            .bind(now_ms)
            .bind(turn_id)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE inbox SET status = 'failed', error = $1, processed_at = $2 WHERE id = $3 AND status = 'pending'",
            )
            .bind(reason)
            .bind(now_ms)
            .bind(inbox_id)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE schedule_runs SET status = 'failed', error = $1, finished_at = $2
                 WHERE inbox_id = $3 AND status IN ('queued', 'running')",
            )
            .bind(reason)
            .bind(now_ms)
            .bind(inbox_id)
            .execute(&mut *tx)
            .await?;
        }

        // Messages, presses and expiry events the session did not get to. A scheduled fire
        // without a turn was never part of a session: it waits for the next one.
        let sql = format!(
            "UPDATE inbox SET status = 'failed', error = $1, processed_at = $2
             WHERE status = 'pending' AND platform_id NOT LIKE 'schedule:%' AND channel IN ({})",
            list(3)
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(reason)
            .bind(now_ms);
        for channel in channels {
            query = query.bind(channel);
        }
        let inbox = query.execute(&mut *tx).await?.rows_affected();

        let sql = format!(
            "UPDATE outbox SET status = 'failed', last_error = $1
             WHERE status IN ('pending', 'sending') AND channel IN ({})",
            list(2)
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(reason);
        for channel in channels {
            query = query.bind(channel);
        }
        let outbox = query.execute(&mut *tx).await?.rows_affected();
        tx.commit().await?;
        if !turns.is_empty() {
            // Their pending confirmations expired with them.
            self.waiting_changed();
        }
        Ok(Abandoned {
            turns: u64::try_from(turns.len()).unwrap_or(u64::MAX),
            inbox,
            outbox,
        })
    }
}
