//! The contract between hearth and a chat platform.
//!
//! Every adapter (Telegram, Discord, Matrix, email, the terminal, the in-memory test channel)
//! implements [`Channel`]. The daemon sees channels only through this trait, and a channel crate
//! never sees the database, the router or the agent runtime: its [`ChannelContext`] carries a
//! [`ScopedSink`] whose acknowledgement means "committed", a [`ScopedState`] for cursors, a data
//! directory and a [`StatusReporter`], all bound to that one channel.

#![warn(missing_docs)]

mod config;
pub mod confirmation;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod http_client;
mod memory;
mod message;
pub mod net;
pub mod plan;
mod retry;
mod secret;
pub mod split;
#[cfg(feature = "testkit")]
pub mod testkit;
mod turn_event;

pub use config::{
    BuildContext, ChannelConfig, ConfigProblem, channel_data_dir, check_secret, check_url,
    check_url_at,
};
pub use error::{ChannelError, ErrorKind};
pub use memory::{AnsweredPress, Login, MemoryChannel, SentMessage};
pub use message::{
    Attachment, AttachmentKind, Authority, Button, ButtonPress, Capabilities, ChatRef, Format,
    Inbound, InboundKind, MessageRef, OutboundMessage, PreviewUpdate, Progress, Sender,
    is_text_mime,
};
pub use plan::{PlannedPart, plan, plan_edit, preview_text};
pub use retry::{Backoff, error_chain, sleep_or_shutdown};
pub use secret::{ProcessEnv, Secret, SecretSource};
pub use split::Measure;
pub use turn_event::{PlanStepView, ShownCall, TurnEvent, TurnEventKind, TurnUsage};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What the daemon hands a channel's receive loop: everything in it is scoped to this one
/// channel, so an adapter can neither write into another channel's inbox nor read its state.
#[derive(Clone)]
pub struct ChannelContext {
    /// Cancelled when the daemon shuts down; `run` returns soon after.
    pub shutdown: CancellationToken,
    /// Where inbound events go. `deliver` returns only after the event is stored.
    pub sink: ScopedSink,
    /// Small persistent key-value store for platform cursors (Telegram offset, IMAP UID …).
    pub state: ScopedState,
    /// A directory of this channel's own, for stores that must persist across restarts (Matrix's
    /// crypto store): `<daemon.data_dir>/channels/<name>/`, created before `run` is called.
    pub data_dir: PathBuf,
    /// Where the adapter reports its connection state; `/healthz` and systemd's READY=1 show it.
    pub status: StatusReporter,
    /// Whom the daemon serves on this channel: the owner's identities, the configured
    /// allowlist and paired users. Adapters ask it where a platform rule depends on the sender
    /// before anything is stored (Discord's server channels, Matrix invites).
    pub allowlist: ScopedAllowlist,
}

impl ChannelContext {
    /// A context for the channel `name`, delivering into `sink` and keeping state in `state`,
    /// both seen by the adapter as its own.
    pub fn new(
        name: &str,
        shutdown: CancellationToken,
        sink: Arc<dyn InboundSink>,
        state: Arc<dyn StateStore>,
        data_dir: PathBuf,
        status: StatusReporter,
    ) -> Self {
        let name: Arc<str> = Arc::from(name);
        Self {
            shutdown,
            sink: ScopedSink {
                channel: name.clone(),
                inner: sink,
            },
            state: ScopedState {
                channel: name.clone(),
                inner: state,
            },
            data_dir,
            status,
            allowlist: ScopedAllowlist {
                channel: name,
                inner: Arc::new(NoOneListed),
            },
        }
    }

    /// Answers [`ChannelContext::allowlist`] from `allowlist` (the daemon's identities); without
    /// it the context knows no one, and adapters go by their configured lists alone.
    pub fn with_allowlist(mut self, allowlist: Arc<dyn Allowlist>) -> Self {
        self.allowlist.inner = allowlist;
        self
    }

    /// The channel's name, as in config, identities and targets.
    pub fn name(&self) -> &str {
        &self.sink.channel
    }

    /// The channel's persistent directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }
}

impl std::fmt::Debug for ChannelContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelContext")
            .field("name", &self.name())
            .field("data_dir", &self.data_dir)
            .finish_non_exhaustive()
    }
}

