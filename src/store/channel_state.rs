//! Platform cursors and other small per-channel values.

use super::{Store, StoreResult};

impl Store {
    pub async fn channel_state(&self, channel: &str, key: &str) -> StoreResult<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT value FROM channel_state WHERE channel = $1 AND key = $2")
                .bind(channel)
                .bind(key)
                .fetch_optional(self.pool())
                .await?,
        )
    }

    pub async fn set_channel_state(
        &self,
        channel: &str,
        key: &str,
        value: &str,
        now_ms: i64,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO channel_state (channel, key, value, updated_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (channel, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        )
        .bind(channel)
        .bind(key)
        .bind(value)
        .bind(now_ms)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }
}
