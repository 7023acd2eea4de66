//! hearth's Matrix channel on matrix-sdk: one device for life (the session and the crypto
//! store are kept under the data directory and restored on every start), a sync loop whose
//! position is hearth's own and advances only after the events of a sync are stored, encrypted
//! rooms, `m.notice` replies with HTML, streamed replies as edits, and confirmations as
//! reactions.
//!
//! Decisions where the issue was silent:
//! - The session and store live in the directory handed to [`ChannelConfig::build`]
//!   (`<daemon.data_dir>/channels/matrix/`), so `send` works before `run` has started; the
//!   daemon passes the same directory to `run`.
//! - Messages are delivered in DMs (rooms of at most two members) always; in bigger rooms only
//!   when they mention the bot (its id, localpart or display name, or `m.mentions`) or reply to
//!   one of its messages.
//! - A reply whose text is only "approve"/"deny" (or "yes"/"no") to a confirmation prompt counts
//!   as the ✅/❌ reaction on it, so the daemon decides it like a reaction.
//!
//! [`ChannelConfig::build`]: hearth_channel::ChannelConfig::build

mod config;
mod doctor;
mod error;
mod format;
#[doc(hidden)]
pub mod fuzzing;
mod inbound;
mod media;
mod outbound;
mod receive;
mod session;

pub use config::{MatrixConfig, MatrixSettings};
/// The matrix-sdk this channel is built on, for code that talks Matrix beside it (the tests'
/// Element-like client) with the same types and features.
pub use matrix_sdk;
pub use session::saved_device_id;

use std::collections::HashMap;
use std::sync::Mutex as StdMutex;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use hearth_channel::{
    Attachment, Capabilities, Channel, ChannelContext, ChannelError, ChatRef, Format, Measure,
    MessageRef, OutboundMessage, PreviewUpdate, ScopedState,
};
use matrix_sdk::Client;
use matrix_sdk::ruma::{OwnedRoomId, OwnedUserId};
use tokio::sync::{Mutex, Notify};

/// The channel's name in config, identities and targets.
pub const CHANNEL_NAME: &str = "matrix";

/// The longest message body, in UTF-8 bytes. A Matrix event may be 64 KiB; the body, its HTML
/// rendering and, in encrypted rooms, the base64 of the ciphertext must all fit.
pub const MAX_MESSAGE_BYTES: usize = 16_000;

/// A Matrix account as a hearth channel.
pub struct MatrixChannel {
    settings: MatrixSettings,
    /// The logged-in client, made on first use (by `run` or a `send`).
    client: Mutex<Option<Client>>,
    /// The state store of the running `run`, where prompts are remembered (replies to them
    /// decide), shared with `send`.
    state: StdMutex<Option<ScopedState>>,
    /// For each recently delivered event, the sync position it was delivered from, so a test
    /// can make the homeserver deliver it again (as after a lost position).
    replay: StdMutex<HashMap<String, String>>,
    /// A sync position to go back to, set by [`MatrixChannel::redeliver_from`].
    rewind: StdMutex<Option<String>>,
    /// Wakes the sync loop's long poll when `rewind` is set.
    rewound: Notify,
    /// Whether the sync loop has synced the current client (so it knows every joined room).
    synced: AtomicBool,
    /// The direct-message rooms hearth opened itself, by user, until a sync makes them known as
    /// such; its lock makes opening one a single step (see `outbound::room`).
    opened_dms: Mutex<HashMap<OwnedUserId, OwnedRoomId>>,
}

