//! Where channel adapters put inbound events: the inbox table, then the dispatcher.

use std::sync::Arc;

use async_trait::async_trait;
use hearth_channel::{Inbound, InboundKind, InboundSink, SinkError, StateStore};

use super::dispatcher::Dispatcher;
use crate::clock::SharedClock;
use crate::daemon::Health;
use crate::metrics::Metrics;
use crate::router::is_cancel;
use crate::store::Store;
use crate::store::inbox::conversation_key;

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
        let inserted = match self
            .store
            .insert_inbox(channel, &event, self.clock.now_ms())
            .await
        {
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
        // `/cancel` must reach a running turn at once, not wait behind it in the queue.
        let is_cancel = matches!(&event.kind, InboundKind::Message { text, .. } if is_cancel(text));
        self.dispatcher.submit(id, key, is_cancel);
        Ok(Some(id))
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
