//! The `turn_plans` table: the checklist a turn keeps with `update_plan` (issue 48), its latest
//! revision stored with the turn, so it survives a restart, `/plan` shows it, and the chat
//! message that shows it is found again (docs/architecture.md, "What a channel sees of a running
//! turn").

use serde::{Deserialize, Serialize};

use super::outbox::insert_outbox;
use super::query::Sql;
use super::{NewOutbox, Store, StoreError, StoreResult, text_enum};

// A plain comment: the tool takes this as an argument, and a doc comment would become the
// description of every field that uses it.
text_enum! {
    // Where a step of a plan stands.
    #[derive(Serialize, Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum StepStatus {
        Pending = "pending",
        InProgress = "in_progress",
        Done = "done",
        Skipped = "skipped",
        Failed = "failed",
    }
}

impl StepStatus {
    /// Whether the step is over: done, skipped or failed.
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            StepStatus::Done | StepStatus::Skipped | StepStatus::Failed
        )
    }
}

/// One step of a plan, as stored (JSON in `steps`) and as clients read it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    /// What the step does, in a few words.
    pub step: String,
    pub status: StepStatus,
    /// A short note: what came out, or why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Plan mode: the tools the step's executor is offered (empty for `update_plan` plans).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Plan mode: what the step's executor answered, handed to later steps and the final answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Plan mode: the step's runs that failed (a step is run at most twice).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: u8,
}

fn is_zero(n: &u8) -> bool {
    *n == 0
}

impl PlanStep {
    /// A step as the model or the planner names it, not started.
    pub fn new(step: String, status: StepStatus, note: Option<String>) -> Self {
        Self {
            step,
            status,
            note,
            tools: Vec::new(),
            result: None,
            failures: 0,
        }
    }
}

/// A turn's plan at its latest revision.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub turn_id: i64,
    pub conversation_id: i64,
    /// 1 for the first version, one more for each update.
    pub revision: i64,
    pub explanation: Option<String>,
    pub steps: Vec<PlanStep>,
    /// The outbox row of the chat message that shows the plan, once there is one.
    pub message_outbox_id: Option<i64>,
    pub updated_at: i64,
}

impl Plan {
    /// Steps done, and steps in all.
    pub fn progress(&self) -> (usize, usize) {
        let done = self
            .steps
            .iter()
            .filter(|s| s.status == StepStatus::Done)
            .count();
        (done, self.steps.len())
    }
}

#[derive(sqlx::FromRow)]
struct PlanRow {
    turn_id: i64,
    conversation_id: i64,
    revision: i64,
    explanation: Option<String>,
    steps: String,
    message_outbox_id: Option<i64>,
    updated_at: i64,
}

const COLUMNS: &str =
    "turn_id, conversation_id, revision, explanation, steps, message_outbox_id, updated_at";

impl TryFrom<PlanRow> for Plan {
    type Error = StoreError;

    fn try_from(row: PlanRow) -> StoreResult<Self> {
        Ok(Plan {
            turn_id: row.turn_id,
            conversation_id: row.conversation_id,
            revision: row.revision,
            explanation: row.explanation,
            steps: serde_json::from_str(&row.steps)?,
            message_outbox_id: row.message_outbox_id,
            updated_at: row.updated_at,
        })
    }
}

/// A new revision of a turn's plan, checked by the tool.
#[derive(Clone, Debug)]
pub struct PlanRevision<'a> {
    pub turn_id: i64,
    pub conversation_id: i64,
    /// The revision this one replaces; 0 for a turn's first plan.
    pub replaces: i64,
    pub explanation: Option<&'a str>,
    pub steps: &'a [PlanStep],
}

