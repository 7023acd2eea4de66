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
    }
}

#[test]
fn a_stored_message_with_attachments_loads() {
    let mut sender = Sender::new("42");
    sender.name = Some("Ada".into());
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
                },
                Attachment {
                    kind: AttachmentKind::Image,
                    mime: "image/jpeg".into(),
                    name: None,
                    data_base64: Some("/9j/4AAQ".into()),
                    text: None,
                },
            ],
            message_id: Some("55".into()),
            reply_to: Some("54".into()),
        },
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
            Button {
                label: "✅ Approve".into(),
                data: "c:abcdefghijklmnopqrstuv:a".into(),
            },
            Button {
                label: "❌ Deny".into(),
                data: "c:abcdefghijklmnopqrstuv:d".into(),
            },
        ],
        reply_to: Some("55".into()),
        replaces: Some(MessageRef {
            chat: topic(),
            message_id: "80".into(),
        }),
        delivery_id: Some("hearth-12".into()),
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
