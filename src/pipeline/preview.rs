//! A channel as the runtime's [`PreviewSink`]: the runtime streams into it without holding the
//! channel.

use std::sync::Arc;

use async_trait::async_trait;
use hearth_channel::{Channel, ChannelError, MessageRef, PreviewUpdate};

use crate::runtime::preview::PreviewSink;

/// Shows a turn's streamed reply with the channel's own preview ([`Channel::preview`]).
pub struct ChannelPreview(pub Arc<dyn Channel>);

impl ChannelPreview {
    /// The preview sink of `channel`, as a turn holds it.
    pub fn of(channel: &Arc<dyn Channel>) -> Arc<dyn PreviewSink> {
        Arc::new(ChannelPreview(channel.clone()))
    }
}

#[async_trait]
impl PreviewSink for ChannelPreview {
    async fn show(&self, update: PreviewUpdate<'_>) -> Result<Option<MessageRef>, ChannelError> {
        self.0.preview(update).await
    }
}
