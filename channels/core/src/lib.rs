//! The contract between hearth and a chat platform.
//!
//! Every adapter (Telegram, Discord, Matrix, email, the terminal, the in-memory test channel)
//! implements [`Channel`]. The daemon sees channels only through this trait, and a channel crate
//! never sees the database, the router or the agent runtime: inbound events go into an
//! [`InboundSink`] whose acknowledgement means "committed", and cursors go into a
//! [`StateStore`].

mod config;
mod error;
mod memory;
mod message;
mod secret;
pub mod split;
#[cfg(feature = "testkit")]
pub mod testkit;

pub use config::{
    BuildContext, ChannelConfig, ConfigProblem, channel_data_dir, check_secret, check_url,
};
pub use error::{ChannelError, ErrorKind};
pub use memory::{AnsweredPress, MemoryChannel, SentMessage};
pub use message::{
    Attachment, AttachmentKind, Button, ButtonPress, Capabilities, ChatRef, Format, Inbound,
    InboundKind, MessageRef, OutboundMessage, Sender,
};
pub use secret::{ProcessEnv, Secret, SecretSource};

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

/// What the daemon hands a channel's receive loop.
#[derive(Clone)]
pub struct ChannelContext {
    /// Cancelled when the daemon shuts down; `run` returns soon after.
    pub shutdown: CancellationToken,
    /// Where inbound events go. `deliver` returns only after the event is stored.
    pub sink: Arc<dyn InboundSink>,
    /// Small persistent key-value store for platform cursors (Telegram offset, IMAP UID …).
    pub state: Arc<dyn StateStore>,
}

impl std::fmt::Debug for ChannelContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelContext").finish_non_exhaustive()
    }
}

/// The daemon side of inbound delivery.
#[async_trait]
pub trait InboundSink: Send + Sync {
    /// Stores the event durably (deduplicated on the channel and `platform_id`).
    ///
    /// Returns `Ok` once the event is committed, also when it was a duplicate; only then may the
    /// adapter advance its platform cursor. An error means nothing was stored: keep the cursor and
    /// offer the event again later.
    async fn deliver(&self, channel: &str, event: Inbound) -> Result<(), SinkError>;
}

/// The inbox could not store an event (database unavailable, shutting down).
#[derive(Debug, thiserror::Error)]
#[error("inbox unavailable: {0}")]
pub struct SinkError(pub String);

/// Persistent per-channel state, namespaced by channel name.
#[async_trait]
pub trait StateStore: Send + Sync {
    async fn load(&self, channel: &str, key: &str) -> Result<Option<String>, SinkError>;
    async fn save(&self, channel: &str, key: &str, value: &str) -> Result<(), SinkError>;
}

/// A chat platform adapter.
#[async_trait]
pub trait Channel: Send + Sync + 'static {
    /// The channel's name as used in config, identities and targets: `telegram`, `terminal` …
    fn name(&self) -> &str;

    /// What the platform can show; the daemon shapes replies and confirmations with it.
    fn capabilities(&self) -> Capabilities;

    /// Receives events until `ctx.shutdown` is cancelled. Each event is handed to the sink and
    /// the platform cursor is advanced only after the sink acknowledged it.
    ///
    /// Returns `Ok(())` after shutdown; an error tells the supervisor what went wrong (its kind
    /// decides between restart with backoff and marking the channel failed).
    async fn run(&self, ctx: ChannelContext) -> Result<(), ChannelError>;

    /// Sends a message, split at the platform limit if needed. The returned reference points at
    /// the last part, which carries the buttons if there are any.
    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, ChannelError>;

    /// Replaces the text (and buttons) of a message sent earlier.
    async fn edit(
        &self,
        target: &MessageRef,
        message: &OutboundMessage,
    ) -> Result<(), ChannelError>;

    /// Shows a "typing…" indicator in the chat, where the platform has one.
    async fn typing(&self, _chat: &ChatRef) -> Result<(), ChannelError> {
        Ok(())
    }

    /// Acknowledges a button press (Telegram `answerCallbackQuery`, a Discord interaction
    /// response). `notice` is a short text shown to the presser, as an alert when `alert` is set.
    async fn answer_press(
        &self,
        _press: &ButtonPress,
        _notice: Option<&str>,
        _alert: bool,
    ) -> Result<(), ChannelError> {
        Ok(())
    }

    /// Shows a reply while it is being generated. `text` is everything generated so far.
    /// The first call for a `draft` (None) creates the preview; later calls pass the reference
    /// it returned. The final reply arrives later through `send` with `replaces` set to it.
    /// Only called when [`Capabilities::preview`] is set.
    async fn preview(
        &self,
        chat: &ChatRef,
        draft: Option<&MessageRef>,
        text: &str,
    ) -> Result<Option<MessageRef>, ChannelError> {
        let _ = (chat, draft, text); // no preview by default
        Ok(None)
    }
}
