//! The owner's page in the database: its login codes, sessions and the decisions made on it
//! (`web_login_codes`, `web_sessions`, `web_decisions`), and the read-only views the page shows
//! (pending confirmations, transcripts, the search, a schedule run's cost).

use super::query::like_pattern;
use super::{Store, StoreResult};

/// A pending confirmation as the Inbox shows it.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct PendingConfirmation {
    pub id: String,
    pub channel: String,
    pub chat_id: String,
    pub requester: String,
    /// The requester's name where hearth knows it.
    pub requester_name: Option<String>,
    pub agent_id: String,
    pub tool: String,
    pub summary: String,
    /// The tool call's arguments, as the model gave them (JSON text).
    pub arguments: String,
    pub created_at: i64,
    pub expires_at: i64,
}

/// A conversation in the list.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ConversationRow {
    pub id: i64,
    pub channel: String,
    pub chat_id: String,
    pub thread_id: String,
    pub current_agent: Option<String>,
    pub last_active_at: i64,
    pub messages: i64,
    /// The stored body (JSON) of the first user message kept, which titles the conversation.
    pub first_message: Option<String>,
}

/// A stored message with what the transcript shows next to it.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct TranscriptRow {
    pub id: i64,
    pub session: i64,
    pub turn_id: Option<i64>,
    pub agent_id: Option<String>,
    pub body: String,
    pub created_at: i64,
}

/// A tool call with the confirmation that guarded it, if one did.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ToolCallRow {
    pub message_id: i64,
    pub call_id: String,
    pub name: String,
    pub arguments: String,
    pub status: String,
    /// The confirmation's status, when one was asked.
    pub confirmation: Option<String>,
    /// Who decided the confirmation, when someone did.
    pub decided_by: Option<String>,
}

/// A message the search found.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct SearchHit {
    pub conversation_id: i64,
    pub channel: String,
    pub chat_id: String,
    pub message_id: i64,
    pub body: String,
    pub created_at: i64,
}

/// Tokens and cost of one schedule run's turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct RunCost {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_nusd: i64,
}

