//! The conformance checks, one public function each; [`crate::conformance_tests!`] turns every
//! one into a test of its own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Document, Harness, MemoryState, PATIENCE, RecordingSink, Running, Shown};
use crate::{
    AttachmentKind, Button, Channel, ChannelStatus, ChatRef, ErrorKind, Format, InboundKind,
    MessageRef, OutboundMessage, PreviewUpdate,
};

/// The longest delivery id the daemon produces (`hearth-` and the largest outbox row id). It is
/// longer than a Discord nonce may be (25 characters), so an adapter must map it, not pass it on.
pub const LONGEST_DELIVERY_ID: &str = "hearth-9223372036854775807";

/// Inbound text reaches the sink with the right chat, sender and text.
pub async fn check_inbound_text(h: &dyn Harness) {
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    let text = unique("hello from conformance");
    inject(h, &h.chat(), &text).await;
    let event = running.sink.wait_text(&text, PATIENCE).await;
    assert_eq!(event.chat, h.chat(), "inbound event in the wrong chat");
    assert_eq!(
        event.sender.id,
        h.sender().id,
        "inbound event from the wrong sender"
    );
    assert!(
        event.sender.verified,
        "a chat platform's sender must be marked verified"
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
    inject(h, &h.chat(), &first).await;
    inject(h, &h.chat(), &second).await;
    sink.wait_for_event(|e| e.text() == Some(second.as_str()), PATIENCE)
        .await
        .unwrap_or_else(|| panic!("{second:?} never reached the sink"));
    let texts: Vec<String> = sink
        .events()
        .iter()
        .filter_map(|e| e.text().map(str::to_owned))
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
    let refusing = RecordingSink::new();
    refusing.fail_next(usize::MAX);
    delivered_by_the_next_run(
        h,
        refusing,
        "never stored before the restart",
        "was lost: the cursor passed an unstored event",
    )
    .await;
}

/// Runs the channel with `holding` (a sink that keeps what it is offered from being stored),
/// injects a message, stops the run once the message was offered, and checks that a new run
/// with the same state delivers it; `lost` ends the message of a failure.
async fn delivered_by_the_next_run(
    h: &dyn Harness,
    holding: RecordingSink,
    what: &str,
    lost: &str,
) {
    let state = MemoryState::new();
    let running = Running::start(h.channel(), holding.clone(), state.clone());
    let text = unique(what);
    inject(h, &h.chat(), &text).await;
    holding
        .wait_for_attempt(|e| e.text() == Some(text.as_str()), PATIENCE)
        .await
        .unwrap_or_else(|| panic!("{text:?} was never offered to the sink"));
    running.stop().await;

    let running = Running::start(h.channel(), RecordingSink::new(), state);
    running
        .sink
        .wait_for_event(|e| e.text() == Some(text.as_str()), PATIENCE)
        .await
        .unwrap_or_else(|| panic!("{text:?} {lost}"));
    running.stop().await;
}

/// An event the platform delivers again (after a lost acknowledgement) comes with the same
/// platform id, so the inbox drops the copy.
pub async fn check_duplicate_delivery_is_dropped(h: &dyn Harness) {
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    let text = unique("delivered twice");
    inject(h, &h.chat(), &text).await;
    let event = running.sink.wait_text(&text, PATIENCE).await;
    h.redeliver(&event.platform_id)
        .await
        .unwrap_or_else(|e| panic!("the harness could not redeliver {text:?}: {e}"));
    // Events are delivered in order, so once a later one is stored the copy was offered.
    let later = unique("after the copy");
    inject(h, &h.chat(), &later).await;
    running.sink.wait_text(&later, PATIENCE).await;
    let copies = running
        .sink
        .attempts()
        .iter()
        .filter(|e| e.text() == Some(text.as_str()))
        .map(|e| e.platform_id.clone())
        .collect::<Vec<_>>();
    assert_eq!(
        copies.len(),
        2,
        "the redelivered {text:?} did not reach the sink again"
    );
    assert_eq!(
        copies[0], copies[1],
        "the redelivered event has another platform id, so the inbox would store it twice"
    );
    assert_eq!(running.sink.duplicates(), 1);
    let stored = running
        .sink
        .events()
        .iter()
        .filter(|e| e.text() == Some(text.as_str()))
        .count();
    assert_eq!(stored, 1, "{text:?} was stored twice");
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
    let stuck = RecordingSink::new();
    stuck.pause();
    delivered_by_the_next_run(h, stuck, "pending at shutdown", "was lost after a shutdown").await;
}

/// `send` returns a reference in the right chat, and the text is visible on the platform.
pub async fn check_send(h: &dyn Harness) {
    let channel = h.channel();
    let text = unique("a plain reply");
    let sent = send(h, &*channel, OutboundMessage::text(h.chat(), &text)).await;
    assert_eq!(
        sent.chat,
        h.chat(),
        "send returned a reference to another chat"
    );
    assert!(
        !sent.message_id.is_empty(),
        "send returned an empty message id"
    );
    let shown = shown_eventually(h, &h.chat(), &text).await;
    assert_eq!(
        shown.id, sent.message_id,
        "send returned another message's id"
    );
}

/// A message of exactly `max_message_len` arrives whole, as one message. Without a limit, a
/// message of 10,000 characters arrives whole.
pub async fn check_message_at_the_limit_arrives_whole(h: &dyn Harness) {
    let channel = h.channel();
    let len = channel.capabilities().max_message_len.unwrap_or(10_000);
    let tag = unique("at the limit");
    let text = words_of_len(&tag, len);
    assert_eq!(text.chars().count(), len);
    let sent = send(h, &*channel, OutboundMessage::text(h.chat(), &text)).await;
    let shown = shown_eventually(h, &h.chat(), &tag).await;
    assert_eq!(
        shown.id, sent.message_id,
        "a message at the limit was not sent as one message"
    );
    assert_eq!(
        shown.text, text,
        "a message at the limit did not arrive whole"
    );
}

/// A message over `max_message_len` is refused with a `Rejected` error that names the limit,
/// and nothing shows: the outbound plan in core splits replies before they reach the adapter,
/// so an over-limit message is a bug to report, not something for the adapter to cut or split.
pub async fn check_over_limit_message(h: &dyn Harness) {
    let channel = h.channel();
    let Some(max) = channel.capabilities().max_message_len else {
        // No limit: the documented behaviour is that any length arrives whole.
        check_message_at_the_limit_arrives_whole(h).await;
        return;
    };
    let tag = unique("over the limit");
    let text = words_of_len(&tag, max * 5 / 2);
    let before = h.shown(&h.chat()).await.len();
    let message = h.address(OutboundMessage::text(h.chat(), &text)).await;
    let error = match channel.send(&message).await {
        Err(error) => error,
        Ok(sent) => panic!(
            "a message of {} characters over the limit {max} was sent ({sent:?}); it must be \
             refused with Rejected (core's outbound plan splits replies)",
            text.chars().count()
        ),
    };
    assert_eq!(
        error.kind,
        ErrorKind::Rejected,
        "an over-limit message must be refused for good (Rejected), not {error}"
    );
    assert!(
        error.to_string().contains(&max.to_string()),
        "the error does not name the limit {max}: {error}"
    );
    let shown = h.shown(&h.chat()).await;
    assert_eq!(
        shown.len(),
        before,
        "a refused message still showed: {shown:?}"
    );
}

/// Basic Markdown (`**bold**`, `` `code` ``) is sent without an error and its words are shown.
pub async fn check_markdown_basics(h: &dyn Harness) {
    let channel = h.channel();
    let tag = unique("markdown");
    let text = format!("{tag}: **bold** and `code` and a_b < c & d");
    send(h, &*channel, OutboundMessage::text(h.chat(), &text)).await;
    let shown = shown_eventually(h, &h.chat(), &tag).await;
    for word in ["bold", "code", "a_b < c & d"] {
        assert!(
            shown.text.contains(word),
            "{word:?} missing from {:?}",
            shown.text
        );
    }
    // Where the adapter renders Markdown into markup, the markers must not show; a Markdown
    // platform renders the source itself, and a plain one shows it as written.
    if matches!(
        channel.capabilities().format,
        Format::InlineHtml | Format::Html
    ) {
        assert!(
            !shown.text.contains("**"),
            "Markdown shown as its source: {:?}",
            shown.text
        );
    }
}

/// `edit` changes the visible text where the platform has edits; elsewhere it fails with
/// `Rejected`, so the daemon sends follow-ups instead.
pub async fn check_edit(h: &dyn Harness) {
    let channel = h.channel();
    let before = unique("before the edit");
    let after = unique("after the edit");
    let sent = send(h, &*channel, OutboundMessage::text(h.chat(), &before)).await;
    let result = channel
        .edit(
            &sent,
            &h.address(OutboundMessage::text(h.chat(), &after)).await,
        )
        .await;
    if !channel.capabilities().edits {
        let error = result.expect_err("edit succeeded on a platform that claims no edits");
        assert_eq!(error.kind, ErrorKind::Rejected, "{error}");
        return;
    }
    result.unwrap_or_else(|e| panic!("edit failed: {e}"));
    let shown = shown_eventually(h, &h.chat(), &after).await;
    assert_eq!(shown.id, sent.message_id, "the edit made a new message");
    assert!(
        !h.shown(&h.chat())
            .await
            .iter()
            .any(|m| m.text.contains(&before)),
        "the old text is still shown after the edit"
    );
}

/// Buttons are shown with their labels (or, on a platform that shows buttons as reactions,
/// as the bot's reactions with their emoji). A platform with neither refuses them with
/// `Rejected`, and the daemon uses typed codes instead.
pub async fn check_buttons(h: &dyn Harness) {
    let channel = h.channel();
    let caps = channel.capabilities();
    let text = unique("approve this?");
    let mut message = OutboundMessage::text(h.chat(), &text);
    message.buttons = approve_deny();
    if !caps.buttons && !caps.buttons_as_reactions {
        let error = channel
            .send(&h.address(message).await)
            .await
            .expect_err("a platform without buttons accepted buttons");
        assert_eq!(error.kind, ErrorKind::Rejected, "{error}");
        return;
    }
    send(h, &*channel, message).await;
    let shown = shown_eventually(h, &h.chat(), &text).await;
    if caps.buttons {
        let labels: Vec<&str> = shown.buttons.iter().map(|b| b.label.as_str()).collect();
        assert_eq!(labels, ["✅ Approve", "❌ Deny"], "buttons not shown");
        let data: Vec<&str> = shown.buttons.iter().map(|b| b.data.as_str()).collect();
        assert_eq!(data, ["conformance:yes", "conformance:no"]);
    } else {
        for emoji in ["✅", "❌"] {
            assert!(
                shown.reactions.iter().any(|r| r.starts_with(emoji)),
                "{emoji} not seeded as a reaction: {:?}",
                shown.reactions
            );
        }
    }
}

/// A press arrives as a `Press` with the button's data, the message it was under and the
/// presser; it can be acknowledged (or the adapter acknowledged it on receipt, where the
/// platform has a deadline). A platform without buttons has nothing to press: the fallback
/// (typed codes) is plain inbound text, and nothing is acknowledged on receipt.
pub async fn check_presses(h: &dyn Harness) {
    let channel = h.channel();
    let caps = channel.capabilities();
    if !caps.buttons {
        assert!(
            !caps.acks_presses_on_receipt,
            "a platform without buttons claims to acknowledge presses"
        );
        assert!(
            h.inject_press(
                &MessageRef {
                    chat: h.chat(),
                    message_id: "1".into()
                },
                &h.sender(),
                "x"
            )
            .await
            .is_err(),
            "the platform has no buttons, yet a press could be made"
        );
        return;
    }
    let text = unique("press a button");
    let mut message = OutboundMessage::text(h.chat(), &text);
    message.buttons = approve_deny();
    let sent = send(h, &*channel, message).await;
    let running = Running::start(channel.clone(), RecordingSink::new(), MemoryState::new());
    h.inject_press(&sent, &h.sender(), "conformance:yes")
        .await
        .unwrap_or_else(|e| panic!("the harness could not press a button: {e}"));
    let event = running
        .sink
        .wait_for_event(|e| matches!(&e.kind, InboundKind::Press(_)), PATIENCE)
        .await
        .unwrap_or_else(|| panic!("the press never reached the sink"));
    running.stop().await;
    let InboundKind::Press(press) = &event.kind else {
        unreachable!("matched above");
    };
    assert_eq!(
        press.data, "conformance:yes",
        "the press carries other data"
    );
    assert_eq!(
        press.message.as_ref(),
        Some(&sent),
        "the press does not name its message"
    );
    assert_eq!(
        event.sender.id,
        h.sender().id,
        "the press has another sender"
    );
    assert_eq!(event.chat, h.chat(), "the press is in another chat");
    if caps.acks_presses_on_receipt {
        let answered = h.answered_presses().await;
        assert!(
            answered.contains(&press.press_id),
            "the adapter claims to acknowledge presses on receipt but did not: {answered:?}"
        );
    } else {
        channel
            .answer_press(press, Some("Approved"), false)
            .await
            .unwrap_or_else(|e| panic!("answering the press failed: {e}"));
        let answered = h.answered_presses().await;
        assert!(
            answered.contains(&press.press_id),
            "the press was not acknowledged: {answered:?}"
        );
    }
}

/// A user's reaction to one of our messages arrives as a `Reaction` naming the message and the
/// emoji. A platform without reactions cannot show buttons as reactions either.
pub async fn check_reactions(h: &dyn Harness) {
    let channel = h.channel();
    let caps = channel.capabilities();
    if !caps.reactions {
        assert!(
            !caps.buttons_as_reactions,
            "a platform without reactions claims to show buttons as reactions"
        );
        return;
    }
    let text = unique("react to this");
    let sent = send(h, &*channel, OutboundMessage::text(h.chat(), &text)).await;
    let running = Running::start(channel, RecordingSink::new(), MemoryState::new());
    h.inject_reaction(&sent, &h.sender(), "👍")
        .await
        .unwrap_or_else(|e| panic!("the harness could not react: {e}"));
    let event = running
        .sink
        .wait_for_event(
            |e| matches!(&e.kind, InboundKind::Reaction { .. }),
            PATIENCE,
        )
        .await
        .unwrap_or_else(|| panic!("the reaction never reached the sink"));
    running.stop().await;
    assert_eq!(
        event.kind,
        InboundKind::Reaction {
            message_id: sent.message_id.clone(),
            emoji: "👍".into()
        }
    );
    assert_eq!(event.sender.id, h.sender().id);
}

/// A user's edit of their message arrives as an `Edit` naming the message. A platform whose
/// messages cannot be edited produces no edits.
pub async fn check_inbound_edits(h: &dyn Harness) {
    let channel = h.channel();
    if !channel.capabilities().edits {
        assert!(
            h.inject_edit(&h.chat(), &h.sender(), "1", "x")
                .await
                .is_err(),
            "the platform claims no edits, yet a user could edit"
        );
        return;
    }
    let running = Running::start(channel, RecordingSink::new(), MemoryState::new());
    let text = unique("before my edit");
    inject(h, &h.chat(), &text).await;
    let event = running.sink.wait_text(&text, PATIENCE).await;
    let InboundKind::Message {
        message_id: Some(message_id),
        ..
    } = &event.kind
    else {
        panic!("an inbound message without a message id: {event:?}");
    };
    let edited = unique("after my edit");
    h.inject_edit(&h.chat(), &h.sender(), message_id, &edited)
        .await
        .unwrap_or_else(|e| panic!("the harness could not edit: {e}"));
    let event = running
        .sink
        .wait_for_event(|e| matches!(&e.kind, InboundKind::Edit { .. }), PATIENCE)
        .await
        .unwrap_or_else(|| panic!("the edit never reached the sink"));
    running.stop().await;
    assert_eq!(
        event.kind,
        InboundKind::Edit {
            message_id: message_id.clone(),
            text: edited
        }
    );
}

/// Where the platform has threads, a message in a thread arrives with the thread, and a reply
/// to that chat shows in the thread. Elsewhere inbound events carry no thread.
pub async fn check_threads(h: &dyn Harness) {
    let channel = h.channel();
    let running = Running::start(channel.clone(), RecordingSink::new(), MemoryState::new());
    if !channel.capabilities().threads {
        assert!(
            h.thread_chat().is_none(),
            "the harness has a thread on a platform without threads"
        );
        let text = unique("no threads here");
        inject(h, &h.chat(), &text).await;
        let event = running.sink.wait_text(&text, PATIENCE).await;
        running.stop().await;
        assert_eq!(event.chat.thread_id, None, "an event with a thread");
        return;
    }
    let thread = h
        .thread_chat()
        .unwrap_or_else(|| panic!("the platform has threads, but the harness names none"));
    assert!(thread.thread_id.is_some(), "the thread chat has no thread");
    let text = unique("in a thread");
    inject(h, &thread, &text).await;
    let event = running.sink.wait_text(&text, PATIENCE).await;
    running.stop().await;
    assert_eq!(event.chat, thread, "the event lost its thread");
    let reply = unique("answer in the thread");
    send(
        h,
        &*channel,
        OutboundMessage::text(event.chat.clone(), &reply),
    )
    .await;
    shown_eventually(h, &thread, &reply).await;
}

/// Makes the platform deliver a message labelled `label` and returns its platform message id,
/// for checks of replies that quote it.
async fn incoming_message_id(h: &dyn Harness, label: &str) -> String {
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    let text = unique(label);
    inject(h, &h.chat(), &text).await;
    let event = running.sink.wait_text(&text, PATIENCE).await;
    running.stop().await;
    match event.kind {
        InboundKind::Message {
            message_id: Some(message_id),
            ..
        } => message_id,
        _ => panic!("an inbound message without a message id: {event:?}"),
    }
}

/// A reply quotes the message it answers.
pub async fn check_reply_quoting(h: &dyn Harness) {
    let channel = h.channel();
    let message_id = &incoming_message_id(h, "quote me").await;
    let answer = unique("the answer");
    let mut reply = OutboundMessage::text(h.chat(), &answer);
    reply.reply_to = Some(message_id.clone());
    send(h, &*channel, reply).await;
    let shown = shown_eventually(h, &h.chat(), &answer).await;
    assert_eq!(
        shown.reply_to.as_ref(),
        Some(message_id),
        "the reply does not quote the message it answers"
    );
}

/// A streamed preview quotes the message it answers, and the final reply replaces it: one
/// message, with the final text, still quoting (an edit cannot add a quote, so the preview
/// must carry it). Channels without previews document it and pass.
pub async fn check_preview_quotes_and_is_replaced(h: &dyn Harness) {
    let channel = h.channel();
    if channel.capabilities().preview.is_none() {
        return;
    }
    let message_id = &incoming_message_id(h, "answer me slowly").await;
    let chat = h.chat();
    let first = PreviewUpdate {
        reply_to: Some(message_id),
        ..PreviewUpdate::first(&chat, "Thinking")
    };
    let draft = channel
        .preview(first)
        .await
        .unwrap_or_else(|e| panic!("creating the preview failed: {e}"))
        .expect("a channel with previews returns the preview it created");
    channel
        .preview(PreviewUpdate {
            draft: Some(&draft),
            text: "Thinking about it",
            ..first
        })
        .await
        .unwrap_or_else(|e| panic!("updating the preview failed: {e}"));
    let shown = shown_eventually(h, &h.chat(), "Thinking about it").await;
    assert_eq!(
        shown.reply_to.as_ref(),
        Some(message_id),
        "the preview does not quote the message it answers"
    );
    let answer = unique("the final answer");
    let mut reply = OutboundMessage::text(h.chat(), &answer);
    reply.reply_to = Some(message_id.clone());
    reply.replaces = Some(draft.clone());
    let landed = send(h, &*channel, reply).await;
    assert_eq!(
        landed.message_id, draft.message_id,
        "the final reply did not replace the preview"
    );
    let shown = shown_eventually(h, &h.chat(), &answer).await;
    assert_eq!(shown.id, draft.message_id);
    assert_eq!(
        shown.reply_to.as_ref(),
        Some(message_id),
        "the final reply lost the quote"
    );
}

/// `typing` succeeds, and shows an indicator where the platform has one.
pub async fn check_typing(h: &dyn Harness) {
    let channel = h.channel();
    let before = h.typing_shown(&h.chat()).await;
    channel
        .typing(&h.chat())
        .await
        .unwrap_or_else(|e| panic!("typing failed: {e}"));
    if let Some(before) = before {
        let after = h.typing_shown(&h.chat()).await.unwrap_or(0);
        assert!(after > before, "no typing indicator was shown");
    }
}

/// A send carrying the daemon's longest delivery id succeeds; sent again with the same id, it
/// shows once where the platform deduplicates sends (and returns the same message), and
/// twice where it does not.
pub async fn check_stable_delivery_ids(h: &dyn Harness) {
    let channel = h.channel();
    let text = unique("sent with a delivery id");
    let mut message = OutboundMessage::text(h.chat(), &text);
    message.delivery_id = Some(LONGEST_DELIVERY_ID.into());
    let first = send(h, &*channel, message.clone()).await;
    let second = send(h, &*channel, message).await;
    shown_eventually(h, &h.chat(), &text).await;
    let copies = h
        .shown(&h.chat())
        .await
        .iter()
        .filter(|m| m.text.contains(&text))
        .count();
    if channel.capabilities().deduplicates_sends {
        assert_eq!(copies, 1, "a resend with the same delivery id showed twice");
        assert_eq!(
            first, second,
            "a deduplicated resend returned another message"
        );
    } else {
        assert_eq!(
            copies, 2,
            "the platform claims no deduplication, yet a resend did not show"
        );
    }
}

/// A document a user sends arrives as an attachment of the message, with its name and type.
/// Its content is not downloaded by the receive loop: the attachment names its
/// [`source`](crate::Attachment::source), and [`Channel::fetch_attachment`](crate::Channel)
/// returns the bytes, refusing a limit smaller than the file. (An adapter that delivers the
/// content inline, as the in-memory channel does, passes too.)
pub async fn check_attachments_in(h: &dyn Harness) {
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    let caption = unique("see the notes");
    let document = Document {
        name: "notes.txt".into(),
        mime: "text/plain".into(),
        bytes: b"buy milk\nwater the plants\n".to_vec(),
    };
    h.inject_document(&h.chat(), &h.sender(), &caption, &document)
        .await
        .unwrap_or_else(|e| panic!("the harness could not send a document: {e}"));
    let event = running.sink.wait_text(&caption, PATIENCE).await;
    running.stop().await;
    let InboundKind::Message { attachments, .. } = &event.kind else {
        unreachable!("a text was found");
    };
    assert_eq!(attachments.len(), 1, "{attachments:?}");
    let attachment = &attachments[0];
    assert_eq!(attachment.kind, AttachmentKind::Document);
    assert_eq!(attachment.mime, "text/plain");
    assert_eq!(attachment.name.as_deref(), Some("notes.txt"));
    if attachment.source.is_none() {
        assert!(
            attachment
                .text
                .as_deref()
                .is_some_and(|t| t.contains("water the plants"))
                || attachment.data_base64.is_some(),
            "the document has neither a source to fetch nor its content: {attachment:?}"
        );
        return;
    }
    assert!(
        attachment.data_base64.is_none(),
        "a remote attachment was downloaded into the stored event: {attachment:?}"
    );
    let bytes = h
        .channel()
        .fetch_attachment(attachment, 1 << 20)
        .await
        .unwrap_or_else(|e| panic!("fetching the document failed: {e}"));
    assert_eq!(bytes, document.bytes, "the fetched document differs");
    let small = h
        .channel()
        .fetch_attachment(attachment, 4)
        .await
        .expect_err("a file larger than the limit must be refused");
    assert!(
        !small.is_temporary(),
        "a file over the limit is refused for good, not retried: {small}"
    );
}

/// The channel reports connecting until the platform accepted its login, then connected.
pub async fn check_state_connected_after_login(h: &dyn Harness) {
    let held = h.hold_login().await.is_ok();
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    if held {
        // The login is outstanding: nothing may claim to be connected yet.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            running.status.current(),
            ChannelStatus::Connecting,
            "the channel reported another state before its login was answered"
        );
        h.release_login()
            .await
            .unwrap_or_else(|e| panic!("the harness could not release the login: {e}"));
    }
    let status = running
        .wait_for_status(|s| *s == ChannelStatus::Connected, PATIENCE)
        .await;
    assert_eq!(
        status,
        ChannelStatus::Connected,
        "the channel never reported connected"
    );
    running.stop().await;
}

