//! A conformance suite every adapter runs against its local fake or real server, and the test
//! doubles the daemon's own tests reuse.
//!
//! An adapter's test implements [`Harness`] (how to make the platform produce a message and
//! what the platform shows) and calls [`run_conformance`]. Each check is also public, so a
//! platform that cannot do one of them can run the rest. Checks panic with a message that says
//! what the adapter did wrong, as test assertions do.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{
    Button, Channel, ChannelContext, ChannelError, ChatRef, Inbound, InboundKind, InboundSink,
    OutboundMessage, Sender, SinkError, StateStore,
};

/// How long a check waits for something the platform should do promptly.
const PATIENCE: Duration = Duration::from_secs(10);
/// How soon `run` must return after shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// What a conformance run needs from an adapter's test setup.
#[async_trait]
pub trait Harness: Send + Sync {
    /// The adapter under test, configured against the local server. Called once per check;
    /// returning the same instance each time is fine (and is how restarts are tested).
    fn channel(&self) -> Arc<dyn Channel>;
    /// Makes the platform produce an inbound text message from `sender` in `chat`.
    async fn inject_text(&self, chat: &ChatRef, sender: &Sender, text: &str) -> Result<(), String>;
    /// What the platform shows in `chat`, in order: the latest text of each message.
    async fn sent_texts(&self, chat: &ChatRef) -> Vec<String>;
    /// The chat the checks talk in.
    fn chat(&self) -> ChatRef;
    /// The user the injected messages come from.
    fn sender(&self) -> Sender;
}

/// Runs every check, in order.
pub async fn run_conformance(h: &dyn Harness) {
    check_inbound_text(h).await;
    check_failed_delivery_is_offered_again(h).await;
    check_unstored_event_survives_restart(h).await;
    check_shutdown_is_prompt(h).await;
    check_send(h).await;
    check_long_reply_is_split(h).await;
    check_over_limit_send_is_rejected(h).await;
    check_edit(h).await;
    check_buttons(h).await;
    check_markdown_basics(h).await;
}

/// Inbound text reaches the sink with the right chat, sender and text.
pub async fn check_inbound_text(h: &dyn Harness) {
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    let text = unique("hello from conformance");
    inject(h, &text).await;
    let event = running
        .sink
        .wait_for_event(|e| text_of(e) == Some(&text), PATIENCE)
        .await
        .unwrap_or_else(|| panic!("inbound {text:?} never reached the sink"));
    assert_eq!(event.chat, h.chat(), "inbound event in the wrong chat");
    assert_eq!(
        event.sender.id,
        h.sender().id,
        "inbound event from the wrong sender"
    );
    assert!(
        !event.platform_id.is_empty(),
        "inbound event without a platform id"
    );
    running.stop().await;
}

/// An event whose delivery fails is offered again within the same run, and the adapter does not
/// deliver later events before it (its cursor does not pass it).
pub async fn check_failed_delivery_is_offered_again(h: &dyn Harness) {
    let sink = RecordingSink::new();
    sink.fail_next(1);
    let running = Running::start(h.channel(), sink.clone(), MemoryState::new());
    let first = unique("refused at first");
    let second = unique("after the refused one");
    inject(h, &first).await;
    inject(h, &second).await;
    sink.wait_for_event(|e| text_of(e) == Some(&second), PATIENCE)
        .await
        .unwrap_or_else(|| panic!("{second:?} never reached the sink"));
    let texts: Vec<String> = sink
        .events()
        .iter()
        .filter_map(|e| text_of(e).cloned())
        .collect();
    let at_first = texts.iter().position(|t| *t == first);
    let at_second = texts.iter().position(|t| *t == second);
    assert!(
        at_first.is_some(),
        "{first:?} was refused once and never offered again"
    );
    assert!(
        at_first < at_second,
        "{second:?} was stored before the refused {first:?}: {texts:?}"
    );
    running.stop().await;
}

/// An event the sink never stored is delivered by the next run (a daemon restart with the same
/// state): the adapter acknowledges only what is stored.
pub async fn check_unstored_event_survives_restart(h: &dyn Harness) {
    let state = MemoryState::new();
    let refusing = RecordingSink::new();
    refusing.fail_next(usize::MAX);
    let running = Running::start(h.channel(), refusing.clone(), state.clone());
    let text = unique("never stored before the restart");
    inject(h, &text).await;
    refusing
        .wait_for_attempt(|e| text_of(e) == Some(&text), PATIENCE)
        .await
        .unwrap_or_else(|| panic!("{text:?} was never offered to the sink"));
    running.stop().await;

    let running = Running::start(h.channel(), RecordingSink::new(), state);
    running
        .sink
        .wait_for_event(|e| text_of(e) == Some(&text), PATIENCE)
        .await
        .unwrap_or_else(|| panic!("{text:?} was lost: the cursor passed an unstored event"));
    running.stop().await;
}

