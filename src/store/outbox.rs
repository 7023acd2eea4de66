//! The outbox: replies and edits committed with the turn that produced them, delivered in order
//! per chat by the delivery worker, retried until the platform takes them.
//!
//! A reply is delivered as the parts of its outbound plan (`hearth_channel::plan`), stored in
//! `outbox_parts` when the worker first takes the row and recorded one by one as the platform
//! accepts them: a retry or a restart resumes at the first part not yet shown.

use hearth_channel::{MessageRef, OutboundMessage, PlannedPart};
use sqlx::FromRow;
use sqlx::any::AnyRow;

use super::{Batch, Store, StoreError, StoreResult, WriteTx, text_enum};

#[derive(Clone, Debug, PartialEq)]
pub enum OutboxKind {
    /// A new message (or the final text of a streamed preview, via `replaces`).
    Send,
    /// New text and buttons for a message sent earlier.
    Edit { target: MessageRef },
    /// A confirmation's outcome, added under its prompt: the message outbox row `prompt`
    /// delivered; this row's text is the line to add. Which platform message that is, is looked
    /// up when this row is delivered, not when the decision is made: a quick press can arrive
    /// while the prompt's send is still being answered. The prompt is earlier in the same chat's
    /// queue, so it has gone out (or failed for good) by then.
    Outcome { prompt: i64 },
    /// New text for the message outbox row `message` delivered (a turn's plan, edited as its
    /// steps change). Like an outcome, the platform message is looked up when this row is
    /// delivered; if the edit cannot be made, the text goes out as a new message instead.
    Revise { message: i64 },
}

/// A reply to be written to the outbox.
#[derive(Clone, Debug, PartialEq)]
pub struct NewOutbox {
    /// The inbox entry this answers; `(inbox_id, seq)` is unique so a reply is stored once.
    pub inbox_id: Option<i64>,
    pub seq: i64,
    pub channel: String,
    pub kind: OutboxKind,
    pub message: OutboundMessage,
}

/// A stored outbox row waiting for delivery.
#[derive(Clone, Debug, PartialEq)]
pub struct OutboxItem {
    pub id: i64,
    pub inbox_id: Option<i64>,
    pub channel: String,
    pub chat_key: String,
    pub kind: OutboxKind,
    pub message: OutboundMessage,
    pub attempts: i64,
}

text_enum! {
    /// Where one part of a reply stands.
    pub enum PartStatus {
        Pending = "pending",
        /// Handed to the platform; still so at start means the process died during the call.
        Sending = "sending",
        Sent = "sent",
        Failed = "failed",
    }
}

text_enum! {
    /// The `kind` column: which [`OutboxKind`] a row holds, its `target` column the rest.
    pub(super) enum StoredKind {
        Send = "send",
        Edit = "edit",
        Outcome = "outcome",
        Revise = "revise",
    }
}

/// One stored part of a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxPart {
    pub part: PlannedPart,
    pub status: PartStatus,
    /// Where the platform put it, once sent.
    pub platform_message_id: Option<String>,
    /// It was in flight when the process died and was sent again: the chat may show it twice.
    pub in_doubt: bool,
}

/// Deliveries are ordered per chat (and thread): this is their key.
pub fn chat_key(channel: &str, message: &OutboundMessage) -> String {
    format!(
        "{channel}\u{1f}{}\u{1f}{}",
        message.chat.chat_id,
        message.chat.thread_id.as_deref().unwrap_or("")
    )
}

pub(super) async fn insert_outbox(
    tx: &mut WriteTx,
    item: &NewOutbox,
    now_ms: i64,
) -> StoreResult<i64> {
    insert_outbox_due(tx, item, now_ms, now_ms).await
}

