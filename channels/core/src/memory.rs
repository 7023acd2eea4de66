//! An in-memory chat platform for tests of the daemon.
//!
//! [`MemoryChannel`] behaves like a small, strict platform: inbound events wait in a queue (the
//! platform side of a cursor) until the sink acknowledges them, sent messages get sequential
//! ids and can be edited, and sends can be made to fail on demand. Tests drive it from the
//! platform side (`push_text`, `push_press`, `push_reaction`, `push_edit`, `redeliver`,
//! `set_login`) and inspect what the daemon did (`sent`, `wait_for_sent`, `answered_presses`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;

use crate::split::Measure;
use crate::{
    Attachment, Button, ButtonPress, Capabilities, Channel, ChannelContext, ChannelError, ChatRef,
    Format, Inbound, InboundKind, MessageRef, OutboundMessage, PreviewUpdate, Sender,
};

/// A message as the in-memory platform shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct SentMessage {
    /// The platform message id: "1", "2", … in the order messages were created.
    pub id: String,
    /// The chat it was sent to.
    pub chat: ChatRef,
    /// The current text.
    pub text: String,
    /// The buttons under it, as last sent or edited.
    pub buttons: Vec<Button>,
    /// The message it quotes.
    pub reply_to: Option<String>,
    /// Every text the message was edited to, oldest first; the last one equals `text`.
    pub edits: Vec<String>,
    /// Created by [`Channel::preview`] and not yet replaced by a final reply.
    pub draft: bool,
}

impl SentMessage {
    /// A reference to this message, as `send` returned it.
    pub fn reference(&self) -> MessageRef {
        MessageRef {
            chat: self.chat.clone(),
            message_id: self.id.clone(),
        }
    }
}

/// How the in-memory platform answers the login `run` starts with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Login {
    /// Accepted at once: the channel reports connected as soon as `run` starts (the default).
    Accept,
    /// Not answered yet: the channel stays connecting until the login is set to another value.
    Hold,
    /// Refused with this reason: `run` reports failed and returns an `Auth` error.
    Refuse(String),
}

/// A recorded [`Channel::answer_press`] call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnsweredPress {
    /// The press answered.
    pub press_id: String,
    /// The short notice shown, if any.
    pub notice: Option<String>,
    /// Whether the notice was shown as an alert the user must dismiss.
    pub alert: bool,
}

/// An in-memory platform implementing [`Channel`]. Cheap to clone: clones share the platform,
/// so a test keeps one handle and gives the daemon another (`Arc::new(channel.clone())`).
///
/// By default it has buttons, edits, reactions and threads, no length limit, Markdown and no
/// previews; [`MemoryChannel::with_capabilities`] changes that. Like every adapter it shows one
/// message per `send` (the daemon plans the split). It is strict where a real platform would
/// be: buttons without the capability, edits without the capability, previews without the
/// capability, edits of unknown messages, and sends, edits and previews longer than the limit
/// are `Rejected`.
#[derive(Clone)]
pub struct MemoryChannel {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MemoryChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryChannel")
            .field("name", &self.shared.name)
            .finish_non_exhaustive()
    }
}

struct Shared {
    name: String,
    state: Mutex<State>,
    /// Bumped whenever an event is queued, so an idle `run` wakes up.
    inbound_changed: watch::Sender<u64>,
    /// How the platform answers logins; a change wakes a `run` waiting on a held login.
    login: watch::Sender<Login>,
    /// The number of sent messages, for `wait_for_sent`.
    sent_count: watch::Sender<usize>,
}

