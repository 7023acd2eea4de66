//! The HTTP channel's tables (migration 0018): client tokens, turns started over HTTP and
//! their events. The channel crate reaches them through `http::backend`.

use super::{Store, StoreResult, text_enum};

text_enum! {
    /// Where a turn started over HTTP stands.
    pub enum HttpTurnState {
        Queued = "queued",
        Running = "running",
        AwaitingConfirmation = "awaiting_confirmation",
        Completed = "completed",
        Failed = "failed",
        Cancelled = "cancelled",
    }
}

/// A client token as stored: its hash, never the token.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct TokenRow {
    pub name: String,
    pub scope: String,
    /// Agent ids it may use; empty: any. Stored as one comma-separated text.
    #[sqlx(try_from = "String")]
    pub agents: AgentList,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// The agents a token may use, stored as `a,b,c`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentList(pub Vec<String>);

impl From<String> for AgentList {
    fn from(stored: String) -> Self {
        AgentList(
            stored
                .split(',')
                .filter(|a| !a.is_empty())
                .map(str::to_string)
                .collect(),
        )
    }
}

// The column lists are constants: the only text formatted into a query here.
const TOKEN_COLUMNS: &str = "name, scope, agents, created_at, last_used_at, revoked_at";

/// A turn started over HTTP.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct HttpTurnRow {
    pub id: String,
    pub token: String,
    pub idem_key: String,
    pub body_sha: String,
    pub platform_id: String,
    pub conversation: String,
    pub agent: String,
    pub state: HttpTurnState,
    pub final_text: Option<String>,
    pub created_at: i64,
}

const TURN_COLUMNS: &str = "id, token, idem_key, body_sha, platform_id, conversation, agent, state, final_text, created_at";

/// A stored event of an HTTP turn: its kind's wire name and its JSON, as text.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct HttpEventRow {
    pub seq: i64,
    pub kind: String,
    pub data: String,
}

/// A chat turn of the OpenAI-compatible endpoint, with its turn's state.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct HttpChatTurnRow {
    pub turn: String,
    pub state: HttpTurnState,
    /// The client's messages it covers, as JSON.
    pub messages: String,
    pub shown: Option<String>,
}

/// How the daemon's turn answering an inbox entry went.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct TurnSummary {
    pub status: String,
    pub error: Option<String>,
    pub agent_id: String,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_nusd: i64,
}

