//! The inbox: every inbound event, stored once, before the platform cursor moves.

use hearth_channel::Inbound;
use sqlx::Row;

use super::{Store, StoreResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InboxStatus {
    Pending,
    Done,
    Failed,
}

impl InboxStatus {
    fn parse(s: &str) -> Self {
        match s {
            "done" => Self::Done,
            "failed" => Self::Failed,
            _ => Self::Pending,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Done => "done",
            Self::Failed => "failed",
        }
    }
}

/// A stored inbound event.
#[derive(Clone, Debug)]
pub struct InboxEntry {
    pub id: i64,
    pub channel: String,
    pub platform_id: String,
    pub conversation_key: String,
    /// The event; `Err` holds the reason when the stored payload cannot be read back.
    pub event: Result<Inbound, String>,
    pub received_at: i64,
    pub status: InboxStatus,
}

/// The key that orders a conversation's work: channel, chat and thread.
pub fn conversation_key(channel: &str, event: &Inbound) -> String {
    format!(
        "{channel}\u{1f}{}\u{1f}{}",
        event.chat.chat_id,
        event.chat.thread_id.as_deref().unwrap_or("")
    )
}

impl Store {
    /// Stores an inbound event unless (channel, platform id) is already there.
    /// Returns the new entry's id, or `None` for a duplicate.
    pub async fn insert_inbox(
        &self,
        channel: &str,
        event: &Inbound,
        now_ms: i64,
    ) -> StoreResult<Option<i64>> {
        let payload = serde_json::to_string(event)?;
        let key = conversation_key(channel, event);
        let id: Option<i64> = sqlx::query_scalar(
            "INSERT INTO inbox (channel, platform_id, conversation_key, payload, status, received_at)
             VALUES ($1, $2, $3, $4, 'pending', $5)
             ON CONFLICT (channel, platform_id) DO NOTHING
             RETURNING id",
        )
        .bind(channel)
        .bind(&event.platform_id)
        .bind(&key)
        .bind(payload)
        .bind(now_ms)
        .fetch_optional(self.pool())
        .await?;
        Ok(id)
    }

    /// Entries of `channels` not yet handled, oldest first: the dispatcher's work after a
    /// restart. Other channels' entries are left to the process that runs those channels.
    pub async fn pending_inbox(&self, channels: &[String]) -> StoreResult<Vec<(i64, String)>> {
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT id, conversation_key FROM inbox WHERE status = 'pending' AND channel IN ({}) ORDER BY id",
            super::placeholders(1, channels.len())
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for channel in channels {
            query = query.bind(channel);
        }
        let rows = query.fetch_all(self.pool()).await?;
        rows.iter()
            .map(|row| Ok((row.try_get("id")?, row.try_get("conversation_key")?)))
            .collect()
    }

    pub async fn inbox_entry(&self, id: i64) -> StoreResult<Option<InboxEntry>> {
        let row = sqlx::query(
            "SELECT id, channel, platform_id, conversation_key, payload, received_at, status FROM inbox WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        let payload: String = row.try_get("payload")?;
        Ok(Some(InboxEntry {
            id: row.try_get("id")?,
            channel: row.try_get("channel")?,
            platform_id: row.try_get("platform_id")?,
            conversation_key: row.try_get("conversation_key")?,
            event: serde_json::from_str(&payload).map_err(|err| err.to_string()),
            received_at: row.try_get("received_at")?,
            status: InboxStatus::parse(&row.try_get::<String, _>("status")?),
        }))
    }

    pub async fn inbox_status(&self, id: i64) -> StoreResult<Option<InboxStatus>> {
        let status: Option<String> = sqlx::query_scalar("SELECT status FROM inbox WHERE id = $1")
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        Ok(status.map(|s| InboxStatus::parse(&s)))
    }

    /// Marks an entry handled without a reply (a duplicate press, an ignored reaction).
    pub async fn finish_inbox(
        &self,
        id: i64,
        status: InboxStatus,
        error: Option<&str>,
        now_ms: i64,
    ) -> StoreResult<()> {
        sqlx::query("UPDATE inbox SET status = $1, error = $2, processed_at = $3 WHERE id = $4")
            .bind(status.as_str())
            .bind(error)
            .bind(now_ms)
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// How many entries wait for the dispatcher.
    pub async fn inbox_depth(&self) -> StoreResult<i64> {
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) FROM inbox WHERE status = 'pending'")
                .fetch_one(self.pool())
                .await?,
        )
    }
}