impl Store {
    /// Stores a login code's hash, valid until `expires_at`.
    pub async fn add_web_login_code(
        &self,
        code_hash: &str,
        now_ms: i64,
        expires_at: i64,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO web_login_codes (code_hash, created_at, expires_at) VALUES ($1, $2, $3)",
        )
        .bind(code_hash)
        .bind(now_ms)
        .bind(expires_at)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }

    /// Uses up a login code: true when it existed, was unused and unexpired. One UPDATE, so two
    /// racing logins with the same code cannot both succeed.
    pub async fn use_web_login_code(&self, code_hash: &str, now_ms: i64) -> StoreResult<bool> {
        let used = sqlx::query(
            "UPDATE web_login_codes SET used_at = $2
             WHERE code_hash = $1 AND used_at IS NULL AND expires_at > $2",
        )
        .bind(code_hash)
        .bind(now_ms)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(used.rows_affected() == 1)
    }

    /// Starts a session; the id is stored hashed.
    pub async fn add_web_session(
        &self,
        id_hash: &str,
        csrf: &str,
        now_ms: i64,
        expires_at: i64,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO web_sessions (id_hash, csrf, created_at, expires_at, last_seen_at)
             VALUES ($1, $2, $3, $4, $3)",
        )
        .bind(id_hash)
        .bind(csrf)
        .bind(now_ms)
        .bind(expires_at)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }

    /// The CSRF token of a live session, `None` when there is none or it expired.
    pub async fn web_session(&self, id_hash: &str, now_ms: i64) -> StoreResult<Option<String>> {
        Ok(sqlx::query_scalar(
            "SELECT csrf FROM web_sessions WHERE id_hash = $1 AND expires_at > $2",
        )
        .bind(id_hash)
        .bind(now_ms)
        .fetch_optional(self.pool())
        .await?)
    }

    /// Ends one session.
    pub async fn end_web_session(&self, id_hash: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM web_sessions WHERE id_hash = $1")
            .bind(id_hash)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(())
    }

    /// Ends every session and voids every unused login code; returns the sessions ended.
    pub async fn end_all_web_sessions(&self) -> StoreResult<u64> {
        let mut tx = self.begin().await?;
        let ended = sqlx::query("DELETE FROM web_sessions")
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("DELETE FROM web_login_codes")
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(ended)
    }

    /// Records a decision made on the page, before its event enters the inbox.
    pub async fn add_web_decision(
        &self,
        platform_id: &str,
        confirmation_id: &str,
        action: &str,
        now_ms: i64,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO web_decisions (platform_id, confirmation_id, action, created_at)
             VALUES ($1, $2, $3, $4)",
        )
        .bind(platform_id)
        .bind(confirmation_id)
        .bind(action)
        .bind(now_ms)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }

    /// The confirmation id and action the page recorded for an event's platform id.
    pub async fn web_decision(&self, platform_id: &str) -> StoreResult<Option<(String, String)>> {
        Ok(sqlx::query_as(
            "SELECT confirmation_id, action FROM web_decisions WHERE platform_id = $1",
        )
        .bind(platform_id)
        .fetch_optional(self.pool())
        .await?)
    }

    /// Confirmations waiting for an answer and not yet expired, oldest first, with the agent
    /// and the tool call's arguments.
    pub async fn pending_confirmation_list(
        &self,
        now_ms: i64,
    ) -> StoreResult<Vec<PendingConfirmation>> {
        Ok(sqlx::query_as(
            "SELECT c.id, c.channel, c.chat_id, c.requester, i.display_name AS requester_name,
                    t.agent_id, c.tool, c.summary, tc.arguments, c.created_at, c.expires_at
             FROM confirmations c
             JOIN turns t ON t.id = c.turn_id
             JOIN tool_calls tc ON tc.id = c.tool_call_id
             LEFT JOIN identities i ON i.channel = c.channel AND i.platform_user_id = c.requester
             WHERE c.status = 'pending' AND c.expires_at > $1
             ORDER BY c.created_at, c.id",
        )
        .bind(now_ms)
        .fetch_all(self.pool())
        .await?)
    }

    /// Conversations, the most recently active first.
    pub async fn conversation_list(&self, limit: i64) -> StoreResult<Vec<ConversationRow>> {
        Ok(sqlx::query_as(
            "SELECT c.id, c.channel, c.chat_id, c.thread_id, c.current_agent, c.last_active_at,
                    (SELECT CAST(COUNT(*) AS BIGINT) FROM messages m WHERE m.conversation_id = c.id) AS messages,
                    (SELECT m.body FROM messages m WHERE m.conversation_id = c.id AND m.role = 'user'
                     ORDER BY m.id LIMIT 1) AS first_message
             FROM conversations c ORDER BY c.last_active_at DESC, c.id DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(self.pool())
        .await?)
    }

    /// The last `limit` messages of a conversation (every session), oldest first.
    pub async fn transcript(
        &self,
        conversation_id: i64,
        limit: i64,
    ) -> StoreResult<Vec<TranscriptRow>> {
        let mut messages: Vec<TranscriptRow> = sqlx::query_as(
            "SELECT m.id, m.session, m.turn_id, t.agent_id, m.body, m.created_at
             FROM messages m LEFT JOIN turns t ON t.id = m.turn_id
             WHERE m.conversation_id = $1 ORDER BY m.id DESC LIMIT $2",
        )
        .bind(conversation_id)
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        messages.reverse();
        Ok(messages)
    }

    /// The tool calls of a conversation's turns with their confirmations' outcomes.
    pub async fn conversation_tool_calls(
        &self,
        conversation_id: i64,
    ) -> StoreResult<Vec<ToolCallRow>> {
        Ok(sqlx::query_as(
            "SELECT tc.message_id, tc.call_id, tc.name, tc.arguments, tc.status,
                    c.status AS confirmation, c.decided_by
             FROM tool_calls tc JOIN turns t ON t.id = tc.turn_id
             LEFT JOIN confirmations c ON c.tool_call_id = tc.id
             WHERE t.conversation_id = $1 ORDER BY tc.id",
        )
        .bind(conversation_id)
        .fetch_all(self.pool())
        .await?)
    }

    /// Messages whose stored text contains `text` (case-insensitive), newest first. A LIKE
    /// search, the same on SQLite and PostgreSQL; the caller checks each hit's visible text,
    /// since the stored body is JSON.
    pub async fn search_messages(&self, text: &str, limit: i64) -> StoreResult<Vec<SearchHit>> {
        Ok(sqlx::query_as(
            "SELECT m.conversation_id, c.channel, c.chat_id, m.id AS message_id, m.body, m.created_at
             FROM messages m JOIN conversations c ON c.id = m.conversation_id
             WHERE LOWER(m.body) LIKE $1 ESCAPE '\\' ORDER BY m.id DESC LIMIT $2",
        )
        .bind(like_pattern(text))
        .bind(limit)
        .fetch_all(self.pool())
        .await?)
    }

    /// Tokens and cost of the turn that handled an inbox entry (a schedule run's).
    pub async fn inbox_cost(&self, inbox_id: i64) -> StoreResult<RunCost> {
        Ok(sqlx::query_as(
            "SELECT CAST(COALESCE(SUM(m.input_tokens), 0) AS BIGINT) AS input_tokens,
                    CAST(COALESCE(SUM(m.output_tokens), 0) AS BIGINT) AS output_tokens,
                    CAST(COALESCE(SUM(m.cost_nusd), 0) AS BIGINT) AS cost_nusd
             FROM model_calls m JOIN turns t ON t.id = m.turn_id WHERE t.inbox_id = $1",
        )
        .bind(inbox_id)
        .fetch_one(self.pool())
        .await?)
    }

    /// The stored body (JSON) of a conversation's first user message kept, which titles it;
    /// as [`ConversationRow::first_message`] has it for the list.
    pub async fn first_message(&self, conversation_id: i64) -> StoreResult<Option<String>> {
        Ok(sqlx::query_scalar(
            "SELECT body FROM messages WHERE conversation_id = $1 AND role = 'user'
             ORDER BY id LIMIT 1",
        )
        .bind(conversation_id)
        .fetch_optional(self.pool())
        .await?)
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn a_login_code_works_once_and_not_after_it_expired() {
        let (store, _dir) = crate::store::test_support::temp_store().await;
        store
            .add_web_login_code("h1", 1_000, 2_000)
            .await
            .expect("add");
        assert!(
            !store.use_web_login_code("h1", 2_000).await.expect("use"),
            "expired"
        );
        store
            .add_web_login_code("h2", 1_000, 2_000)
            .await
            .expect("add");
        assert!(!store.use_web_login_code("nope", 1_500).await.expect("use"));
        assert!(store.use_web_login_code("h2", 1_500).await.expect("use"));
        assert!(
            !store.use_web_login_code("h2", 1_600).await.expect("use"),
            "reused"
        );
    }

    #[tokio::test]
    async fn sessions_expire_and_all_end_at_once() {
        let (store, _dir) = crate::store::test_support::temp_store().await;
        store
            .add_web_session("s1", "t1", 0, 100)
            .await
            .expect("add");
        store
            .add_web_session("s2", "t2", 0, 1_000)
            .await
            .expect("add");
        assert_eq!(
            store.web_session("s1", 50).await.expect("read").as_deref(),
            Some("t1")
        );
        assert_eq!(
            store.web_session("s1", 100).await.expect("read"),
            None,
            "expired"
        );
        assert_eq!(store.end_all_web_sessions().await.expect("end"), 2);
        assert_eq!(store.web_session("s2", 50).await.expect("read"), None);
    }
}
