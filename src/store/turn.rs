//! Turns, the conversation's messages, and tool calls: stored as they happen so a turn can be
//! resumed after a restart and no tool with side effects ever runs twice.

use super::batch::returned_ids;
use super::inbox::InboxStatus;
use super::outbox::{NewOutbox, push_reply_of_turn, reply_and_finish};
use super::query::Sql;
use super::usage::{ModelCall, push_model_call};
use super::{Store, StoreError, StoreResult, WriteTx, text_enum, to_i64};
use crate::provider::{ChatMessage, ToolCall, Usage};

text_enum! {
    /// Where a turn stands.
    pub enum TurnStatus {
        Running = "running",
        /// Parked while a tool call waits for the requester's decision.
        Suspended = "suspended",
        Done = "done",
        Failed = "failed",
        Cancelled = "cancelled",
    }
}

/// How a batch of turns ended (`hearth chat` over a pipe fails when every turn failed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TurnOutcomes {
    pub total: u64,
    pub failed: u64,
    pub last_error: Option<String>,
}

#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct Turn {
    pub id: i64,
    pub inbox_id: i64,
    pub conversation_id: i64,
    pub user_id: Option<i64>,
    pub agent_id: String,
    /// The version of the agent's definition the turn ran (`hearth agents history`); `None`
    /// for turns from before versions were kept.
    pub agent_version: Option<i64>,
    pub status: TurnStatus,
    pub llm_calls: i64,
    pub tool_calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// False when this turn existed already: the daemon is resuming it after a restart.
    #[sqlx(skip)]
    pub fresh: bool,
    /// Set on the copy of a plan-mode turn that runs one of its steps: the step's run, under
    /// which its model requests and tool results are kept apart from the conversation
    /// (`runtime::plan_mode`).
    #[sqlx(skip)]
    pub sub_turn: Option<i64>,
}

/// The columns of [`Turn`]: `fresh` is not stored, and a turn read back is never fresh.
const TURN_COLUMNS: &str = "id, inbox_id, conversation_id, user_id, agent_id, agent_version, \
     status, llm_calls, tool_calls, input_tokens, output_tokens";

text_enum! {
    /// Where a tool call stands.
    pub enum ToolCallStatus {
        /// Requested by the model, not started.
        Pending = "pending",
        /// Started; if the daemon dies now the call is reported as interrupted, never re-run.
        Running = "running",
        Done = "done",
        Error = "error",
        Interrupted = "interrupted",
        Cancelled = "cancelled",
        /// Not run because a limit (max tool calls) was reached.
        Skipped = "skipped",
        /// Waiting for the requester's Approve or Deny.
        Waiting = "waiting",
        /// Approved; runs when the turn resumes.
        Approved = "approved",
        /// Denied by the requester, or not decided in time.
        Denied = "denied",
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallRecord {
    pub id: i64,
    pub turn_id: i64,
    pub call: ToolCall,
    pub status: ToolCallStatus,
    pub result: Option<String>,
}

/// A `tool_calls` row as read; the call's own id is `call_id` beside the row's `id`.
#[derive(sqlx::FromRow)]
struct ToolCallRow {
    id: i64,
    turn_id: i64,
    call_id: String,
    name: String,
    arguments: String,
    status: ToolCallStatus,
    result: Option<String>,
}

impl From<ToolCallRow> for ToolCallRecord {
    fn from(row: ToolCallRow) -> Self {
        ToolCallRecord {
            id: row.id,
            turn_id: row.turn_id,
            call: ToolCall {
                id: row.call_id,
                name: row.name,
                arguments: row.arguments,
            },
            status: row.status,
            result: row.result,
        }
    }
}

/// A message of the conversation as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredMessage {
    pub id: i64,
    pub turn_id: Option<i64>,
    pub message: ChatMessage,
    pub chars: i64,
    /// Its turn is still running or waiting for a decision: its open tool calls must not reach
    /// the model in another turn's history.
    pub turn_unfinished: bool,
}

/// The unfinished turns among `messages` (see [`StoredMessage::turn_unfinished`]).
pub fn unfinished_turns(messages: &[StoredMessage]) -> Vec<i64> {
    let mut turns: Vec<i64> = messages
        .iter()
        .filter(|m| m.turn_unfinished)
        .filter_map(|m| m.turn_id)
        .collect();
    turns.dedup();
    turns
}

fn role(message: &ChatMessage) -> &'static str {
    match message {
        ChatMessage::User { .. } => "user",
        ChatMessage::Assistant { .. } => "assistant",
        ChatMessage::Tool { .. } => "tool",
    }
}