struct State {
    capabilities: Capabilities,
    retry_delay: Duration,
    /// Events the platform has not seen acknowledged, oldest first, with a queue sequence
    /// number so an acknowledgement removes exactly the event that was delivered.
    queue: VecDeque<(u64, Inbound)>,
    next_seq: u64,
    /// Acknowledged events, in order, kept for `redeliver`.
    acknowledged: Vec<Inbound>,
    next_inbound_id: u64,
    sent: Vec<SentMessage>,
    send_attempts: Vec<OutboundMessage>,
    fail_sends: VecDeque<ChannelError>,
    /// How long a send takes to answer after the message is shown.
    answer_delay: Duration,
    presses: Vec<AnsweredPress>,
    typing: usize,
    /// Files the platform holds, by [`Attachment::source`], and every source fetched.
    files: std::collections::HashMap<String, Vec<u8>>,
    fetched: Vec<String>,
}

impl MemoryChannel {
    /// A new, empty platform called `name` (the channel name the daemon sees).
    pub fn new(name: impl Into<String>) -> Self {
        let state = State {
            capabilities: Capabilities {
                buttons: true,
                edits: true,
                reactions: true,
                threads: true,
                max_message_len: None,
                measure: Measure::Chars,
                format: Format::Markdown,
                preview: None,
                typing_interval: Some(Duration::from_secs(4)),
                ..Capabilities::default()
            },
            retry_delay: Duration::from_millis(50),
            queue: VecDeque::new(),
            next_seq: 0,
            acknowledged: Vec::new(),
            next_inbound_id: 0,
            sent: Vec::new(),
            send_attempts: Vec::new(),
            fail_sends: VecDeque::new(),
            answer_delay: Duration::ZERO,
            presses: Vec::new(),
            typing: 0,
            files: std::collections::HashMap::new(),
            fetched: Vec::new(),
        };
        Self {
            shared: Arc::new(Shared {
                name: name.into(),
                state: Mutex::new(state),
                inbound_changed: watch::Sender::new(0),
                login: watch::Sender::new(Login::Accept),
                sent_count: watch::Sender::new(0),
            }),
        }
    }

    /// Puts a file on the platform under `source`, for a message whose attachment names it
    /// ([`Attachment::remote`]); [`Channel::fetch_attachment`] then returns it.
    pub fn add_file(&self, source: &str, bytes: Vec<u8>) {
        self.lock().files.insert(source.to_owned(), bytes);
    }

    /// The sources of every file fetched so far, in order (a test checks a stranger's file was
    /// never downloaded).
    pub fn fetched_files(&self) -> Vec<String> {
        self.lock().fetched.clone()
    }

    /// Sets what the platform claims it can show (and enforces it).
    pub fn with_capabilities(self, capabilities: Capabilities) -> Self {
        self.lock().capabilities = capabilities;
        self
    }

    /// Sets the unit `max_message_len` is counted in (characters by default); the same as
    /// setting [`Capabilities::measure`].
    pub fn with_measure(self, measure: Measure) -> Self {
        self.lock().capabilities.measure = measure;
        self
    }

    /// Sets how the platform answers the login of the next `run` (see [`Login`]).
    pub fn with_login(self, login: Login) -> Self {
        self.set_login(login);
        self
    }

    /// Changes how the platform answers logins; a `run` waiting on a held login sees it at once.
    pub fn set_login(&self, login: Login) {
        self.shared.login.send_replace(login);
    }