impl std::fmt::Debug for MatrixChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MatrixChannel")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl MatrixChannel {
    /// A channel for the account in `settings`. No network traffic until `run` or `send`.
    pub fn new(settings: MatrixSettings) -> Result<Self, ChannelError> {
        hearth_channel::check_url(&settings.homeserver, &["http", "https"])
            .map_err(|m| ChannelError::config(format!("homeserver: {m}")))?;
        Ok(Self {
            settings,
            client: Mutex::new(None),
            state: StdMutex::new(None),
            replay: StdMutex::new(HashMap::new()),
            rewind: StdMutex::new(None),
            rewound: Notify::new(),
            synced: AtomicBool::new(false),
            opened_dms: Mutex::new(HashMap::new()),
        })
    }

    /// The settings the channel runs on.
    pub fn settings(&self) -> &MatrixSettings {
        &self.settings
    }

    /// The logged-in client, logging in (or restoring the session) on first use.
    async fn client(&self) -> Result<Client, ChannelError> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref() {
            return Ok(client.clone());
        }
        let client = session::connect(&self.settings).await?;
        *slot = Some(client.clone());
        Ok(client)
    }

    /// Forgets the client after the homeserver refused its token, so the next use logs in anew.
    async fn forget_client(&self) {
        *self.client.lock().await = None;
        self.synced.store(false, Ordering::SeqCst);
    }

    /// The device id hearth runs as, once logged in.
    pub async fn device_id(&self) -> Option<String> {
        let slot = self.client.lock().await;
        slot.as_ref()
            .and_then(|c| c.device_id().map(|d| d.to_string()))
    }

    /// Makes the running sync loop go back to the position it delivered `event_id` from, so
    /// the homeserver delivers that event (and what followed) again, as it does when a sync
    /// position was lost. For the conformance check of duplicate deliveries; returns false when
    /// the event was not delivered recently.
    #[doc(hidden)]
    pub fn redeliver_from(&self, event_id: &str) -> bool {
        let Some(position) = lock(&self.replay).get(event_id).cloned() else {
            return false;
        };
        *lock(&self.rewind) = Some(position);
        self.rewound.notify_one();
        true
    }

    fn state(&self) -> Option<ScopedState> {
        lock(&self.state).clone()
    }
}

/// Locks a std mutex holding plain data; a panic elsewhere cannot leave it inconsistent.
fn lock<T>(mutex: &StdMutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[async_trait]
impl Channel for MatrixChannel {
    fn name(&self) -> &str {
        CHANNEL_NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            buttons: false,
            edits: true,
            reactions: true,
            threads: true,
            max_message_len: Some(MAX_MESSAGE_BYTES),
            measure: Measure::Bytes,
            format: Format::Html,
            preview: Some(self.settings.edit_interval),
            // matrix-sdk announces typing for 4 s and sends again only after 3 s.
            typing_interval: Some(std::time::Duration::from_secs(3)),
            buttons_as_reactions: true,
            acks_presses_on_receipt: false,
            deduplicates_sends: true,
            silent_with_strangers: false,
            progress: false,
        }
    }

    async fn live_checks(&self) -> Vec<Result<String, String>> {
        doctor::live_checks(&self.settings).await
    }

    async fn run(&self, ctx: ChannelContext) -> Result<(), ChannelError> {
        *lock(&self.state) = Some(ctx.state.clone());
        receive::run(self, ctx).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, ChannelError> {
        outbound::send(self, message).await
    }

    async fn edit(
        &self,
        target: &MessageRef,
        message: &OutboundMessage,
    ) -> Result<(), ChannelError> {
        outbound::edit(self, target, message).await
    }

    async fn typing(&self, chat: &ChatRef) -> Result<(), ChannelError> {
        outbound::typing(self, chat).await
    }

    async fn preview(&self, update: PreviewUpdate<'_>) -> Result<Option<MessageRef>, ChannelError> {
        outbound::preview(self, update).await.map(Some)
    }

    async fn fetch_attachment(
        &self,
        attachment: &Attachment,
        max_bytes: u64,
    ) -> Result<Vec<u8>, ChannelError> {
        let source = media::prepare(attachment, max_bytes)?;
        let client = self.client().await?;
        media::fetch(&client, source, max_bytes).await
    }
}
