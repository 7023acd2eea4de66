//! Whom hearth obeys and what strangers can cost, on the in-memory platform: a stranger's files
//! are never fetched, an allowed user's are (within the per-message limit), `/cancel` only from
//! the person whose turn it is or the owner, and in a group each member sees only their own
//! earlier turns.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hearth::tool::{ToolInfo, ToolRegistry};
use hearth_channel::{Attachment, AttachmentKind, ChatRef, Sender};
use hearth_testkit::Reply;
use serde_json::json;

use crate::support::{CHAT, Hearth, TestTool, USER, WAIT, eventually, general_agent, settle};

const FRIEND: &str = "2002";
const STRANGER: &str = "31337";

/// A one-pixel PNG, as a phone would send a photo.
const PNG: &[u8] = &[
    0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, b'I', b'H', b'D', b'R',
];

fn photo(source: &str, size: usize) -> Attachment {
    Attachment::remote(AttachmentKind::Image, "image/png", source)
        .with_name("photo.png")
        .with_size(size as u64)
}

#[tokio::test]
async fn a_strangers_photos_are_never_downloaded_and_an_allowed_users_are() {
    let mut h = Hearth::new().await;
    h.config.providers[0].vision = true;
    h.start().await;
    h.channel.add_file("big-1", vec![0u8; 8_000_000]);
    h.channel.add_file("big-2", vec![0u8; 8_000_000]);
    let stranger = Sender::new(STRANGER);
    h.channel.push_message(
        &ChatRef::new("dm-stranger"),
        &stranger,
        "look at these",
        vec![photo("big-1", 8_000_000), photo("big-2", 8_000_000)],
        None,
    );
    // The stranger gets a pairing code and nothing is fetched.
    let sent = h.channel.wait_for_sent(1, WAIT).await;
    assert!(sent[0].text.contains("pairing code"), "{}", sent[0].text);
    settle(&h).await;
    assert!(
        h.channel.fetched_files().is_empty(),
        "{:?}",
        h.channel.fetched_files()
    );
    let stored: String = sqlx::query_scalar("SELECT payload FROM inbox ORDER BY id LIMIT 1")
        .fetch_one(h.daemon().store().pool())
        .await
        .expect("the stranger's message is stored");
    assert!(
        stored.len() < 2_000,
        "the row holds only references: {} bytes",
        stored.len()
    );
    assert!(stored.contains("big-1"), "{stored}");

    // The allowed user's photo is fetched and shown to the vision model.
    h.channel.add_file("mine", PNG.to_vec());
    h.llm.push(Reply::text("A tiny image."));
    h.channel.push_message(
        &ChatRef::new(CHAT),
        &Sender::new(USER),
        "what is this?",
        vec![photo("mine", PNG.len())],
        None,
    );
    h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(h.channel.fetched_files(), ["mine"]);
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(PNG);
    let request = h.llm.last_request().expect("request").to_string();
    assert!(
        request.contains(&format!("data:image/png;base64,{encoded}")),
        "{request}"
    );
    h.stop().await;
}

#[tokio::test]
async fn files_over_the_per_message_limit_are_refused_from_their_declared_size() {
    let mut h = Hearth::new().await;
    h.config.daemon.max_attachment_bytes = 1_000;
    h.config.providers[0].vision = true;
    h.start().await;
    h.channel.add_file("small", PNG.to_vec());
    h.channel.add_file("large", vec![1u8; 5_000]);
    h.channel.add_file("notes", b"buy milk".to_vec());
    h.llm.push(Reply::text("Seen."));
    let notes = Attachment::remote(AttachmentKind::Document, "text/plain", "notes")
        .with_name("notes.txt")
        .with_size(8);
    let lying = photo("large", 10); // declares 10 bytes, holds 5,000
    h.channel.push_message(
        &ChatRef::new(CHAT),
        &Sender::new(USER),
        "three files",
        vec![
            photo("small", PNG.len()),
            photo("large", 5_000),
            notes,
            lying,
        ],
        None,
    );
    h.channel.wait_for_sent(1, WAIT).await;
    // The declared 5,000 bytes are over the limit: never fetched. The one that lied about its
    // size is fetched with what is left as the limit, and refused by the platform side.
    assert_eq!(h.channel.fetched_files(), ["small", "notes", "large"]);
    let request = h.llm.last_request().expect("request").to_string();
    assert!(
        request.contains("photo.png was not downloaded: it is larger than the 984 bytes left of the 1 KB allowed per message (daemon.max_attachment_bytes)"),
        "{request}"
    );
    assert!(
        request.contains("buy milk"),
        "the text document is read: {request}"
    );
    assert!(
        request.contains("photo.png could not be downloaded"),
        "{request}"
    );
    h.stop().await;
}