/// [`insert_outbox`] of a row not delivered before `due_ms`.
async fn insert_outbox_due(
    tx: &mut WriteTx,
    item: &NewOutbox,
    now_ms: i64,
    due_ms: i64,
) -> StoreResult<i64> {
    let row = OutboxRow::of(item)?;
    Ok(sqlx::query_scalar(
        "INSERT INTO outbox (inbox_id, seq, channel, chat_key, kind, payload, target, status, next_attempt_at, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9) RETURNING id",
    )
    .bind(item.inbox_id)
    .bind(item.seq)
    .bind(&item.channel)
    .bind(row.chat_key)
    .bind(row.kind)
    .bind(row.payload)
    .bind(row.target)
    .bind(due_ms.max(now_ms))
    .bind(now_ms)
    .fetch_one(&mut **tx)
    .await?)
}

/// Adds `item` to `batch` as [`insert_outbox`] does, but only while turn `turn_id` is running
/// or suspended (see [`Store::finish_turn`]); its id comes back as a row when it is queued.
pub(super) fn push_reply_of_turn(
    batch: &mut Batch,
    item: &NewOutbox,
    turn_id: i64,
    now_ms: i64,
) -> StoreResult<()> {
    let row = OutboxRow::of(item)?;
    batch
        .push(
            "INSERT INTO outbox (inbox_id, seq, channel, chat_key, kind, payload, target, status, next_attempt_at, created_at)
             SELECT $1, $2, $3, $4, $5, $6, $7, 'pending', $8, $8
             WHERE EXISTS (SELECT 1 FROM turns WHERE id = $9 AND status IN ('running', 'suspended'))
             RETURNING id",
        )
        .bind(item.inbox_id)
        .bind(item.seq)
        .bind(item.channel.as_str())
        .bind(row.chat_key)
        .bind(row.kind)
        .bind(row.payload)
        .bind(row.target)
        .bind(now_ms)
        .bind(turn_id);
    Ok(())
}

/// What a new outbox row stores of its item, beside the item's own fields.
struct OutboxRow {
    chat_key: String,
    kind: StoredKind,
    payload: String,
    target: Option<String>,
}

impl OutboxRow {
    fn of(item: &NewOutbox) -> StoreResult<Self> {
        let (kind, target) = match &item.kind {
            OutboxKind::Send => (StoredKind::Send, None),
            OutboxKind::Edit { target } => (StoredKind::Edit, Some(serde_json::to_string(target)?)),
            OutboxKind::Outcome { prompt } => (StoredKind::Outcome, Some(prompt.to_string())),
            OutboxKind::Revise { message } => (StoredKind::Revise, Some(message.to_string())),
        };
        Ok(Self {
            chat_key: chat_key(&item.channel, &item.message),
            kind,
            payload: serde_json::to_string(&item.message)?,
            target,
        })
    }
}

/// Queues `replies` and marks inbox entry `inbox_id` handled, inside the caller's transaction:
/// an event's answer and its completion commit together. Returns the replies' outbox ids.
pub(super) async fn reply_and_finish(
    tx: &mut WriteTx,
    inbox_id: i64,
    replies: &[NewOutbox],
    now_ms: i64,
) -> StoreResult<Vec<i64>> {
    let mut ids = Vec::with_capacity(replies.len());
    for reply in replies {
        ids.push(insert_outbox(tx, reply, now_ms).await?);
    }
    sqlx::query("UPDATE inbox SET status = 'done', processed_at = $1 WHERE id = $2")
        .bind(now_ms)
        .bind(inbox_id)
        .execute(&mut **tx)
        .await?;
    Ok(ids)
}

/// The columns of [`ItemRow`].
const ITEM_COLUMNS: &str = "id, inbox_id, channel, chat_key, kind, payload, target, attempts";

/// An `outbox` row as read; its kind, target and payload become an [`OutboxItem`].
#[derive(sqlx::FromRow)]
struct ItemRow {
    id: i64,
    inbox_id: Option<i64>,
    channel: String,
    chat_key: String,
    kind: StoredKind,
    payload: String,
    target: Option<String>,
    attempts: i64,
}

