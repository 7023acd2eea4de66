//! Pending Approve/Deny decisions and the tool audit log.

use hearth_channel::OutboundMessage;

use super::outbox::{NewOutbox, insert_outbox, reply_and_finish};
use super::query::Sql;
use super::{Store, StoreResult, text_enum};

text_enum! {
    /// Where a confirmation stands.
    pub enum ConfirmationStatus {
        Pending = "pending",
        Approved = "approved",
        Denied = "denied",
        Expired = "expired",
    }
}

/// A tool call waiting for the requester's decision.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct Confirmation {
    /// Unguessable; carried in the buttons' data.
    pub id: String,
    pub turn_id: i64,
    pub tool_call_id: i64,
    pub conversation_id: i64,
    pub channel: String,
    pub chat_id: String,
    pub thread_id: Option<String>,
    /// The platform user id of the person whose message caused the call.
    pub requester: String,
    pub user_id: Option<i64>,
    pub tool: String,
    /// What the prompt says the call will do.
    pub summary: String,
    pub prompt_outbox_id: Option<i64>,
    pub status: ConfirmationStatus,
    pub decided_by: Option<String>,
    pub created_at: i64,
    pub expires_at: i64,
    /// The code a person types to decide (`APPROVE K7M2QX`), on channels whose prompt has no
    /// buttons; unique among the chat's pending confirmations.
    pub short_code: Option<String>,
    /// Wrong codes typed in the chat while this one was pending.
    pub wrong_codes: i64,
    /// Where a copy of the prompt went with buttons (`daemon.approvals_to`): its channel, chat
    /// and outbox row. `None` when the prompt was not routed.
    pub routed_channel: Option<String>,
    pub routed_chat_id: Option<String>,
    pub routed_outbox_id: Option<i64>,
}

impl Confirmation {
    /// Whether a chat turn waits on it. An MCP client's request ([`super::mcp_approval`])
    /// belongs to no turn, and is decided only in the chat it was asked in: the client may
    /// itself hold a token that decides the owner's other confirmations.
    pub fn has_turn(&self) -> bool {
        self.turn_id != 0
    }
}

/// What a wrong typed code did.
#[derive(Clone, Debug, PartialEq)]
pub struct WrongCode {
    /// Wrong codes the chat may still type before the next of its pending confirmations is
    /// denied (`max` when none is left waiting).
    pub left: i64,
    /// The confirmations denied now because the chat typed too many wrong codes.
    pub denied: Vec<Confirmation>,
}

/// `decided_by` of a confirmation denied after too many wrong codes.
pub const DENIED_FOR_WRONG_CODES: &str = "hearth:wrong-codes";

/// The columns of [`Confirmation`]. A confirmation outside a thread is stored with an empty
/// `thread_id` (the column is part of a unique key); it reads back as none. An MCP client's
/// ([`super::mcp_approval`]) belongs to no turn, call or conversation: those read back as 0,
/// which no row has, so resuming or showing "its turn" finds nothing to do.
pub(super) const COLUMNS: &str = "id, COALESCE(turn_id, 0) AS turn_id, \
     COALESCE(tool_call_id, 0) AS tool_call_id, COALESCE(conversation_id, 0) AS conversation_id, \
     channel, chat_id, \
     NULLIF(thread_id, '') AS thread_id, requester, user_id, tool, summary, prompt_outbox_id, \
     status, decided_by, created_at, expires_at, short_code, wrong_codes, routed_channel, \
     routed_chat_id, routed_outbox_id";

/// A confirmation found by its prompt, and the prompt's stored message.
#[derive(sqlx::FromRow)]
struct PromptRow {
    #[sqlx(flatten)]
    confirmation: Confirmation,
    prompt_payload: String,
}