    /// Sets how long `run` waits before offering a refused event again (50 ms by default).
    pub fn with_retry_delay(self, delay: Duration) -> Self {
        self.lock().retry_delay = delay;
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock leaves consistent data behind: every
        // critical section below is a few plain assignments.
        self.shared
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    // ----- the platform side: what users do -----

    /// Queues an event as if the platform received it. Pushing an event with a `platform_id`
    /// seen before simulates platform redelivery.
    pub fn push(&self, event: Inbound) {
        {
            let mut state = self.lock();
            let seq = state.next_seq;
            state.next_seq += 1;
            state.queue.push_back((seq, event));
        }
        self.shared.inbound_changed.send_modify(|n| *n += 1);
    }

    /// Queues a text message from `sender_id` in `chat_id` and returns its platform id (which
    /// is also its message id).
    pub fn push_text(&self, chat_id: &str, sender_id: &str, text: &str) -> String {
        self.push_text_in(&ChatRef::new(chat_id), &Sender::new(sender_id), text)
    }

    /// Like [`MemoryChannel::push_text`] with a full chat (thread included) and sender.
    pub fn push_text_in(&self, chat: &ChatRef, sender: &Sender, text: &str) -> String {
        self.push_message(chat, sender, text, Vec::new(), None)
    }

    /// Queues a message from `sender` in `chat` with these attachments, answering the message
    /// `reply_to` if given; returns its platform id (also its message id).
    pub fn push_message(
        &self,
        chat: &ChatRef,
        sender: &Sender,
        text: &str,
        attachments: Vec<Attachment>,
        reply_to: Option<&str>,
    ) -> String {
        let id = self.next_inbound_id("msg");
        self.push(Inbound {
            platform_id: id.clone(),
            chat: chat.clone(),
            sender: sender.clone(),
            kind: InboundKind::Message {
                text: text.to_owned(),
                attachments,
                message_id: Some(id.clone()),
                reply_to: reply_to.map(str::to_owned),
            },
            reply_context: None,
            agent: None,
        });
        id
    }

    /// Queues a reaction with `emoji` by `sender_id` to `message`; returns its platform id.
    pub fn push_reaction(&self, message: &MessageRef, sender_id: &str, emoji: &str) -> String {
        let id = self.next_inbound_id("reaction");
        self.push(Inbound {
            platform_id: id.clone(),
            chat: message.chat.clone(),
            sender: Sender::new(sender_id),
            kind: InboundKind::Reaction {
                message_id: message.message_id.clone(),
                emoji: emoji.to_owned(),
            },
            reply_context: None,
            agent: None,
        });
        id
    }

    /// Queues an edit by `sender` of their message `message_id` in `chat` to `text`; returns
    /// the edit's platform id.
    pub fn push_edit(
        &self,
        chat: &ChatRef,
        sender: &Sender,
        message_id: &str,
        text: &str,
    ) -> String {
        let id = self.next_inbound_id("edit");
        self.push(Inbound {
            platform_id: id.clone(),
            chat: chat.clone(),
            sender: sender.clone(),
            kind: InboundKind::Edit {
                message_id: message_id.to_owned(),
                text: text.to_owned(),
            },
            reply_context: None,
            agent: None,
        });
        id
    }

    /// Queues a press of the button with `data` under `message` and returns the press id
    /// (also the event's platform id).
    pub fn push_press(&self, message: &MessageRef, sender_id: &str, data: &str) -> String {
        let id = self.next_inbound_id("press");
        self.push(Inbound {
            platform_id: id.clone(),
            chat: message.chat.clone(),
            sender: Sender::new(sender_id),
            kind: InboundKind::Press(ButtonPress {
                press_id: id.clone(),
                data: data.to_owned(),
                message: Some(message.clone()),
            }),
            reply_context: None,
            agent: None,
        });
        id
    }

    fn next_inbound_id(&self, prefix: &str) -> String {
        let mut state = self.lock();
        state.next_inbound_id += 1;
        format!("{}-{prefix}-{}", self.shared.name, state.next_inbound_id)
    }

    /// Queues an already acknowledged event again, as a platform does after a lost
    /// acknowledgement. Returns false if no acknowledged event has that id.
    pub fn redeliver(&self, platform_id: &str) -> bool {
        let event = self
            .lock()
            .acknowledged
            .iter()
            .find(|e| e.platform_id == platform_id)
            .cloned();
        match event {
            Some(event) => {
                self.push(event);
                true
            }
            None => false,
        }
    }

    /// Makes the next sends fail with these errors, one per send, in order.
    pub fn fail_next_sends(&self, errors: Vec<ChannelError>) {
        self.lock().fail_sends.extend(errors);
    }

    // ----- inspection -----

    /// Makes later sends answer `delay` after the message is shown, as a platform slow to
    /// answer does: people can see (and press) the message before hearth knows it arrived.
    pub fn answer_sends_after(&self, delay: Duration) {
        self.lock().answer_delay = delay;
    }

    /// Events queued and not yet acknowledged by a sink.
    pub fn pending_inbound(&self) -> usize {
        self.lock().queue.len()
    }

    /// Platform ids of acknowledged events, in the order they were acknowledged.
    pub fn acknowledged(&self) -> Vec<String> {
        let state = self.lock();
        state
            .acknowledged
            .iter()
            .map(|e| e.platform_id.clone())
            .collect()
    }

    /// Every message on the platform (previews included), in creation order.
    pub fn sent(&self) -> Vec<SentMessage> {
        self.lock().sent.clone()
    }

    /// The messages in chat `chat_id` (any thread), in creation order.
    pub fn sent_to(&self, chat_id: &str) -> Vec<SentMessage> {
        let state = self.lock();
        state
            .sent
            .iter()
            .filter(|m| m.chat.chat_id == chat_id)
            .cloned()
            .collect()
    }

    /// Waits until at least `n` messages exist or `timeout` passes, then returns all of them;
    /// on timeout the caller's assertion on the result shows what did arrive.
    pub async fn wait_for_sent(&self, n: usize, timeout: Duration) -> Vec<SentMessage> {
        let mut count = self.shared.sent_count.subscribe();
        // Timing out is an expected outcome here: the caller inspects what arrived.
        let _ = tokio::time::timeout(timeout, count.wait_for(|&c| c >= n)).await;
        self.sent()
    }

    /// Every `send` call, failed or not, with the message it was asked to send.
    pub fn send_attempts(&self) -> Vec<OutboundMessage> {
        self.lock().send_attempts.clone()
    }

    /// Every `answer_press` call, in order.
    pub fn answered_presses(&self) -> Vec<AnsweredPress> {
        self.lock().presses.clone()
    }

    /// How many times `typing` was called.
    pub fn typing_count(&self) -> usize {
        self.lock().typing
    }

    // ----- helpers for the trait methods -----

    /// Creates a message and returns its reference.
    fn create(
        state: &mut State,
        chat: &ChatRef,
        text: String,
        buttons: Vec<Button>,
        reply_to: Option<String>,
        draft: bool,
    ) -> MessageRef {
        let message = SentMessage {
            id: (state.sent.len() + 1).to_string(),
            chat: chat.clone(),
            text,
            buttons,
            reply_to,
            edits: Vec::new(),
            draft,
        };
        let reference = message.reference();
        state.sent.push(message);
        reference
    }

    fn find<'a>(
        state: &'a mut State,
        target: &MessageRef,
    ) -> Result<&'a mut SentMessage, ChannelError> {
        state
            .sent
            .iter_mut()
            .find(|m| m.id == target.message_id && m.chat == target.chat)
            .ok_or_else(|| ChannelError::rejected(format!("no message {}", target.message_id)))
    }

    fn notify_sent(&self) {
        let count = self.lock().sent.len();
        self.shared.sent_count.send_replace(count);
    }
}

