//! The conformance suite against [`MemoryChannel`], plus the in-memory platform's own cursor
//! behaviour that the daemon's tests rely on.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hearth_channel::testkit::{
    Document, Harness, MemoryState, RecordingSink, Running, Shown,
    check_failed_delivery_is_offered_again, check_unstored_event_survives_restart,
};
use hearth_channel::{
    Attachment, AttachmentKind, Capabilities, Channel, ChannelContext, ChannelError, ChatRef,
    Format, Inbound, InboundKind, InboundSink, Login, MemoryChannel, MessageRef, OutboundMessage,
    ScopedSink, Sender, SinkError,
};

struct MemoryHarness {
    channel: MemoryChannel,
    /// Makes the adapter acknowledge events the sink refused: the bug the suite must catch.
    lossy: bool,
}

impl MemoryHarness {
    fn new(channel: MemoryChannel) -> Self {
        Self {
            channel,
            lossy: false,
        }
    }
}

#[async_trait]
impl Harness for MemoryHarness {
    fn channel(&self) -> Arc<dyn Channel> {
        if self.lossy {
            Arc::new(Lossy(self.channel.clone()))
        } else {
            Arc::new(self.channel.clone())
        }
    }

    fn chat(&self) -> ChatRef {
        ChatRef::new("chat-1")
    }

    fn sender(&self) -> Sender {
        Sender::new("user-1")
    }

    fn thread_chat(&self) -> Option<ChatRef> {
        self.channel
            .capabilities()
            .threads
            .then(|| ChatRef::new("chat-1").with_thread("topic-7"))
    }

    async fn inject_text(&self, chat: &ChatRef, sender: &Sender, text: &str) -> Result<(), String> {
        self.channel.push_text_in(chat, sender, text);
        Ok(())
    }

    async fn inject_document(
        &self,
        chat: &ChatRef,
        sender: &Sender,
        caption: &str,
        document: &Document,
    ) -> Result<(), String> {
        // Like the real adapters: the message names the file, fetched on demand.
        let source = format!("file-{}", document.name);
        self.channel.add_file(&source, document.bytes.clone());
        let attachment = Attachment::remote(AttachmentKind::Document, &document.mime, source)
            .with_name(&document.name)
            .with_size(document.bytes.len() as u64);
        self.channel
            .push_message(chat, sender, caption, vec![attachment], None);
        Ok(())
    }

    async fn inject_edit(
        &self,
        chat: &ChatRef,
        sender: &Sender,
        message_id: &str,
        text: &str,
    ) -> Result<(), String> {
        if !self.channel.capabilities().edits {
            return Err("this platform has no edits".into());
        }
        self.channel.push_edit(chat, sender, message_id, text);
        Ok(())
    }

    async fn inject_press(
        &self,
        message: &MessageRef,
        sender: &Sender,
        data: &str,
    ) -> Result<(), String> {
        if !self.channel.capabilities().buttons {
            return Err("this platform has no buttons".into());
        }
        self.channel.push_press(message, &sender.id, data);
        Ok(())
    }

    async fn inject_reaction(
        &self,
        message: &MessageRef,
        sender: &Sender,
        emoji: &str,
    ) -> Result<(), String> {
        self.channel.push_reaction(message, &sender.id, emoji);
        Ok(())
    }

    async fn redeliver(&self, platform_id: &str) -> Result<(), String> {
        if self.channel.redeliver(platform_id) {
            Ok(())
        } else {
            Err(format!("no acknowledged event {platform_id}"))
        }
    }

    async fn shown(&self, chat: &ChatRef) -> Vec<Shown> {
        let reactions = self.channel.capabilities().buttons_as_reactions;
        self.channel
            .sent()
            .into_iter()
            .filter(|m| m.chat == *chat)
            .map(|m| Shown {
                id: m.id,
                text: m.text,
                reactions: if reactions {
                    m.buttons.iter().filter_map(|b| b.emoji.clone()).collect()
                } else {
                    Vec::new()
                },
                buttons: if reactions { Vec::new() } else { m.buttons },
                reply_to: m.reply_to,
            })
            .collect()
    }

    async fn answered_presses(&self) -> Vec<String> {
        self.channel
            .answered_presses()
            .into_iter()
            .map(|p| p.press_id)
            .collect()
    }