/// `run` returns within two seconds of shutdown, also while a delivery is pending, and the
/// pending event is delivered by the next run.
pub async fn check_shutdown_is_prompt(h: &dyn Harness) {
    // Idle.
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    tokio::time::sleep(Duration::from_millis(200)).await;
    running.stop().await;

    // Blocked in `deliver`.
    let state = MemoryState::new();
    let stuck = RecordingSink::new();
    stuck.pause();
    let running = Running::start(h.channel(), stuck.clone(), state.clone());
    let text = unique("pending at shutdown");
    inject(h, &text).await;
    stuck
        .wait_for_attempt(|e| text_of(e) == Some(&text), PATIENCE)
        .await
        .unwrap_or_else(|| panic!("{text:?} was never offered to the sink"));
    running.stop().await;

    let running = Running::start(h.channel(), RecordingSink::new(), state);
    running
        .sink
        .wait_for_event(|e| text_of(e) == Some(&text), PATIENCE)
        .await
        .unwrap_or_else(|| panic!("{text:?}, pending at shutdown, was lost"));
    running.stop().await;
}

/// `send` returns a reference in the right chat, and the text is visible on the platform.
pub async fn check_send(h: &dyn Harness) {
    let channel = h.channel();
    let text = unique("a plain reply");
    let sent = send(&*channel, OutboundMessage::text(h.chat(), &text)).await;
    assert_eq!(
        sent.chat,
        h.chat(),
        "send returned a reference to another chat"
    );
    assert!(
        !sent.message_id.is_empty(),
        "send returned an empty message id"
    );
    assert_visible(h, &text).await;
}

/// A reply longer than `max_message_len`, planned with [`crate::plan()`] and sent one part per
/// `send`, arrives complete, in order, in parts within the limit. Without a limit, a long reply
/// arrives whole.
pub async fn check_long_reply_is_split(h: &dyn Harness) {
    let channel = h.channel();
    let max = channel.capabilities().max_message_len;
    // ASCII words, so every way of counting agrees, in paragraphs so splits have natural places.
    let target = max.map_or(10_000, |m| m * 5 / 2);
    let tag = unique("long");
    let mut text = String::new();
    let mut n = 0;
    while text.len() < target {
        n += 1;
        text.push_str(&format!("w{n:05}"));
        text.push_str(if n % 40 == 0 { "\n\n" } else { " " });
    }
    text = format!("{tag} {}", text.trim_end());

    let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let before = h.sent_texts(&h.chat()).await.len();
    let reply = OutboundMessage::text(h.chat(), &text);
    for part in crate::plan(&reply, &channel.capabilities()) {
        send(&*channel, part.message(&reply)).await;
    }
    // A platform may show the parts a little after `send` returns.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let parts = loop {
        let shown = h.sent_texts(&h.chat()).await;
        let parts = shown.get(before..).unwrap_or_default().to_vec();
        let complete = parts.iter().flat_map(|p| words(p)).count() >= words(&text).len();
        if complete || tokio::time::Instant::now() >= deadline {
            break parts;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!parts.is_empty(), "the long reply is not visible");
    if let Some(max) = max {
        for part in &parts {
            assert!(
                part.chars().count() <= max,
                "a part of {} characters exceeds the limit {max}",
                part.chars().count()
            );
        }
    }
    let arrived: Vec<String> = parts.iter().flat_map(|p| words(p)).collect();
    assert!(
        arrived == words(&text),
        "the long reply did not arrive complete and in order ({} words sent, {} shown)",
        words(&text).len(),
        arrived.len()
    );
}

/// `send` shows exactly one message: text over the limit is refused as `Rejected`, never cut
/// or split by the adapter (splitting is the daemon's plan, which records each part).
pub async fn check_over_limit_send_is_rejected(h: &dyn Harness) {
    let channel = h.channel();
    let capabilities = channel.capabilities();
    let Some(max) = capabilities.max_message_len else {
        return;
    };
    let tag = unique("too long");
    let mut text = format!("{tag} ");
    while capabilities.measure.len(&text) <= max {
        text.push_str("word ");
    }
    let before = h.sent_texts(&h.chat()).await.len();
    let error = channel
        .send(&OutboundMessage::text(h.chat(), &text))
        .await
        .expect_err("a send over the platform limit must fail");
    assert_eq!(
        error.kind,
        crate::ErrorKind::Rejected,
        "an over-limit send must be Rejected (retrying cannot help): {error}"
    );
    let shown = h.sent_texts(&h.chat()).await;
    assert!(
        !shown[before.min(shown.len())..]
            .iter()
            .any(|t| t.contains(&tag)),
        "part of an over-limit send was shown: {shown:?}"
    );
}