impl State {
    fn check_buttons(&self, buttons: &[Button]) -> Result<(), ChannelError> {
        let shows_buttons = self.capabilities.buttons || self.capabilities.buttons_as_reactions;
        if !buttons.is_empty() && !shows_buttons {
            return Err(ChannelError::rejected("this platform has no buttons"));
        }
        Ok(())
    }

    fn fits(&self, text: &str) -> bool {
        self.capabilities
            .max_message_len
            .is_none_or(|max| self.capabilities.measure.len(text) <= max)
    }

    fn check_length(&self, text: &str) -> Result<(), ChannelError> {
        if self.fits(text) {
            return Ok(());
        }
        Err(ChannelError::rejected(format!(
            "message of {} units is over the limit of {}",
            self.capabilities.measure.len(text),
            self.capabilities.max_message_len.unwrap_or_default()
        )))
    }
}

#[async_trait]
impl Channel for MemoryChannel {
    fn name(&self) -> &str {
        &self.shared.name
    }

    fn capabilities(&self) -> Capabilities {
        self.lock().capabilities.clone()
    }

    async fn run(&self, ctx: ChannelContext) -> Result<(), ChannelError> {
        // The login: held until the test decides, refused, or accepted. The state stays as the
        // supervisor left it (connecting, or reconnecting after a failure) until then.
        let mut login = self.shared.login.subscribe();
        let answer = tokio::select! {
            () = ctx.shutdown.cancelled() => return Ok(()),
            // The sender lives in `self`, so this ends only with a decision.
            answer = login.wait_for(|l| *l != Login::Hold) => answer.map(|l| l.clone()),
        };
        if let Ok(Login::Refuse(reason)) = answer {
            ctx.status.failed(reason.clone());
            return Err(ChannelError::auth(reason));
        }
        ctx.status.connected();

        let mut changed = self.shared.inbound_changed.subscribe();
        loop {
            // Mark the current version seen before looking, so a push after the look wakes us.
            changed.borrow_and_update();
            let (next, retry_delay) = {
                let state = self.lock();
                (state.queue.front().cloned(), state.retry_delay)
            };
            let Some((seq, event)) = next else {
                tokio::select! {
                    () = ctx.shutdown.cancelled() => return Ok(()),
                    // The sender lives in `self`, so this only ends with a new event.
                    _ = changed.changed() => continue,
                }
            };
            let platform_id = event.platform_id.clone();
            let delivered = tokio::select! {
                // Shutdown wins even mid-delivery: the event stays queued for the next run.
                () = ctx.shutdown.cancelled() => return Ok(()),
                result = ctx.sink.deliver(event) => result,
            };
            match delivered {
                Ok(()) => {
                    // Advance the cursor past exactly this event.
                    let mut state = self.lock();
                    if state.queue.front().is_some_and(|(s, _)| *s == seq)
                        && let Some((_, event)) = state.queue.pop_front()
                    {
                        state.acknowledged.push(event);
                    }
                }
                Err(error) => {
                    tracing::debug!(channel = %self.shared.name, %platform_id, %error, "delivery refused, will retry");
                    tokio::select! {
                        () = ctx.shutdown.cancelled() => return Ok(()),
                        () = tokio::time::sleep(retry_delay) => {}
                    }
                }
            }
        }
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, ChannelError> {
        let result = {
            let mut state = self.lock();
            state.send_attempts.push(message.clone());
            if let Some(error) = state.fail_sends.pop_front() {
                return Err(error);
            }
            state.check_buttons(&message.buttons)?;
            state.check_length(&message.text)?;
            // The message takes the place of the preview, like an edit of the draft.
            if let Some(draft) = &message.replaces
                && let Ok(existing) = Self::find(&mut state, draft)
            {
                existing.text = message.text.clone();
                existing.edits.push(message.text.clone());
                existing.buttons = message.buttons.clone();
                existing.draft = false;
                existing.reference()
            } else {
                Self::create(
                    &mut state,
                    &message.chat,
                    message.text.clone(),
                    message.buttons.clone(),
                    message.reply_to.clone(),
                    false,
                )
            }
        };
        self.notify_sent();
        let delay = self.lock().answer_delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        Ok(result)
    }

    async fn edit(
        &self,
        target: &MessageRef,
        message: &OutboundMessage,
    ) -> Result<(), ChannelError> {
        let mut state = self.lock();
        if !state.capabilities.edits {
            return Err(ChannelError::rejected("this platform cannot edit messages"));
        }
        state.check_buttons(&message.buttons)?;
        state.check_length(&message.text)?;
        let existing = Self::find(&mut state, target)?;
        existing.text = message.text.clone();
        existing.edits.push(message.text.clone());
        existing.buttons = message.buttons.clone();
        Ok(())
    }

    async fn typing(&self, _chat: &ChatRef) -> Result<(), ChannelError> {
        self.lock().typing += 1;
        Ok(())
    }

    async fn fetch_attachment(
        &self,
        attachment: &Attachment,
        max_bytes: u64,
    ) -> Result<Vec<u8>, ChannelError> {
        let source = attachment.source.as_deref().unwrap_or_default();
        let mut state = self.lock();
        state.fetched.push(source.to_owned());
        let Some(bytes) = state.files.get(source) else {
            return Err(ChannelError::rejected(format!("no file {source}")));
        };
        if bytes.len() as u64 > max_bytes {
            return Err(ChannelError::rejected(format!(
                "the file is larger than {max_bytes} bytes"
            )));
        }
        Ok(bytes.clone())
    }

    async fn answer_press(
        &self,
        press: &ButtonPress,
        notice: Option<&str>,
        alert: bool,
    ) -> Result<(), ChannelError> {
        self.lock().presses.push(AnsweredPress {
            press_id: press.press_id.clone(),
            notice: notice.map(str::to_owned),
            alert,
        });
        Ok(())
    }

    async fn preview(&self, update: PreviewUpdate<'_>) -> Result<Option<MessageRef>, ChannelError> {
        let (chat, draft, text) = (update.chat, update.draft, update.text);
        let reply_to = update.reply_to;
        let reference = {
            let mut state = self.lock();
            if state.capabilities.preview.is_none() {
                return Err(ChannelError::rejected("this platform has no previews"));
            }
            state.check_length(text)?;
            match draft {
                Some(target) => {
                    let existing = Self::find(&mut state, target)?;
                    existing.text = text.to_owned();
                    existing.edits.push(text.to_owned());
                    existing.reference()
                }
                None => Self::create(
                    &mut state,
                    chat,
                    text.to_owned(),
                    Vec::new(),
                    reply_to.map(str::to_owned),
                    true,
                ),
            }
        };
        self.notify_sent();
        Ok(Some(reference))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat() -> ChatRef {
        ChatRef::new("c1")
    }

    #[tokio::test]
    async fn sends_get_sequential_ids_and_can_be_edited() {
        let channel = MemoryChannel::new("memory");
        let first = channel
            .send(&OutboundMessage::text(chat(), "one"))
            .await
            .expect("send");
        let second = channel
            .send(&OutboundMessage::text(chat(), "two"))
            .await
            .expect("send");
        assert_eq!(
            (first.message_id.as_str(), second.message_id.as_str()),
            ("1", "2")
        );
        channel
            .edit(&first, &OutboundMessage::text(chat(), "one, edited"))
            .await
            .expect("edit");
        let sent = channel.sent_to("c1");
        assert_eq!(sent[0].text, "one, edited");
        assert_eq!(sent[0].edits, ["one, edited"]);

        let unknown = MessageRef {
            chat: chat(),
            message_id: "99".into(),
        };
        let error = channel
            .edit(&unknown, &OutboundMessage::text(chat(), "x"))
            .await
            .expect_err("unknown message");
        assert_eq!(error.kind, crate::ErrorKind::Rejected);
    }

    #[tokio::test]
    async fn long_sends_are_split_with_buttons_on_the_last_part() {
        let channel = MemoryChannel::new("memory").with_capabilities(Capabilities {
            buttons: true,
            max_message_len: Some(20),
            ..Capabilities::default()
        });
        let mut message = OutboundMessage::text(chat(), "alpha beta gamma delta epsilon zeta");
        message.buttons = vec![Button::new("Ok", "ok")];
        message.reply_to = Some("in-1".into());
        // One message per send: the daemon sends the planned parts in order.
        let mut last = None;
        for part in crate::plan(&message, &channel.capabilities()) {
            last = Some(channel.send(&part.message(&message)).await.expect("send"));
        }
        let last = last.expect("at least one part");
        let sent = channel.sent();
        assert_eq!(sent.len(), 2);
        assert_eq!(last, sent[1].reference());
        assert_eq!(sent[0].reply_to.as_deref(), Some("in-1"));
        assert!(sent[0].buttons.is_empty());
        assert_eq!(sent[1].buttons.len(), 1);
        assert!(sent.iter().all(|m| m.text.chars().count() <= 20));
    }

    #[tokio::test]
    async fn a_send_over_the_limit_is_rejected_not_cut() {
        let channel = MemoryChannel::new("memory")
            .with_capabilities(Capabilities {
                max_message_len: Some(4),
                ..Capabilities::default()
            })
            .with_measure(Measure::Utf16);
        let error = channel
            .send(&OutboundMessage::text(chat(), "😀😀😀"))
            .await
            .expect_err("6 UTF-16 units");
        assert_eq!(error.kind, crate::ErrorKind::Rejected);
        assert!(error.message.contains("over the limit of 4"), "{error}");
        assert!(channel.sent().is_empty());
        channel
            .send(&OutboundMessage::text(chat(), "😀😀"))
            .await
            .expect("4 units fit");
    }

    #[tokio::test]
    async fn injected_failures_come_first_and_are_recorded() {
        let channel = MemoryChannel::new("memory");
        channel.fail_next_sends(vec![
            ChannelError::rate_limited(Duration::from_secs(3)),
            ChannelError::transient("boom"),
        ]);
        let message = OutboundMessage::text(chat(), "hi");
        let first = channel.send(&message).await.expect_err("rate limited");
        assert_eq!(first.retry_after(), Some(Duration::from_secs(3)));
        assert!(
            channel
                .send(&message)
                .await
                .expect_err("transient")
                .is_temporary()
        );
        channel.send(&message).await.expect("third send succeeds");
        assert_eq!(channel.send_attempts().len(), 3);
        assert_eq!(channel.sent().len(), 1);
    }

    #[tokio::test]
    async fn a_preview_is_replaced_by_the_final_reply() {
        let channel = MemoryChannel::new("memory").with_capabilities(Capabilities {
            preview: Some(Duration::from_secs(1)),
            ..Capabilities::default()
        });
        // The conformance suite streams several previews (`like_telegram`); this checks what
        // only the memory platform records: the replaced draft is one message, no longer a
        // draft, whose edits include the final text.
        let draft = channel
            .preview(PreviewUpdate::first(&chat(), "The ans"))
            .await
            .expect("preview")
            .expect("a draft");
        assert!(channel.sent()[0].draft);
        let mut reply = OutboundMessage::text(chat(), "The answer.");
        reply.replaces = Some(draft.clone());
        assert_eq!(channel.send(&reply).await.expect("send"), draft);
        let sent = channel.sent();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].text, "The answer.");
        assert_eq!(sent[0].edits, ["The answer."]);
        assert!(!sent[0].draft);
    }