    async fn typing_shown(&self, _chat: &ChatRef) -> Option<usize> {
        Some(self.channel.typing_count())
    }

    async fn refuse_login(&self) -> Result<(), String> {
        self.channel
            .set_login(Login::Refuse("401 Unauthorized".into()));
        Ok(())
    }

    async fn hold_login(&self) -> Result<(), String> {
        self.channel.set_login(Login::Hold);
        Ok(())
    }

    async fn release_login(&self) -> Result<(), String> {
        self.channel.set_login(Login::Accept);
        Ok(())
    }
}

async fn default_capabilities() -> MemoryHarness {
    MemoryHarness::new(MemoryChannel::new("memory"))
}

async fn like_telegram() -> MemoryHarness {
    let channel = MemoryChannel::new("telegramish")
        .with_capabilities(Capabilities {
            buttons: true,
            edits: true,
            threads: true,
            max_message_len: Some(4096),
            // The in-memory platform shows Markdown as written; it renders no HTML.
            format: Format::Markdown,
            preview: Some(Duration::from_secs(1)),
            ..Capabilities::default()
        })
        .with_measure(hearth_channel::split::Measure::Utf16);
    MemoryHarness::new(channel)
}

/// A text-only platform, as email is: no buttons, edits, reactions or threads.
async fn text_only() -> MemoryHarness {
    let channel = MemoryChannel::new("plain").with_capabilities(Capabilities {
        max_message_len: Some(300),
        ..Capabilities::default()
    });
    MemoryHarness::new(channel)
}

/// Buttons shown as reactions, as on Matrix.
async fn reacting() -> MemoryHarness {
    let channel = MemoryChannel::new("reacting").with_capabilities(Capabilities {
        edits: true,
        reactions: true,
        threads: true,
        format: Format::Markdown,
        buttons_as_reactions: true,
        ..Capabilities::default()
    });
    MemoryHarness::new(channel)
}

mod memory_default {
    hearth_channel::conformance_tests!(super::default_capabilities);
}

mod memory_like_telegram {
    hearth_channel::conformance_tests!(super::like_telegram);
}

mod memory_text_only {
    hearth_channel::conformance_tests!(super::text_only);
}

mod memory_buttons_as_reactions {
    hearth_channel::conformance_tests!(super::reacting);
}

#[tokio::test]
async fn events_are_acknowledged_in_order_only_after_they_are_stored() {
    let channel = MemoryChannel::new("memory");
    let first = channel.push_text("c", "u", "one");
    let second = channel.push_text("c", "u", "two");
    let sink = RecordingSink::new();
    sink.fail_next(3);
    let running = Running::start(Arc::new(channel.clone()), sink.clone(), MemoryState::new());
    let events = sink.wait_for_events(2, Duration::from_secs(5)).await;
    let ids: Vec<_> = events.iter().map(|e| e.platform_id.clone()).collect();
    assert_eq!(ids, [first.clone(), second.clone()]);
    assert_eq!(sink.refused(), 3);
    assert_eq!(channel.pending_inbound(), 0);
    assert_eq!(channel.acknowledged(), [first, second]);
    running.stop().await;
}

#[tokio::test]
async fn an_event_pending_at_shutdown_is_delivered_after_a_restart() {
    let channel = MemoryChannel::new("memory");
    let stuck = RecordingSink::new();
    stuck.pause();
    let running = Running::start(Arc::new(channel.clone()), stuck.clone(), MemoryState::new());
    let id = channel.push_text("c", "u", "hello");
    stuck
        .wait_for_attempt(|e| e.platform_id == id, Duration::from_secs(5))
        .await
        .expect("offered to the sink");
    running.stop().await;
    assert_eq!(
        channel.pending_inbound(),
        1,
        "cursor advanced past an unstored event"
    );

    let running = Running::start(
        Arc::new(channel.clone()),
        RecordingSink::new(),
        MemoryState::new(),
    );
    let events = running
        .sink
        .wait_for_events(1, Duration::from_secs(5))
        .await;
    assert_eq!(events.len(), 1);
    assert!(matches!(&events[0].kind, InboundKind::Message { text, .. } if text == "hello"));
    assert_eq!(channel.pending_inbound(), 0);
    running.stop().await;
}