/// Characters a message costs in the model's context, for the window's token estimate.
pub fn message_chars(message: &ChatMessage) -> usize {
    match message {
        ChatMessage::User { content } => content
            .iter()
            .map(|part| match part {
                crate::provider::ContentPart::Text { text } => text.chars().count(),
                // Images cost the model roughly a thousand tokens whatever their byte size.
                crate::provider::ContentPart::Image { .. } => 4_000,
            })
            .sum(),
        ChatMessage::Assistant { text, tool_calls } => {
            text.chars().count()
                + tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.chars().count())
                    .sum::<usize>()
        }
        ChatMessage::Tool { content, .. } => content.chars().count(),
    }
}

pub(super) async fn insert_message(
    tx: &mut WriteTx,
    conversation_id: i64,
    session: i64,
    turn_id: i64,
    sub_turn: Option<i64>,
    message: &ChatMessage,
    now_ms: i64,
) -> StoreResult<i64> {
    let body = serde_json::to_string(message)?;
    Ok(sqlx::query_scalar(
        "INSERT INTO messages (conversation_id, session, turn_id, role, body, chars, created_at, sub_turn)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
    )
    .bind(conversation_id)
    .bind(session)
    .bind(turn_id)
    .bind(role(message))
    .bind(body)
    .bind(to_i64(message_chars(message)))
    .bind(now_ms)
    .bind(sub_turn)
    .fetch_one(&mut **tx)
    .await?)
}

/// How a turn ends.
#[derive(Debug)]
pub struct TurnEnd<'a> {
    pub status: TurnStatus,
    /// The final assistant message to keep in the history, if any.
    pub message: Option<&'a ChatMessage>,
    pub session: i64,
    pub replies: Vec<NewOutbox>,
    pub error: Option<&'a str>,
    /// The turn's last model call: recorded in `model_calls` and added to the turn's counts
    /// (tokens, provider, model) in the same transaction.
    pub call: Option<&'a ModelCall>,
}

impl Store {
    /// Starts the turn answering `inbox_id`, storing the user's message with it. The caller has
    /// checked [`Store::turn_for_inbox`] first: an entry already being worked on resumes its turn.
    ///
    /// `routed` is `Some(pinned)` for a message the router sent to `agent`: in the same
    /// transaction that agent becomes the conversation's (pinned or not, as
    /// [`Store::set_conversation_agent`] does) and the conversation is active now. A scheduled
    /// run (`None`) leaves the conversation as it is.
    #[allow(clippy::too_many_arguments)]
    pub async fn start_turn(
        &self,
        inbox_id: i64,
        conversation: &super::Conversation,
        user_id: Option<i64>,
        agent: (&str, Option<i64>),
        routed: Option<bool>,
        user_message: &ChatMessage,
        now_ms: i64,
    ) -> StoreResult<Turn> {
        let (agent_id, agent_version) = agent;
        let (conversation_id, session) = (conversation.id, conversation.session);
        // One batch (every message starts a turn): the user's message finds its turn by the
        // inbox entry, which has at most one.
        let mut batch = self.batch();
        if let Some(pinned) = routed {
            batch
                .push(super::conversation::SET_AGENT)
                .bind(Some(agent_id))
                .bind(i64::from(pinned))
                .bind(now_ms)
                .bind(conversation_id);
        }
        batch
            .push(
                "INSERT INTO turns (inbox_id, conversation_id, user_id, agent_id, agent_version, status, started_at)
                 VALUES ($1, $2, $3, $4, $5, 'running', $6) RETURNING id",
            )
            .bind(inbox_id)
            .bind(conversation_id)
            .bind(user_id)
            .bind(agent_id)
            .bind(agent_version)
            .bind(now_ms);
        batch
            .push(
                "INSERT INTO messages (conversation_id, session, turn_id, role, body, chars, created_at)
                 VALUES ($1, $2, (SELECT id FROM turns WHERE inbox_id = $3), $4, $5, $6, $7)",
            )
            .bind(conversation_id)
            .bind(session)
            .bind(inbox_id)
            .bind(role(user_message))
            .bind(serde_json::to_string(user_message)?)
            .bind(to_i64(message_chars(user_message)))
            .bind(now_ms);
        let rows = self.write_batch(batch).await?;
        let turn_id = *returned_ids(&rows)?
            .first()
            .ok_or(sqlx::Error::RowNotFound)?;
        Ok(Turn {
            id: turn_id,
            inbox_id,
            conversation_id,
            user_id,
            agent_id: agent_id.to_string(),
            agent_version,
            status: TurnStatus::Running,
            llm_calls: 0,
            tool_calls: 0,
            input_tokens: 0,
            output_tokens: 0,
            fresh: true,
            sub_turn: None,
        })
    }