/// One line of the tool audit log.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditEntry<'a> {
    pub user_id: Option<i64>,
    pub turn_id: Option<i64>,
    pub agent_id: &'a str,
    pub tool: &'a str,
    pub arguments: &'a str,
    pub outcome: &'a str,
    pub summary: &'a str,
    pub duration_ms: i64,
    /// The MCP client that made the call (`hearth mcp serve`, `/mcp`); `None` in a chat turn.
    pub client: Option<&'a str>,
}

/// The pending confirmations of a chat (`$1`, `$2`) decided by typing their code, oldest
/// first.
fn pending_coded_sql() -> String {
    format!(
        "SELECT {COLUMNS} FROM confirmations
         WHERE channel = $1 AND chat_id = $2 AND status = 'pending' AND short_code IS NOT NULL
         ORDER BY created_at"
    )
}

impl Store {
    /// Stores a confirmation, its prompt (in the outbox), the prompt's copy for the owner's chat
    /// (`routed`, going to `confirmation.routed_channel` and `routed_chat_id`) and the call's
    /// waiting state together. Returns the prompt's outbox id.
    pub async fn create_confirmation(
        &self,
        confirmation: &Confirmation,
        prompt: &NewOutbox,
        routed: Option<&NewOutbox>,
        now_ms: i64,
    ) -> StoreResult<i64> {
        let mut tx = self.begin().await?;
        let outbox_id = insert_outbox(&mut tx, prompt, now_ms).await?;
        let routed_outbox_id = match routed {
            Some(routed) => Some(insert_outbox(&mut tx, routed, now_ms).await?),
            None => None,
        };
        let (routed_channel, routed_chat_id) = match routed {
            Some(_) => (
                confirmation.routed_channel.as_deref(),
                confirmation.routed_chat_id.as_deref(),
            ),
            None => (None, None),
        };
        sqlx::query(
            "INSERT INTO confirmations (id, turn_id, tool_call_id, conversation_id, channel, chat_id, thread_id,
               requester, user_id, tool, summary, prompt_outbox_id, status, created_at, expires_at, short_code,
               routed_channel, routed_chat_id, routed_outbox_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'pending', $13, $14, $15, $16, $17, $18)",
        )
        .bind(&confirmation.id)
        .bind(confirmation.turn_id)
        .bind(confirmation.tool_call_id)
        .bind(confirmation.conversation_id)
        .bind(&confirmation.channel)
        .bind(&confirmation.chat_id)
        .bind(confirmation.thread_id.as_deref().unwrap_or(""))
        .bind(&confirmation.requester)
        .bind(confirmation.user_id)
        .bind(&confirmation.tool)
        .bind(&confirmation.summary)
        .bind(outbox_id)
        .bind(confirmation.created_at)
        .bind(confirmation.expires_at)
        .bind(confirmation.short_code.as_deref())
        .bind(routed_channel)
        .bind(routed_chat_id)
        .bind(routed_outbox_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE tool_calls SET status = 'waiting' WHERE id = $1")
            .bind(confirmation.tool_call_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.waiting_changed();
        Ok(outbox_id)
    }

    pub async fn confirmation(&self, id: &str) -> StoreResult<Option<Confirmation>> {
        let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM confirmations WHERE id = "));
        sql.bind(id.to_string());
        sql.fetch_optional(self).await
    }

    pub async fn confirmation_for_call(
        &self,
        tool_call_id: i64,
    ) -> StoreResult<Option<Confirmation>> {
        let mut sql = Sql::new(&format!(
            "SELECT {COLUMNS} FROM confirmations WHERE tool_call_id = "
        ));
        sql.bind(tool_call_id)
            .push(" ORDER BY created_at DESC LIMIT 1");
        sql.fetch_optional(self).await
    }

    /// Whether a pending confirmation in this chat already uses `code`.
    pub async fn short_code_taken(
        &self,
        channel: &str,
        chat_id: &str,
        code: &str,
    ) -> StoreResult<bool> {
        let taken: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM confirmations
             WHERE channel = $1 AND chat_id = $2 AND status = 'pending' AND short_code = $3",
        )
        .bind(channel)
        .bind(chat_id)
        .bind(code)
        .fetch_one(self.pool())
        .await?;
        Ok(taken > 0)
    }

