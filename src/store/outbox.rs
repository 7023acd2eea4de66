//! The outbox: replies and edits committed with the turn that produced them, delivered in order
//! per chat by the delivery worker, retried until the platform takes them.

use hearth_channel::{MessageRef, OutboundMessage};
use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use super::{Store, StoreResult};

#[derive(Clone, Debug, PartialEq)]
pub enum OutboxKind {
    /// A new message (or the final text of a streamed preview, via `replaces`).
    Send,
    /// New text and buttons for a message sent earlier.
    Edit { target: MessageRef },
}

/// A reply to be written to the outbox.
#[derive(Clone, Debug, PartialEq)]
pub struct NewOutbox {
    /// The inbox entry this answers; `(inbox_id, seq)` is unique so a reply is stored once.
    pub inbox_id: Option<i64>,
    pub seq: i64,
    pub channel: String,
    pub kind: OutboxKind,
    pub message: OutboundMessage,
}

/// A stored outbox row waiting for delivery.
#[derive(Clone, Debug, PartialEq)]
pub struct OutboxItem {
    pub id: i64,
    pub inbox_id: Option<i64>,
    pub channel: String,
    pub chat_key: String,
    pub kind: OutboxKind,
    pub message: OutboundMessage,
    pub attempts: i64,
}

/// Deliveries are ordered per chat (and thread): this is their key.
pub fn chat_key(channel: &str, message: &OutboundMessage) -> String {
    format!(
        "{channel}\u{1f}{}\u{1f}{}",
        message.chat.chat_id,
        message.chat.thread_id.as_deref().unwrap_or("")
    )
}

pub(super) async fn insert_outbox(
    tx: &mut Transaction<'_, Any>,
    item: &NewOutbox,
    now_ms: i64,
) -> StoreResult<i64> {
    let (kind, target) = match &item.kind {
        OutboxKind::Send => ("send", None),
        OutboxKind::Edit { target } => ("edit", Some(serde_json::to_string(target)?)),
    };
    Ok(sqlx::query_scalar(
        "INSERT INTO outbox (inbox_id, seq, channel, chat_key, kind, payload, target, status, next_attempt_at, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $8) RETURNING id",
    )
    .bind(item.inbox_id)
    .bind(item.seq)
    .bind(&item.channel)
    .bind(chat_key(&item.channel, &item.message))
    .bind(kind)
    .bind(serde_json::to_string(&item.message)?)
    .bind(target)
    .bind(now_ms)
    .fetch_one(&mut **tx)
    .await?)
}

fn item_from_row(row: &AnyRow) -> StoreResult<OutboxItem> {
    let kind: String = row.try_get("kind")?;
    let target: Option<String> = row.try_get("target")?;
    let payload: String = row.try_get("payload")?;
    let kind = match (kind.as_str(), target) {
        ("edit", Some(target)) => OutboxKind::Edit {
            target: serde_json::from_str(&target)?,
        },
        _ => OutboxKind::Send,
    };
    Ok(OutboxItem {
        id: row.try_get("id")?,
        inbox_id: row.try_get("inbox_id")?,
        channel: row.try_get("channel")?,
        chat_key: row.try_get("chat_key")?,
        kind,
        message: serde_json::from_str(&payload)?,
        attempts: row.try_get("attempts")?,
    })
}

impl Store {
    /// Stores replies that belong to no turn (notices, edits after a decision).
    pub async fn enqueue_outbox(&self, items: &[NewOutbox], now_ms: i64) -> StoreResult<Vec<i64>> {
        let mut tx = self.pool().begin().await?;
        let mut ids = Vec::with_capacity(items.len());
        for item in items {
            ids.push(insert_outbox(&mut tx, item, now_ms).await?);
        }
        tx.commit().await?;
        Ok(ids)
    }