/// A pending row and when it is due.
#[derive(sqlx::FromRow)]
struct PendingRow {
    #[sqlx(flatten)]
    item: ItemRow,
    next_attempt_at: i64,
}

impl TryFrom<ItemRow> for OutboxItem {
    type Error = StoreError;

    fn try_from(row: ItemRow) -> StoreResult<Self> {
        // An edit or outcome without its target has never been written; read as a plain
        // send, as before kinds had targets.
        let kind = match (row.kind, row.target) {
            (StoredKind::Edit, Some(target)) => OutboxKind::Edit {
                target: serde_json::from_str(&target)?,
            },
            (StoredKind::Outcome, Some(prompt)) => OutboxKind::Outcome {
                prompt: serde_json::from_str(&prompt)?,
            },
            (StoredKind::Revise, Some(message)) => OutboxKind::Revise {
                message: serde_json::from_str(&message)?,
            },
            _ => OutboxKind::Send,
        };
        Ok(OutboxItem {
            id: row.id,
            inbox_id: row.inbox_id,
            channel: row.channel,
            chat_key: row.chat_key,
            kind,
            message: serde_json::from_str(&row.payload)?,
            attempts: row.attempts,
        })
    }
}

/// An `outbox_parts` row as read.
#[derive(sqlx::FromRow)]
struct PartRow {
    idx: i64,
    text: String,
    status: PartStatus,
    platform_message_id: Option<String>,
    in_doubt: i64,
}

async fn parts_of(conn: &mut sqlx::AnyConnection, id: i64) -> StoreResult<Vec<OutboxPart>> {
    let rows: Vec<PartRow> = sqlx::query_as(
        "SELECT idx, text, status, platform_message_id, in_doubt FROM outbox_parts WHERE outbox_id = $1 ORDER BY idx",
    )
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    let count = rows.len();
    rows.into_iter()
        .map(|row| {
            let index = usize::try_from(row.idx)
                .map_err(|_| StoreError::Corrupt(format!("outbox part index {}", row.idx)))?;
            Ok(OutboxPart {
                part: PlannedPart::new(index, count, row.text),
                status: row.status,
                platform_message_id: row.platform_message_id,
                in_doubt: row.in_doubt != 0,
            })
        })
        .collect()
}

/// Adds to `batch` the planned parts of row `id`, the first marked as being sent (the caller
/// sends it next), all in one statement, and only if the row can be taken now (pending and due
/// at `now_ms`) and has no parts yet. Each part stored returns a row.
fn push_planned_parts(batch: &mut Batch, id: i64, now_ms: i64, planned: &[String]) {
    let values: Vec<String> = (0..planned.len())
        .map(|index| {
            let status = if index == 0 {
                PartStatus::Sending
            } else {
                PartStatus::Pending
            };
            format!("($1, {index}, ${}, '{}')", index + 3, status.as_str())
        })
        .collect();
    batch.push(&format!(
        "INSERT INTO outbox_parts (outbox_id, idx, text, status)
         SELECT column1, column2, column3, column4 FROM (VALUES {}) AS planned
         WHERE EXISTS (SELECT 1 FROM outbox WHERE id = $1 AND status = 'pending' AND next_attempt_at <= $2)
         AND NOT EXISTS (SELECT 1 FROM outbox_parts WHERE outbox_id = $1)
         RETURNING idx",
        values.join(", ")
    ));
    batch.bind(id).bind(now_ms);
    for text in planned {
        batch.bind(text.as_str());
    }
}

/// The parts [`push_planned_parts`] stores, as stored.
fn new_parts(planned: &[String]) -> Vec<OutboxPart> {
    planned
        .iter()
        .enumerate()
        .map(|(index, text)| OutboxPart {
            part: PlannedPart::new(index, planned.len(), text.clone()),
            status: if index == 0 {
                PartStatus::Sending
            } else {
                PartStatus::Pending
            },
            platform_message_id: None,
            in_doubt: false,
        })
        .collect()
}