/// A chat command the daemon understands, as shown in a platform's command menu.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommandInfo {
    /// The command without the slash: `help`, `agent` …
    pub name: &'static str,
    /// One short line for the menu.
    pub description: &'static str,
}

/// The daemon side of inbound delivery: one inbox for every channel. Adapters never see it
/// directly; they get a [`ScopedSink`] bound to their own channel.
#[async_trait]
pub trait InboundSink: Send + Sync {
    /// Stores the event durably (deduplicated on the channel and `platform_id`).
    ///
    /// Returns `Ok` once the event is committed, also when it was a duplicate; only then may the
    /// adapter advance its platform cursor. An error means nothing was stored: keep the cursor and
    /// offer the event again later.
    async fn deliver(&self, channel: &str, event: Inbound) -> Result<(), SinkError>;
}

/// The inbox as one channel sees it: every event it delivers is filed under that channel.
#[derive(Clone)]
pub struct ScopedSink {
    channel: Arc<str>,
    inner: Arc<dyn InboundSink>,
}

impl ScopedSink {
    /// Binds `inner` to `channel`. The daemon does this once per channel; tests wrap a sink to
    /// observe or disturb deliveries.
    pub fn new(channel: &str, inner: Arc<dyn InboundSink>) -> Self {
        Self {
            channel: Arc::from(channel),
            inner,
        }
    }

    /// The channel the events are filed under.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Stores the event (see [`InboundSink::deliver`]): `Ok` means committed, and only then may
    /// the platform cursor advance.
    pub async fn deliver(&self, event: Inbound) -> Result<(), SinkError> {
        self.inner.deliver(&self.channel, event).await
    }
}

impl std::fmt::Debug for ScopedSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedSink")
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

/// The inbox could not store an event (database unavailable, shutting down).
#[derive(Debug, thiserror::Error)]
#[error("inbox unavailable: {0}")]
pub struct SinkError(pub String);

/// Persistent per-channel state, namespaced by channel name (the daemon side).
#[async_trait]
pub trait StateStore: Send + Sync {
    /// The value stored under `key` for `channel`, if any.
    async fn load(&self, channel: &str, key: &str) -> Result<Option<String>, SinkError>;
    /// Stores `value` under `key` for `channel`, replacing what was there.
    async fn save(&self, channel: &str, key: &str, value: &str) -> Result<(), SinkError>;
}

/// The state store as one channel sees it: keys are its own.
#[derive(Clone)]
pub struct ScopedState {
    channel: Arc<str>,
    inner: Arc<dyn StateStore>,
}

impl ScopedState {
    /// Binds `inner` to `channel`.
    pub fn new(channel: &str, inner: Arc<dyn StateStore>) -> Self {
        Self {
            channel: Arc::from(channel),
            inner,
        }
    }

    /// The value stored under `key`, if any.
    pub async fn load(&self, key: &str) -> Result<Option<String>, SinkError> {
        self.inner.load(&self.channel, key).await
    }

    /// Stores `value` under `key`, replacing what was there.
    pub async fn save(&self, key: &str, value: &str) -> Result<(), SinkError> {
        self.inner.save(&self.channel, key, value).await
    }
}

impl std::fmt::Debug for ScopedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedState")
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

/// Whom the daemon serves (the daemon side): the identities it allows, across channels.
#[async_trait]
pub trait Allowlist: Send + Sync {
    /// Whether `platform_user_id` on `channel` is an allowed identity (the owner, the
    /// configured allowlist, a paired or linked user) and not revoked.
    async fn allows(&self, channel: &str, platform_user_id: &str) -> Result<bool, SinkError>;
}

/// An allowlist that lists no one: adapters then go by their configured lists alone.
struct NoOneListed;

#[async_trait]
impl Allowlist for NoOneListed {
    async fn allows(&self, _channel: &str, _platform_user_id: &str) -> Result<bool, SinkError> {
        Ok(false)
    }
}

/// The allowlist as one channel sees it: it asks about its own platform's user ids.
#[derive(Clone)]
pub struct ScopedAllowlist {
    channel: Arc<str>,
    inner: Arc<dyn Allowlist>,
}

