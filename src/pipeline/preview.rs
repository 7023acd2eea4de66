//! A channel as the runtime's [`PreviewSink`] and [`TurnEventSink`]: the runtime streams its
//! reply and its events into it without holding the channel.

use std::sync::Arc;

use async_trait::async_trait;
use hearth_channel::{Channel, ChannelError, MessageRef, PreviewUpdate, Progress};

use crate::runtime::preview::{PreviewSink, TurnEventSink};

/// Shows a turn's streamed reply with the channel's own preview ([`Channel::preview`]) and its
/// events with [`Channel::turn_event`].
pub struct ChannelPreview(pub Arc<dyn Channel>);

impl ChannelPreview {
    /// The preview sink of `channel`, as a turn holds it.
    pub fn of(channel: &Arc<dyn Channel>) -> Arc<dyn PreviewSink> {
        Arc::new(ChannelPreview(channel.clone()))
    }

    /// The event sink of `channel`, as a turn holds it.
    pub fn events_of(channel: &Arc<dyn Channel>) -> Arc<dyn TurnEventSink> {
        Arc::new(ChannelPreview(channel.clone()))
    }
}

#[async_trait]
impl PreviewSink for ChannelPreview {
    async fn show(&self, update: PreviewUpdate<'_>) -> Result<Option<MessageRef>, ChannelError> {
        self.0.preview(update).await
    }
}

#[async_trait]
impl TurnEventSink for ChannelPreview {
    async fn emit(&self, progress: Progress<'_>) {
        emit(&self.0, progress).await;
    }
}

/// Hands a turn's event to `channel` when it shows progress ([`hearth_channel::Capabilities::progress`]):
/// the one place that decides who sees a turn's events. A failure is logged; the turn goes on.
pub async fn emit(channel: &Arc<dyn Channel>, progress: Progress<'_>) {
    if !channel.capabilities().progress {
        return;
    }
    let kind = progress.event.kind();
    if let Err(err) = channel.turn_event(progress).await {
        tracing::warn!(error = %err, channel = channel.name(), %kind, "showing a turn event failed");
    }
}