/// `edit` changes the visible text, where the platform has edits.
pub async fn check_edit(h: &dyn Harness) {
    let channel = h.channel();
    if !channel.capabilities().edits {
        return;
    }
    let before = unique("before the edit");
    let after = unique("after the edit");
    let sent = send(&*channel, OutboundMessage::text(h.chat(), &before)).await;
    channel
        .edit(&sent, &OutboundMessage::text(h.chat(), &after))
        .await
        .unwrap_or_else(|e| panic!("edit failed: {e}"));
    let shown = visible_eventually(h, &after).await;
    assert!(
        !shown.iter().any(|t| t.contains(&before)),
        "the old text is still shown after the edit: {shown:?}"
    );
}

/// Buttons are accepted, where the platform has them.
pub async fn check_buttons(h: &dyn Harness) {
    let channel = h.channel();
    if !channel.capabilities().buttons {
        return;
    }
    let text = unique("approve this?");
    let mut message = OutboundMessage::text(h.chat(), &text);
    message.buttons = vec![
        Button {
            label: "✅ Approve".into(),
            data: "conformance:yes".into(),
        },
        Button {
            label: "❌ Deny".into(),
            data: "conformance:no".into(),
        },
    ];
    send(&*channel, message).await;
    assert_visible(h, &text).await;
}

/// Basic Markdown (`**bold**`, `` `code` ``) is sent without an error and its words are shown.
pub async fn check_markdown_basics(h: &dyn Harness) {
    let channel = h.channel();
    let tag = unique("markdown");
    let text = format!("{tag}: **bold** and `code` and a_b < c & d");
    send(&*channel, OutboundMessage::text(h.chat(), &text)).await;
    let shown = visible_eventually(h, &tag).await;
    let last = shown
        .iter()
        .rev()
        .find(|t| t.contains(&tag))
        .cloned()
        .unwrap_or_default();
    for word in ["bold", "code"] {
        assert!(last.contains(word), "{word:?} missing from {last:?}");
    }
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

/// A channel's `run` loop in a task, with the sink and shutdown token it was given.
pub struct Running {
    /// The sink the run delivers to.
    pub sink: RecordingSink,
    /// The state store the run keeps its cursor in.
    pub state: MemoryState,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), ChannelError>>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running").finish_non_exhaustive()
    }
}

impl Running {
    /// Spawns `channel.run` with a fresh shutdown token.
    pub fn start(channel: Arc<dyn Channel>, sink: RecordingSink, state: MemoryState) -> Self {
        let shutdown = CancellationToken::new();
        let ctx = ChannelContext {
            shutdown: shutdown.clone(),
            sink: Arc::new(sink.clone()),
            state: Arc::new(state.clone()),
        };
        let task = tokio::spawn(async move { channel.run(ctx).await });
        Self {
            sink,
            state,
            shutdown,
            task,
        }
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

// ----- helpers -----

/// A text no earlier run can have produced, so checks find their own messages even on a
/// platform that still shows (or redelivers) older ones.
fn unique(label: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{label} #{n}-{nanos:x}")
}

fn text_of(event: &Inbound) -> Option<&String> {
    match &event.kind {
        InboundKind::Message { text, .. } => Some(text),
        _ => None,
    }
}

async fn inject(h: &dyn Harness, text: &str) {
    h.inject_text(&h.chat(), &h.sender(), text)
        .await
        .unwrap_or_else(|e| panic!("the harness could not inject {text:?}: {e}"));
}

async fn send(channel: &dyn Channel, message: OutboundMessage) -> crate::MessageRef {
    channel
        .send(&message)
        .await
        .unwrap_or_else(|e| panic!("send of {:?} failed: {e}", message.text))
}

/// Waits until some shown message contains `needle` and returns what the chat shows.
async fn visible_eventually(h: &dyn Harness, needle: &str) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let shown = h.sent_texts(&h.chat()).await;
        // A platform may show a sent message a little later than `send` returns.
        if shown.iter().any(|t| t.contains(needle)) || tokio::time::Instant::now() >= deadline {
            return shown;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn assert_visible(h: &dyn Harness, needle: &str) {
    let shown = visible_eventually(h, needle).await;
    assert!(
        shown.iter().any(|t| t.contains(needle)),
        "{needle:?} is not visible in the chat: {shown:?}"
    );
}