    #[tokio::test]
    async fn strict_about_missing_capabilities() {
        let channel = MemoryChannel::new("plain").with_capabilities(Capabilities::default());
        let mut message = OutboundMessage::text(chat(), "pick");
        message.buttons = vec![Button::new("A", "a")];
        assert!(channel.send(&message).await.is_err());
        let here = chat();
        assert!(
            channel
                .preview(PreviewUpdate::first(&here, "x"))
                .await
                .is_err()
        );
        let sent = channel
            .send(&OutboundMessage::text(chat(), "x"))
            .await
            .expect("plain send");
        assert!(
            channel
                .edit(&sent, &OutboundMessage::text(chat(), "y"))
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn presses_and_typing_are_recorded() {
        let channel = MemoryChannel::new("memory");
        let sent = channel
            .send(&OutboundMessage::text(chat(), "approve?"))
            .await
            .expect("send");
        let press_id = channel.push_press(&sent, "u1", "confirm:abc:yes");
        let press = ButtonPress {
            press_id: press_id.clone(),
            data: "confirm:abc:yes".into(),
            message: Some(sent),
        };
        channel
            .answer_press(&press, Some("Approved"), false)
            .await
            .expect("answer");
        channel.typing(&chat()).await.expect("typing");
        assert_eq!(
            channel.answered_presses(),
            [AnsweredPress {
                press_id,
                notice: Some("Approved".into()),
                alert: false
            }]
        );
        assert_eq!(channel.typing_count(), 1);
        assert_eq!(channel.pending_inbound(), 1);
    }

    #[tokio::test]
    async fn wait_for_sent_wakes_on_a_send_and_times_out_otherwise() {
        let channel = MemoryChannel::new("memory");
        let sender = channel.clone();
        let task = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            sender.send(&OutboundMessage::text(chat(), "late")).await
        });
        let sent = channel.wait_for_sent(1, Duration::from_secs(5)).await;
        assert_eq!(sent.len(), 1);
        task.await.expect("task").expect("send");
        let sent = channel.wait_for_sent(2, Duration::from_millis(10)).await;
        assert_eq!(sent.len(), 1);
    }