/// A refused login ends `run` with an `Auth` error and the channel never reports connected.
pub async fn check_state_failed_when_login_refused(h: &dyn Harness) {
    h.refuse_login()
        .await
        .unwrap_or_else(|e| panic!("the harness could not refuse the login: {e}"));
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    let status = running.status.clone();
    let result = running
        .returned(PATIENCE)
        .await
        .unwrap_or_else(|| panic!("run kept going after its login was refused"));
    let error = result.expect_err("run succeeded although its login was refused");
    assert_eq!(error.kind, ErrorKind::Auth, "{error}");
    assert_ne!(
        status.current(),
        ChannelStatus::Connected,
        "the channel reported connected after a refused login"
    );
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

/// `tag` followed by ASCII words (no markup, so every unit of length agrees), exactly `len`
/// characters long.
fn words_of_len(tag: &str, len: usize) -> String {
    let mut text = tag.to_owned();
    let mut n = 0;
    while text.len() + 8 <= len {
        n += 1;
        text.push_str(&format!(" w{n:05}"));
    }
    while text.len() < len {
        text.push('x');
    }
    text
}

fn approve_deny() -> Vec<Button> {
    vec![
        Button::new("✅ Approve", "conformance:yes").with_emoji("✅"),
        Button::new("❌ Deny", "conformance:no").with_emoji("❌"),
    ]
}

async fn inject(h: &dyn Harness, chat: &ChatRef, text: &str) {
    h.inject_text(chat, &h.sender(), text)
        .await
        .unwrap_or_else(|e| panic!("the harness could not inject {text:?}: {e}"));
}

/// Sends `message` as the daemon would address it on this channel ([`Harness::address`]).
async fn send(h: &dyn Harness, channel: &dyn Channel, message: OutboundMessage) -> MessageRef {
    let message = h.address(message).await;
    channel
        .send(&message)
        .await
        .unwrap_or_else(|e| panic!("send of {:?} failed: {e}", message.text))
}

/// Waits until a message in `chat` contains `needle` and returns the newest such message.
async fn shown_eventually(h: &dyn Harness, chat: &ChatRef, needle: &str) -> Shown {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let shown = h.shown(chat).await;
        // A platform may show a sent message a little later than `send` returns.
        if let Some(found) = shown.iter().rev().find(|m| m.text.contains(needle)) {
            return found.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{needle:?} is not visible in {chat}: {shown:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