#[tokio::test]
async fn cancel_stops_only_the_senders_own_turn_or_the_owners_word() {
    let started = Arc::new(AtomicUsize::new(0));
    let counter = started.clone();
    let mut h = Hearth::new()
        .await
        .with_agents(&general_agent(r#"tools = ["slow"]"#))
        .with_tools(move || {
            let mut registry = ToolRegistry::with_builtin();
            let info = ToolInfo::new("slow", "test", "Takes forever", json!({"type": "object"}));
            let counter = counter.clone();
            // `slow` starts and never ends, so a turn stays running until it is cancelled.
            let slow = TestTool::hanging(info, move |_| {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok("finally".into())
            });
            registry.register(slow).expect("register");
            registry
        });
    h.config.daemon.owner = Some("memory:9999".into());
    h.start().await;
    h.allow(FRIEND).await;

    h.llm.push(Reply::call("c1", "slow", "{}"));
    h.channel.push_text(CHAT, USER, "do the slow thing");
    eventually("the slow tool to start", async || {
        started.load(Ordering::SeqCst) == 1
    })
    .await;

    // Another member of the group and a stranger send /cancel: the turn goes on.
    h.channel.push_text(CHAT, FRIEND, "/cancel");
    h.channel.push_text(CHAT, STRANGER, "/cancel");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !h.channel
            .sent()
            .iter()
            .any(|m| m.text.contains("Cancelled")),
        "someone else's /cancel stopped the turn: {:?}",
        h.channel.sent()
    );

    // The owner may stop anyone's turn.
    h.channel.push_text(CHAT, "9999", "/cancel");
    eventually("the owner's /cancel to stop the turn", async || {
        h.channel.sent().iter().any(|m| m.text == "⏹ Cancelled.")
    })
    .await;

    // And the person whose turn it is may stop their own.
    h.llm.push(Reply::call("c2", "slow", "{}"));
    h.channel.push_text(CHAT, USER, "again, slowly");
    eventually("the second slow call", async || {
        started.load(Ordering::SeqCst) == 2
    })
    .await;
    h.channel.push_text(CHAT, USER, "/cancel");
    eventually("the requester's /cancel to stop it", async || {
        h.channel
            .sent()
            .iter()
            .filter(|m| m.text == "⏹ Cancelled.")
            .count()
            == 2
    })
    .await;
    h.stop().await;
}

#[tokio::test]
async fn in_a_group_each_member_sees_only_their_own_earlier_turns() {
    let mut h = Hearth::new().await;
    h.start().await;
    h.allow(FRIEND).await;
    h.llm.push(Reply::text("Noted."));
    h.say("I spent 420 on the lawyer, keep it quiet").await;

    h.llm.push(Reply::text("I cannot say."));
    let before = h.channel.sent().len();
    h.channel
        .push_text(CHAT, FRIEND, "what did the others spend money on?");
    h.channel.wait_for_sent(before + 1, WAIT).await;
    let friends = h.llm.last_request().expect("request").to_string();
    assert!(
        !friends.contains("lawyer"),
        "another member's turn leaked: {friends}"
    );

    h.llm.push(Reply::text("420 on the lawyer."));
    h.say("what did I spend?").await;
    let owners = h.llm.last_request().expect("request").to_string();
    assert!(
        owners.contains("lawyer"),
        "the user's own history is kept: {owners}"
    );
    assert!(!owners.contains("what did the others spend"), "{owners}");
    h.stop().await;
}
