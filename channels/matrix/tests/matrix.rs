//! The Matrix adapter against a real Synapse (installed and started by the test kit), with a
//! person talking plain HTTP to it: the conformance suite of `channels/core`, plus Matrix's own
//! cases (the device kept across restarts, a limited sync, a malformed event).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hearth_channel::testkit::{Document, Harness, MemoryState, RecordingSink, Running, Shown};
use hearth_channel::{Button, Channel, ChatRef, InboundKind, MessageRef, OutboundMessage, Sender};
use hearth_matrix::{MatrixChannel, MatrixSettings};
use hearth_testkit::matrix::{Human, Registered, SeenMessage, Synapse, unique_name};

struct MatrixHarness {
    server: &'static Synapse,
    bot: Registered,
    human: Human,
    room: String,
    thread_root: String,
    channel: Arc<MatrixChannel>,
    refused: AtomicBool,
    dirs: Mutex<Vec<tempfile::TempDir>>,
}

fn init() {
    // rustls finds both ring and aws-lc-rs in the build; pick one, as hearth's main does.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default(); // already installed by another test
    let _ = tracing_subscriber::fmt()
        .with_env_filter("hearth_matrix=debug")
        .with_test_writer()
        .try_init(); // one subscriber per process
}

fn settings(
    server: &Synapse,
    bot: &Registered,
    password: &str,
    dir: &std::path::Path,
) -> MatrixSettings {
    let mut settings = MatrixSettings::new(server.url(), &bot.user_id, password, dir.to_path_buf());
    settings.sync_timeout = Duration::from_secs(5);
    settings
}