#[tokio::test]
async fn redelivered_events_reach_the_sink_again_and_are_deduplicated_there() {
    let channel = MemoryChannel::new("memory");
    let sink = RecordingSink::new();
    let running = Running::start(Arc::new(channel.clone()), sink.clone(), MemoryState::new());
    let id = channel.push_text("c", "u", "once");
    sink.wait_for_events(1, Duration::from_secs(5)).await;
    assert!(channel.redeliver(&id));
    assert!(!channel.redeliver("no-such-id"));
    // Events are delivered one at a time, so once a later event is stored the redelivered one
    // has been handled.
    let later = channel.push_text("c", "u", "later");
    sink.wait_for_event(|e| e.platform_id == later, Duration::from_secs(5))
        .await
        .expect("later event stored");
    assert_eq!(sink.duplicates(), 1);
    assert_eq!(sink.events().len(), 2);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_refused_event_is_retried_after_the_retry_delay() {
    let channel = MemoryChannel::new("memory").with_retry_delay(Duration::from_secs(30));
    let sink = RecordingSink::new();
    sink.fail_next(1);
    channel.push_text("c", "u", "slow");
    let running = Running::start(Arc::new(channel.clone()), sink.clone(), MemoryState::new());
    let events = sink.wait_for_events(1, Duration::from_secs(29)).await;
    assert!(events.is_empty(), "retried before the delay");
    let events = sink.wait_for_events(1, Duration::from_secs(2)).await;
    assert_eq!(events.len(), 1);
    running.stop().await;
}

/// An adapter with the classic bug: it advances its cursor whether or not the event was stored.
struct Lossy(MemoryChannel);

/// Reports every delivery as stored, whatever the real sink said.
struct Swallow(ScopedSink);

#[async_trait]
impl InboundSink for Swallow {
    async fn deliver(&self, _channel: &str, event: Inbound) -> Result<(), SinkError> {
        // Deliberately dropped: this is the bug under test.
        let _ = self.0.deliver(event).await;
        Ok(())
    }
}

#[async_trait]
impl Channel for Lossy {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn capabilities(&self) -> Capabilities {
        self.0.capabilities()
    }

    async fn run(&self, ctx: ChannelContext) -> Result<(), ChannelError> {
        let sink = ScopedSink::new(ctx.name(), Arc::new(Swallow(ctx.sink.clone())));
        self.0.run(ChannelContext { sink, ..ctx }).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, ChannelError> {
        self.0.send(message).await
    }

    async fn edit(
        &self,
        target: &MessageRef,
        message: &OutboundMessage,
    ) -> Result<(), ChannelError> {
        self.0.edit(target, message).await
    }
}

#[tokio::test]
#[should_panic(expected = "never offered again")]
async fn the_suite_catches_an_adapter_that_drops_refused_events() {
    let mut harness = MemoryHarness::new(MemoryChannel::new("lossy"));
    harness.lossy = true;
    check_failed_delivery_is_offered_again(&harness).await;
}

#[tokio::test]
#[should_panic(expected = "cursor passed an unstored event")]
async fn the_suite_catches_an_adapter_that_loses_events_across_a_restart() {
    let mut harness = MemoryHarness::new(MemoryChannel::new("lossy"));
    harness.lossy = true;
    check_unstored_event_survives_restart(&harness).await;
}

/// The macro's list is written by hand: a `check_*` left out of it would silently never run
/// against any adapter. Every public check in `check.rs` must be in the list, and the list must
/// name nothing else.
#[test]
fn the_conformance_macro_runs_every_check() {
    fn names(text: &str, marker: &str) -> std::collections::BTreeSet<String> {
        text.split(marker)
            .skip(1)
            .map(|rest| {
                rest.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect()
            })
            .collect()
    }
    let defined = names(
        include_str!("../src/testkit/check.rs"),
        "pub async fn check_",
    );
    let macro_text = include_str!("../src/testkit.rs");
    let listed = names(
        &macro_text[macro_text
            .find("macro_rules! conformance_tests")
            .expect("the macro")..],
        "=> check_",
    );
    assert!(!defined.is_empty());
    assert_eq!(
        defined, listed,
        "check.rs's checks vs conformance_tests!'s list"
    );
}