impl ScopedAllowlist {
    /// Binds `inner` to `channel`.
    pub fn new(channel: &str, inner: Arc<dyn Allowlist>) -> Self {
        Self {
            channel: Arc::from(channel),
            inner,
        }
    }

    /// Whether the daemon serves `platform_user_id` on this channel. An error (the database is
    /// unavailable) is an answer of its own: the caller keeps the event and tries again rather
    /// than treating the sender as a stranger.
    pub async fn allows(&self, platform_user_id: &str) -> Result<bool, SinkError> {
        self.inner.allows(&self.channel, platform_user_id).await
    }
}

impl std::fmt::Debug for ScopedAllowlist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedAllowlist")
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

/// A channel's connection state, as `/healthz` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChannelStatus {
    /// Logging in for the first time; the platform has not accepted us yet.
    Connecting,
    /// The platform accepted the login (Telegram: `getMe` succeeded) and events flow.
    Connected,
    /// The connection was lost or refused for a while; the adapter (or the supervisor) tries
    /// again with backoff.
    Reconnecting {
        /// The error that interrupted it.
        reason: String,
    },
    /// The channel gave up (refused credentials, unusable configuration) until the next start.
    Failed {
        /// Why it gave up.
        reason: String,
    },
    /// `run` returned after shutdown.
    Stopped,
}

impl ChannelStatus {
    /// The state's name: `connecting`, `connected`, `reconnecting`, `failed` or `stopped`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Connecting => "connecting",
            Self::Connected => "connected",
            Self::Reconnecting { .. } => "reconnecting",
            Self::Failed { .. } => "failed",
            Self::Stopped => "stopped",
        }
    }

    /// Why the channel is reconnecting or failed.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Reconnecting { reason } | Self::Failed { reason } => Some(reason),
            _ => None,
        }
    }

    /// Whether the channel has got past its first attempt: it is connected, or it tried and
    /// now retries or gave up. Only `connecting` is unsettled. systemd's READY=1 waits for every
    /// channel to be settled; a channel that retries (the network is down at boot) counts, so
    /// hearth is not killed by systemd's start timeout while it keeps trying.
    pub fn is_settled(&self) -> bool {
        !matches!(self, Self::Connecting)
    }
}

impl std::fmt::Display for ChannelStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.reason() {
            Some(reason) => write!(f, "{}: {reason}", self.as_str()),
            None => f.write_str(self.as_str()),
        }
    }
}

/// How an adapter reports its [`ChannelStatus`]. Cheap to clone; every clone reports to the
/// same place. Reporting the state the channel is already in changes nothing.
#[derive(Clone, Debug)]
pub struct StatusReporter {
    tx: Arc<watch::Sender<ChannelStatus>>,
}

impl Default for StatusReporter {
    fn default() -> Self {
        Self::new()
    }
}

impl StatusReporter {
    /// A reporter starting at [`ChannelStatus::Connecting`].
    pub fn new() -> Self {
        Self {
            tx: Arc::new(watch::Sender::new(ChannelStatus::Connecting)),
        }
    }

    /// Reports `status`.
    pub fn set(&self, status: ChannelStatus) {
        self.tx.send_if_modified(|current| {
            if *current == status {
                return false;
            }
            *current = status;
            true
        });
    }

    /// Logging in (again).
    pub fn connecting(&self) {
        self.set(ChannelStatus::Connecting);
    }

    /// The platform accepted the login; events flow.
    pub fn connected(&self) {
        self.set(ChannelStatus::Connected);
    }

    /// The connection is down for `reason`; trying again.
    pub fn reconnecting(&self, reason: impl Into<String>) {
        self.set(ChannelStatus::Reconnecting {
            reason: reason.into(),
        });
    }

    /// Given up for `reason` until the next start.
    pub fn failed(&self, reason: impl Into<String>) {
        self.set(ChannelStatus::Failed {
            reason: reason.into(),
        });
    }

    /// The state reported last.
    pub fn current(&self) -> ChannelStatus {
        self.tx.borrow().clone()
    }

    /// A receiver that sees every later report.
    pub fn subscribe(&self) -> watch::Receiver<ChannelStatus> {
        self.tx.subscribe()
    }
}

