//! Where channel adapters put inbound events: the inbox table, then the dispatcher.

use std::sync::Arc;

use async_trait::async_trait;
use hearth_channel::{Inbound, InboundKind, InboundSink, SinkError, StateStore};

use super::dispatcher::Dispatcher;
use crate::clock::SharedClock;
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
}

impl InboxSink {
    /// Stores an event and queues it; returns the new inbox id, or `None` for a duplicate.
    /// Used by the channels (through [`InboundSink`]) and by the scheduler, which links the
    /// entry to its run.
    pub async fn store_event(
        &self,
        channel: &str,
        event: Inbound,
    ) -> Result<Option<i64>, SinkError> {
        let inserted = self
            .store
            .insert_inbox(channel, &event, self.clock.now_ms())
            .await
            .map_err(|err| SinkError(err.to_string()))?;
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
