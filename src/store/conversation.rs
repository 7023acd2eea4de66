//! Conversations: one per chat (and thread), with the agent it is talking to.

use hearth_channel::ChatRef;

use super::query::Sql;
use super::{Store, StoreResult};

#[derive(Clone, Debug, PartialEq)]
pub struct Conversation {
    pub id: i64,
    pub channel: String,
    pub chat: ChatRef,
    /// The agent of the last turn; `None` for a new or reset conversation.
    pub current_agent: Option<String>,
    /// Set by `/agent ID`: keyword triggers do not switch away until `/agent auto` or `/reset`.
    pub agent_pinned: bool,
    /// Messages of older sessions (before `/new` or `/reset`) are not shown to the model.
    pub session: i64,
    pub last_active_at: i64,
}

/// A `conversations` row as read. A chat without a thread is stored with an empty
/// `thread_id` (the column is part of the chat's unique key).
#[derive(sqlx::FromRow)]
struct ConversationRow {
    id: i64,
    channel: String,
    chat_id: String,
    thread_id: String,
    current_agent: Option<String>,
    agent_pinned: i64,
    session: i64,
    last_active_at: i64,
}

impl From<ConversationRow> for Conversation {
    fn from(row: ConversationRow) -> Self {
        Conversation {
            id: row.id,
            channel: row.channel,
            chat: ChatRef {
                chat_id: row.chat_id,
                thread_id: (!row.thread_id.is_empty()).then_some(row.thread_id),
            },
            current_agent: row.current_agent,
            agent_pinned: row.agent_pinned != 0,
            session: row.session,
            last_active_at: row.last_active_at,
        }
    }
}

const COLUMNS: &str =
    "id, channel, chat_id, thread_id, current_agent, agent_pinned, session, last_active_at";

impl Store {
    /// The conversation of a chat, created on first contact.
    pub async fn conversation(
        &self,
        channel: &str,
        chat: &ChatRef,
        now_ms: i64,
    ) -> StoreResult<Conversation> {
        let thread = chat.thread_id.as_deref().unwrap_or("");
        let select = format!(
            "SELECT {COLUMNS} FROM conversations WHERE channel = $1 AND chat_id = $2 AND thread_id = $3"
        );
        // Known chats (nearly every message) need one query, and no write.
        let found: Option<ConversationRow> = sqlx::query_as(sqlx::AssertSqlSafe(select))
            .bind(channel)
            .bind(&chat.chat_id)
            .bind(thread)
            .fetch_optional(self.pool())
            .await?;
        if let Some(row) = found {
            return Ok(row.into());
        }
        self.insert_conversation(channel, &chat.chat_id, thread, now_ms)
            .await
    }

    /// A new chat's conversation, inserted and read back in one statement. The no-op update
    /// brings back a row that a racing writer inserted first; `fetch_all` as in
    /// `Sql::write_returning`, so a failed commit is an error and not a conversation.
    async fn insert_conversation(
        &self,
        channel: &str,
        chat_id: &str,
        thread: &str,
        now_ms: i64,
    ) -> StoreResult<Conversation> {
        let rows: Vec<ConversationRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "INSERT INTO conversations (channel, chat_id, thread_id, last_active_at, created_at)
             VALUES ($1, $2, $3, $4, $4)
             ON CONFLICT (channel, chat_id, thread_id) DO UPDATE SET channel = excluded.channel
             RETURNING {COLUMNS}"
        )))
        .bind(channel)
        .bind(chat_id)
        .bind(thread)
        .bind(now_ms)
        .fetch_all(&mut *self.write().await?)
        .await?;
        let row = rows.into_iter().next().ok_or(sqlx::Error::RowNotFound)?;
        Ok(row.into())
    }

    pub async fn conversation_by_id(&self, id: i64) -> StoreResult<Option<Conversation>> {
        let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM conversations WHERE id = "));
        sql.bind(id);
        let row: Option<ConversationRow> = sql.fetch_optional(self).await?;
        Ok(row.map(Conversation::from))
    }

    /// Sets the conversation's agent (and whether it is pinned) and marks it active now.
    pub async fn set_conversation_agent(
        &self,
        id: i64,
        agent: Option<&str>,
        pinned: bool,
        now_ms: i64,
    ) -> StoreResult<()> {
        set_agent(&mut *self.write().await?, id, agent, pinned, now_ms).await
    }

    /// Starts a new session: the model forgets the history. With `reset_agent`, the
    /// conversation also returns to the default agent and loses any `/agent` pin.
    pub async fn new_session(&self, id: i64, reset_agent: bool, now_ms: i64) -> StoreResult<()> {
        let sql = if reset_agent {
            "UPDATE conversations SET session = session + 1, current_agent = NULL, agent_pinned = 0, last_active_at = $1 WHERE id = $2"
        } else {
            "UPDATE conversations SET session = session + 1, last_active_at = $1 WHERE id = $2"
        };
        sqlx::query(sql)
            .bind(now_ms)
            .bind(id)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(())
    }
}

/// The conversation's agent, whether it is pinned, and when it was last active.
pub(super) const SET_AGENT: &str = "UPDATE conversations SET current_agent = $1, agent_pinned = $2, last_active_at = $3 WHERE id = $4";

/// [`SET_AGENT`] on `conn`: [`Store::set_conversation_agent`]; [`Store::start_turn`] runs it in
/// its batch.
pub(super) async fn set_agent(
    conn: &mut sqlx::AnyConnection,
    id: i64,
    agent: Option<&str>,
    pinned: bool,
    now_ms: i64,
) -> StoreResult<()> {
    sqlx::query(SET_AGENT)
        .bind(agent)
        .bind(i64::from(pinned))
        .bind(now_ms)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two starts racing on a new chat: the one that inserts second gets the first one's row,
    /// unchanged, not an error or a second conversation.
    #[tokio::test]
    async fn a_chat_inserted_twice_is_one_conversation() {
        let (store, _dir) = crate::store::test_support::temp_store().await;
        let first = store
            .insert_conversation("test", "chat", "", 1)
            .await
            .expect("first");
        store
            .set_conversation_agent(first.id, Some("finance"), true, 2)
            .await
            .expect("agent");
        let second = store
            .insert_conversation("test", "chat", "", 3)
            .await
            .expect("second");
        assert_eq!(second.id, first.id);
        assert_eq!(second.current_agent.as_deref(), Some("finance"));
        assert_eq!(second.last_active_at, 2, "left as it was");
        let found = store
            .conversation("test", &ChatRef::new("chat"), 4)
            .await
            .expect("found");
        assert_eq!(found.id, first.id);
        let other = store
            .conversation("test", &ChatRef::new("other"), 5)
            .await
            .expect("new");
        assert_ne!(other.id, first.id);
        assert_eq!(other.last_active_at, 5);
        store.close().await;
    }
}
