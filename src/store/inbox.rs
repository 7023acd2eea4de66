//! The inbox: every inbound event, stored once, before the platform cursor moves.

use hearth_channel::Inbound;

use super::{Store, StoreResult, text_enum};

text_enum! {
    /// Where an inbox entry stands.
    pub enum InboxStatus {
        /// Not yet handled: the dispatcher's work.
        Pending = "pending",
        Done = "done",
        Failed = "failed",
    }
}

/// A stored inbound event.
#[derive(Clone, Debug)]
pub struct InboxEntry {
    pub id: i64,
    pub channel: String,
    pub platform_id: String,
    pub conversation_key: String,
    /// The event; `Err` holds the reason when the stored payload cannot be read back.
    pub event: Result<Inbound, String>,
    pub received_at: i64,
    pub status: InboxStatus,
    /// Stored by this process a moment ago and not yet tried: no turn can have started for it,
    /// so its handling looks for none. Read back from the database, an entry is never fresh.
    pub fresh: bool,
}

impl InboxEntry {
    /// The entry [`Store::insert_inbox`] just stored as `id`, without reading it back.
    pub fn stored_now(id: i64, channel: &str, event: Inbound, now_ms: i64) -> Self {
        Self {
            id,
            channel: channel.to_owned(),
            platform_id: event.platform_id.clone(),
            conversation_key: conversation_key(channel, &event),
            event: Ok(event),
            received_at: now_ms,
            status: InboxStatus::Pending,
            fresh: true,
        }
    }
}

/// An `inbox` row as read; its payload becomes [`InboxEntry::event`].
#[derive(sqlx::FromRow)]
struct InboxRow {
    id: i64,
    channel: String,
    platform_id: String,
    conversation_key: String,
    payload: String,
    received_at: i64,
    status: InboxStatus,
}

impl From<InboxRow> for InboxEntry {
    fn from(row: InboxRow) -> Self {
        InboxEntry {
            id: row.id,
            channel: row.channel,
            platform_id: row.platform_id,
            conversation_key: row.conversation_key,
            event: serde_json::from_str(&row.payload).map_err(|err| err.to_string()),
            received_at: row.received_at,
            status: row.status,
            fresh: false,
        }
    }
}

/// The key that orders a conversation's work: channel, chat and thread. A background task's run
/// is ordered on its own (its platform id), so a long task never holds up the chat it reports
/// to.
pub fn conversation_key(channel: &str, event: &Inbound) -> String {
    if super::background::is_run_event(event) {
        return format!("{channel}\u{1f}{}", event.platform_id);
    }
    format!(
        "{channel}\u{1f}{}\u{1f}{}",
        event.chat.chat_id,
        event.chat.thread_id.as_deref().unwrap_or("")
    )
}

/// What a handled event keeps after its retention period: its ids, chat and sender (who wrote,
/// and a schedule's fires are still told from others' messages), without the text, the files,
/// the sender's display name or the threading context.
pub fn stripped(event: &Inbound) -> Inbound {
    use hearth_channel::InboundKind;
    let kind = match &event.kind {
        InboundKind::Message {
            message_id,
            reply_to,
            ..
        } => InboundKind::Message {
            text: String::new(),
            attachments: Vec::new(),
            message_id: message_id.clone(),
            reply_to: reply_to.clone(),
        },
        InboundKind::Edit { message_id, .. } => InboundKind::Edit {
            message_id: message_id.clone(),
            text: String::new(),
        },
        InboundKind::Notice { reason, .. } => InboundKind::Notice {
            text: String::new(),
            reason: reason.clone(),
        },
        other => other.clone(),
    };
    let mut sender = event.sender.clone();
    sender.name = None;
    Inbound {
        platform_id: event.platform_id.clone(),
        chat: event.chat.clone(),
        sender,
        kind,
        reply_context: None,
        agent: None,
    }
}

impl Store {
    /// Stores an inbound event unless (channel, platform id) is already there.
    /// Returns the new entry's id, or `None` for a duplicate; `Ok` only once it is committed.
    pub async fn insert_inbox(
        &self,
        channel: &str,
        event: &Inbound,
        now_ms: i64,
    ) -> StoreResult<Option<i64>> {
        let payload = serde_json::to_string(event)?;
        let key = conversation_key(channel, event);
        // One statement in autocommit, read to its end with `fetch_all` so that a commit that
        // fails is this call's error (see `Sql::write_returning`): the adapter must never
        // acknowledge an event that was not stored.
        let ids: Vec<i64> = sqlx::query_scalar(
            "INSERT INTO inbox (channel, platform_id, conversation_key, payload, status, received_at)
             VALUES ($1, $2, $3, $4, 'pending', $5)
             ON CONFLICT (channel, platform_id) DO NOTHING
             RETURNING id",
        )
        .bind(channel)
        .bind(&event.platform_id)
        .bind(&key)
        .bind(payload)
        .bind(now_ms)
        .fetch_all(&mut *self.write().await?)
        .await?;
        Ok(ids.first().copied())
    }

