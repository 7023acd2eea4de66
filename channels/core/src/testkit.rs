//! A conformance suite every adapter runs against its local fake or real server, and the test
//! doubles the daemon's own tests reuse.
//!
//! An adapter's tests implement [`Harness`] (how to make the platform produce events, and what
//! the platform shows) and expand [`conformance_tests!`](crate::conformance_tests) with an async
//! function that builds a fresh harness. That gives one `#[tokio::test]` per check, so a failing
//! check is named. Where a platform lacks a capability, its check asserts the fallback that
//! [`Capabilities`](crate::Capabilities) documents instead of passing silently; a check that
//! cannot apply to a channel at all is opted out of by name, with the reason, and shows as an
//! ignored test (see the macro). Checks panic with a message that says what the adapter did
//! wrong, as test assertions do.
//!
//! ```ignore
//! async fn harness() -> MyHarness { MyHarness::start().await }
//! mod conformance {
//!     hearth_channel::conformance_tests!(super::harness);
//! }
//! ```

mod check;

pub use check::*;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{
    Button, Channel, ChannelContext, ChannelError, ChannelStatus, ChatRef, Inbound, InboundSink,
    MessageRef, OutboundMessage, Sender, SinkError, StateStore, StatusReporter,
};

/// How long a check waits for something the platform should do promptly.
pub const PATIENCE: Duration = Duration::from_secs(10);
/// How soon `run` must return after shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// An environment holding exactly these variables: a [`SecretSource`](crate::SecretSource)
/// for config checks and builds.
pub fn env(vars: &[(&str, &str)]) -> HashMap<String, String> {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A message as the platform shows it to the people in the chat.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shown {
    /// The platform's message id, as [`MessageRef::message_id`] names it.
    pub id: String,
    /// The visible text now (after edits), markup removed.
    pub text: String,
    /// The buttons under it, with their press data (emoji unknown: `None`).
    pub buttons: Vec<Button>,
    /// Reactions the bot put on it (buttons shown as reactions).
    pub reactions: Vec<String>,
    /// The message it quotes, by platform message id.
    pub reply_to: Option<String>,
}

/// A document a check makes a user send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    /// Its file name.
    pub name: String,
    /// Its MIME type.
    pub mime: String,
    /// Its content.
    pub bytes: Vec<u8>,
}

/// What the conformance checks need from an adapter's test setup: the adapter, pointed at the
/// platform's local server, and ways to act on that server as the platform's users would.
///
/// Methods for things a platform cannot do have defaults that say so; a check only calls them
/// when [`Channel::capabilities`] claims the capability.
#[async_trait]
pub trait Harness: Send + Sync {
    /// The adapter under test, configured against the local server. Called several times per
    /// check; returning the same instance each time is fine (and is how restarts are tested).
    fn channel(&self) -> Arc<dyn Channel>;
    /// The chat the checks talk in (outside any thread).
    fn chat(&self) -> ChatRef;
    /// The user the injected events come from.
    fn sender(&self) -> Sender;
    /// A chat with a thread (forum topic, Discord thread) the bot answers in, where the
    /// platform has threads.
    fn thread_chat(&self) -> Option<ChatRef> {
        None
    }

    /// Makes `message` what the daemon sends on this channel. Channels that send only in answer
    /// to a message (HTTP: every reply belongs to a turn) get the `reply_context` the daemon
    /// copies from the message answered: the one `reply_to` names, else one the harness makes
    /// the platform receive (the same one again for the same `delivery_id`, as a resend of one
    /// reply is). By default the message is sent as it is.
    async fn address(&self, message: OutboundMessage) -> OutboundMessage {
        message
    }