const SET_PART_STATUS: &str =
    "UPDATE outbox_parts SET status = $1 WHERE outbox_id = $2 AND idx = $3";

async fn set_part_status(
    conn: &mut sqlx::AnyConnection,
    id: i64,
    index: usize,
    status: PartStatus,
) -> StoreResult<()> {
    sqlx::query(SET_PART_STATUS)
        .bind(status)
        .bind(id)
        .bind(super::to_i64(index))
        .execute(&mut *conn)
        .await?;
    Ok(())
}

impl Store {
    /// Stores replies that belong to no turn (notices, edits after a decision).
    pub async fn enqueue_outbox(&self, items: &[NewOutbox], now_ms: i64) -> StoreResult<Vec<i64>> {
        let mut tx = self.begin().await?;
        let mut ids = Vec::with_capacity(items.len());
        for item in items {
            ids.push(insert_outbox(&mut tx, item, now_ms).await?);
        }
        tx.commit().await?;
        Ok(ids)
    }

    /// Stores one reply that belongs to no turn, delivered no sooner than `due_ms` (a plan's
    /// edit paced behind the one before it); the chat's later rows wait behind it.
    pub async fn enqueue_outbox_due(
        &self,
        item: &NewOutbox,
        now_ms: i64,
        due_ms: i64,
    ) -> StoreResult<i64> {
        let mut tx = self.begin().await?;
        let id = insert_outbox_due(&mut tx, item, now_ms, due_ms).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Pending rows of `channels`, oldest first, at most `limit`. Rows not yet due are included
    /// so the worker can keep a chat's later rows behind an earlier one that is waiting to be
    /// retried. Other channels' rows are left to the process that runs those channels.
    pub async fn pending_outbox(
        &self,
        limit: usize,
        channels: &[String],
    ) -> StoreResult<Vec<(OutboxItem, i64)>> {
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {ITEM_COLUMNS}, next_attempt_at
             FROM outbox WHERE status = 'pending' AND channel IN ({}) ORDER BY id LIMIT $1",
            super::placeholders(2, channels.len())
        );
        let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(super::to_i64(limit));
        for channel in channels {
            query = query.bind(channel);
        }
        let rows: Vec<PendingRow> = query.fetch_all(self.pool()).await?;
        rows.into_iter()
            .map(|row| Ok((OutboxItem::try_from(row.item)?, row.next_attempt_at)))
            .collect()
    }

    /// Takes a due row for delivery, before any platform call: marks it `sending` so a death
    /// during the call can be told apart at the next start. For a reply, stores `planned` (the
    /// texts of its parts) the first time, marks the first part not yet sent as `sending` too,
    /// and returns the parts; an edit has none. `None`: another lane took the row (or finished
    /// it) since it was read, or it now waits for a retry; leave it alone.
    pub async fn start_outbox_delivery(
        &self,
        id: i64,
        now_ms: i64,
        planned: &[String],
    ) -> StoreResult<Option<Vec<OutboxPart>>> {
        // The first delivery of a reply (nearly all of them) is one batch: its parts stored
        // if the row can be taken and has none yet, then the row taken, returning how many
        // parts it has. Both statements test the row as it was before the batch.
        let mut batch = self.batch();
        if !planned.is_empty() {
            push_planned_parts(&mut batch, id, now_ms, planned);
        }
        batch
            .push(
                "UPDATE outbox SET status = 'sending' WHERE id = $1 AND status = 'pending' AND next_attempt_at <= $2
                 RETURNING (SELECT COUNT(*) FROM outbox_parts WHERE outbox_id = $1) AS stored_parts",
            )
            .bind(id)
            .bind(now_ms);
        let rows = self.write_batch(batch).await?;
        // Not taken: nothing was stored either.
        let Some(taken) = rows.last() else {
            return Ok(None);
        };
        let (stored_parts,) = <(i64,) as FromRow<AnyRow>>::from_row(taken)?;
        if rows.len() > 1 || stored_parts == 0 {
            // Stored now (the first part marked as being sent), or an edit, which has none.
            return Ok(Some(new_parts(planned)));
        }
        // Parts an earlier attempt stored: resume at the first one not sent. The row is this
        // lane's now; a death before this commits leaves it `sending` with no part in flight,
        // which the next start queues again without a doubt.
        let mut tx = self.begin().await?;
        let mut parts = parts_of(&mut tx, id).await?;
        if let Some(next) = parts.iter_mut().find(|p| p.status != PartStatus::Sent) {
            set_part_status(&mut tx, id, next.part.index, PartStatus::Sending).await?;
            next.status = PartStatus::Sending;
        }
        tx.commit().await?;
        Ok(Some(parts))
    }