impl MatrixHarness {
    async fn start() -> Self {
        init();
        let server = Synapse::shared().unwrap_or_else(|e| panic!("Synapse: {e}"));
        let bot = server
            .register(&unique_name("bot"), "bot-password")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let human = Human::register(server, "human")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let room = human
            .create_room(&[&bot.user_id], true, false)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        // The bot joins with the token of its registration (another device; the room is not
        // encrypted), so `send` works before any `run` accepted the invite.
        Human::new(&server.url(), bot.clone())
            .join(&room)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let thread_root = human
            .text(&room, "a thread starts here", None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let channel = Arc::new(
            MatrixChannel::new(settings(server, &bot, "bot-password", dir.path()))
                .unwrap_or_else(|e| panic!("{e}")),
        );
        Self {
            server,
            bot,
            human,
            room,
            thread_root,
            channel,
            refused: AtomicBool::new(false),
            dirs: Mutex::new(vec![dir]),
        }
    }

    fn shown_of(&self, message: &SeenMessage) -> Shown {
        Shown {
            id: message.event_id.clone(),
            text: message.text.clone(),
            buttons: Vec::new(),
            reactions: message
                .reactions
                .iter()
                .filter(|(sender, _)| *sender == self.bot.user_id)
                .map(|(_, key)| key.clone())
                .collect(),
            reply_to: message.reply_to.clone(),
        }
    }
}

async fn harness() -> MatrixHarness {
    MatrixHarness::start().await
}

#[async_trait]
impl Harness for MatrixHarness {
    fn channel(&self) -> Arc<dyn Channel> {
        if !self.refused.load(Ordering::SeqCst) {
            return self.channel.clone();
        }
        // A first login with a wrong password, in a fresh directory (no saved session).
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let channel = MatrixChannel::new(settings(
            self.server,
            &self.bot,
            "wrong-password",
            dir.path(),
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        self.dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(dir);
        Arc::new(channel)
    }

    fn chat(&self) -> ChatRef {
        ChatRef::new(&self.room)
    }

    fn sender(&self) -> Sender {
        Sender::new(&self.human.user.user_id)
    }

    fn thread_chat(&self) -> Option<ChatRef> {
        Some(ChatRef::new(&self.room).with_thread(&self.thread_root))
    }

    async fn inject_text(
        &self,
        chat: &ChatRef,
        _sender: &Sender,
        text: &str,
    ) -> Result<(), String> {
        self.human
            .text(&chat.chat_id, text, chat.thread_id.as_deref())
            .await
            .map(drop)
    }

    async fn inject_document(
        &self,
        chat: &ChatRef,
        _sender: &Sender,
        caption: &str,
        document: &Document,
    ) -> Result<(), String> {
        let url = self
            .human
            .upload(document.bytes.clone(), &document.mime, &document.name)
            .await?;
        self.human
            .send(
                &chat.chat_id,
                "m.room.message",
                serde_json::json!({
                    "msgtype": "m.file", "body": caption, "filename": document.name, "url": url,
                    "info": {"mimetype": document.mime, "size": document.bytes.len()},
                }),
            )
            .await
            .map(drop)
    }

    async fn inject_edit(
        &self,
        chat: &ChatRef,
        _sender: &Sender,
        message_id: &str,
        text: &str,
    ) -> Result<(), String> {
        self.human
            .edit(&chat.chat_id, message_id, text)
            .await
            .map(drop)
    }

    async fn inject_reaction(
        &self,
        message: &MessageRef,
        _sender: &Sender,
        emoji: &str,
    ) -> Result<(), String> {
        self.human
            .react(&message.chat.chat_id, &message.message_id, emoji)
            .await
            .map(drop)
    }

    async fn redeliver(&self, platform_id: &str) -> Result<(), String> {
        if self.channel.redeliver_from(platform_id) {
            Ok(())
        } else {
            Err(format!("{platform_id} was not delivered by this channel"))
        }
    }

    async fn shown(&self, chat: &ChatRef) -> Vec<Shown> {
        let seen = self.human.seen(&chat.chat_id).await.unwrap_or_default();
        seen.iter()
            .filter(|m| m.thread.as_deref() == chat.thread_id.as_deref())
            .map(|m| self.shown_of(m))
            .collect()
    }

    async fn refuse_login(&self) -> Result<(), String> {
        self.refused.store(true, Ordering::SeqCst);
        Ok(())
    }
}

mod conformance {
    hearth_channel::conformance_tests!(super::harness);
}

/// The session is kept: a second start (a new channel on the same directory) is the same
/// device and does not log in again.
#[tokio::test]
async fn one_device_for_life_and_a_new_one_when_the_store_is_lost() {
    let h = harness().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let make = || {
        Arc::new(
            MatrixChannel::new(settings(h.server, &h.bot, "bot-password", dir.path()))
                .unwrap_or_else(|e| panic!("{e}")),
        )
    };
    let first = make();
    first
        .send(&OutboundMessage::text(h.chat(), "first start"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let device = first
        .device_id()
        .await
        .unwrap_or_else(|| panic!("no device"));
    assert_eq!(
        hearth_matrix::saved_device_id(dir.path()),
        Some(device.clone())
    );
    drop(first);

    let second = make();
    second
        .send(&OutboundMessage::text(h.chat(), "second start"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        second.device_id().await,
        Some(device.clone()),
        "a restart made a new device"
    );
    drop(second);

    std::fs::remove_dir_all(dir.path().join("store")).unwrap_or_else(|e| panic!("{e}"));
    let third = make();
    third
        .send(&OutboundMessage::text(h.chat(), "after the store was lost"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let new_device = third
        .device_id()
        .await
        .unwrap_or_else(|| panic!("no device"));
    assert_ne!(
        new_device, device,
        "a lost store must not reuse the old device id"
    );
}

/// More messages than one sync's timeline holds arrive while the channel is down: after the
/// restart every one is delivered, once, in order (the gap is fetched with /messages).
#[tokio::test]
async fn a_limited_sync_loses_nothing() {
    let h = harness().await;
    let state = MemoryState::new();
    let running = Running::start(h.channel(), RecordingSink::new(), state.clone());
    let probe = unique_name("probe");
    h.human
        .text(&h.room, &probe, None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    running
        .sink
        .wait_for_event(
            |e| matches!(&e.kind, InboundKind::Message { text, .. } if *text == probe),
            Duration::from_secs(20),
        )
        .await
        .unwrap_or_else(|| panic!("the probe never arrived"));
    running.stop().await;

    let texts: Vec<String> = (0..60).map(|i| format!("burst {i:02}")).collect();
    for text in &texts {
        h.human
            .text(&h.room, text, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let running = Running::start(h.channel(), RecordingSink::new(), state);
    let events = running
        .sink
        .wait_for_events(60, Duration::from_secs(30))
        .await;
    running.stop().await;
    let got: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            InboundKind::Message { text, .. } if text.starts_with("burst ") => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(got, texts, "the burst arrived incomplete or out of order");
}

/// An event with a malformed body (a number) is skipped with a warning; the messages around it
/// arrive.
#[tokio::test]
async fn a_malformed_event_is_skipped_and_nothing_else_lost() {
    let h = harness().await;
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    running
        .wait_for_status(|s| s.as_str() == "connected", Duration::from_secs(20))
        .await;
    // Synapse checks `body` and `msgtype`, not relations: an edit without its new content.
    let original = h
        .human
        .text(&h.room, "to be edited badly", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.human
        .send(
            &h.room,
            "m.room.message",
            serde_json::json!({"msgtype": "m.text", "body": "* broken", "m.relates_to": {"rel_type": "m.replace", "event_id": original}}),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.human
        .text(&h.room, "after the bad one", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    running
        .sink
        .wait_for_event(
            |e| matches!(&e.kind, InboundKind::Message { text, .. } if text == "after the bad one"),
            Duration::from_secs(20),
        )
        .await
        .unwrap_or_else(|| panic!("the message after the malformed one was lost"));
    assert!(running.status.current().as_str() == "connected");
    running.stop().await;
}

/// A prompt gets ✅ ❌ from the bot; a reply "approve" to it arrives as the ✅ reaction.
#[tokio::test]
async fn a_reply_approve_to_a_prompt_counts_as_its_reaction() {
    let h = harness().await;
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    running
        .wait_for_status(|s| s.as_str() == "connected", Duration::from_secs(20))
        .await;
    let mut prompt = OutboundMessage::text(h.chat(), "Run the tool?");
    prompt.buttons = vec![
        Button::new("✅ Approve", "c:x:a").with_emoji("✅"),
        Button::new("❌ Deny", "c:x:d").with_emoji("❌"),
    ];
    let sent = h
        .channel
        .send(&prompt)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.human
        .reply(&h.room, &sent.message_id, "Approve")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let event = running
        .sink
        .wait_for_event(
            |e| matches!(&e.kind, InboundKind::Reaction { .. }),
            Duration::from_secs(20),
        )
        .await
        .unwrap_or_else(|| panic!("the reply never arrived as a reaction"));
    assert_eq!(
        event.kind,
        InboundKind::Reaction {
            message_id: sent.message_id.clone(),
            emoji: "✅".into()
        }
    );
    running.stop().await;
}

/// An encrypted DM, as Element makes them: a person on a matrix-sdk client invites hearth,
/// hearth joins, decrypts the message, answers encrypted (the person decrypts it), and after a
/// restart on the same directory it is the same device and still decrypts new messages.
#[tokio::test]
async fn an_encrypted_dm_works_across_a_restart_with_the_same_device() {
    use matrix_sdk::config::SyncSettings;
    use matrix_sdk::room::MessagesOptions;
    use matrix_sdk::ruma::events::reaction::ReactionEventContent;
    use matrix_sdk::ruma::events::relation::Annotation;
    use matrix_sdk::ruma::events::room::message::RoomMessageEventContent;
    use matrix_sdk::ruma::{EventId, RoomId};

    let h = harness().await;
    let person = Human::register(h.server, "element")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let client = matrix_sdk::Client::builder()
        .homeserver_url(h.server.url())
        .build()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    client
        .matrix_auth()
        .login_username(&person.user.user_id, &person.user.password)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let quick = || SyncSettings::default().timeout(Duration::from_millis(300));
    client
        .sync_once(quick())
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let make = || {
        let mut settings = settings(h.server, &h.bot, "bot-password", dir.path());
        settings.allowed_users = vec![person.user.user_id.clone()];
        Arc::new(MatrixChannel::new(settings).unwrap_or_else(|e| panic!("{e}")))
    };
    let state = MemoryState::new();
    let channel = make();
    let running = Running::start(channel.clone(), RecordingSink::new(), state.clone());
    running
        .wait_for_status(|s| s.as_str() == "connected", Duration::from_secs(20))
        .await;
    let room_id = person
        .create_room(&[&h.bot.user_id], true, true)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while person.membership(&room_id, &h.bot.user_id).await.as_deref() != Some("join") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "hearth did not accept the invite"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client
        .sync_once(quick())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let parsed = RoomId::parse(&room_id).unwrap_or_else(|e| panic!("{e}"));
    let room = client
        .get_room(&parsed)
        .unwrap_or_else(|| panic!("the person's client has no room"));
    assert!(
        room.latest_encryption_state()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_encrypted(),
        "the DM is not encrypted"
    );

    let says = |running: &Running, text: &'static str| {
        let sink = running.sink.clone();
        async move {
            sink.wait_for_event(
                |e| matches!(&e.kind, InboundKind::Message { text: t, .. } if t == text),
                Duration::from_secs(30),
            )
            .await
            .unwrap_or_else(|| panic!("{text:?} was not decrypted"))
        }
    };
    room.send(RoomMessageEventContent::text_plain("a secret hello"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let event = says(&running, "a secret hello").await;
    assert_eq!(event.chat.chat_id, room_id);

    let sent = channel
        .send(&OutboundMessage::text(
            ChatRef::new(&room_id),
            "an **encrypted** answer",
        ))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let raw = person.events(&room_id, 50).await.unwrap_or_default();
    let on_the_wire = raw
        .iter()
        .find(|e| e["event_id"] == sent.message_id.as_str())
        .map(|e| e["type"].clone());
    assert_eq!(
        on_the_wire,
        Some(serde_json::json!("m.room.encrypted")),
        "the answer was not encrypted"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        client
            .sync_once(quick())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let page = room
            .messages(MessagesOptions::backward())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let decrypted = page.chunk.iter().any(|e| {
            e.raw()
                .get_field::<serde_json::Value>("content")
                .ok()
                .flatten()
                .is_some_and(|c| c["body"] == "an **encrypted** answer")
        });
        if decrypted {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the person could not decrypt the answer"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Reactions in an encrypted room are encrypted too (Element's ✅ on a confirmation prompt):
    // hearth decrypts them into the reaction on its answer.
    let answer = EventId::parse(sent.message_id.as_str()).unwrap_or_else(|e| panic!("{e}"));
    room.send(ReactionEventContent::new(Annotation::new(
        answer,
        "✅".to_owned(),
    )))
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let reaction = running
        .sink
        .wait_for_event(
            |e| matches!(&e.kind, InboundKind::Reaction { .. }),
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|| panic!("the encrypted reaction was not decrypted"));
    assert!(
        matches!(&reaction.kind, InboundKind::Reaction { message_id, emoji }
            if message_id == sent.message_id.as_str() && emoji == "✅"),
        "{:?}",
        reaction.kind
    );
    assert_eq!(reaction.sender.id, person.user.user_id);

    let device = channel.device_id().await;
    running.stop().await;
    drop(channel);

    let channel = make();
    let running = Running::start(channel.clone(), RecordingSink::new(), state);
    running
        .wait_for_status(|s| s.as_str() == "connected", Duration::from_secs(20))
        .await;
    assert_eq!(
        channel.device_id().await,
        device,
        "the restart made a new device"
    );
    room.send(RoomMessageEventContent::text_plain(
        "still secret after the restart",
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    says(&running, "still secret after the restart").await;
    running.stop().await;
}

/// The recovery key (Element: Settings → Encryption → set up recovery) given to hearth after it
/// already ran without one: at the next start hearth imports the account's cross-signing keys
/// and signs its own device, so the account's other sessions (and everyone who verified the
/// account) see hearth's device as verified by its owner; before, it was not.
#[tokio::test]
async fn a_recovery_key_cross_signs_hearths_device() {
    use matrix_sdk::config::SyncSettings;
    use matrix_sdk::encryption::EncryptionSettings;
    use matrix_sdk::ruma::{OwnedDeviceId, UserId};

    init();
    let server = Synapse::shared().unwrap_or_else(|e| panic!("Synapse: {e}"));
    let bot = server
        .register(&unique_name("bot"), "bot-password")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // The owner's Element session on hearth's account, which sets up cross-signing and recovery.
    let element = matrix_sdk::Client::builder()
        .homeserver_url(server.url())
        .with_encryption_settings(EncryptionSettings {
            auto_enable_cross_signing: true,
            ..Default::default()
        })
        .build()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    element
        .matrix_auth()
        .login_username(&bot.user_id, &bot.password)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    element
        .encryption()
        .wait_for_e2ee_initialization_tasks()
        .await;
    let quick = || SyncSettings::default().timeout(Duration::from_millis(300));
    element
        .sync_once(quick())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let recovery_key = element
        .encryption()
        .recovery()
        .enable()
        .await
        .unwrap_or_else(|e| panic!("recovery could not be set up: {e}"));

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let start = |recovery: Option<String>| {
        let mut settings = settings(server, &bot, &bot.password, dir.path());
        settings.recovery_key = recovery;
        let channel = Arc::new(MatrixChannel::new(settings).unwrap_or_else(|e| panic!("{e}")));
        let running = Running::start(channel.clone(), RecordingSink::new(), MemoryState::new());
        (channel, running)
    };
    let user = UserId::parse(&bot.user_id).unwrap_or_else(|e| panic!("{e}"));
    // Whether Element, after its syncs, sees hearth's device as signed by the account.
    let cross_signed = |device: OwnedDeviceId, want: bool| {
        let (element, user) = (element.clone(), user.clone());
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            loop {
                element
                    .sync_once(quick())
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                let seen = element
                    .encryption()
                    .get_device(&user, &device)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"))
                    .map(|d| d.is_cross_signed_by_owner());
                if seen == Some(want) {
                    return;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "Element sees hearth's device as {seen:?}, wanted cross-signed = {want}"
                );
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
    };

    let (channel, running) = start(None);
    running
        .wait_for_status(|s| s.as_str() == "connected", Duration::from_secs(20))
        .await;
    let device: OwnedDeviceId = channel
        .device_id()
        .await
        .unwrap_or_else(|| panic!("hearth has no device"))
        .into();
    cross_signed(device.clone(), false).await;
    running.stop().await;
    drop(channel);

    let (channel, running) = start(Some(recovery_key));
    running
        .wait_for_status(|s| s.as_str() == "connected", Duration::from_secs(20))
        .await;
    assert_eq!(
        channel.device_id().await.as_deref(),
        Some(device.as_str()),
        "the same device"
    );
    cross_signed(device, true).await;
    running.stop().await;
}