    /// Pending rows of `channels`, oldest first, at most `limit`. Rows not yet due are included
    /// so the worker can keep a chat's later rows behind an earlier one that is waiting to be
    /// retried. Other channels' rows are left to the process that runs those channels.
    pub async fn pending_outbox(
        &self,
        limit: usize,
        channels: &[String],
    ) -> StoreResult<Vec<(OutboxItem, i64)>> {
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT id, inbox_id, channel, chat_key, kind, payload, target, attempts, next_attempt_at
             FROM outbox WHERE status = 'pending' AND channel IN ({}) ORDER BY id LIMIT $1",
            super::placeholders(2, channels.len())
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(super::to_i64(limit));
        for channel in channels {
            query = query.bind(channel);
        }
        let rows = query.fetch_all(self.pool()).await?;
        rows.iter()
            .map(|row| Ok((item_from_row(row)?, row.try_get("next_attempt_at")?)))
            .collect()
    }

    /// Marks a row as being handed to the platform, before the call: if the daemon dies now,
    /// the next start knows this delivery is in doubt.
    pub async fn mark_outbox_sending(&self, id: i64, now_ms: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE outbox SET status = 'sending' WHERE id = $1 AND status = 'pending' AND next_attempt_at <= $2",
        )
        .bind(id)
        .bind(now_ms)
            .execute(self.pool())
            .await?;
        // False: another lane took (or finished) this row since it was read, or it now waits
        // for a retry; leave it alone.
        Ok(done.rows_affected() == 1)
    }

    /// At start: deliveries of `channels` interrupted by a crash go back to pending, flagged as
    /// in doubt. Returns how many there were. Only this process's channels: another process may
    /// be sending its own rows right now.
    pub async fn requeue_interrupted_deliveries(&self, channels: &[String]) -> StoreResult<u64> {
        if channels.is_empty() {
            return Ok(0);
        }
        let sql = format!(
            "UPDATE outbox SET status = 'pending', in_doubt = 1 WHERE status = 'sending' AND channel IN ({})",
            super::placeholders(1, channels.len())
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for channel in channels {
            query = query.bind(channel);
        }
        let done = query.execute(self.pool()).await?;
        Ok(done.rows_affected())
    }

    pub async fn mark_outbox_sent(
        &self,
        id: i64,
        platform_message_id: Option<&str>,
        now_ms: i64,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE outbox SET status = 'sent', platform_message_id = $1, sent_at = $2, attempts = attempts + 1
             WHERE id = $3",
        )
        .bind(platform_message_id)
        .bind(now_ms)
        .bind(id)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    pub async fn mark_outbox_retry(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: i64,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE outbox SET status = 'pending', attempts = attempts + 1, last_error = $1, next_attempt_at = $2 WHERE id = $3",
        )
            .bind(error)
            .bind(next_attempt_at)
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    pub async fn mark_outbox_failed(&self, id: i64, error: &str) -> StoreResult<()> {
        sqlx::query("UPDATE outbox SET status = 'failed', attempts = attempts + 1, last_error = $1 WHERE id = $2")
            .bind(error)
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// A stored outbox message and, once delivered, where it landed.
    pub async fn outbox_message(
        &self,
        id: i64,
    ) -> StoreResult<Option<(OutboundMessage, Option<MessageRef>)>> {
        let row = sqlx::query("SELECT payload, platform_message_id FROM outbox WHERE id = $1")
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        let Some(row) = row else { return Ok(None) };
        let payload: String = row.try_get("payload")?;
        let message: OutboundMessage = serde_json::from_str(&payload)?;
        let reference = row
            .try_get::<Option<String>, _>("platform_message_id")?
            .map(|message_id| MessageRef {
                chat: message.chat.clone(),
                message_id,
            });
        Ok(Some((message, reference)))
    }

    /// The platform reference of a delivered outbox row (to edit it later).
    pub async fn outbox_message_ref(&self, id: i64) -> StoreResult<Option<MessageRef>> {
        let row = sqlx::query(
            "SELECT payload, platform_message_id FROM outbox WHERE id = $1 AND status = 'sent'",
        )
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        let Some(message_id) = row.try_get::<Option<String>, _>("platform_message_id")? else {
            return Ok(None);
        };
        let payload: String = row.try_get("payload")?;
        let message: hearth_channel::OutboundMessage = serde_json::from_str(&payload)?;
        Ok(Some(MessageRef {
            chat: message.chat,
            message_id,
        }))
    }

    pub async fn outbox_depth(&self) -> StoreResult<i64> {
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) FROM outbox WHERE status = 'pending'")
                .fetch_one(self.pool())
                .await?,
        )
    }
}