impl Store {
    /// The plan of turn `turn_id`, if it has one.
    pub async fn plan_of_turn(&self, turn_id: i64) -> StoreResult<Option<Plan>> {
        let mut sql = Sql::new(&format!(
            "SELECT {COLUMNS} FROM turn_plans WHERE turn_id = "
        ));
        sql.bind(turn_id);
        let row: Option<PlanRow> = sql.fetch_optional(self).await?;
        row.map(Plan::try_from).transpose()
    }

    /// The plan of the conversation's latest turn that made one.
    pub async fn latest_plan(&self, conversation_id: i64) -> StoreResult<Option<Plan>> {
        let mut sql = Sql::new(&format!(
            "SELECT {COLUMNS} FROM turn_plans WHERE conversation_id = "
        ));
        sql.bind(conversation_id)
            .push(" ORDER BY turn_id DESC LIMIT 1");
        let row: Option<PlanRow> = sql.fetch_optional(self).await?;
        row.map(Plan::try_from).transpose()
    }

    /// Stores `revision` as the turn's plan, if the stored one is still the revision it
    /// replaces (two calls of one answer race: one wins, the other is told to look again).
    /// The new revision number, or `None` when another revision came first.
    pub async fn save_plan(
        &self,
        revision: &PlanRevision<'_>,
        now: i64,
    ) -> StoreResult<Option<i64>> {
        let steps = serde_json::to_string(revision.steps)?;
        let next = revision.replaces + 1;
        let sql = if revision.replaces == 0 {
            let mut sql = Sql::insert(
                "turn_plans",
                "turn_id, conversation_id, revision, explanation, steps, updated_at",
            );
            sql.value(revision.turn_id)
                .value(revision.conversation_id)
                .value(next)
                .value(revision.explanation.map(str::to_string))
                .value(steps)
                .value(now)
                .push(") ON CONFLICT (turn_id) DO NOTHING RETURNING revision");
            sql
        } else {
            let mut sql = Sql::new("UPDATE turn_plans SET revision = ");
            sql.bind(next)
                .push(", explanation = ")
                .bind(revision.explanation.map(str::to_string))
                .push(", steps = ")
                .bind(steps)
                .push(", updated_at = ")
                .bind(now)
                .push(" WHERE turn_id = ")
                .bind(revision.turn_id)
                .push(" AND revision = ")
                .bind(revision.replaces)
                .push(" RETURNING revision");
            sql
        };
        let row: Option<(i64,)> = sql.write_returning(self).await?;
        Ok(row.map(|(revision,)| revision))
    }

    /// The text the plan message whose outbox row is `message` was last given (its own, or its
    /// latest revision's) and when that was queued or sent: where a resumed turn's plan takes
    /// up its pace.
    pub async fn plan_message_text(&self, message: i64) -> StoreResult<Option<(String, i64)>> {
        let mut sql =
            Sql::new("SELECT payload, COALESCE(sent_at, next_attempt_at) FROM outbox WHERE id = ");
        sql.bind(message)
            .push(" OR (kind = ")
            .bind(super::outbox::StoredKind::Revise)
            .push(" AND target = ")
            .bind(message.to_string())
            .push(") ORDER BY id DESC LIMIT 1");
        let row: Option<(String, i64)> = sql.fetch_optional(self).await?;
        let Some((payload, at)) = row else {
            return Ok(None);
        };
        let message: hearth_channel::OutboundMessage = serde_json::from_str(&payload)?;
        Ok(Some((message.text, at)))
    }

