//! The agents file as last synced, so conversations and turns refer to agents that existed, and
//! every definition each agent has had (its versions), so a turn names the one it ran.

use std::collections::HashMap;

use super::{Store, StoreResult, to_i64};
use crate::agent::version::{FIRST_VERSION, definition_hash, definition_json, describe_changes};
use crate::agent::{AgentDef, AgentSet};

/// One stored definition of an agent (`hearth agents history ID`).
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct AgentVersion {
    /// 1 for the first definition seen, then one more for each change.
    pub version: i64,
    /// When hearth first saw this definition (Unix milliseconds).
    pub created_at: i64,
    /// What changed from the version before, in words ("first version" for version 1).
    pub changes: String,
    /// SHA-256 of the definition.
    pub hash: String,
    /// The full definition as JSON (an [`AgentDef`]).
    pub definition: String,
    /// How many turns ran with this version.
    pub turns: i64,
}

impl Store {
    /// Makes the `agents` table match `agents`: upserts every agent in file order and marks the
    /// ones no longer in the file inactive (their history stays). An agent whose definition
    /// differs from its latest version gets a new version; returns every agent's current
    /// version, for the turns to record.
    pub async fn sync_agents(
        &self,
        agents: &AgentSet,
        now_ms: i64,
    ) -> StoreResult<HashMap<String, i64>> {
        let mut tx = self.begin().await?;
        sqlx::query("UPDATE agents SET active = 0")
            .execute(&mut *tx)
            .await?;
        let mut versions = HashMap::new();
        // Logged once after the commit, as one line: a first start stores every agent's first
        // version, and a line each would bury the start log.
        let mut stored = Vec::new();
        for (position, agent) in agents.iter().enumerate() {
            let definition = definition_json(agent)?;
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
            .bind(&definition)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;

            let hash = definition_hash(&definition);
            let latest: Option<(i64, String, String)> = sqlx::query_as(
                "SELECT version, hash, definition FROM agent_versions WHERE agent_id = $1
                 ORDER BY version DESC LIMIT 1",
            )
            .bind(&agent.id)
            .fetch_optional(&mut *tx)
            .await?;
            let (version, changes) = match latest {
                None => (1, FIRST_VERSION.to_string()),
                Some((version, latest_hash, before)) => {
                    if latest_hash == hash {
                        versions.insert(agent.id.clone(), version);
                        continue;
                    }
                    // A definition stored by an older hearth may not read as today's type.
                    let changes = match serde_json::from_str::<AgentDef>(&before) {
                        Ok(before) => describe_changes(&before, agent),
                        Err(_) => "definition changed".to_string(),
                    };
                    (version + 1, changes)
                }
            };
            // Another process syncing the same file at the same moment stored the same version.
            sqlx::query(
                "INSERT INTO agent_versions (agent_id, version, hash, definition, changes, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (agent_id, version) DO NOTHING",
            )
            .bind(&agent.id)
            .bind(version)
            .bind(&hash)
            .bind(&definition)
            .bind(&changes)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
            stored.push(format!("{} v{version} ({changes})", agent.id));
            versions.insert(agent.id.clone(), version);
        }
        tx.commit().await?;
        if !stored.is_empty() {
            tracing::info!(agents = %stored.join(", "), "new agent versions");
        }
        Ok(versions)
    }

    /// Ids of the active agents in file order.
    pub async fn active_agent_ids(&self) -> StoreResult<Vec<String>> {
        Ok(
            sqlx::query_scalar("SELECT id FROM agents WHERE active = 1 ORDER BY position")
                .fetch_all(self.pool())
                .await?,
        )
    }