    /// Records that the platform accepted part `index` of row `id` as `message_id`. Marks the
    /// part `next` as being sent in the same write, or, after the last part, the row as sent
    /// with this (the last) part's id, which later edits and button updates use.
    pub async fn record_part_sent(
        &self,
        id: i64,
        index: usize,
        message_id: &str,
        next: Option<usize>,
        now_ms: i64,
    ) -> StoreResult<()> {
        // One batch: this runs once per part sent, with a reply's delivery waiting on it.
        let mut batch = self.batch();
        batch
            .push(
                "UPDATE outbox_parts SET status = 'sent', platform_message_id = $1, sent_at = $2
                 WHERE outbox_id = $3 AND idx = $4",
            )
            .bind(message_id)
            .bind(now_ms)
            .bind(id)
            .bind(super::to_i64(index));
        match next {
            Some(next) => batch
                .push(SET_PART_STATUS)
                .bind(PartStatus::Sending)
                .bind(id)
                .bind(super::to_i64(next)),
            None => batch
                .push(
                    "UPDATE outbox SET status = 'sent', platform_message_id = $1, sent_at = $2, attempts = attempts + 1
                     WHERE id = $3",
                )
                .bind(message_id)
                .bind(now_ms)
                .bind(id),
        };
        self.write_batch(batch).await?;
        Ok(())
    }