    pub async fn turn_for_inbox(&self, inbox_id: i64) -> StoreResult<Option<Turn>> {
        let mut sql = Sql::new(&format!(
            "SELECT {TURN_COLUMNS} FROM turns WHERE inbox_id = "
        ));
        sql.bind(inbox_id);
        sql.fetch_optional(self).await
    }

    /// Why a turn failed, as stored.
    pub async fn turn_error(&self, turn_id: i64) -> StoreResult<Option<String>> {
        Ok(
            sqlx::query_scalar::<_, Option<String>>("SELECT error FROM turns WHERE id = $1")
                .bind(turn_id)
                .fetch_optional(self.pool())
                .await?
                .flatten(),
        )
    }

    /// How the turns of a conversation started at or after `since_ms` ended: how many there
    /// were, how many failed, and the last failure's stored error.
    pub async fn turn_outcomes_since(
        &self,
        conversation_id: i64,
        since_ms: i64,
    ) -> StoreResult<TurnOutcomes> {
        let rows: Vec<(TurnStatus, Option<String>)> = sqlx::query_as(
            "SELECT status, error FROM turns WHERE conversation_id = $1 AND started_at >= $2 ORDER BY id",
        )
        .bind(conversation_id)
        .bind(since_ms)
        .fetch_all(self.pool())
        .await?;
        let mut outcomes = TurnOutcomes::default();
        for (status, error) in rows {
            outcomes.total += 1;
            if status == TurnStatus::Failed {
                outcomes.failed += 1;
                outcomes.last_error = error;
            }
        }
        Ok(outcomes)
    }

    /// The conversation session a turn's messages belong to.
    pub async fn turn_session(&self, turn_id: i64) -> StoreResult<Option<i64>> {
        Ok(sqlx::query_scalar(
            "SELECT session FROM messages WHERE turn_id = $1 ORDER BY id LIMIT 1",
        )
        .bind(turn_id)
        .fetch_optional(self.pool())
        .await?)
    }

    pub async fn turn(&self, id: i64) -> StoreResult<Option<Turn>> {
        let mut sql = Sql::new(&format!("SELECT {TURN_COLUMNS} FROM turns WHERE id = "));
        sql.bind(id);
        sql.fetch_optional(self).await
    }