    /// Ids of every agent hearth has seen, active or not, by id.
    pub async fn known_agent_ids(&self) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar("SELECT id FROM agents ORDER BY id")
            .fetch_all(self.pool())
            .await?)
    }

    /// The versions of an agent, newest first, with how many turns ran each; empty for an agent
    /// hearth never saw.
    pub async fn agent_versions(&self, agent_id: &str) -> StoreResult<Vec<AgentVersion>> {
        Ok(sqlx::query_as(
            "SELECT v.version, v.created_at, v.changes, v.hash, v.definition,
               (SELECT COUNT(*) FROM turns t WHERE t.agent_id = v.agent_id AND t.agent_version = v.version) AS turns
             FROM agent_versions v WHERE v.agent_id = $1 ORDER BY v.version DESC",
        )
        .bind(agent_id)
        .fetch_all(self.pool())
        .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ChatMessage;
    use crate::store::test_support::{on_both_backends, stored_message};

    fn agents(finance_keywords: &str, general_prompt: &str) -> AgentSet {
        AgentSet::parse(
            &format!(
                "[[agent]]\nid = \"general\"\nname = \"General\"\nsystem_prompt = \"{general_prompt}\"\n\
                 [[agent]]\nid = \"finance\"\nname = \"Finance\"\nsystem_prompt = \"Count.\"\n\
                 [agent.triggers]\nkeywords = [{finance_keywords}]\n"
            ),
            "agents.toml",
        )
        .expect("valid agents")
    }

    /// A turn of `agent` in a fresh conversation, recording `version`.
    async fn turn(store: &Store, n: i64, agent: &str, version: Option<i64>) {
        let (inbox, conversation) = stored_message(store, n, "chat").await;
        let turn = store
            .start_turn(
                inbox,
                &conversation,
                None,
                (agent, version),
                None,
                &ChatMessage::user("hi"),
                n,
            )
            .await
            .expect("turn");
        assert_eq!(turn.agent_version, version);
        let stored = store.turn(turn.id).await.expect("read").expect("turn");
        assert_eq!(stored.agent_version, version, "read back as stored");
    }

    on_both_backends!(
        a_changed_definition_is_a_new_version_and_an_unchanged_one_is_not,
        a_changed_definition_is_a_new_version_and_an_unchanged_one_is_not_on_postgres,
        check
    );

    async fn check(store: Store) {
        let first = agents("\"spent\", \"paid\"", "Help.");
        let versions = store.sync_agents(&first, 1_000).await.expect("sync");
        assert_eq!(versions.get("general"), Some(&1));
        assert_eq!(versions.get("finance"), Some(&1));
        turn(&store, 1, "finance", Some(1)).await;

        // Read again unchanged (a restart, a SIGHUP without edits): no new version.
        let again = store.sync_agents(&first, 2_000).await.expect("sync");
        assert_eq!(again, versions);
        assert_eq!(
            store.agent_versions("finance").await.expect("read").len(),
            1
        );

        // Finance's keywords change; General's definition does not.
        let second = agents("\"spent\", \"receipt\"", "Help.");
        let versions = store.sync_agents(&second, 3_000).await.expect("sync");
        assert_eq!(versions.get("finance"), Some(&2));
        assert_eq!(versions.get("general"), Some(&1));
        turn(&store, 2, "finance", Some(2)).await;
        turn(&store, 3, "finance", Some(2)).await;

        let history = store.agent_versions("finance").await.expect("read");
        let summary: Vec<(i64, i64, &str, i64)> = history
            .iter()
            .map(|v| (v.version, v.created_at, v.changes.as_str(), v.turns))
            .collect();
        assert_eq!(
            summary,
            [
                (
                    2,
                    3_000,
                    "keywords added: receipt; keywords removed: paid",
                    2
                ),
                (1, 1_000, FIRST_VERSION, 1),
            ]
        );
        // The full definition is kept with each version.
        let kept: AgentDef = serde_json::from_str(&history[1].definition).expect("definition");
        assert_eq!(kept.triggers.keywords, ["spent", "paid"]);
        assert_ne!(history[0].hash, history[1].hash);
        assert_eq!(
            store.agent_versions("general").await.expect("read").len(),
            1
        );

        // Back to the first definition: a change like any other, a third version.
        let versions = store.sync_agents(&first, 4_000).await.expect("sync");
        assert_eq!(versions.get("finance"), Some(&3));
        assert_eq!(
            store.agent_versions("finance").await.expect("read")[0].changes,
            "keywords added: paid; keywords removed: receipt"
        );

        // Nobody by that name: no versions, and the known ids for the error message.
        assert!(
            store
                .agent_versions("nobody")
                .await
                .expect("read")
                .is_empty()
        );
        assert_eq!(
            store.known_agent_ids().await.expect("ids"),
            ["finance", "general"]
        );
    }
}
