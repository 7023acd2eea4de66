//! Inbound events and outbound messages are stored as JSON in the inbox and the outbox, so rows
//! written by an earlier hearth must still load. The fixtures under `tests/fixtures/` were
//! captured from the types as they were before the seam for Discord, Matrix and email was added;
//! they must never be edited, only added to.

use hearth_channel::{
    Attachment, AttachmentKind, Button, ButtonPress, ChatRef, Inbound, InboundKind, MessageRef,
    OutboundMessage, Sender,
};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn inbound(name: &str) -> Inbound {
    serde_json::from_str(&fixture(name)).unwrap_or_else(|e| panic!("{name} no longer loads: {e}"))
}

fn outbound(name: &str) -> OutboundMessage {
    serde_json::from_str(&fixture(name)).unwrap_or_else(|e| panic!("{name} no longer loads: {e}"))
}

fn topic() -> ChatRef {
    ChatRef::new("-1001234").with_thread("7")
}

fn private(platform_id: &str, kind: InboundKind) -> Inbound {
    Inbound {
        platform_id: platform_id.into(),
        chat: ChatRef::new("42"),
        sender: Sender::new("42"),
        kind,
        reply_context: None,
        agent: None,
    }
}

#[test]
fn a_stored_message_with_attachments_loads() {
    let sender = Sender::new("42").with_name("Ada");
    let expected = Inbound {
        platform_id: "100001".into(),
        chat: topic(),
        sender,
        kind: InboundKind::Message {
            text: "what did I spend on groceries?".into(),
            attachments: vec![
                Attachment {
                    kind: AttachmentKind::Document,
                    mime: "text/plain".into(),
                    name: Some("list.txt".into()),
                    data_base64: None,
                    text: Some("milk\neggs".into()),
                    source: None,
                    size: None,
                },
                Attachment {
                    kind: AttachmentKind::Image,
                    mime: "image/jpeg".into(),
                    name: None,
                    data_base64: Some("/9j/4AAQ".into()),
                    text: None,
                    source: None,
                    size: None,
                },
            ],
            message_id: Some("55".into()),
            reply_to: Some("54".into()),
        },
        reply_context: None,
        agent: None,
    };
    assert_eq!(inbound("inbound_message"), expected);
}

#[test]
fn a_stored_minimal_message_loads() {
    let expected = private(
        "100002",
        InboundKind::Message {
            text: "hi".into(),
            attachments: Vec::new(),
            message_id: None,
            reply_to: None,
        },
    );
    assert_eq!(inbound("inbound_message_minimal"), expected);
}

#[test]
fn a_stored_press_loads() {
    let expected = private(
        "100003",
        InboundKind::Press(ButtonPress {
            press_id: "cbq-9".into(),
            data: "c:abcdefghijklmnopqrstuv:a".into(),
            message: Some(MessageRef {
                chat: ChatRef::new("42"),
                message_id: "77".into(),
            }),
        }),
    );
    assert_eq!(inbound("inbound_press"), expected);
}

#[test]
fn a_stored_reaction_loads() {
    let expected = Inbound {
        platform_id: "$evt1".into(),
        chat: ChatRef::new("!room:example.org"),
        sender: Sender::new("@me:example.org"),
        kind: InboundKind::Reaction {
            message_id: "$prompt".into(),
            emoji: "✅".into(),
        },
        reply_context: None,
        agent: None,
    };
    assert_eq!(inbound("inbound_reaction"), expected);
}

#[test]
fn a_stored_edit_loads() {
    let expected = private(
        "100004",
        InboundKind::Edit {
            message_id: "55".into(),
            text: "what did I spend on fruit?".into(),
        },
    );
    assert_eq!(inbound("inbound_edit"), expected);
}

#[test]
fn a_stored_prompt_with_buttons_loads() {
    let expected = OutboundMessage {
        chat: topic(),
        text: "🔐 Approve?".into(),
        buttons: vec![
            Button::new("✅ Approve", "c:abcdefghijklmnopqrstuv:a"),
            Button::new("❌ Deny", "c:abcdefghijklmnopqrstuv:d"),
        ],
        reply_to: Some("55".into()),
        replaces: Some(MessageRef {
            chat: topic(),
            message_id: "80".into(),
        }),
        delivery_id: Some("hearth-12".into()),
        reply_context: None,
        answers_press: None,
    };
    assert_eq!(outbound("outbound_message"), expected);
}

#[test]
fn a_stored_plain_reply_loads() {
    assert_eq!(
        outbound("outbound_message_minimal"),
        OutboundMessage::text(ChatRef::new("42"), "Done.")
    );
}

/// Old rows load as verified senders without a reply context, and a row written now without
/// the new fields set looks exactly as it did, so an older hearth (after a downgrade) reads it.
#[test]
fn rows_round_trip_unchanged_and_old_senders_count_as_verified() {
    for name in [
        "inbound_message",
        "inbound_message_minimal",
        "inbound_press",
        "inbound_reaction",
        "inbound_edit",
    ] {
        let event = inbound(name);
        assert!(
            event.sender.verified,
            "{name}: an old sender is not verified"
        );
        assert_eq!(event.reply_context, None, "{name}");
        let old: serde_json::Value = serde_json::from_str(&fixture(name)).expect("json");
        assert_eq!(serde_json::to_value(&event).expect("json"), old, "{name}");
    }
    for name in ["outbound_message", "outbound_message_minimal"] {
        let message = outbound(name);
        assert!(message.buttons.iter().all(|b| b.emoji.is_none()));
        let old: serde_json::Value = serde_json::from_str(&fixture(name)).expect("json");
        assert_eq!(serde_json::to_value(&message).expect("json"), old, "{name}");
    }
}

/// The new fields survive a round trip: an unverified sender stays unverified, a reply context
/// comes back as it went in, and buttons keep their emoji.
#[test]
fn new_fields_round_trip() {
    let mut event = inbound("inbound_message_minimal");
    event.sender = Sender::new("me@example.org").unverified();
    event.reply_context = Some(serde_json::json!({
        "subject": "Groceries",
        "message_id": "<abc@example.org>",
        "references": ["<root@example.org>"],
    }));
    let json = serde_json::to_string(&event).expect("json");
    assert!(json.contains(r#""verified":false"#), "{json}");
    let back: Inbound = serde_json::from_str(&json).expect("loads");
    assert_eq!(back, event);

    let mut message = outbound("outbound_message");
    message.buttons[0].emoji = Some("✅".into());
    message.reply_context = event.reply_context.clone();
    let back: OutboundMessage =
        serde_json::from_str(&serde_json::to_string(&message).expect("json")).expect("loads");
    assert_eq!(back, message);
}
