//! Where channel adapters put inbound events: the inbox table, then the dispatcher.

use std::sync::Arc;

use async_trait::async_trait;
use hearth_channel::{Allowlist, Inbound, InboundKind, InboundSink, SinkError, StateStore};

use super::dispatcher::Dispatcher;
use crate::clock::SharedClock;
use crate::health::Health;
use crate::metrics::Metrics;
use crate::router::is_cancel;
use crate::store::Store;
use crate::store::inbox::{InboxEntry, conversation_key};

/// Commits each event to the inbox and hands new ones to the dispatcher.
pub struct InboxSink {
    pub store: Store,
    pub clock: SharedClock,
    pub metrics: Arc<Metrics>,
    pub dispatcher: Arc<Dispatcher>,
    /// Told when the inbox cannot store (`/healthz` turns 503) and when it can again.
    pub health: Health,
}

/// The write path name under which inbox failures appear in `/healthz`.
pub const INBOX_PATH: &str = "inbox";

impl InboxSink {
    /// Stores an event and queues it; returns the new inbox id, or `None` for a duplicate.
    /// Used by the channels (through [`InboundSink`]) and by the scheduler, which links the
    /// entry to its run.
    ///
    /// An error means nothing was stored: the channel keeps its cursor and offers the event
    /// again (Telegram redelivers it), and `/healthz` reports the inbox failing until a later
    /// event is stored.
    pub async fn store_event(
        &self,
        channel: &str,
        event: Inbound,
    ) -> Result<Option<i64>, SinkError> {
        let now = self.clock.now_ms();
        let inserted = match self.store.insert_inbox(channel, &event, now).await {
            Ok(inserted) => {
                // A duplicate writes nothing, so it says nothing about whether writes work.
                if inserted.is_some() {
                    self.health.clear_fault(INBOX_PATH);
                }
                inserted
            }
            Err(err) => {
                let reason = err.reason();
                self.health.set_fault(INBOX_PATH, &reason);
                return Err(SinkError(reason));
            }
        };
        let Some(id) = inserted else {
            tracing::debug!(channel, platform_id = %event.platform_id, "duplicate inbound event dropped");
            return Ok(None);
        };
        self.metrics.message_in(channel);
        let key = conversation_key(channel, &event);
        // `/cancel` must reach a running turn at once, not wait behind it in the queue, but
        // only from the person whose turn it is (or the owner): in a group, a stranger's or
        // another member's `/cancel` waits in the queue like any message.
        let is_cancel = matches!(&event.kind, InboundKind::Message { text, .. } if is_cancel(text))
            && self.may_cancel(channel, &event, &key).await;
        let entry = InboxEntry::stored_now(id, channel, event, now);
        self.dispatcher.submit_stored(entry, key, is_cancel);
        Ok(Some(id))
    }

    /// Whether the sender of a `/cancel` may stop the conversation's running turn: a verified,
    /// allowed identity that is the owner or the same person (any linked identity) as the
    /// sender of the entry being run. A database error says no; the `/cancel` is then handled
    /// in its turn like any command.
    async fn may_cancel(&self, channel: &str, event: &Inbound, key: &str) -> bool {
        let Some(running) = self.dispatcher.running_entry(key) else {
            return false;
        };
        if !event.sender.verified {
            return false;
        }
        let allowed = |identity: Option<crate::store::Identity>| {
            identity.filter(|i| i.status == crate::store::IdentityStatus::Allowed)
        };
        let Ok(canceller) = self.store.identity(channel, &event.sender.id).await else {
            return false;
        };
        let Some(canceller) = allowed(canceller) else {
            tracing::info!(channel, sender = %event.sender.id, "/cancel from someone hearth does not serve ignored");
            return false;
        };
        if canceller.is_owner {
            return true;
        }
        let Ok(Some(entry)) = self.store.inbox_entry(running).await else {
            return false;
        };
        let Ok(asker) = entry.event else {
            return false;
        };
        let Ok(asker) = self.store.identity(&entry.channel, &asker.sender.id).await else {
            return false;
        };
        let same = allowed(asker).is_some_and(|a| a.user_id == canceller.user_id);
        if !same {
            tracing::info!(channel, sender = %event.sender.id, "/cancel of someone else's turn ignored");
        }
        same
    }
}

#[async_trait]
impl InboundSink for InboxSink {
    async fn deliver(&self, channel: &str, event: Inbound) -> Result<(), SinkError> {
        self.store_event(channel, event).await.map(|_| ())
    }
}

/// Channel cursors in the `channel_state` table.
pub struct StoreState {
    pub store: Store,
    pub clock: SharedClock,
}

#[async_trait]
impl StateStore for StoreState {
    async fn load(&self, channel: &str, key: &str) -> Result<Option<String>, SinkError> {
        self.store
            .channel_state(channel, key)
            .await
            .map_err(|err| SinkError(err.to_string()))
    }

    async fn save(&self, channel: &str, key: &str, value: &str) -> Result<(), SinkError> {
        self.store
            .set_channel_state(channel, key, value, self.clock.now_ms())
            .await
            .map_err(|err| SinkError(err.to_string()))
    }
}

/// Whom hearth serves, for adapters whose platform rules depend on the sender (Discord's server
/// channels, Matrix invites): the identities table, where the owner, the configured allowlists
/// and paired or linked users all are.
pub struct StoreAllowlist {
    pub store: Store,
}

#[async_trait]
impl Allowlist for StoreAllowlist {
    async fn allows(&self, channel: &str, platform_user_id: &str) -> Result<bool, SinkError> {
        self.store
            .identity(channel, platform_user_id)
            .await
            .map(|identity| {
                identity.is_some_and(|i| i.status == crate::store::IdentityStatus::Allowed)
            })
            .map_err(|err| SinkError(err.to_string()))
    }
}