    /// Makes the platform produce a text message from `sender` in `chat`.
    async fn inject_text(&self, chat: &ChatRef, sender: &Sender, text: &str) -> Result<(), String>;
    /// Makes the platform produce a message with `caption` and a document attached.
    async fn inject_document(
        &self,
        chat: &ChatRef,
        sender: &Sender,
        caption: &str,
        document: &Document,
    ) -> Result<(), String>;
    /// Makes `sender` edit their message `message_id` to `text`.
    async fn inject_edit(
        &self,
        chat: &ChatRef,
        sender: &Sender,
        message_id: &str,
        text: &str,
    ) -> Result<(), String> {
        let _ = (chat, sender, message_id, text); // a platform without edits has nothing to do
        Err("this platform has no edits".into())
    }
    /// Makes `sender` press the button with `data` under `message`.
    async fn inject_press(
        &self,
        message: &MessageRef,
        sender: &Sender,
        data: &str,
    ) -> Result<(), String> {
        let _ = (message, sender, data); // a platform without buttons has nothing to press
        Err("this platform has no buttons".into())
    }
    /// Makes `sender` react to `message` with `emoji`.
    async fn inject_reaction(
        &self,
        message: &MessageRef,
        sender: &Sender,
        emoji: &str,
    ) -> Result<(), String> {
        let _ = (message, sender, emoji); // a platform without reactions has nothing to add
        Err("this platform has no reactions".into())
    }
    /// Makes the platform deliver the event `platform_id` (already acknowledged) once more, as
    /// it does after a lost acknowledgement.
    async fn redeliver(&self, platform_id: &str) -> Result<(), String>;

    /// What the platform shows in `chat` (in its thread, if it has one), oldest first.
    async fn shown(&self, chat: &ChatRef) -> Vec<Shown>;
    /// The ids of the presses the platform saw acknowledged, in order.
    async fn answered_presses(&self) -> Vec<String> {
        Vec::new()
    }
    /// How many typing indicators the platform showed in `chat`; `None` when it has none to
    /// show.
    async fn typing_shown(&self, chat: &ChatRef) -> Option<usize> {
        let _ = chat; // no typing indicator by default
        None
    }

    /// Makes the platform refuse the adapter's login (a revoked token, a wrong password).
    async fn refuse_login(&self) -> Result<(), String>;
    /// Makes the platform keep the adapter's next login waiting, until
    /// [`Harness::release_login`]. Platforms whose local server cannot hold a login say so.
    async fn hold_login(&self) -> Result<(), String> {
        Err("the local server cannot hold a login".into())
    }
    /// Lets a held login through.
    async fn release_login(&self) -> Result<(), String> {
        Err("the local server cannot hold a login".into())
    }
}