    /// Queues `message`, the plan's first showing in its chat, and records it as the plan's
    /// message, in one transaction: after a crash the plan has a message or none, never two.
    /// The message's outbox id; `None` when the plan already has one (or the turn none).
    pub async fn show_plan_message(
        &self,
        turn_id: i64,
        message: &NewOutbox,
        now: i64,
    ) -> StoreResult<Option<i64>> {
        let mut tx = self.begin().await?;
        let free: Option<(i64,)> = sqlx::query_as(
            "SELECT turn_id FROM turn_plans WHERE turn_id = $1 AND message_outbox_id IS NULL",
        )
        .bind(turn_id)
        .fetch_optional(&mut *tx)
        .await?;
        if free.is_none() {
            tx.rollback().await?;
            return Ok(None);
        }
        let id = insert_outbox(&mut tx, message, now).await?;
        sqlx::query("UPDATE turn_plans SET message_outbox_id = $1 WHERE turn_id = $2")
            .bind(id)
            .bind(turn_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::{on_both_backends, stored_message};

    fn step(text: &str, status: StepStatus) -> PlanStep {
        PlanStep::new(text.into(), status, None)
    }

    async fn plans_are_revised_in_turn_and_show_one_message(store: Store) {
        let store = &store;
        let (inbox, conversation) = stored_message(store, 1, "c").await;
        let turn = store
            .start_turn(
                inbox,
                &conversation,
                None,
                ("general", Some(1)),
                None,
                &crate::provider::ChatMessage::user("hi"),
                1,
            )
            .await
            .expect("turn");
        assert_eq!(store.plan_of_turn(turn.id).await.expect("read"), None);
        let steps = [
            step("find flats", StepStatus::InProgress),
            step("compare", StepStatus::Pending),
        ];
        let first = PlanRevision {
            turn_id: turn.id,
            conversation_id: conversation.id,
            replaces: 0,
            explanation: Some("three flats"),
            steps: &steps,
        };
        assert_eq!(store.save_plan(&first, 10).await.expect("save"), Some(1));
        // A second first revision (a racing call) does not take.
        assert_eq!(store.save_plan(&first, 11).await.expect("save"), None);
        let steps = [
            step("find flats", StepStatus::Done),
            step("compare", StepStatus::InProgress),
        ];
        let second = PlanRevision {
            replaces: 1,
            explanation: None,
            steps: &steps,
            ..first
        };
        assert_eq!(store.save_plan(&second, 12).await.expect("save"), Some(2));
        assert_eq!(store.save_plan(&second, 13).await.expect("save"), None);
        let plan = store
            .plan_of_turn(turn.id)
            .await
            .expect("read")
            .expect("plan");
        assert_eq!(plan.revision, 2);
        assert_eq!(plan.steps, steps);
        assert_eq!(plan.progress(), (1, 2));
        assert_eq!(plan.explanation, None);
        let latest = store.latest_plan(conversation.id).await.expect("read");
        assert_eq!(latest.as_ref(), Some(&plan));

        let message = NewOutbox {
            inbox_id: None,
            seq: 0,
            channel: "memory".into(),
            kind: crate::store::OutboxKind::Send,
            message: hearth_channel::OutboundMessage::text(
                hearth_channel::ChatRef::new("c"),
                "plan",
            ),
        };
        let id = store
            .show_plan_message(turn.id, &message, 14)
            .await
            .expect("show")
            .expect("first showing");
        assert_eq!(
            store
                .show_plan_message(turn.id, &message, 15)
                .await
                .expect("show"),
            None,
            "one message per plan"
        );
        let plan = store
            .plan_of_turn(turn.id)
            .await
            .expect("read")
            .expect("plan");
        assert_eq!(plan.message_outbox_id, Some(id));
        assert_eq!(
            store.plan_message_text(id).await.expect("text"),
            Some(("plan".to_string(), 14))
        );
        let revision = NewOutbox {
            kind: crate::store::OutboxKind::Revise { message: id },
            message: hearth_channel::OutboundMessage::text(
                hearth_channel::ChatRef::new("c"),
                "plan, revised",
            ),
            ..message
        };
        store
            .enqueue_outbox_due(&revision, 16, 18)
            .await
            .expect("revise");
        assert_eq!(
            store.plan_message_text(id).await.expect("text"),
            Some(("plan, revised".to_string(), 18))
        );
    }

    on_both_backends!(
        plans_on_sqlite,
        plans_on_postgres,
        plans_are_revised_in_turn_and_show_one_message
    );
}
