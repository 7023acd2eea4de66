//! The `mcp_approvals` table: an MCP client's call that waits for the owner's approval
//! (`crate::mcp_server`, docs/architecture.md "hearth as an MCP server").
//!
//! The decision itself is a [`Confirmation`] like a chat turn's (belonging to no turn), so a
//! press, a reaction, the expiry timer and a restart treat it as they treat any. This table
//! adds what the MCP side needs: the handle the client polls with, whose call it is, the call
//! itself, and its result. `run_state` only moves forward, each step guarded by the one before
//! ([`Store::start_mcp_run`]), so an approved call runs once whoever asks for it and however
//! often.

use super::confirmation::COLUMNS;
use super::outbox::{NewOutbox, insert_outbox};
use super::query::Sql;
use super::{Confirmation, ConfirmationStatus, Store, StoreResult, text_enum};

text_enum! {
    /// Where an MCP call waiting for approval stands, once decided.
    pub enum McpRunState {
        /// Not started: waiting for the owner, or decided without running.
        Waiting = "waiting",
        /// Approved and started; a crash here leaves it so, and it is never started again.
        Running = "running",
        Succeeded = "succeeded",
        Failed = "failed",
    }
}

/// An MCP call waiting for (or decided by) the owner, with its confirmation.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct McpApproval {
    #[sqlx(flatten)]
    pub confirmation: Confirmation,
    /// What the client passes to `check_approval`; unguessable, and not the confirmation's id
    /// (which the prompt's buttons carry).
    pub handle: String,
    /// How the caller came in (`stdio`, `token phone`); with the confirmation's user, whose
    /// handle it is.
    pub caller_door: String,
    /// The client as the audit log names it.
    pub client: String,
    /// The agent whose tool it is (its autonomy cap applied).
    pub agent_id: String,
    /// The call's arguments, as JSON.
    pub arguments: String,
    pub run_state: McpRunState,
    /// The tool's answer once it ran.
    pub result: Option<String>,
    pub started_at: Option<i64>,
}

/// What a new waiting MCP call stores besides its confirmation.
#[derive(Clone, Debug)]
pub struct NewMcpApproval<'a> {
    pub handle: &'a str,
    pub caller_door: &'a str,
    pub client: &'a str,
    pub agent_id: &'a str,
    pub arguments: &'a str,
}

fn select() -> String {
    format!(
        "SELECT {COLUMNS}, handle, caller_door, client, agent_id, arguments, run_state, result, \
         started_at FROM confirmations JOIN mcp_approvals ON confirmation_id = id WHERE "
    )
}

impl Store {
    /// Stores a waiting MCP call: its confirmation (no turn), its prompt in the outbox (for
    /// the daemon's delivery worker, whichever process writes it) and this table's row,
    /// together. Returns the prompt's outbox id.
    pub async fn create_mcp_approval(
        &self,
        confirmation: &Confirmation,
        approval: &NewMcpApproval<'_>,
        prompt: &NewOutbox,
        now_ms: i64,
    ) -> StoreResult<i64> {
        let mut tx = self.begin().await?;
        let outbox_id = insert_outbox(&mut tx, prompt, now_ms).await?;
        sqlx::query(
            "INSERT INTO confirmations (id, channel, chat_id, thread_id, requester, user_id, tool,
               summary, prompt_outbox_id, status, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&confirmation.id)
        .bind(&confirmation.channel)
        .bind(&confirmation.chat_id)
        .bind(confirmation.thread_id.as_deref().unwrap_or(""))
        .bind(&confirmation.requester)
        .bind(confirmation.user_id)
        .bind(&confirmation.tool)
        .bind(&confirmation.summary)
        .bind(outbox_id)
        .bind(ConfirmationStatus::Pending)
        .bind(confirmation.created_at)
        .bind(confirmation.expires_at)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO mcp_approvals (confirmation_id, handle, caller_door, client, agent_id,
               arguments, run_state)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&confirmation.id)
        .bind(approval.handle)
        .bind(approval.caller_door)
        .bind(approval.client)
        .bind(approval.agent_id)
        .bind(approval.arguments)
        .bind(McpRunState::Waiting)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.waiting_changed();
        Ok(outbox_id)
    }

    /// The waiting MCP call of confirmation `id`.
    pub async fn mcp_approval(&self, id: &str) -> StoreResult<Option<McpApproval>> {
        let mut sql = Sql::new(&format!("{} id = ", select()));
        sql.bind(id.to_string());
        sql.fetch_optional(self).await
    }

    /// The waiting MCP call with `handle`, if it is this caller's (user and door).
    pub async fn mcp_approval_by_handle(
        &self,
        handle: &str,
        user_id: i64,
        door: &str,
    ) -> StoreResult<Option<McpApproval>> {
        let mut sql = Sql::new(&format!("{} handle = ", select()));
        sql.bind(handle.to_string())
            .push(" AND user_id = ")
            .bind(user_id)
            .push(" AND caller_door = ")
            .bind(door.to_string());
        sql.fetch_optional(self).await
    }

    /// Claims the run of an approved call: true for the one caller that may now run it, false
    /// when it is not approved or was claimed already.
    pub async fn start_mcp_run(&self, id: &str, now_ms: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE mcp_approvals SET run_state = $1, started_at = $2
             WHERE confirmation_id = $3 AND run_state = $4
               AND confirmation_id IN (SELECT id FROM confirmations WHERE status = $5)",
        )
        .bind(McpRunState::Running)
        .bind(now_ms)
        .bind(id)
        .bind(McpRunState::Waiting)
        .bind(ConfirmationStatus::Approved)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records the result of a run claimed with [`Store::start_mcp_run`].
    pub async fn finish_mcp_run(&self, id: &str, succeeded: bool, result: &str) -> StoreResult<()> {
        let state = if succeeded {
            McpRunState::Succeeded
        } else {
            McpRunState::Failed
        };
        sqlx::query(
            "UPDATE mcp_approvals SET run_state = $1, result = $2
             WHERE confirmation_id = $3 AND run_state = $4",
        )
        .bind(state)
        .bind(result)
        .bind(id)
        .bind(McpRunState::Running)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Withdraws a pending MCP call (its client went away) as `decided_by`, with `outcome`
    /// (its prompt edited to say so), in one transaction; false, with nothing written, when it
    /// was decided already.
    pub async fn withdraw_mcp_approval(
        &self,
        id: &str,
        decided_by: &str,
        outcome: &NewOutbox,
        now_ms: i64,
    ) -> StoreResult<bool> {
        let mut tx = self.begin().await?;
        let done = sqlx::query(
            "UPDATE confirmations SET status = $1, decided_by = $2, decided_at = $3
             WHERE id = $4 AND status = $5",
        )
        .bind(ConfirmationStatus::Denied)
        .bind(decided_by)
        .bind(now_ms)
        .bind(id)
        .bind(ConfirmationStatus::Pending)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        insert_outbox(&mut tx, outcome, now_ms).await?;
        tx.commit().await?;
        self.waiting_changed();
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