/// Expands to one `#[tokio::test]` per conformance check, each on a fresh harness from the async
/// function `$harness` (a path, called with no arguments, returning a [`Harness`]). Expand it
/// inside a module of its own, e.g. `mod conformance { conformance_tests!(super::harness); }`.
/// The calling crate needs `tokio` (with the `macros` and `rt` features) as a dependency.
/// A new `check_*` goes into the list below; `the_conformance_macro_runs_every_check` (in
/// `tests/conformance.rs`) fails while one is missing.
///
/// A channel for which a check cannot apply opts out of it by name, saying why:
///
/// ```ignore
/// conformance_tests!(super::harness, skip {
///     check_attachments_in: "the API takes text only",
/// });
/// ```
///
/// The check's test is then still there, marked `#[ignore]` with that reason, so `cargo test`
/// lists it as ignored and `cargo test -- --ignored` runs it. Naming a check that does not
/// exist, or giving an empty reason, does not compile.
#[macro_export]
macro_rules! conformance_tests {
    ($harness:path $(, skip { $($skip:ident : $why:literal),* $(,)? })? $(,)?) => {
        $crate::conformance_tests!(@skips ($) $harness; [$($($skip : $why),*)?]);
    };
    // `$d` is a `$` for the helper macro's own variables.
    (@skips ($d:tt) $harness:path; [$($skip:ident : $why:literal),*]) => {
        $(
            #[allow(unused_imports)]
            use $crate::testkit::$skip as _;
            const _: () = assert!(!$why.is_empty(), "an opted-out check needs a reason");
        )*
        macro_rules! __conformance_test {
            $(
                ($d test:ident, $skip) => {
                    #[tokio::test]
                    #[ignore = $why]
                    async fn $d test() {
                        let harness = $harness().await;
                        $crate::testkit::$skip(&harness).await;
                    }
                };
            )*
            ($d test:ident, $d check:ident) => {
                #[tokio::test]
                async fn $d test() {
                    let harness = $harness().await;
                    $crate::testkit::$d check(&harness).await;
                }
            };
        }
        $crate::conformance_tests!(@each
            inbound_text => check_inbound_text,
            failed_delivery_is_offered_again => check_failed_delivery_is_offered_again,
            unstored_event_survives_restart => check_unstored_event_survives_restart,
            duplicate_delivery_is_dropped => check_duplicate_delivery_is_dropped,
            shutdown_is_prompt => check_shutdown_is_prompt,
            text_out => check_send,
            message_at_the_limit_arrives_whole => check_message_at_the_limit_arrives_whole,
            over_limit_message => check_over_limit_message,
            markdown_basics => check_markdown_basics,
            edit => check_edit,
            buttons => check_buttons,
            presses => check_presses,
            reactions => check_reactions,
            inbound_edits => check_inbound_edits,
            threads => check_threads,
            reply_quoting => check_reply_quoting,
            preview_quotes_and_is_replaced => check_preview_quotes_and_is_replaced,
            typing => check_typing,
            stable_delivery_ids => check_stable_delivery_ids,
            attachments_in => check_attachments_in,
            state_connected_after_login => check_state_connected_after_login,
            state_failed_when_login_refused => check_state_failed_when_login_refused,
        );
    };
    (@each $($test:ident => $check:ident),* $(,)?) => {
        $( __conformance_test!($test, $check); )*
    };
}

// ----- test doubles -----

/// An [`InboundSink`] that records what it stores, deduplicated like the inbox, and can be
/// told to refuse or hold deliveries.
#[derive(Clone, Default)]
pub struct RecordingSink {
    inner: Arc<SinkInner>,
}

#[derive(Default)]
struct SinkInner {
    state: Mutex<SinkState>,
    /// Bumped on every `deliver` call, so waiters re-check.
    changed: watch::Sender<u64>,
    /// While true, `deliver` waits (a database that hangs).
    paused: watch::Sender<bool>,
}

#[derive(Default)]
struct SinkState {
    events: Vec<(String, Inbound)>,
    seen: HashSet<(String, String)>,
    attempts: Vec<Inbound>,
    fail_next: usize,
    refused: usize,
    duplicates: usize,
}

impl std::fmt::Debug for RecordingSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingSink").finish_non_exhaustive()
    }
}

impl RecordingSink {
    /// A sink that stores everything.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, SinkState> {
        // Plain data; a panicking test thread cannot leave it half-updated.
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Refuses the next `n` deliveries (replacing any earlier count); `usize::MAX` refuses all.
    pub fn fail_next(&self, n: usize) {
        self.lock().fail_next = n;
    }

    /// Makes `deliver` wait until [`RecordingSink::resume`].
    pub fn pause(&self) {
        self.inner.paused.send_replace(true);
    }

    /// Lets waiting and later deliveries through.
    pub fn resume(&self) {
        self.inner.paused.send_replace(false);
    }

    /// Stored events, first delivery of each platform id only, in order.
    pub fn events(&self) -> Vec<Inbound> {
        self.lock().events.iter().map(|(_, e)| e.clone()).collect()
    }

    /// Stored events with the channel name they came from.
    pub fn events_with_channel(&self) -> Vec<(String, Inbound)> {
        self.lock().events.clone()
    }

