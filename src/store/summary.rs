//! Summaries of a conversation's older turns. The messages they cover stay in `messages`; the
//! model sees the latest summary instead of them. Each summary folds in the one before it, so
//! only the latest counts.

use sqlx::Row;

use super::turn::StoredMessage;
use super::{Store, StoreResult};

/// The latest summary of a member's history in one session.
#[derive(Clone, Debug, PartialEq)]
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
#[derive(Clone, Debug, PartialEq)]
pub struct CoveredCall {
    pub turn_id: i64,
    pub name: String,
    pub arguments: String,
    pub status: String,
    pub result: Option<String>,
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
        let row = sqlx::query(
            "SELECT id, covers_until, turns, narrative, ledger, created_at FROM conversation_summaries
             WHERE conversation_id = $1 AND session = $2 AND user_id IS NOT DISTINCT FROM $3
             ORDER BY id DESC LIMIT 1",
        )
        .bind(key.conversation_id)
        .bind(key.session)
        .bind(key.user_id)
        .fetch_optional(self.pool())
        .await?;
        row.map(|row| {
            Ok(Summary {
                id: row.try_get("id")?,
                covers_until: row.try_get("covers_until")?,
                turns: row.try_get("turns")?,
                narrative: row.try_get("narrative")?,
                ledger: row.try_get("ledger")?,
                created_at: row.try_get("created_at")?,
            })
        })
        .transpose()
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
        let rows = sqlx::query(
            "SELECT m.id, m.turn_id, m.body, m.chars,
                    CAST(CASE WHEN t.status IN ('running', 'suspended') THEN 1 ELSE 0 END AS BIGINT) AS unfinished
             FROM messages m JOIN turns t ON t.id = m.turn_id
             WHERE m.conversation_id = $1 AND m.session = $2 AND t.user_id IS NOT DISTINCT FROM $3 AND m.id > $4
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
            .iter()
            .map(|row| {
                let body: String = row.try_get("body")?;
                let unfinished: i64 = row.try_get("unfinished")?;
                Ok(StoredMessage {
                    id: row.try_get("id")?,
                    turn_id: row.try_get("turn_id")?,
                    message: serde_json::from_str(&body)?,
                    chars: row.try_get("chars")?,
                    turn_unfinished: unfinished != 0,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        messages.reverse();
        Ok(messages)
    }

    /// The tool calls of `turns`, in order, for the ledger.
    pub async fn calls_of_turns(&self, turns: &[i64]) -> StoreResult<Vec<CoveredCall>> {
        let mut calls = Vec::new();
        // One query per turn keeps the SQL plain on both backends; compaction is rare.
        for turn in turns {
            let rows = sqlx::query(
                "SELECT turn_id, name, arguments, status, result FROM tool_calls WHERE turn_id = $1 ORDER BY message_id, position",
            )
            .bind(turn)
            .fetch_all(self.pool())
            .await?;
            for row in rows {
                calls.push(CoveredCall {
                    turn_id: row.try_get("turn_id")?,
                    name: row.try_get("name")?,
                    arguments: row.try_get("arguments")?,
                    status: row.try_get("status")?,
                    result: row.try_get("result")?,
                });
            }
        }
        Ok(calls)
    }

    /// The name and arguments of every tool call of a turn, for spotting a call repeated again
    /// and again.
    pub async fn tool_call_arguments_of_turn(
        &self,
        turn_id: i64,
    ) -> StoreResult<Vec<(String, String)>> {
        let rows = sqlx::query("SELECT name, arguments FROM tool_calls WHERE turn_id = $1")
            .bind(turn_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("name")?, row.try_get("arguments")?)))
            .collect()
    }

    /// The full result of the tool call `call_id` in a member's history, for the `tool_result`
    /// tool. Call ids are the provider's and may repeat across turns: the newest wins.
    pub async fn tool_result_in(
        &self,
        conversation_id: i64,
        user_id: Option<i64>,
        call_id: &str,
    ) -> StoreResult<Option<(String, String)>> {
        let row = sqlx::query(
            "SELECT c.name, c.result FROM tool_calls c JOIN turns t ON t.id = c.turn_id
             WHERE t.conversation_id = $1 AND t.user_id IS NOT DISTINCT FROM $2 AND c.call_id = $3 AND c.result IS NOT NULL
             ORDER BY c.id DESC LIMIT 1",
        )
        .bind(conversation_id)
        .bind(user_id)
        .bind(call_id)
        .fetch_optional(self.pool())
        .await?;
        row.map(|row| Ok((row.try_get("name")?, row.try_get("result")?)))
            .transpose()
    }
}
