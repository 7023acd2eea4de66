//! Summaries of a conversation's older turns. The messages they cover stay in `messages`; the
//! model sees the latest summary instead of them. Each summary folds in the one before it, so
//! only the latest counts.

use super::turn::{StoredMessage, ToolCallStatus};
use super::{Store, StoreError, StoreResult};

/// The latest summary of a member's history in one session.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct Summary {
    pub id: i64,
    /// The last `messages.id` it covers: the model sees later messages word for word.
    pub covers_until: i64,
    /// How many turns it covers, all summaries before it included.
    pub turns: i64,
    /// The model's text under the fixed headings.
    pub narrative: String,
    /// The ledger (JSON), computed from the database.
    pub ledger: String,
    pub created_at: i64,
}

/// A tool call of a covered turn, for the ledger.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct CoveredCall {
    pub turn_id: i64,
    pub name: String,
    pub arguments: String,
    pub status: ToolCallStatus,
    pub result: Option<String>,
}

/// A stored message as read, with whether its turn is still unfinished (1 or 0).
#[derive(sqlx::FromRow)]
struct MessageRow {
    id: i64,
    turn_id: Option<i64>,
    body: String,
    chars: i64,
    unfinished: i64,
}

impl TryFrom<MessageRow> for StoredMessage {
    type Error = StoreError;

    fn try_from(row: MessageRow) -> StoreResult<Self> {
        Ok(StoredMessage {
            id: row.id,
            turn_id: row.turn_id,
            message: serde_json::from_str(&row.body)?,
            chars: row.chars,
            turn_unfinished: row.unfinished != 0,
        })
    }
}

/// Which history a summary belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HistoryKey {
    pub conversation_id: i64,
    pub session: i64,
    pub user_id: Option<i64>,
}

impl Store {
    pub async fn latest_summary(&self, key: HistoryKey) -> StoreResult<Option<Summary>> {
        Ok(sqlx::query_as(
            "SELECT id, covers_until, turns, narrative, ledger, created_at FROM conversation_summaries
             WHERE conversation_id = $1 AND session = $2 AND user_id IS NOT DISTINCT FROM $3
             ORDER BY id DESC LIMIT 1",
        )
        .bind(key.conversation_id)
        .bind(key.session)
        .bind(key.user_id)
        .fetch_optional(self.pool())
        .await?)
    }

    /// Stores a summary; from now on the model sees it instead of the messages up to
    /// `covers_until`. One insert: a crash before it leaves the history as it was.
    pub async fn save_summary(
        &self,
        key: HistoryKey,
        covers_until: i64,
        turns: i64,
        narrative: &str,
        ledger: &str,
        now_ms: i64,
    ) -> StoreResult<i64> {
        Ok(sqlx::query_scalar(
            "INSERT INTO conversation_summaries (conversation_id, session, user_id, covers_until, turns, narrative, ledger, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
        )
        .bind(key.conversation_id)
        .bind(key.session)
        .bind(key.user_id)
        .bind(covers_until)
        .bind(turns)
        .bind(narrative)
        .bind(ledger)
        .bind(now_ms)
        .fetch_one(&mut *self.write().await?)
        .await?)
    }

    /// The newest `limit` messages of a member's history after message `after`, oldest first
    /// (see [`Store::recent_messages`] for whose turns a member sees).
    pub async fn messages_after(
        &self,
        key: HistoryKey,
        after: i64,
        limit: usize,
    ) -> StoreResult<Vec<StoredMessage>> {
        let rows: Vec<MessageRow> = sqlx::query_as(
            "SELECT m.id, m.turn_id, m.body, m.chars,
                    CAST(CASE WHEN t.status IN ('running', 'suspended') THEN 1 ELSE 0 END AS BIGINT) AS unfinished
             FROM messages m JOIN turns t ON t.id = m.turn_id
             WHERE m.conversation_id = $1 AND m.session = $2 AND t.user_id IS NOT DISTINCT FROM $3 AND m.id > $4
                   AND m.sub_turn IS NULL
             ORDER BY m.id DESC LIMIT $5",
        )
        .bind(key.conversation_id)
        .bind(key.session)
        .bind(key.user_id)
        .bind(after)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        let mut messages = rows
            .into_iter()
            .map(StoredMessage::try_from)
            .collect::<StoreResult<Vec<_>>>()?;
        messages.reverse();
        Ok(messages)
    }

    /// The tool calls of `turns`, in order, for the ledger.
    pub async fn calls_of_turns(&self, turns: &[i64]) -> StoreResult<Vec<CoveredCall>> {
        let mut calls = Vec::new();
        // One query per turn keeps the SQL plain on both backends; compaction is rare.
        for turn in turns {
            let rows: Vec<CoveredCall> = sqlx::query_as(
                "SELECT turn_id, name, arguments, status, result FROM tool_calls WHERE turn_id = $1 ORDER BY message_id, position",
            )
            .bind(turn)
            .fetch_all(self.pool())
            .await?;
            calls.extend(rows);
        }
        Ok(calls)
    }

    /// The name and arguments of every tool call of a turn, for spotting a call repeated again
    /// and again.
    pub async fn tool_call_arguments_of_turn(
        &self,
        turn_id: i64,
    ) -> StoreResult<Vec<(String, String)>> {
        Ok(
            sqlx::query_as("SELECT name, arguments FROM tool_calls WHERE turn_id = $1")
                .bind(turn_id)
                .fetch_all(self.pool())
                .await?,
        )
    }

    /// The full result of the tool call `call_id` in a member's history, for the `tool_result`
    /// tool. Call ids are the provider's and may repeat across turns: the newest wins.
    pub async fn tool_result_in(
        &self,
        conversation_id: i64,
        user_id: Option<i64>,
        call_id: &str,
    ) -> StoreResult<Option<(String, String)>> {
        Ok(sqlx::query_as(
            "SELECT c.name, c.result FROM tool_calls c JOIN turns t ON t.id = c.turn_id
             WHERE t.conversation_id = $1 AND t.user_id IS NOT DISTINCT FROM $2 AND c.call_id = $3 AND c.result IS NOT NULL
             ORDER BY c.id DESC LIMIT 1",
        )
        .bind(conversation_id)
        .bind(user_id)
        .bind(call_id)
        .fetch_optional(self.pool())
        .await?)
    }
}