    /// The newest messages of a conversation's session from the turns of one user (`None`: the
    /// turns without a user), oldest first, at most `limit`. In a group chat several people
    /// talk to hearth in one conversation; each of them sees only their own earlier turns, so
    /// one member's turn never reads another's tool results (their expenses, their contacts).
    /// In a direct chat every turn is the same person's, and this is the whole history.
    pub async fn recent_messages(
        &self,
        conversation_id: i64,
        session: i64,
        user_id: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<StoredMessage>> {
        let key = super::summary::HistoryKey {
            conversation_id,
            session,
            user_id,
        };
        // Message ids start at 1, so "after 0" is the whole history.
        self.messages_after(key, 0, limit).await
    }

    /// The person's message a turn answers, as the model saw it.
    pub async fn turn_request(&self, turn_id: i64) -> StoreResult<Option<ChatMessage>> {
        let body: Option<String> = sqlx::query_scalar(
            "SELECT body FROM messages WHERE turn_id = $1 AND role = 'user' ORDER BY id LIMIT 1",
        )
        .bind(turn_id)
        .fetch_optional(self.pool())
        .await?;
        body.map(|body| Ok(serde_json::from_str(&body)?))
            .transpose()
    }

    /// The messages of a plan-mode step's run `sub_turn` of turn `turn_id`, oldest first: the
    /// model's tool requests and their results, what the step's executor reads back.
    pub async fn sub_turn_messages(
        &self,
        turn_id: i64,
        sub_turn: i64,
    ) -> StoreResult<Vec<ChatMessage>> {
        let bodies: Vec<String> = sqlx::query_scalar(
            "SELECT body FROM messages WHERE turn_id = $1 AND sub_turn = $2 ORDER BY id",
        )
        .bind(turn_id)
        .bind(sub_turn)
        .fetch_all(self.pool())
        .await?;
        bodies
            .iter()
            .map(|body| Ok(serde_json::from_str(body)?))
            .collect()
    }

    /// Stores the model's answer that asks for tools, with one pending record per call.
    pub async fn record_tool_request(
        &self,
        turn: &Turn,
        session: i64,
        message: &ChatMessage,
        now_ms: i64,
    ) -> StoreResult<Vec<ToolCallRecord>> {
        let ChatMessage::Assistant { tool_calls, .. } = message else {
            return Err(StoreError::Corrupt(
                "a tool request must be an assistant message".into(),
            ));
        };
        let mut tx = self.begin().await?;
        let message_id = insert_message(
            &mut tx,
            turn.conversation_id,
            session,
            turn.id,
            turn.sub_turn,
            message,
            now_ms,
        )
        .await?;
        let mut records = Vec::with_capacity(tool_calls.len());
        for (position, call) in tool_calls.iter().enumerate() {
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO tool_calls (turn_id, message_id, position, call_id, name, arguments, status)
                 VALUES ($1, $2, $3, $4, $5, $6, 'pending') RETURNING id",
            )
            .bind(turn.id)
            .bind(message_id)
            .bind(to_i64(position))
            .bind(&call.id)
            .bind(&call.name)
            .bind(&call.arguments)
            .fetch_one(&mut *tx)
            .await?;
            records.push(ToolCallRecord {
                id,
                turn_id: turn.id,
                call: call.clone(),
                status: ToolCallStatus::Pending,
                result: None,
            });
        }
        tx.commit().await?;
        Ok(records)
    }