/// A chat platform adapter.
#[async_trait]
pub trait Channel: Send + Sync + 'static {
    /// The channel's name as used in config, identities and targets: `telegram`, `terminal` …
    fn name(&self) -> &str;

    /// What the platform can show; the daemon shapes replies and confirmations with it.
    fn capabilities(&self) -> Capabilities;

    /// Receives the daemon's chat commands once, before the first `run`, for platforms with a
    /// command menu (Telegram `setMyCommands`, Discord application commands). The list belongs
    /// to the daemon; an adapter only shows it. An error is logged and the daemon carries on.
    async fn register_commands(&self, _commands: &[CommandInfo]) -> Result<(), ChannelError> {
        Ok(())
    }

    /// `hearth doctor`'s live checks of the platform, one line each: `Ok` says what was found
    /// (the bot's name, the server's capabilities), `Err` what failed and how to fix it. Only
    /// requests that cannot disturb a daemon running beside it: no long poll, no gateway
    /// session, no new login that would make a new device. None by default.
    async fn live_checks(&self) -> Vec<Result<String, String>> {
        Vec::new()
    }

    /// Receives events until `ctx.shutdown` is cancelled. Each event is handed to the sink and
    /// the platform cursor is advanced only after the sink acknowledged it.
    ///
    /// Reports its state through `ctx.status`: it starts as connecting, and the adapter reports
    /// connected once the platform accepted the login (not merely when `run` starts), and
    /// reconnecting while it retries a lost connection by itself.
    ///
    /// Returns `Ok(())` after shutdown; an error tells the supervisor what went wrong (its kind
    /// decides between restart with backoff and marking the channel failed).
    async fn run(&self, ctx: ChannelContext) -> Result<(), ChannelError>;

    /// Sends one message and returns where it landed. With `replaces` set, the preview is
    /// turned into this message instead (or, if the platform refuses to edit it, a new message
    /// is sent). The daemon splits long replies with [`plan()`] first, so `message.text` fits
    /// [`Capabilities::max_message_len`]; text that does not is `Rejected` rather than cut.
    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, ChannelError>;

    /// Replaces the text (and buttons) of a message sent earlier. The daemon fits the text to
    /// one message with [`plan_edit`].
    async fn edit(
        &self,
        target: &MessageRef,
        message: &OutboundMessage,
    ) -> Result<(), ChannelError>;

    /// Shows a "typing…" indicator in the chat, where the platform has one.
    async fn typing(&self, _chat: &ChatRef) -> Result<(), ChannelError> {
        Ok(())
    }

    /// Acknowledges a button press (Telegram `answerCallbackQuery`). `notice` is a short text
    /// shown to the presser, as an alert when `alert` is set. Not called on channels with
    /// [`Capabilities::acks_presses_on_receipt`]: they acknowledged the press when it arrived,
    /// and the daemon's answer comes as an edit or a follow-up message instead.
    async fn answer_press(
        &self,
        _press: &ButtonPress,
        _notice: Option<&str>,
        _alert: bool,
    ) -> Result<(), ChannelError> {
        Ok(())
    }

    /// Shows a reply while it is being generated. `update.text` is the beginning of what was
    /// generated so far, cut to one message by the daemon ([`preview_text`]).
    /// The first call (`update.draft` None) creates the preview; later calls pass the reference
    /// it returned. The final reply arrives later through `send` with `replaces` set to it.
    /// Only called when [`Capabilities::preview`] is set.
    ///
    /// `update.reply_to` is the message the reply answers: the preview quotes it where the
    /// outbound plan would quote the first part, since the final reply replaces the preview by
    /// an edit, and an edit cannot add a quote.
    async fn preview(&self, update: PreviewUpdate<'_>) -> Result<Option<MessageRef>, ChannelError> {
        let _ = update; // no preview by default
        Ok(None)
    }

    /// Downloads an attachment that arrived with a [`Attachment::source`], reading at most
    /// `max_bytes`: a larger file (by its declared size, or once more than `max_bytes` arrived)
    /// is `Rejected` without reading the rest, and nothing is held beyond the limit. The daemon
    /// calls it in the handler, after the sender proved allowed, never in the receive loop. A
    /// temporary error (`is_temporary`) is worth another try; others mean the file is gone.
    async fn fetch_attachment(
        &self,
        attachment: &Attachment,
        max_bytes: u64,
    ) -> Result<Vec<u8>, ChannelError> {
        let _ = (attachment, max_bytes); // adapters without remote attachments
        Err(ChannelError::rejected(
            "this channel cannot fetch attachments",
        ))
    }

    /// Counts of platform events the adapter keeps for `/metrics`, as (event, total since the
    /// channel was built): Discord's `ratelimited`, say. The daemon shows each as
    /// `hearth_channel_events_total{channel="<name>",event="<event>"}`. None by default.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Shows an event of a turn answering this chat (the agent chosen, a tool call, a
    /// decision). Called only on channels whose [`Capabilities::progress`] is set; the default
    /// shows nothing. A failure is logged and the turn goes on: a client that misses a progress
    /// event still gets the answer.
    async fn turn_event(&self, progress: Progress<'_>) -> Result<(), ChannelError> {
        let _ = progress; // no progress shown by default
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_reporter_starts_connecting_and_reports_changes_once() {
        let status = StatusReporter::new();
        assert_eq!(status.current(), ChannelStatus::Connecting);
        assert!(!status.current().is_settled());
        let mut seen = status.subscribe();
        status.connected();
        assert!(seen.has_changed().unwrap_or(false));
        seen.borrow_and_update();
        status.connected();
        assert!(
            !seen.has_changed().unwrap_or(true),
            "the same state reported again is no change"
        );
        status.reconnecting("502 Bad Gateway");
        assert_eq!(
            status.current().to_string(),
            "reconnecting: 502 Bad Gateway"
        );
        assert!(
            status.current().is_settled(),
            "a channel that retries counts as settled"
        );
        status.failed("401");
        assert_eq!(status.current().reason(), Some("401"));
        assert_eq!(status.current().as_str(), "failed");
    }

    struct Recorder(std::sync::Mutex<Vec<(String, String)>>);

    #[async_trait]
    impl InboundSink for Recorder {
        async fn deliver(&self, channel: &str, event: Inbound) -> Result<(), SinkError> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((channel.to_owned(), event.platform_id));
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_context_files_everything_under_its_own_channel() {
        let recorder = Arc::new(Recorder(std::sync::Mutex::new(Vec::new())));
        let ctx = ChannelContext::new(
            "telegram",
            CancellationToken::new(),
            recorder.clone(),
            Arc::new(testkit_state::Map::default()),
            PathBuf::from("/nonexistent"),
            StatusReporter::new(),
        );
        assert_eq!(ctx.name(), "telegram");
        let event = Inbound {
            platform_id: "1".into(),
            chat: ChatRef::new("c"),
            sender: Sender::new("u"),
            kind: InboundKind::Edit {
                message_id: "m".into(),
                text: "t".into(),
            },
            reply_context: None,
            agent: None,
        };
        ctx.sink.deliver(event).await.expect("delivered");
        ctx.state.save("offset", "7").await.expect("saved");
        assert_eq!(
            *recorder.0.lock().unwrap_or_else(|p| p.into_inner()),
            [("telegram".to_owned(), "1".to_owned())]
        );
        assert_eq!(
            ctx.state.load("offset").await.expect("loaded").as_deref(),
            Some("7")
        );
        let other = ScopedState::new("matrix", ctx.state.inner.clone());
        assert_eq!(
            other.load("offset").await.expect("loaded"),
            None,
            "state is per channel"
        );
    }

    mod testkit_state {
        use super::super::*;

        #[derive(Default)]
        pub struct Map(std::sync::Mutex<std::collections::HashMap<(String, String), String>>);

        #[async_trait]
        impl StateStore for Map {
            async fn load(&self, channel: &str, key: &str) -> Result<Option<String>, SinkError> {
                Ok(self
                    .0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&(channel.to_owned(), key.to_owned()))
                    .cloned())
            }
            async fn save(&self, channel: &str, key: &str, value: &str) -> Result<(), SinkError> {
                self.0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert((channel.to_owned(), key.to_owned()), value.to_owned());
                Ok(())
            }
        }
    }
}