    /// Every `deliver` call, refused and duplicate ones included.
    pub fn attempts(&self) -> Vec<Inbound> {
        self.lock().attempts.clone()
    }

    /// How many deliveries were refused.
    pub fn refused(&self) -> usize {
        self.lock().refused
    }

    /// How many deliveries were of an already stored event.
    pub fn duplicates(&self) -> usize {
        self.lock().duplicates
    }

    /// Waits until a stored event matches, up to `timeout`.
    pub async fn wait_for_event(
        &self,
        matches: impl Fn(&Inbound) -> bool,
        timeout: Duration,
    ) -> Option<Inbound> {
        self.wait(
            |events, _| events.iter().find(|e| matches(e)).cloned(),
            timeout,
        )
        .await
    }

    /// The texts of the stored messages, in order.
    pub fn texts(&self) -> Vec<String> {
        self.events()
            .iter()
            .filter_map(|e| e.text().map(str::to_owned))
            .collect()
    }

    /// Waits until a message with exactly `text` is stored, up to `timeout`; panics naming what
    /// arrived instead.
    pub async fn wait_text(&self, text: &str, timeout: Duration) -> Inbound {
        self.wait_for_event(|e| e.text() == Some(text), timeout)
            .await
            .unwrap_or_else(|| panic!("{text:?} never arrived; got {:?}", self.texts()))
    }

    /// Waits until at least `n` events are stored, up to `timeout`, and returns them all.
    pub async fn wait_for_events(&self, n: usize, timeout: Duration) -> Vec<Inbound> {
        // Timing out is an expected outcome: the caller asserts on what arrived.
        let _ = self
            .wait(|events, _| (events.len() >= n).then_some(()), timeout)
            .await;
        self.events()
    }

    /// Waits until a `deliver` call (stored or not) matches, up to `timeout`.
    pub async fn wait_for_attempt(
        &self,
        matches: impl Fn(&Inbound) -> bool,
        timeout: Duration,
    ) -> Option<Inbound> {
        self.wait(
            |_, attempts| attempts.iter().find(|e| matches(e)).cloned(),
            timeout,
        )
        .await
    }