    /// Entries of `channels` not yet handled, oldest first: the dispatcher's work after a
    /// restart. Other channels' entries are left to the process that runs those channels.
    pub async fn pending_inbox(&self, channels: &[String]) -> StoreResult<Vec<(i64, String)>> {
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT id, conversation_key FROM inbox WHERE status = 'pending' AND channel IN ({}) ORDER BY id",
            super::placeholders(1, channels.len())
        );
        let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql));
        for channel in channels {
            query = query.bind(channel);
        }
        Ok(query.fetch_all(self.pool()).await?)
    }

    pub async fn inbox_entry(&self, id: i64) -> StoreResult<Option<InboxEntry>> {
        let row: Option<InboxRow> = sqlx::query_as(
            "SELECT id, channel, platform_id, conversation_key, payload, received_at, status FROM inbox WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        Ok(row.map(InboxEntry::from))
    }

    /// Replaces the content of handled entries received before `cutoff_ms` by a stub (see
    /// [`stripped`]), at most `batch` of them; returns how many. Pending entries keep
    /// everything: their turn may still need it (a turn waiting for a confirmation resumes from
    /// its entry).
    pub async fn strip_handled_inbox(
        &self,
        cutoff_ms: i64,
        batch: usize,
        now_ms: i64,
    ) -> StoreResult<usize> {
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT id, payload FROM inbox
             WHERE stripped_at IS NULL AND received_at < $1 AND status <> 'pending'
             ORDER BY received_at LIMIT $2",
        )
        .bind(cutoff_ms)
        .bind(i64::try_from(batch).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        let mut tx = self.begin().await?;
        for (id, payload) in &rows {
            // An entry that no longer reads keeps nothing worth keeping either.
            let stub = serde_json::from_str::<Inbound>(payload)
                .map(|event| stripped(&event))
                .ok()
                .and_then(|event| serde_json::to_string(&event).ok())
                .unwrap_or_else(|| "{}".to_string());
            sqlx::query("UPDATE inbox SET payload = $1, stripped_at = $2 WHERE id = $3")
                .bind(stub)
                .bind(now_ms)
                .bind(*id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(rows.len())
    }

    pub async fn inbox_status(&self, id: i64) -> StoreResult<Option<InboxStatus>> {
        Ok(sqlx::query_scalar("SELECT status FROM inbox WHERE id = $1")
            .bind(id)
            .fetch_optional(self.pool())
            .await?)
    }

    /// Marks an entry handled without a reply (a duplicate press, an ignored reaction).
    pub async fn finish_inbox(
        &self,
        id: i64,
        status: InboxStatus,
        error: Option<&str>,
        now_ms: i64,
    ) -> StoreResult<()> {
        sqlx::query("UPDATE inbox SET status = $1, error = $2, processed_at = $3 WHERE id = $4")
            .bind(status)
            .bind(error)
            .bind(now_ms)
            .bind(id)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(())
    }

    /// How many entries wait for the dispatcher.
    pub async fn inbox_depth(&self) -> StoreResult<i64> {
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) FROM inbox WHERE status = 'pending'")
                .fetch_one(self.pool())
                .await?,
        )
    }
}

#[cfg(test)]
mod tests {
    use hearth_channel::{ChatRef, Inbound, InboundKind, Sender};
    use hearth_testkit::tmpfs::Tmpfs;

    use crate::store::Store;

    fn message(platform_id: &str, text: &str) -> Inbound {
        Inbound::message(platform_id, ChatRef::new("chat"), Sender::new("user"), text)
    }