    /// Tool calls of a turn that have no result yet (pending, running, waiting for a decision or
    /// approved), in the model's order.
    pub async fn open_tool_calls(&self, turn_id: i64) -> StoreResult<Vec<ToolCallRecord>> {
        let rows: Vec<ToolCallRow> = sqlx::query_as(
            "SELECT id, turn_id, call_id, name, arguments, status, result FROM tool_calls
             WHERE turn_id = $1 AND status IN ('pending', 'running', 'waiting', 'approved') ORDER BY message_id, position",
        )
        .bind(turn_id)
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(ToolCallRecord::from).collect())
    }

    /// Every tool call of a turn with its status, for tests and audits.
    pub async fn tool_calls_of_turn(
        &self,
        turn_id: i64,
    ) -> StoreResult<Vec<(String, ToolCallStatus)>> {
        Ok(sqlx::query_as(
            "SELECT name, status FROM tool_calls WHERE turn_id = $1 ORDER BY message_id, position",
        )
        .bind(turn_id)
        .fetch_all(self.pool())
        .await?)
    }

    pub async fn set_tool_status(&self, id: i64, status: ToolCallStatus) -> StoreResult<()> {
        sqlx::query("UPDATE tool_calls SET status = $1 WHERE id = $2")
            .bind(status)
            .bind(id)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(())
    }

    /// Marks a call as started. Committed before the tool runs, so a crash during the call is
    /// seen as an interruption rather than a call that never happened.
    pub async fn mark_tool_running(&self, id: i64, now_ms: i64) -> StoreResult<()> {
        sqlx::query(
            "UPDATE tool_calls SET status = 'running', started_at = $1 WHERE id = $2 AND status IN ('pending', 'approved')",
        )
            .bind(now_ms)
            .bind(id)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(())
    }

    /// Stores a call's outcome and the tool message the model will see, together.
    pub async fn finish_tool_call(
        &self,
        turn: &Turn,
        session: i64,
        record_id: i64,
        status: ToolCallStatus,
        message: &ChatMessage,
        now_ms: i64,
    ) -> StoreResult<()> {
        let ChatMessage::Tool { content, .. } = message else {
            return Err(StoreError::Corrupt(
                "a tool result must be a tool message".into(),
            ));
        };
        let mut tx = self.begin().await?;
        sqlx::query(
            "UPDATE tool_calls SET status = $1, result = $2, finished_at = $3 WHERE id = $4",
        )
        .bind(status)
        .bind(content)
        .bind(now_ms)
        .bind(record_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE turns SET tool_calls = tool_calls + 1 WHERE id = $1")
            .bind(turn.id)
            .execute(&mut *tx)
            .await?;
        insert_message(
            &mut tx,
            turn.conversation_id,
            session,
            turn.id,
            turn.sub_turn,
            message,
            now_ms,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Adds one LLM call's usage to the turn.
    pub async fn add_turn_usage(
        &self,
        turn_id: i64,
        usage: &Usage,
        provider: &str,
        model: &str,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE turns SET llm_calls = llm_calls + 1, input_tokens = input_tokens + $1,
             output_tokens = output_tokens + $2, provider = $3, model = $4 WHERE id = $5",
        )
        .bind(i64::try_from(usage.input_tokens).unwrap_or(i64::MAX))
        .bind(i64::try_from(usage.output_tokens).unwrap_or(i64::MAX))
        .bind(provider)
        .bind(model)
        .bind(turn_id)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }

    /// Ends a turn in one transaction: the final message joins the history, the replies enter
    /// the outbox, and the inbox entry is done. Either all of it happens or none of it, so a crash
    /// here means the turn resumes and replies exactly once. Returns the replies' outbox ids;
    /// none when the turn was already finished (a second resume raced this one), whose first
    /// outcome stays.
    ///
    /// One batch, as every answer ends here: each statement is guarded by the turn still
    /// being unfinished, and the turn's own update comes last, so all of them see it as it was.
    /// The last model call is recorded either way: it was made, and it cost what it cost.
    pub async fn finish_turn(
        &self,
        turn: &Turn,
        end: TurnEnd<'_>,
        now_ms: i64,
    ) -> StoreResult<Vec<i64>> {
        let mut batch = self.batch();
        if let Some(call) = end.call {
            push_model_call(&mut batch, call);
        }
        if let Some(message) = end.message {
            batch
                .push(
                    "INSERT INTO messages (conversation_id, session, turn_id, role, body, chars, created_at)
                     SELECT $1, $2, $3, $4, $5, $6, $7
                     WHERE EXISTS (SELECT 1 FROM turns WHERE id = $3 AND status IN ('running', 'suspended'))",
                )
                .bind(turn.conversation_id)
                .bind(end.session)
                .bind(turn.id)
                .bind(role(message))
                .bind(serde_json::to_string(message)?)
                .bind(to_i64(message_chars(message)))
                .bind(now_ms);
        }
        for reply in &end.replies {
            push_reply_of_turn(&mut batch, reply, turn.id, now_ms)?;
        }
        batch
            .push(
                "UPDATE inbox SET status = 'done', processed_at = $1 WHERE id = $2
                 AND EXISTS (SELECT 1 FROM turns WHERE id = $3 AND status IN ('running', 'suspended'))",
            )
            .bind(now_ms)
            .bind(turn.inbox_id)
            .bind(turn.id);
        let (calls, input, output, provider, model) = match end.call {
            Some(call) => (
                1i64,
                i64::try_from(call.input_tokens).unwrap_or(i64::MAX),
                i64::try_from(call.output_tokens).unwrap_or(i64::MAX),
                Some(call.provider.as_str()),
                Some(call.model.as_str()),
            ),
            None => (0, 0, 0, None, None),
        };
        batch
            .push(
                "UPDATE turns SET status = $1, error = $2, finished_at = $3, llm_calls = llm_calls + $5,
                   input_tokens = input_tokens + $6, output_tokens = output_tokens + $7,
                   provider = COALESCE($8, provider), model = COALESCE($9, model)
                 WHERE id = $4 AND status IN ('running', 'suspended')",
            )
            .bind(end.status)
            .bind(end.error)
            .bind(now_ms)
            .bind(turn.id)
            .bind(calls)
            .bind(input)
            .bind(output)
            .bind(provider)
            .bind(model);
        let rows = self.write_batch(batch).await?;
        returned_ids(&rows)
    }

    /// Answers an inbox entry without a turn (a chat command, a pairing code): the replies and
    /// the entry's completion commit together.
    pub async fn reply_and_finish_inbox(
        &self,
        inbox_id: i64,
        replies: &[NewOutbox],
        now_ms: i64,
    ) -> StoreResult<Vec<i64>> {
        let mut tx = self.begin().await?;
        let status: Option<InboxStatus> =
            sqlx::query_scalar("SELECT status FROM inbox WHERE id = $1")
                .bind(inbox_id)
                .fetch_optional(&mut *tx)
                .await?;
        if status != Some(InboxStatus::Pending) {
            return Ok(Vec::new());
        }
        let ids = reply_and_finish(&mut tx, inbox_id, replies, now_ms).await?;
        tx.commit().await?;
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use hearth_channel::ChatRef;

    use super::*;
    use crate::store::test_support::{stored_message, temp_store};
    use crate::store::{InboxStatus, Payer};

    async fn start(store: &Store, n: i64, chat: &str, routed: Option<bool>) -> Turn {
        let (inbox, conversation) = stored_message(store, n, chat).await;
        store
            .start_turn(
                inbox,
                &conversation,
                None,
                ("finance", None),
                routed,
                &ChatMessage::user("hi"),
                n,
            )
            .await
            .expect("turn")
    }

    #[tokio::test]
    async fn a_routed_turn_sets_the_conversations_agent_and_a_scheduled_one_does_not() {
        let (store, _dir) = temp_store().await;
        let routed = start(&store, 1, "routed", Some(true)).await;
        let conversation = store
            .conversation_by_id(routed.conversation_id)
            .await
            .expect("read")
            .expect("conversation");
        assert_eq!(conversation.current_agent.as_deref(), Some("finance"));
        assert!(conversation.agent_pinned);
        assert_eq!(conversation.last_active_at, 1);

        let scheduled = start(&store, 2, "scheduled", None).await;
        let conversation = store
            .conversation_by_id(scheduled.conversation_id)
            .await
            .expect("read")
            .expect("conversation");
        assert_eq!(conversation.current_agent, None, "left as it was");
        assert!(!conversation.agent_pinned);
        store.close().await;
    }

    fn call(turn: &Turn, input: u64) -> ModelCall {
        ModelCall {
            at_ms: 5,
            day: "2026-11-27".into(),
            payer: Payer {
                purpose: "turn",
                turn_id: Some(turn.id),
                ..Payer::default()
            },
            provider: "fake".into(),
            model: "m1".into(),
            input_tokens: input,
            output_tokens: 7,
            cost_nusd: 100,
            ..ModelCall::default()
        }
    }

    fn end<'a>(turn: &Turn, call: &'a ModelCall, answer: &'a ChatMessage) -> TurnEnd<'a> {
        TurnEnd {
            status: TurnStatus::Done,
            message: Some(answer),
            session: 0,
            replies: vec![NewOutbox {
                inbox_id: Some(turn.inbox_id),
                seq: 0,
                channel: "test".into(),
                kind: super::super::OutboxKind::Send,
                message: hearth_channel::OutboundMessage::text(ChatRef::new("chat"), "answer"),
            }],
            error: None,
            call: Some(call),
        }
    }

    /// What is stored of a turn's end: the answer in the history, the reply in the outbox, the
    /// inbox entry done. When a racing resume finished the turn first, the first outcome stays
    /// and nothing of the second is stored but its model call: it was made, and it was paid.
    #[tokio::test]
    async fn the_last_model_call_is_stored_with_the_turns_end_even_after_a_race() {
        let (store, _dir) = temp_store().await;
        let turn = start(&store, 1, "chat", Some(false)).await;
        let first = call(&turn, 40);
        let answer = ChatMessage::assistant("answer");
        let ids = store
            .finish_turn(&turn, end(&turn, &first, &answer), 10)
            .await
            .expect("finish");
        assert_eq!(ids.len(), 1, "the reply is queued");
        let finished = store.turn(turn.id).await.expect("read").expect("turn");
        assert_eq!(finished.status, TurnStatus::Done);
        assert_eq!(
            (
                finished.llm_calls,
                finished.input_tokens,
                finished.output_tokens
            ),
            (1, 40, 7)
        );
        assert_eq!(
            store.inbox_status(turn.inbox_id).await.expect("status"),
            Some(InboxStatus::Done)
        );
        let history = |store: Store| async move {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM messages")
                .fetch_one(store.pool())
                .await
                .expect("count")
        };
        assert_eq!(
            history(store.clone()).await,
            2,
            "the question and the answer"
        );

        let late = call(&turn, 1000);
        let ids = store
            .finish_turn(&turn, end(&turn, &late, &answer), 11)
            .await
            .expect("raced finish");
        assert!(ids.is_empty(), "no second reply");
        assert_eq!(store.outbox_depth().await.expect("depth"), 1);
        assert_eq!(history(store.clone()).await, 2, "no second answer");
        let kept = store.turn(turn.id).await.expect("read").expect("turn");
        assert_eq!(kept.input_tokens, 40, "the first outcome stays");
        let spent = store
            .spent_nusd("2026-11-27", "2026-11-27", None)
            .await
            .expect("spent");
        assert_eq!(spent, 200, "both calls are recorded");
        store.close().await;
    }

    /// A state this hearth does not know (written by a newer one, or by hand) is reported
    /// when the row is read, never taken for another: an unknown turn status used to read as
    /// running, and an unknown tool call status as pending, which would run the call again.
    async fn unknown_states_are_errors(store: Store) {
        let turn = start(&store, 1, "chat", None).await;
        let request = ChatMessage::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "add_task".into(),
                arguments: "{}".into(),
            }],
        };
        store
            .record_tool_request(&turn, 0, &request, 2)
            .await
            .expect("calls");
        for sql in [
            "UPDATE turns SET status = 'paused'",
            "UPDATE tool_calls SET status = 'queued'",
        ] {
            sqlx::query(sql)
                .execute(&mut *store.write().await.expect("write"))
                .await
                .expect("set by hand");
        }
        let err = store
            .turn(turn.id)
            .await
            .expect_err("an unknown turn status");
        assert!(
            err.to_string().contains("unknown TurnStatus \"paused\""),
            "{err}"
        );
        let err = store
            .tool_calls_of_turn(turn.id)
            .await
            .expect_err("an unknown tool call status");
        assert!(err.to_string().contains("unknown ToolCallStatus"), "{err}");
        store.close().await;
    }

    crate::store::test_support::on_both_backends!(
        an_unknown_stored_state_is_an_error_on_sqlite,
        an_unknown_stored_state_is_an_error_on_postgres,
        unknown_states_are_errors
    );
}