    /// Re-checks on every `deliver` call, on a copy of (stored events, attempts) so `check`
    /// may call back into the sink.
    async fn wait<T>(
        &self,
        check: impl Fn(&[Inbound], &[Inbound]) -> Option<T>,
        timeout: Duration,
    ) -> Option<T> {
        let mut changed = self.inner.changed.subscribe();
        let wait = async {
            loop {
                changed.borrow_and_update();
                let (events, attempts) = {
                    let state = self.lock();
                    let events: Vec<Inbound> =
                        state.events.iter().map(|(_, e)| e.clone()).collect();
                    (events, state.attempts.clone())
                };
                if let Some(found) = check(&events, &attempts) {
                    return Some(found);
                }
                if changed.changed().await.is_err() {
                    return None;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.ok().flatten()
    }
}

#[async_trait]
impl InboundSink for RecordingSink {
    async fn deliver(&self, channel: &str, event: Inbound) -> Result<(), SinkError> {
        self.lock().attempts.push(event.clone());
        self.inner.changed.send_modify(|n| *n += 1);
        let mut paused = self.inner.paused.subscribe();
        // The sender lives in `self`, so this ends only when resumed.
        let _ = paused.wait_for(|p| !p).await;
        let result = {
            let mut state = self.lock();
            if state.fail_next > 0 {
                state.fail_next -= 1;
                state.refused += 1;
                Err(SinkError("refused by the test".into()))
            } else if state
                .seen
                .insert((channel.to_owned(), event.platform_id.clone()))
            {
                state.events.push((channel.to_owned(), event));
                Ok(())
            } else {
                state.duplicates += 1;
                Ok(())
            }
        };
        self.inner.changed.send_modify(|n| *n += 1);
        result
    }
}

/// An in-memory [`StateStore`]; clones share the data, so a "restarted" adapter finds its
/// cursor.
#[derive(Clone, Debug, Default)]
pub struct MemoryState {
    values: Arc<Mutex<HashMap<(String, String), String>>>,
}

impl MemoryState {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stored value, for assertions on cursors.
    pub fn get(&self, channel: &str, key: &str) -> Option<String> {
        self.lock()
            .get(&(channel.to_owned(), key.to_owned()))
            .cloned()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), String>> {
        // Single inserts and reads; a poisoned map is still consistent.
        self.values
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl StateStore for MemoryState {
    async fn load(&self, channel: &str, key: &str) -> Result<Option<String>, SinkError> {
        Ok(self.get(channel, key))
    }

    async fn save(&self, channel: &str, key: &str, value: &str) -> Result<(), SinkError> {
        self.lock()
            .insert((channel.to_owned(), key.to_owned()), value.to_owned());
        Ok(())
    }
}

/// A channel's `run` loop in a task, with the sink, state, data directory and status reporter
/// it was given.
pub struct Running {
    /// The sink the run delivers to.
    pub sink: RecordingSink,
    /// The state store the run keeps its cursor in.
    pub state: MemoryState,
    /// Where the run reports its connection state.
    pub status: StatusReporter,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), ChannelError>>,
    /// The channel's data directory; removed when the run is dropped.
    _data_dir: tempfile::TempDir,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running").finish_non_exhaustive()
    }
}

impl Running {
    /// Spawns `channel.run` with a fresh shutdown token, status reporter and data directory.
    pub fn start(channel: Arc<dyn Channel>, sink: RecordingSink, state: MemoryState) -> Self {
        let data_dir = tempfile::Builder::new()
            .prefix("hearth-channel-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a data directory for the channel: {e}"));
        let shutdown = CancellationToken::new();
        let status = StatusReporter::new();
        let ctx = ChannelContext::new(
            channel.name(),
            shutdown.clone(),
            Arc::new(sink.clone()),
            Arc::new(state.clone()),
            data_dir.path().to_path_buf(),
            status.clone(),
        );
        let task = tokio::spawn(async move { channel.run(ctx).await });
        Self {
            sink,
            state,
            status,
            shutdown,
            task,
            _data_dir: data_dir,
        }
    }

    /// Waits until the reported state matches, up to `timeout`; returns the last state seen.
    pub async fn wait_for_status(
        &self,
        matches: impl Fn(&ChannelStatus) -> bool,
        timeout: Duration,
    ) -> ChannelStatus {
        let mut status = self.status.subscribe();
        // Timing out is an expected outcome: the caller asserts on the state returned.
        let _ = tokio::time::timeout(timeout, status.wait_for(|s| matches(s))).await;
        self.status.current()
    }

    /// Whether `run` has returned.
    pub fn finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Waits up to `timeout` for `run` to return by itself (without shutdown) and returns its
    /// result; `None` if it is still running.
    pub async fn returned(self, timeout: Duration) -> Option<Result<(), ChannelError>> {
        let shutdown = self.shutdown.clone();
        let result = match tokio::time::timeout(timeout, self.task).await {
            Err(_) => None,
            Ok(Err(join)) => panic!("run panicked: {join}"),
            Ok(Ok(result)) => Some(result),
        };
        // Whatever happened, nothing may keep running after the check.
        shutdown.cancel();
        result
    }

    /// Cancels the run and asserts it returns `Ok` within two seconds.
    pub async fn stop(self) {
        self.shutdown.cancel();
        match tokio::time::timeout(SHUTDOWN_GRACE, self.task).await {
            Err(_) => panic!("run did not return within {SHUTDOWN_GRACE:?} of shutdown"),
            Ok(Err(join)) => panic!("run panicked: {join}"),
            Ok(Ok(Err(error))) => panic!("run returned an error after shutdown: {error}"),
            Ok(Ok(Ok(()))) => {}
        }
    }
}