    #[tokio::test]
    async fn a_held_login_keeps_run_connecting_and_a_refused_one_fails_it() {
        use crate::{ChannelStatus, StatusReporter};

        struct Nowhere;
        #[async_trait]
        impl crate::InboundSink for Nowhere {
            async fn deliver(&self, _: &str, _: Inbound) -> Result<(), crate::SinkError> {
                Ok(())
            }
        }
        #[async_trait]
        impl crate::StateStore for Nowhere {
            async fn load(&self, _: &str, _: &str) -> Result<Option<String>, crate::SinkError> {
                Ok(None)
            }
            async fn save(&self, _: &str, _: &str, _: &str) -> Result<(), crate::SinkError> {
                Ok(())
            }
        }
        let context = |status: &StatusReporter| {
            ChannelContext::new(
                "memory",
                tokio_util::sync::CancellationToken::new(),
                Arc::new(Nowhere),
                Arc::new(Nowhere),
                std::env::temp_dir(),
                status.clone(),
            )
        };

        let channel = MemoryChannel::new("memory").with_login(Login::Hold);
        let status = StatusReporter::new();
        let ctx = context(&status);
        let shutdown = ctx.shutdown.clone();
        let run = tokio::spawn({
            let channel = channel.clone();
            async move { channel.run(ctx).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(status.current(), ChannelStatus::Connecting);
        channel.set_login(Login::Accept);
        let mut seen = status.subscribe();
        tokio::time::timeout(
            Duration::from_secs(5),
            seen.wait_for(|s| *s == ChannelStatus::Connected),
        )
        .await
        .expect("connected in time")
        .expect("reporter alive");
        shutdown.cancel();
        run.await.expect("join").expect("clean stop");

        channel.set_login(Login::Refuse("bad token".into()));
        let status = StatusReporter::new();
        let error = channel
            .run(context(&status))
            .await
            .expect_err("refused login");
        assert_eq!(error.kind, crate::ErrorKind::Auth);
        assert_eq!(
            status.current(),
            ChannelStatus::Failed {
                reason: "bad token".into()
            }
        );
    }

    #[tokio::test]
    async fn buttons_as_reactions_are_accepted_without_buttons() {
        let channel = MemoryChannel::new("reacting").with_capabilities(Capabilities {
            reactions: true,
            buttons_as_reactions: true,
            ..Capabilities::default()
        });
        let mut message = OutboundMessage::text(chat(), "approve?");
        message.buttons = vec![Button::new("✅ Approve", "c:x:a").with_emoji("✅")];
        let sent = channel.send(&message).await.expect("accepted");
        let reaction = channel.push_reaction(&sent, "u1", "✅");
        assert!(reaction.starts_with("reacting-reaction-"));
        assert_eq!(channel.pending_inbound(), 1);
    }
}