    /// A temporary failure of part `index`: the part waits again, and the row is retried from
    /// it at `next_attempt_at`.
    ///
    /// With `in_doubt` (the platform may have shown the part before the failure), the part and
    /// its reply are flagged as such, as after a kill in the middle of a send.
    pub async fn retry_part(
        &self,
        id: i64,
        index: usize,
        error: &str,
        next_attempt_at: i64,
        in_doubt: bool,
    ) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        set_part_status(&mut tx, id, index, PartStatus::Pending).await?;
        sqlx::query(
            "UPDATE outbox SET status = 'pending', attempts = attempts + 1, last_error = $1, next_attempt_at = $2 WHERE id = $3",
        )
        .bind(error)
        .bind(next_attempt_at)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if in_doubt {
            sqlx::query("UPDATE outbox SET in_doubt = 1 WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            sqlx::query("UPDATE outbox_parts SET in_doubt = 1 WHERE outbox_id = $1 AND idx = $2")
                .bind(id)
                .bind(i64::try_from(index).unwrap_or(i64::MAX))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Part `index` was refused for good: the part and its reply are failed (later parts are
    /// not sent).
    pub async fn fail_part(&self, id: i64, index: usize, error: &str) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        set_part_status(&mut tx, id, index, PartStatus::Failed).await?;
        sqlx::query("UPDATE outbox SET status = 'failed', attempts = attempts + 1, last_error = $1 WHERE id = $2")
            .bind(error)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The stored parts of row `id`, in order (none for an edit, or before its first delivery).
    pub async fn outbox_parts(&self, id: i64) -> StoreResult<Vec<OutboxPart>> {
        let mut conn = self.pool().acquire().await?;
        parts_of(&mut conn, id).await
    }

    /// At start: deliveries of `channels` interrupted by a crash go back to pending and resume
    /// at their first part not yet sent. A part that was in flight is sent again and flagged in
    /// doubt, and so is its row (as are interrupted edits and rows from before parts were
    /// recorded, which may have been shown whole). Returns how many rows were in doubt. Only this
    /// process's channels: another process may be sending its own rows right now.
    pub async fn requeue_interrupted_deliveries(&self, channels: &[String]) -> StoreResult<u64> {
        if channels.is_empty() {
            return Ok(0);
        }
        let mine = format!("channel IN ({})", super::placeholders(1, channels.len()));
        let statements = [
            format!(
                "UPDATE outbox SET in_doubt = 1 WHERE status = 'sending' AND {mine} AND (
                     kind = 'edit'
                     OR NOT EXISTS (SELECT 1 FROM outbox_parts p WHERE p.outbox_id = outbox.id)
                     OR EXISTS (SELECT 1 FROM outbox_parts p WHERE p.outbox_id = outbox.id AND p.status = 'sending'))"
            ),
            format!(
                "UPDATE outbox_parts SET status = 'pending', in_doubt = 1 WHERE status = 'sending'
                 AND outbox_id IN (SELECT id FROM outbox WHERE status = 'sending' AND {mine})"
            ),
            format!("UPDATE outbox SET status = 'pending' WHERE status = 'sending' AND {mine}"),
        ];
        let mut tx = self.begin().await?;
        let mut in_doubt = 0;
        for (n, sql) in statements.into_iter().enumerate() {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for channel in channels {
                query = query.bind(channel);
            }
            let done = query.execute(&mut *tx).await?;
            if n == 0 {
                in_doubt = done.rows_affected();
            }
        }
        tx.commit().await?;
        Ok(in_doubt)
    }

    pub async fn mark_outbox_sent(
        &self,
        id: i64,
        platform_message_id: Option<&str>,
        now_ms: i64,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE outbox SET status = 'sent', platform_message_id = $1, sent_at = $2, attempts = attempts + 1
             WHERE id = $3",
        )
        .bind(platform_message_id)
        .bind(now_ms)
        .bind(id)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }

    /// Records that the message outbox row `id` delivered now shows at `platform_message_id`:
    /// its edit failed for good and the text went out as a new message, which later edits of
    /// row `id` then edit.
    pub async fn move_outbox_message(&self, id: i64, platform_message_id: &str) -> StoreResult<()> {
        sqlx::query("UPDATE outbox SET platform_message_id = $1 WHERE id = $2")
            .bind(platform_message_id)
            .bind(id)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(())
    }

    /// A temporary failure of a row without parts (an edit): tried again at `next_attempt_at`,
    /// flagged `in_doubt` when the platform may have taken it.
    pub async fn mark_outbox_retry(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: i64,
        in_doubt: bool,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE outbox SET status = 'pending', attempts = attempts + 1, last_error = $1, next_attempt_at = $2,
             in_doubt = CASE WHEN $3 THEN 1 ELSE in_doubt END WHERE id = $4",
        )
            .bind(error)
            .bind(next_attempt_at)
            .bind(in_doubt)
            .bind(id)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(())
    }

    pub async fn mark_outbox_failed(&self, id: i64, error: &str) -> StoreResult<()> {
        sqlx::query("UPDATE outbox SET status = 'failed', attempts = attempts + 1, last_error = $1 WHERE id = $2")
            .bind(error)
            .bind(id)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(())
    }

    /// A stored outbox message as its last part shows it (the part with the buttons, which is
    /// the one a later edit replaces) and, once delivered, where that part landed.
    pub async fn outbox_message(
        &self,
        id: i64,
    ) -> StoreResult<Option<(OutboundMessage, Option<MessageRef>)>> {
        let row: Option<(String, Option<String>)> =
            sqlx::query_as("SELECT payload, platform_message_id FROM outbox WHERE id = $1")
                .bind(id)
                .fetch_optional(self.pool())
                .await?;
        let Some((payload, platform_message_id)) = row else {
            return Ok(None);
        };
        let mut message: OutboundMessage = serde_json::from_str(&payload)?;
        if let Some(last) = self.outbox_parts(id).await?.pop() {
            message.text = last.part.text;
        }
        let reference = platform_message_id.map(|message_id| MessageRef {
            chat: message.chat.clone(),
            message_id,
        });
        Ok(Some((message, reference)))
    }