    /// The pending confirmations of a chat that are decided by typing their code.
    pub async fn pending_coded_confirmations(
        &self,
        channel: &str,
        chat_id: &str,
    ) -> StoreResult<Vec<Confirmation>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(pending_coded_sql()))
            .bind(channel)
            .bind(chat_id)
            .fetch_all(self.pool())
            .await?)
    }

    /// The newest confirmation of a chat with the typed code `code` that is no longer pending
    /// (codes are unique among pending ones only), so a late `approve CODE` can be told so.
    pub async fn decided_coded_confirmation(
        &self,
        channel: &str,
        chat_id: &str,
        code: &str,
    ) -> StoreResult<Option<Confirmation>> {
        let mut sql = Sql::new(&format!(
            "SELECT {COLUMNS} FROM confirmations WHERE channel = "
        ));
        sql.bind(channel.to_string())
            .push(" AND chat_id = ")
            .bind(chat_id.to_string())
            .push(" AND status <> 'pending' AND short_code = ")
            .bind(code.to_string())
            .push(" ORDER BY created_at DESC LIMIT 1");
        sql.fetch_optional(self).await
    }

    /// The confirmation whose prompt, or its copy in the owner's chat, was delivered as the
    /// platform message `message_id` in this chat (whatever its status), with that message as
    /// stored: a reaction to it decides it.
    pub async fn confirmation_by_prompt(
        &self,
        channel: &str,
        chat_id: &str,
        message_id: &str,
    ) -> StoreResult<Option<(Confirmation, OutboundMessage)>> {
        let sql = format!(
            "SELECT {COLUMNS}, prompt_payload FROM (
               SELECT c.*, o.payload AS prompt_payload FROM confirmations c
               JOIN outbox o ON o.id = c.prompt_outbox_id OR o.id = c.routed_outbox_id
               WHERE o.channel = $1 AND o.platform_message_id = $2
                 AND ((o.id = c.prompt_outbox_id AND c.channel = $1 AND c.chat_id = $3)
                   OR (o.id = c.routed_outbox_id AND c.routed_channel = $1 AND c.routed_chat_id = $3))
               ORDER BY c.created_at DESC LIMIT 1
             ) AS found"
        );
        let row: Option<PromptRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(channel)
            .bind(message_id)
            .bind(chat_id)
            .fetch_optional(self.pool())
            .await?;
        let Some(row) = row else { return Ok(None) };
        let prompt = serde_json::from_str(&row.prompt_payload)?;
        Ok(Some((row.confirmation, prompt)))
    }

    /// Counts a wrong code typed in a chat against every confirmation there that waits for a
    /// code, and denies those that have now had `max` wrong codes. A retried inbox entry may
    /// count its attempt twice; that only brings the denial closer, never lets a guess through.
    pub async fn count_wrong_code(
        &self,
        channel: &str,
        chat_id: &str,
        max: i64,
        now_ms: i64,
    ) -> StoreResult<WrongCode> {
        let mut tx = self.begin().await?;
        sqlx::query(
            "UPDATE confirmations SET wrong_codes = wrong_codes + 1
             WHERE channel = $1 AND chat_id = $2 AND status = 'pending' AND short_code IS NOT NULL",
        )
        .bind(channel)
        .bind(chat_id)
        .execute(&mut *tx)
        .await?;
        let pending: Vec<Confirmation> = sqlx::query_as(sqlx::AssertSqlSafe(pending_coded_sql()))
            .bind(channel)
            .bind(chat_id)
            .fetch_all(&mut *tx)
            .await?;
        let mut denied = Vec::new();
        let mut left = max;
        for mut confirmation in pending {
            if confirmation.wrong_codes < max {
                left = left.min(max - confirmation.wrong_codes);
                continue;
            }
            sqlx::query(
                "UPDATE confirmations SET status = 'denied', decided_by = $1, decided_at = $2
                 WHERE id = $3 AND status = 'pending'",
            )
            .bind(DENIED_FOR_WRONG_CODES)
            .bind(now_ms)
            .bind(&confirmation.id)
            .execute(&mut *tx)
            .await?;
            confirmation.status = ConfirmationStatus::Denied;
            confirmation.decided_by = Some(DENIED_FOR_WRONG_CODES.to_string());
            denied.push(confirmation);
        }
        tx.commit().await?;
        if !denied.is_empty() {
            self.waiting_changed();
        }
        Ok(WrongCode { left, denied })
    }

    /// Records a decision if the confirmation is still pending, together with what shows it
    /// (`replies`) and the completion of the inbox entry that made it; false, with nothing
    /// written, when it was decided already (a second press, or expiry raced the press). One
    /// transaction: a failed write leaves the entry pending and the confirmation undecided, so
    /// its retry decides again rather than finding the decision made and its outcome lost.
    pub async fn decide_confirmation(
        &self,
        id: &str,
        decision: (ConfirmationStatus, &str),
        inbox_id: i64,
        replies: &[NewOutbox],
        now_ms: i64,
    ) -> StoreResult<bool> {
        let (status, decided_by) = decision;
        let mut tx = self.begin().await?;
        let done = sqlx::query(
            "UPDATE confirmations SET status = $1, decided_by = $2, decided_at = $3 WHERE id = $4 AND status = 'pending'",
        )
        .bind(status)
        .bind(decided_by)
        .bind(now_ms)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        reply_and_finish(&mut tx, inbox_id, replies, now_ms).await?;
        tx.commit().await?;
        self.waiting_changed();
        Ok(true)
    }

    /// Denies the pending confirmations of turn `turn_id` as `decided_by` (a background task
    /// stopped while it waited); those withdrawn, for their prompts to be edited.
    pub async fn withdraw_confirmations(
        &self,
        turn_id: i64,
        decided_by: &str,
        now_ms: i64,
    ) -> StoreResult<Vec<Confirmation>> {
        let mut tx = self.begin().await?;
        let pending: Vec<Confirmation> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM confirmations WHERE turn_id = $1 AND status = 'pending'"
        )))
        .bind(turn_id)
        .fetch_all(&mut *tx)
        .await?;
        for confirmation in &pending {
            sqlx::query(
                "UPDATE confirmations SET status = $1, decided_by = $2, decided_at = $3 WHERE id = $4 AND status = 'pending'",
            )
            .bind(ConfirmationStatus::Denied)
            .bind(decided_by)
            .bind(now_ms)
            .bind(&confirmation.id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        if !pending.is_empty() {
            self.waiting_changed();
        }
        Ok(pending)
    }

    /// Pending confirmations of `channels` whose time is up.
    pub async fn expired_confirmations(
        &self,
        now_ms: i64,
        channels: &[String],
    ) -> StoreResult<Vec<Confirmation>> {
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::new(&format!(
            "SELECT {COLUMNS} FROM confirmations WHERE status = 'pending' AND expires_at <= "
        ));
        sql.bind(now_ms).push(" AND channel IN (");
        for channel in channels {
            sql.value(channel.clone());
        }
        sql.push(") ORDER BY expires_at");
        sql.fetch_all(self).await
    }

    pub async fn pending_confirmations(&self) -> StoreResult<i64> {
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) FROM confirmations WHERE status = 'pending'")
                .fetch_one(self.pool())
                .await?,
        )
    }

    /// Parks a turn that waits for a decision: the message counts as handled, so the
    /// conversation's queue moves on, and the turn resumes when the decision arrives.
    pub async fn suspend_turn(&self, turn_id: i64, inbox_id: i64, now_ms: i64) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        sqlx::query("UPDATE turns SET status = 'suspended' WHERE id = $1 AND status = 'running'")
            .bind(turn_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE inbox SET status = 'done', processed_at = $1 WHERE id = $2")
            .bind(now_ms)
            .bind(inbox_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn resume_turn(&self, turn_id: i64) -> StoreResult<()> {
        sqlx::query("UPDATE turns SET status = 'running' WHERE id = $1 AND status = 'suspended'")
            .bind(turn_id)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(())
    }

    pub async fn audit(&self, entry: &AuditEntry<'_>, now_ms: i64) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO tool_audit (user_id, turn_id, agent_id, tool, arguments, outcome, summary, duration_ms, created_at, client)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(entry.user_id)
        .bind(entry.turn_id)
        .bind(entry.agent_id)
        .bind(entry.tool)
        .bind(entry.arguments)
        .bind(entry.outcome)
        .bind(entry.summary)
        .bind(entry.duration_ms)
        .bind(now_ms)
        .bind(entry.client)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }

    /// Tool calls MCP clients made since `since_ms`, per client, most calls first: (client,
    /// calls, calls that ran and succeeded).
    pub async fn mcp_calls_by_client(&self, since_ms: i64) -> StoreResult<Vec<(String, i64, i64)>> {
        Ok(sqlx::query_as(
            "SELECT client, COUNT(*), SUM(CASE WHEN outcome = 'ok' THEN 1 ELSE 0 END)
             FROM tool_audit WHERE client IS NOT NULL AND created_at >= $1
             GROUP BY client ORDER BY COUNT(*) DESC, client",
        )
        .bind(since_ms)
        .fetch_all(self.pool())
        .await?)
    }

    /// The audit log's newest entries as (tool, outcome), newest first.
    pub async fn recent_audit(&self, limit: i64) -> StoreResult<Vec<(String, String)>> {
        Ok(
            sqlx::query_as("SELECT tool, outcome FROM tool_audit ORDER BY id DESC LIMIT $1")
                .bind(limit)
                .fetch_all(self.pool())
                .await?,
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::store::test_support::on_both_backends;
    use hearth_channel::{ChatRef, Inbound, OutboundMessage, Sender};

    use super::*;
    use crate::provider::{ChatMessage, ToolCall};
    use crate::store::OutboxKind;

    /// A waiting confirmation from an email chat, routed to the owner's Telegram chat `42`:
    /// its prompt and its copy delivered as message `m-1` in each chat.
    async fn routed_confirmation(store: &Store) -> Confirmation {
        let chat = ChatRef::new("ann@example.org");
        let sender = Sender::new("ann@example.org");
        let event = Inbound::message("mail-1", chat.clone(), sender, "delete task 1");
        let inbox = store
            .insert_inbox("email", &event, 1)
            .await
            .expect("inbox")
            .expect("new");
        let conversation = store.conversation("email", &chat, 1).await.expect("chat");
        let turn = store
            .start_turn(
                inbox,
                &conversation,
                None,
                ("general", Some(1)),
                None,
                &ChatMessage::user("delete task 1"),
                1,
            )
            .await
            .expect("turn");
        let request = ChatMessage::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "delete_task".into(),
                arguments: "{\"task_id\": 1}".into(),
            }],
        };
        let call = store
            .record_tool_request(&turn, conversation.session, &request, 1)
            .await
            .expect("calls")
            .remove(0);
        let reply = |channel: &str, chat: ChatRef, seq: i64| NewOutbox {
            inbox_id: Some(inbox),
            seq,
            channel: channel.into(),
            kind: OutboxKind::Send,
            message: OutboundMessage::text(chat, "🔐 delete_task?"),
        };
        let prompt = reply("email", chat.clone(), call.id);
        let routed = reply("telegram", ChatRef::new("42"), -call.id);
        let mut confirmation = Confirmation {
            id: "c".repeat(22),
            turn_id: turn.id,
            tool_call_id: call.id,
            conversation_id: conversation.id,
            channel: "email".into(),
            chat_id: chat.chat_id.clone(),
            thread_id: None,
            requester: "ann@example.org".into(),
            user_id: None,
            tool: "delete_task".into(),
            summary: "delete_task({\"task_id\":1})".into(),
            prompt_outbox_id: None,
            status: ConfirmationStatus::Pending,
            decided_by: None,
            created_at: 1,
            expires_at: 600_001,
            short_code: Some("K7M2QX".into()),
            wrong_codes: 0,
            routed_channel: Some("telegram".into()),
            routed_chat_id: Some("42".into()),
            routed_outbox_id: None,
        };
        let prompt_id = store
            .create_confirmation(&confirmation, &prompt, Some(&routed), 1)
            .await
            .expect("create");
        let stored = store
            .confirmation(&confirmation.id)
            .await
            .expect("read")
            .expect("stored");
        let routed_id = stored.routed_outbox_id.expect("the copy's outbox row");
        assert_eq!(stored.prompt_outbox_id, Some(prompt_id));
        assert_ne!(routed_id, prompt_id);
        for id in [prompt_id, routed_id] {
            store
                .mark_outbox_sent(id, Some("m-1"), 2)
                .await
                .expect("sent");
        }
        confirmation.prompt_outbox_id = Some(prompt_id);
        confirmation.routed_outbox_id = Some(routed_id);
        assert_eq!(stored, confirmation);
        stored
    }

    async fn check(store: Store) {
        let confirmation = routed_confirmation(&store).await;
        // A reaction on the copy in the owner's chat finds it, with the copy as sent there.
        let (found, message) = store
            .confirmation_by_prompt("telegram", "42", "m-1")
            .await
            .expect("read")
            .expect("the copy's confirmation");
        assert_eq!(found.id, confirmation.id);
        assert_eq!(message.chat.chat_id, "42");
        // So does one on the prompt in its own chat.
        let (found, message) = store
            .confirmation_by_prompt("email", "ann@example.org", "m-1")
            .await
            .expect("read")
            .expect("the prompt's confirmation");
        assert_eq!(found.id, confirmation.id);
        assert_eq!(message.chat.chat_id, "ann@example.org");
        // The same message id in another chat, or on another channel, is not it.
        for (channel, chat) in [
            ("telegram", "43"),
            ("telegram", "ann@example.org"),
            ("email", "42"),
        ] {
            assert!(
                store
                    .confirmation_by_prompt(channel, chat, "m-1")
                    .await
                    .expect("read")
                    .is_none(),
                "{channel}:{chat}"
            );
        }
    }

    on_both_backends!(
        a_routed_prompts_copy_is_stored_with_it_and_found_by_its_message,
        a_routed_prompts_copy_is_stored_with_it_and_found_by_its_message_on_postgres,
        check
    );

    /// MCP clients' calls are counted per client since a time; a chat turn's calls (no client)
    /// and older calls are not.
    async fn count_clients(store: Store) {
        let entry = |client, outcome| AuditEntry {
            user_id: None,
            turn_id: None,
            agent_id: "general",
            tool: "add_task",
            arguments: "{}",
            outcome,
            summary: "",
            duration_ms: 1,
            client,
        };
        let calls = [
            (Some("editor (stdio)"), "ok", 2_000),
            (Some("editor (stdio)"), "refused", 2_001),
            (Some("laptop (token laptop)"), "ok", 2_002),
            (Some("laptop (token laptop)"), "ok", 10),
            (None, "ok", 2_003),
        ];
        for (client, outcome, at) in calls {
            store
                .audit(&entry(client, outcome), at)
                .await
                .expect("audit");
        }
        let counted = store.mcp_calls_by_client(1_000).await.expect("count");
        assert_eq!(
            counted,
            [
                ("editor (stdio)".to_string(), 2, 1),
                ("laptop (token laptop)".to_string(), 1, 1)
            ]
        );
    }

    on_both_backends!(
        mcp_calls_are_counted_by_client,
        mcp_calls_are_counted_by_client_on_postgres,
        count_clients
    );
}
