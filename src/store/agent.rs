//! The agents file as last synced, so conversations and turns refer to agents that existed.

use super::{Store, StoreResult, to_i64};
use crate::agent::AgentSet;

impl Store {
    /// Makes the `agents` table match `agents`: upserts every agent in file order and marks the
    /// ones no longer in the file inactive (their history stays).
    pub async fn sync_agents(&self, agents: &AgentSet, now_ms: i64) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        sqlx::query("UPDATE agents SET active = 0")
            .execute(&mut *tx)
            .await?;
        for (position, agent) in agents.iter().enumerate() {
            sqlx::query(
                "INSERT INTO agents (id, name, emoji, description, position, definition, active, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, 1, $7)
                 ON CONFLICT (id) DO UPDATE SET name = excluded.name, emoji = excluded.emoji,
                   description = excluded.description, position = excluded.position,
                   definition = excluded.definition, active = 1, updated_at = excluded.updated_at",
            )
            .bind(&agent.id)
            .bind(&agent.name)
            .bind(&agent.emoji)
            .bind(&agent.description)
            .bind(to_i64(position))
            .bind(serde_json::to_string(agent)?)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Ids of the active agents in file order.
    pub async fn active_agent_ids(&self) -> StoreResult<Vec<String>> {
        Ok(
            sqlx::query_scalar("SELECT id FROM agents WHERE active = 1 ORDER BY position")
                .fetch_all(self.pool())
                .await?,
        )
    }
}