    /// The platform reference of a delivered outbox row (to edit it later).
    pub async fn outbox_message_ref(&self, id: i64) -> StoreResult<Option<MessageRef>> {
        let row: Option<(String, Option<String>)> = sqlx::query_as(
            "SELECT payload, platform_message_id FROM outbox WHERE id = $1 AND status = 'sent'",
        )
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        let Some((payload, Some(message_id))) = row else {
            return Ok(None);
        };
        let message: hearth_channel::OutboundMessage = serde_json::from_str(&payload)?;
        Ok(Some(MessageRef {
            chat: message.chat,
            message_id,
        }))
    }

    /// Replies not yet delivered: waiting, and being sent right now.
    pub async fn outbox_depth(&self) -> StoreResult<i64> {
        Ok(
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM outbox WHERE status IN ('pending', 'sending')",
            )
            .fetch_one(self.pool())
            .await?,
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::store::test_support::on_both_backends;
    use hearth_channel::ChatRef;

    use super::*;

    fn reply(text: &str) -> NewOutbox {
        NewOutbox {
            inbox_id: None,
            seq: 0,
            channel: "test".into(),
            kind: OutboxKind::Send,
            message: OutboundMessage::text(ChatRef::new("chat"), text),
        }
    }

    fn statuses(parts: &[OutboxPart]) -> Vec<PartStatus> {
        parts.iter().map(|p| p.status).collect()
    }

    /// A delivery's start as the lanes use it: the first takes the row and stores its parts,
    /// the first being sent; a second lane, or a row not yet due, gets nothing and stores
    /// nothing; after a failed part the retry resumes at that part.
    async fn delivery_starts(store: Store) {
        let planned = vec!["one".to_string(), "two".to_string()];
        let ids = store
            .enqueue_outbox(&[reply("one two"), reply("later")], 100)
            .await
            .expect("enqueue");
        let (id, later) = (ids[0], ids[1]);

        let parts = store
            .start_outbox_delivery(id, 100, &planned)
            .await
            .expect("start")
            .expect("taken");
        assert_eq!(statuses(&parts), [PartStatus::Sending, PartStatus::Pending]);
        assert_eq!(store.outbox_parts(id).await.expect("parts"), parts);
        assert!(
            store
                .start_outbox_delivery(id, 100, &planned)
                .await
                .expect("start again")
                .is_none(),
            "another lane has it"
        );

        store
            .record_part_sent(id, 0, "m1", Some(1), 101)
            .await
            .expect("first part sent");
        store
            .retry_part(id, 1, "flood", 200, false)
            .await
            .expect("second part waits");
        assert!(
            store
                .start_outbox_delivery(id, 150, &planned)
                .await
                .expect("start early")
                .is_none(),
            "not due yet"
        );
        let resumed = store
            .start_outbox_delivery(id, 200, &planned)
            .await
            .expect("resume")
            .expect("taken again");
        assert_eq!(statuses(&resumed), [PartStatus::Sent, PartStatus::Sending]);
        assert_eq!(resumed[0].platform_message_id.as_deref(), Some("m1"));

        // An edit (nothing planned) has no parts.
        let edit = store
            .start_outbox_delivery(later, 300, &[])
            .await
            .expect("start")
            .expect("taken");
        assert!(edit.is_empty());
        assert!(store.outbox_parts(later).await.expect("parts").is_empty());
        store.close().await;
    }

    on_both_backends!(
        a_delivery_starts_once_and_resumes_at_the_part_that_failed_on_sqlite,
        a_delivery_starts_once_and_resumes_at_the_part_that_failed_on_postgres,
        delivery_starts
    );
}