    /// The defect: no inbox row was ever deleted or shrunk, so every message (a stranger's
    /// too) was kept whole for good.
    #[tokio::test]
    async fn handled_entries_lose_their_content_after_the_retention_but_still_spot_redelivery() {
        let (store, _dir) = crate::store::test_support::temp_store().await;
        let day = 24 * 60 * 60 * 1000;
        let mut old = message("1", &"secret expenses ".repeat(100));
        old.sender = Sender::new("user").with_name("Ada");
        old.reply_context = Some(serde_json::json!({"subject": "Re: money"}));
        let handled = store
            .insert_inbox("t", &old, day)
            .await
            .expect("insert")
            .expect("id");
        store
            .finish_inbox(handled, super::InboxStatus::Done, None, day)
            .await
            .expect("done");
        let waiting = store
            .insert_inbox("t", &message("2", "still pending"), day)
            .await
            .expect("insert")
            .expect("id");
        let recent = store
            .insert_inbox("t", &message("3", "recent"), 40 * day)
            .await
            .expect("insert")
            .expect("id");
        store
            .finish_inbox(recent, super::InboxStatus::Done, None, 40 * day)
            .await
            .expect("done");

        let now = 41 * day;
        let stripped = store
            .strip_handled_inbox(now - 30 * day, 100, now)
            .await
            .expect("strip");
        assert_eq!(stripped, 1, "only the old, handled entry");
        assert_eq!(
            store
                .strip_handled_inbox(now - 30 * day, 100, now)
                .await
                .expect("again"),
            0
        );
        let entry = store
            .inbox_entry(handled)
            .await
            .expect("read")
            .expect("kept");
        let event = entry.event.expect("the stub still reads");
        assert_eq!(event.platform_id, "1");
        assert_eq!(event.sender.id, "user");
        assert_eq!(event.sender.name, None);
        assert_eq!(event.reply_context, None);
        let InboundKind::Message { text, .. } = &event.kind else {
            panic!("{event:?}")
        };
        assert!(text.is_empty());
        let pending = store
            .inbox_entry(waiting)
            .await
            .expect("read")
            .expect("kept");
        assert!(
            pending
                .event
                .is_ok_and(|e| e.kind == message("2", "still pending").kind)
        );
        assert_eq!(
            store.insert_inbox("t", &old, now).await.expect("insert"),
            None,
            "a redelivery of the stripped message is still a duplicate"
        );
        store.close().await;
    }

    /// Other local users must not read hearth's messages and keys (the umask used to decide).
    #[cfg(unix)]
    #[tokio::test]
    async fn the_data_directory_and_database_are_private_to_hearths_user() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let url = format!("sqlite://{}", data.join("hearth.db").display());
        let store = Store::open(&url).await.expect("open");
        store
            .insert_inbox("t", &message("1", "x"), 1)
            .await
            .expect("insert");
        let mode = |p: &std::path::Path| {
            std::fs::metadata(p).expect("exists").permissions().mode() & 0o777
        };
        assert_eq!(mode(&data), 0o700);
        assert_eq!(mode(&data.join("hearth.db")), 0o600);
        assert_eq!(
            mode(&data.join("hearth.db-wal")),
            0o600,
            "SQLite follows the database"
        );
        store.close().await;
    }

    /// The defect: on a full disk the insert handed back an id while its commit failed, so the
    /// adapter acknowledged an event that was never stored.
    #[tokio::test]
    async fn an_insert_on_a_full_disk_fails_and_succeeds_once_space_is_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let disk = match Tmpfs::mount(dir.path(), 2 * 1024 * 1024) {
            Ok(disk) => disk,
            Err(why) => return eprintln!("skipped: {why}"),
        };
        let url = format!("sqlite://{}", disk.path().join("hearth.db").display());
        let store = Store::open(&url).await.expect("open");
        let first = store
            .insert_inbox("t", &message("1", "before"), 1)
            .await
            .expect("insert with space");
        assert!(first.is_some());

        disk.fill().expect("fill the disk");
        for n in 2..5 {
            let event = message(&n.to_string(), &"x".repeat(2000));
            let err = store
                .insert_inbox("t", &event, 2)
                .await
                .expect_err("a full disk refuses the insert");
            assert!(err.is_unavailable(), "{err}");
            assert_eq!(err.reason(), "database or disk is full");
        }
        let pending: Vec<i64> = store
            .pending_inbox(&["t".to_string()])
            .await
            .expect("reads work")
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(pending, vec![first.expect("id")], "nothing half-stored");

        disk.free().expect("free the disk");
        let event = message("2", &"x".repeat(2000));
        let stored = store
            .insert_inbox("t", &event, 3)
            .await
            .expect("space back");
        assert!(stored.is_some());
        assert_eq!(
            store.insert_inbox("t", &event, 4).await.expect("dup"),
            None,
            "redelivery is a duplicate"
        );
        store.close().await;
    }

    #[tokio::test]
    async fn an_insert_into_a_read_only_database_fails_as_unavailable() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("hearth.db");
        let store = Store::open(&format!("sqlite://{}", path.display()))
            .await
            .expect("open");
        store
            .insert_inbox("t", &message("1", "writable"), 1)
            .await
            .expect("insert");
        let read_only = Store::connect(&format!("sqlite://{}?mode=ro", path.display()))
            .await
            .expect("open read-only");
        let err = read_only
            .insert_inbox("t", &message("2", "refused"), 2)
            .await
            .expect_err("a read-only database refuses the insert");
        assert!(err.is_unavailable(), "{err}");
        assert!(err.reason().contains("readonly"), "{}", err.reason());
        assert_eq!(store.inbox_depth().await.expect("depth"), 1);
        read_only.close().await;
        store.close().await;
    }
}