impl Store {
    /// Stores a new token's hash. `false` when a live token already has the name (a revoked
    /// one is replaced).
    pub async fn create_token(
        &self,
        name: &str,
        hash: &str,
        scope: &str,
        agents: &[String],
        now_ms: i64,
    ) -> StoreResult<bool> {
        let mut tx = self.begin().await?;
        let live: Option<i64> = sqlx::query_scalar(
            "SELECT created_at FROM http_tokens WHERE name = $1 AND revoked_at IS NULL",
        )
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?;
        if live.is_some() {
            return Ok(false);
        }
        sqlx::query("DELETE FROM http_tokens WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO http_tokens (name, hash, scope, agents, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(name)
        .bind(hash)
        .bind(scope)
        .bind(agents.join(","))
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Every token, live and revoked, by name.
    pub async fn tokens(&self) -> StoreResult<Vec<TokenRow>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TOKEN_COLUMNS} FROM http_tokens ORDER BY name"
        )))
        .fetch_all(self.pool())
        .await?)
    }

    /// Revokes the live token `name`; `false` when there is none.
    pub async fn revoke_token(&self, name: &str, now_ms: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE http_tokens SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL",
        )
        .bind(now_ms)
        .bind(name)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The live token with this hash, marked as used now.
    pub async fn token_by_hash(&self, hash: &str, now_ms: i64) -> StoreResult<Option<TokenRow>> {
        let token: Option<TokenRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TOKEN_COLUMNS} FROM http_tokens WHERE hash = $1 AND revoked_at IS NULL"
        )))
        .bind(hash)
        .fetch_optional(self.pool())
        .await?;
        let Some(mut token) = token else {
            return Ok(None);
        };
        // At most one write a minute per token: every request reads, few need to write.
        if token.last_used_at.is_none_or(|last| now_ms - last > 60_000) {
            sqlx::query("UPDATE http_tokens SET last_used_at = $1 WHERE name = $2")
                .bind(now_ms)
                .bind(&token.name)
                .execute(&mut *self.write().await?)
                .await?;
            token.last_used_at = Some(now_ms);
        }
        Ok(Some(token))
    }

    /// Records an HTTP turn unless the token already used the key; returns the stored turn and
    /// whether this call made it.
    pub async fn start_http_turn(
        &self,
        turn: &HttpTurnRow,
        now_ms: i64,
    ) -> StoreResult<(HttpTurnRow, bool)> {
        let inserted = sqlx::query(
            "INSERT INTO http_turns (id, token, idem_key, body_sha, platform_id, conversation, agent, state, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', $8, $8) ON CONFLICT DO NOTHING",
        )
        .bind(&turn.id)
        .bind(&turn.token)
        .bind(&turn.idem_key)
        .bind(&turn.body_sha)
        .bind(&turn.platform_id)
        .bind(&turn.conversation)
        .bind(&turn.agent)
        .bind(now_ms)
        .execute(&mut *self.write().await?)
        .await?
        .rows_affected()
            > 0;
        let stored = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TURN_COLUMNS} FROM http_turns WHERE token = $1 AND idem_key = $2"
        )))
        .bind(&turn.token)
        .bind(&turn.idem_key)
        .fetch_one(self.pool())
        .await?;
        Ok((stored, inserted))
    }

    /// An HTTP turn by id.
    pub async fn http_turn(&self, id: &str) -> StoreResult<Option<HttpTurnRow>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TURN_COLUMNS} FROM http_turns WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(self.pool())
        .await?)
    }

    /// The HTTP turn whose inbox entry has `platform_id`.
    pub async fn http_turn_by_platform_id(
        &self,
        platform_id: &str,
    ) -> StoreResult<Option<HttpTurnRow>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TURN_COLUMNS} FROM http_turns WHERE platform_id = $1"
        )))
        .bind(platform_id)
        .fetch_optional(self.pool())
        .await?)
    }

    /// The newest running turn in the chat `<token>/<conversation>`.
    pub async fn running_http_turn(&self, chat_id: &str) -> StoreResult<Option<String>> {
        let Some((token, conversation)) = chat_id.split_once('/') else {
            return Ok(None);
        };
        Ok(sqlx::query_scalar(
            "SELECT id FROM http_turns WHERE token = $1 AND conversation = $2 AND state = $3
             ORDER BY created_at DESC, id DESC LIMIT 1",
        )
        .bind(token)
        .bind(conversation)
        .bind(HttpTurnState::Running)
        .fetch_optional(self.pool())
        .await?)
    }

    /// Stores an event of `turn` (once per `dedup`) and, when it brings one, the turn's new
    /// state and answer; an ended turn keeps its state.
    #[allow(clippy::too_many_arguments)]
    pub async fn append_http_event(
        &self,
        turn: &str,
        kind: &str,
        data: &serde_json::Value,
        dedup: Option<&str>,
        state: Option<HttpTurnState>,
        final_text: Option<&str>,
        now_ms: i64,
    ) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO http_events (turn, kind, data, dedup, created_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT DO NOTHING",
        )
        .bind(turn)
        .bind(kind)
        .bind(data.to_string())
        .bind(dedup)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            > 0;
        if inserted && let Some(state) = state {
            sqlx::query(
                "UPDATE http_turns SET state = $1, final_text = COALESCE($2, final_text), updated_at = $3
                 WHERE id = $4 AND state NOT IN ($5, $6, $7)",
            )
            .bind(state)
            .bind(final_text)
            .bind(now_ms)
            .bind(turn)
            .bind(HttpTurnState::Completed)
            .bind(HttpTurnState::Failed)
            .bind(HttpTurnState::Cancelled)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The events of `turn` after `after`, oldest first (at most 500 at a time).
    pub async fn http_events_after(
        &self,
        turn: &str,
        after: i64,
    ) -> StoreResult<Vec<HttpEventRow>> {
        Ok(sqlx::query_as(
            "SELECT seq, kind, data FROM http_events WHERE turn = $1 AND seq > $2 ORDER BY seq LIMIT 500",
        )
        .bind(turn)
        .bind(after)
        .fetch_all(self.pool())
        .await?)
    }

    /// How the turn answering the inbox entry (`channel`, `platform_id`) went, with the tokens
    /// and cost of its model calls; `None` when no turn ran for it.
    pub async fn turn_summary_for(
        &self,
        channel: &str,
        platform_id: &str,
    ) -> StoreResult<Option<TurnSummary>> {
        // One row: the turn with the sums of its model calls (none: zero).
        Ok(sqlx::query_as(
            "SELECT t.status, t.error, t.agent_id,
                    CAST(COALESCE(SUM(m.input_tokens), 0) AS BIGINT) AS input_tokens,
                    CAST(COALESCE(SUM(m.output_tokens), 0) AS BIGINT) AS output_tokens,
                    CAST(COALESCE(SUM(m.cost_nusd), 0) AS BIGINT) AS cost_nusd
             FROM turns t JOIN inbox i ON i.id = t.inbox_id
             LEFT JOIN model_calls m ON m.turn_id = t.id
             WHERE i.channel = $1 AND i.platform_id = $2
             GROUP BY t.id, t.status, t.error, t.agent_id",
        )
        .bind(channel)
        .bind(platform_id)
        .fetch_optional(self.pool())
        .await?)
    }

    /// Records what the chat turn `turn` of the OpenAI-compatible endpoint covers of its
    /// client's transcript (`messages`, JSON); a second call for the same turn is a no-op.
    pub async fn record_http_chat_turn(
        &self,
        turn: &str,
        token: &str,
        conversation: &str,
        messages: &str,
        now_ms: i64,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO http_chat_turns (turn, token, conversation, messages, created_at)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        )
        .bind(turn)
        .bind(token)
        .bind(conversation)
        .bind(messages)
        .bind(now_ms)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }

    /// Notes the assistant text the client of the chat turn `turn` was sent.
    pub async fn set_http_chat_shown(&self, turn: &str, shown: &str) -> StoreResult<()> {
        sqlx::query("UPDATE http_chat_turns SET shown = $1 WHERE turn = $2")
            .bind(shown)
            .bind(turn)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(())
    }

    /// The chat turns of `token`'s conversation, oldest first.
    pub async fn http_chat_turns(
        &self,
        token: &str,
        conversation: &str,
    ) -> StoreResult<Vec<HttpChatTurnRow>> {
        Ok(sqlx::query_as(
            "SELECT c.turn, t.state, c.messages, c.shown FROM http_chat_turns c
             JOIN http_turns t ON t.id = c.turn
             WHERE c.token = $1 AND c.conversation = $2 ORDER BY c.seq",
        )
        .bind(token)
        .bind(conversation)
        .fetch_all(self.pool())
        .await?)
    }

    /// Forgets what HTTP turns that ended before `cutoff_ms` said, at most `batch` turns at a
    /// time, as the inbox forgets its handled entries (`daemon.inbox_retention_days`): their
    /// events (reply text, tool arguments and results), their answer, and the client
    /// transcripts their chat turns stored. The turn's row stays, so its Idempotency-Key still
    /// finds it and `GET /turns/{id}` still answers its state. Returns how many turns.
    pub async fn strip_ended_http_turns(&self, cutoff_ms: i64, batch: usize) -> StoreResult<usize> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT t.id FROM http_turns t
             WHERE t.state IN ($3, $4, $5) AND t.updated_at < $1
               AND (t.final_text IS NOT NULL
                    OR EXISTS (SELECT 1 FROM http_events e WHERE e.turn = t.id)
                    OR EXISTS (SELECT 1 FROM http_chat_turns c WHERE c.turn = t.id))
             ORDER BY t.updated_at LIMIT $2",
        )
        .bind(cutoff_ms)
        .bind(i64::try_from(batch).unwrap_or(i64::MAX))
        .bind(HttpTurnState::Completed)
        .bind(HttpTurnState::Failed)
        .bind(HttpTurnState::Cancelled)
        .fetch_all(self.pool())
        .await?;
        let mut tx = self.begin().await?;
        for id in &ids {
            for statement in [
                "DELETE FROM http_events WHERE turn = $1",
                "DELETE FROM http_chat_turns WHERE turn = $1",
                "UPDATE http_turns SET final_text = NULL WHERE id = $1",
            ] {
                sqlx::query(statement).bind(id).execute(&mut *tx).await?;
            }
        }
        tx.commit().await?;
        Ok(ids.len())
    }

    /// Ids of the pending confirmations, oldest first.
    pub async fn pending_confirmation_ids(&self) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM confirmations WHERE status = $1 ORDER BY created_at, id",
        )
        .bind(super::ConfirmationStatus::Pending)
        .fetch_all(self.pool())
        .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::on_both_backends;

    fn turn(id: &str, key: &str, body: &str) -> HttpTurnRow {
        HttpTurnRow {
            id: id.into(),
            token: "laptop".into(),
            idem_key: key.into(),
            body_sha: body.into(),
            platform_id: format!("laptop/{key}"),
            conversation: "c1".into(),
            agent: "auto".into(),
            state: HttpTurnState::Queued,
            final_text: None,
            created_at: 0,
        }
    }

    on_both_backends!(
        ended_turns_lose_their_texts_after_the_retention_on_sqlite,
        ended_turns_lose_their_texts_after_the_retention_on_postgres,
        check_retention
    );

    async fn check_retention(store: Store) {
        let (old, _) = store
            .start_http_turn(&turn("t_old", "k1", "s"), 10)
            .await
            .expect("old");
        store
            .start_http_turn(&turn("t_new", "k2", "s"), 10)
            .await
            .expect("new");
        store
            .start_http_turn(&turn("t_wait", "k3", "s"), 10)
            .await
            .expect("waiting");
        let data = serde_json::json!({ "text": "secret tool result" });
        for (id, state, at) in [
            ("t_old", HttpTurnState::Completed, 100),
            ("t_new", HttpTurnState::Completed, 5_000),
            ("t_wait", HttpTurnState::AwaitingConfirmation, 100),
        ] {
            store
                .append_http_event(id, "tool.finished", &data, None, None, None, at)
                .await
                .expect("event");
            store
                .append_http_event(
                    id,
                    "turn.completed",
                    &data,
                    Some(&format!("end:{id}")),
                    Some(state),
                    Some("the answer"),
                    at,
                )
                .await
                .expect("end");
            store
                .record_http_chat_turn(
                    id,
                    "laptop",
                    "c1",
                    r#"[{"role":"user","content":"my whole transcript"}]"#,
                    at,
                )
                .await
                .expect("chat turn");
        }
        assert_eq!(
            store
                .strip_ended_http_turns(1_000, 500)
                .await
                .expect("strip"),
            1
        );
        // The old ended turn keeps its row and state, nothing it said.
        let stripped = store.http_turn("t_old").await.expect("db").expect("row");
        assert_eq!(
            (stripped.state, stripped.final_text),
            (HttpTurnState::Completed, None)
        );
        assert!(
            store
                .http_events_after("t_old", 0)
                .await
                .expect("events")
                .is_empty()
        );
        let chats = store.http_chat_turns("laptop", "c1").await.expect("chats");
        let kept: Vec<&str> = chats.iter().map(|c| c.turn.as_str()).collect();
        assert_eq!(kept, ["t_new", "t_wait"]);
        // A retry with its key still finds it.
        let (again, new) = store
            .start_http_turn(&turn("t_x", "k1", "s"), 2_000)
            .await
            .expect("retry");
        assert_eq!((again.id, new), (old.id, false));
        // The newer turn and the one still waiting keep everything.
        for id in ["t_new", "t_wait"] {
            assert_eq!(
                store.http_events_after(id, 0).await.expect("events").len(),
                2,
                "{id}"
            );
        }
        assert_eq!(
            store
                .http_turn("t_wait")
                .await
                .expect("db")
                .and_then(|t| t.final_text)
                .as_deref(),
            Some("the answer")
        );
        // Nothing left to strip: the next pass finds nothing (it does not loop on the same rows).
        assert_eq!(
            store
                .strip_ended_http_turns(1_000, 500)
                .await
                .expect("again"),
            0
        );
    }

    on_both_backends!(
        tokens_turns_and_events_on_sqlite,
        tokens_turns_and_events_on_postgres,
        check
    );

    async fn check(store: Store) {
        // Tokens: one live token per name; revoked ones are replaced; found by hash, used now.
        let agents = vec!["general".to_string()];
        assert!(
            store
                .create_token("laptop", "h1", "chat", &agents, 1)
                .await
                .expect("create")
        );
        assert!(
            !store
                .create_token("laptop", "h2", "chat", &[], 2)
                .await
                .expect("taken")
        );
        let found = store.token_by_hash("h1", 100_000).await.expect("by hash");
        assert_eq!(found.as_ref().map(|t| t.agents.0.clone()), Some(agents));
        assert_eq!(found.and_then(|t| t.last_used_at), Some(100_000));
        assert!(store.revoke_token("laptop", 3).await.expect("revoke"));
        assert_eq!(store.token_by_hash("h1", 4).await.expect("by hash"), None);
        assert!(
            !store
                .revoke_token("laptop", 5)
                .await
                .expect("revoked already")
        );
        assert!(
            store
                .create_token("laptop", "h3", "approve", &[], 6)
                .await
                .expect("again")
        );
        let listed = store.tokens().await.expect("list");
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].scope.as_str(), listed[0].revoked_at),
            ("approve", None)
        );

        // Turns: the same key finds the first turn, whatever id the retry brought.
        let (first, new) = store
            .start_http_turn(&turn("t1", "k", "sha"), 10)
            .await
            .expect("start");
        assert!(new);
        let (again, new) = store
            .start_http_turn(&turn("t2", "k", "other"), 11)
            .await
            .expect("retry");
        assert!(!new);
        assert_eq!((again.id.as_str(), again.body_sha.as_str()), ("t1", "sha"));
        assert_eq!(first.state, HttpTurnState::Queued);

        // Events: in order, once per dedup key; the state moves until the turn ends.
        let data = serde_json::json!({ "agent": "general" });
        store
            .append_http_event(
                "t1",
                "agent.selected",
                &data,
                None,
                Some(HttpTurnState::Running),
                None,
                12,
            )
            .await
            .expect("append");
        assert_eq!(
            store.running_http_turn("laptop/c1").await.expect("running"),
            Some("t1".into())
        );
        let done = serde_json::json!({ "text": "hi" });
        for _ in 0..2 {
            store
                .append_http_event(
                    "t1",
                    "turn.completed",
                    &done,
                    Some("out:1"),
                    Some(HttpTurnState::Completed),
                    Some("hi"),
                    13,
                )
                .await
                .expect("append");
        }
        store
            .append_http_event(
                "t1",
                "message",
                &done,
                Some("late"),
                Some(HttpTurnState::Running),
                None,
                14,
            )
            .await
            .expect("append");
        let events = store.http_events_after("t1", 0).await.expect("events");
        let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["agent.selected", "turn.completed", "message"]);
        let after = store
            .http_events_after("t1", events[0].seq)
            .await
            .expect("after");
        assert_eq!(after.len(), 2);
        let stored = store.http_turn("t1").await.expect("turn").expect("exists");
        assert_eq!(
            (stored.state, stored.final_text.as_deref()),
            (HttpTurnState::Completed, Some("hi"))
        );

        // Chat turns of the OpenAI-compatible endpoint: recorded once, listed in order with
        // their turn's state, the shown text noted later.
        for _ in 0..2 {
            store
                .record_http_chat_turn("t1", "laptop", "c1", r#"[{"role":"user"}]"#, 15)
                .await
                .expect("record");
        }
        store
            .set_http_chat_shown("t1", "hi there")
            .await
            .expect("shown");
        assert_eq!(
            store
                .http_chat_turns("laptop", "c1")
                .await
                .expect("chat turns"),
            [HttpChatTurnRow {
                turn: "t1".to_string(),
                state: HttpTurnState::Completed,
                messages: r#"[{"role":"user"}]"#.to_string(),
                shown: Some("hi there".to_string())
            }]
        );
        assert!(
            store
                .http_chat_turns("laptop", "c2")
                .await
                .expect("none")
                .is_empty()
        );
        assert_eq!(
            store.running_http_turn("laptop/c1").await.expect("running"),
            None
        );
        assert_eq!(
            store
                .http_turn_by_platform_id("laptop/k")
                .await
                .expect("by platform id")
                .map(|t| t.id),
            Some("t1".into())
        );
        assert_eq!(
            store
                .turn_summary_for("http", "laptop/k")
                .await
                .expect("summary"),
            None
        );
    }
}
