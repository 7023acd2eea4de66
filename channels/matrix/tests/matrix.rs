//! The Matrix adapter against a real Synapse (installed and started by the test kit), with a
//! person talking plain HTTP to it: the conformance suite of `channels/core`, plus Matrix's own
//! cases (the device kept across restarts, a limited sync, a malformed event).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hearth_channel::testkit::{Document, Harness, MemoryState, RecordingSink, Running, Shown};
use hearth_channel::{
    Button, Channel, ChatRef, InboundKind, MessageRef, OutboundMessage, PreviewUpdate, Sender,
};
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
        let (server, bot) = server_and_bot().await;
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
        // The channel sends only to rooms its sync loop has seen (as in the daemon, where the
        // loop always runs): one short run makes the room known to the sends of the checks.
        connect_once(&channel).await;
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

/// The shared Synapse and a fresh account for hearth's bot (password `bot-password`).
async fn server_and_bot() -> (&'static Synapse, Registered) {
    init();
    let server = Synapse::shared().unwrap_or_else(|e| panic!("Synapse: {e}"));
    let bot = server
        .register(&unique_name("bot"), "bot-password")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (server, bot)
}

/// A short sync, for a client that only needs to catch up.
fn quick() -> matrix_sdk::config::SyncSettings {
    matrix_sdk::config::SyncSettings::default().timeout(Duration::from_millis(300))
}

/// A matrix-sdk session (an Element, say) logged in as `user`, its encryption set up and
/// synced once. With `cross_signing` it sets up cross-signing for the account.
async fn session(server: &Synapse, user: &Registered, cross_signing: bool) -> matrix_sdk::Client {
    let client = matrix_sdk::Client::builder()
        .homeserver_url(server.url())
        .with_encryption_settings(matrix_sdk::encryption::EncryptionSettings {
            auto_enable_cross_signing: cross_signing,
            ..Default::default()
        })
        .build()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    client
        .matrix_auth()
        .login_username(&user.user_id, &user.password)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    client
        .encryption()
        .wait_for_e2ee_initialization_tasks()
        .await;
    client
        .sync_once(quick())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    client
}

async fn harness() -> MatrixHarness {
    MatrixHarness::start().await
}

/// Runs the channel's loop until it has synced once, then stops it.
async fn connect_once(channel: &Arc<MatrixChannel>) {
    let running = Running::start(channel.clone(), RecordingSink::new(), MemoryState::new());
    let status = running
        .wait_for_status(|s| s.as_str() == "connected", Duration::from_secs(30))
        .await;
    assert_eq!(status.as_str(), "connected");
    running.stop().await;
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
    connect_once(&first).await;
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
    connect_once(&second).await;
    assert_eq!(
        second.device_id().await,
        Some(device.clone()),
        "a restart made a new device"
    );
    drop(second);

    std::fs::remove_dir_all(dir.path().join("store")).unwrap_or_else(|e| panic!("{e}"));
    let third = make();
    connect_once(&third).await;
    let new_device = third
        .device_id()
        .await
        .unwrap_or_else(|| panic!("no device"));
    assert_ne!(
        new_device, device,
        "a lost store must not reuse the old device id"
    );
    let aside: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("session.json.set-aside-"))
        .collect();
    assert_eq!(
        aside.len(),
        1,
        "the old session was not moved aside: {aside:?}"
    );
}

/// `store_passphrase_env` added to an install that ran without it: the store cannot be read
/// with the new passphrase, and hearth must neither delete it nor log in as a new device (that
/// would lose every room key and the cross-signing). The channel fails with one line saying
/// what to do, the store and session stay as they were, and with the old setting back the
/// same device runs again.
#[tokio::test]
async fn a_changed_store_passphrase_fails_the_channel_and_keeps_the_keys() {
    let h = harness().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let start = |passphrase: Option<&str>| {
        let mut settings = settings(h.server, &h.bot, "bot-password", dir.path());
        settings.store_passphrase = passphrase.map(hearth_channel::Secret::new);
        let channel = Arc::new(MatrixChannel::new(settings).unwrap_or_else(|e| panic!("{e}")));
        let running = Running::start(channel.clone(), RecordingSink::new(), MemoryState::new());
        (channel, running)
    };
    let (channel, running) = start(None);
    running
        .wait_for_status(|s| s.as_str() == "connected", Duration::from_secs(20))
        .await;
    let device = channel
        .device_id()
        .await
        .unwrap_or_else(|| panic!("no device"));
    running.stop().await;
    drop(channel);
    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let before = listing();

    let (channel, running) = start(Some("a passphrase added later"));
    let status = running
        .wait_for_status(|s| s.as_str() == "failed", Duration::from_secs(20))
        .await;
    let reason = match &status {
        hearth_channel::ChannelStatus::Failed { reason } => reason.clone(),
        other => panic!("the channel did not fail: {other:?}"),
    };
    assert!(
        reason.contains("store_passphrase_env") && reason.contains("move that directory aside"),
        "{reason}"
    );
    assert!(!reason.contains('\n'), "more than one line: {reason}");
    let returned = running.returned(Duration::from_secs(10)).await;
    assert!(
        matches!(&returned, Some(Err(e)) if !e.is_temporary()),
        "{returned:?}"
    );
    assert_eq!(channel.device_id().await, None, "it logged in anyway");
    drop(channel);
    assert_eq!(listing(), before, "the store or session was touched");
    assert_eq!(
        hearth_matrix::saved_device_id(dir.path()).as_deref(),
        Some(device.as_str())
    );

    let (channel, running) = start(None);
    running
        .wait_for_status(|s| s.as_str() == "connected", Duration::from_secs(20))
        .await;
    assert_eq!(
        channel.device_id().await.as_deref(),
        Some(device.as_str()),
        "the old setting back did not bring the same device back"
    );
    running.stop().await;
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
    use matrix_sdk::room::MessagesOptions;
    use matrix_sdk::ruma::events::reaction::ReactionEventContent;
    use matrix_sdk::ruma::events::relation::Annotation;
    use matrix_sdk::ruma::events::room::message::RoomMessageEventContent;
    use matrix_sdk::ruma::{EventId, RoomId};

    let h = harness().await;
    let person = Human::register(h.server, "element")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let client = session(h.server, &person.user, false).await;

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

    // A file in an encrypted room arrives by reference (the encrypted file's key, iv and hash
    // in its source, nothing downloaded) and is fetched and decrypted to the exact bytes.
    let secret_file: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    room.send_attachment(
        "secret.bin",
        &mime::APPLICATION_OCTET_STREAM,
        secret_file.clone(),
        matrix_sdk::attachment::AttachmentConfig::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let event = running
        .sink
        .wait_for_event(
            |e| matches!(&e.kind, InboundKind::Message { attachments, .. } if !attachments.is_empty()),
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|| panic!("the encrypted file did not arrive"));
    let InboundKind::Message { attachments, .. } = &event.kind else {
        unreachable!("matched a message");
    };
    let file = &attachments[0];
    assert_eq!(file.data_base64, None, "the loop downloaded the file");
    assert!(
        file.source
            .as_deref()
            .is_some_and(|s| s.contains("\"key\"")),
        "the source lacks the file's key: {file:?}"
    );
    let fetched = channel
        .fetch_attachment(file, 1 << 20)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(fetched == secret_file, "the decrypted file differs");
    assert!(
        channel
            .fetch_attachment(file, 1000)
            .await
            .is_err_and(|e| !e.is_temporary()),
        "an encrypted file over the limit was not refused"
    );

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
    use matrix_sdk::ruma::{OwnedDeviceId, UserId};

    let (server, bot) = server_and_bot().await;
    // The owner's Element session on hearth's account, which sets up cross-signing and recovery.
    let element = session(server, &bot, true).await;
    let recovery_key = element
        .encryption()
        .recovery()
        .enable()
        .await
        .unwrap_or_else(|e| panic!("recovery could not be set up: {e}"));

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let start = |recovery: Option<String>| {
        let mut settings = settings(server, &bot, &bot.password, dir.path());
        settings.recovery_key = recovery.map(hearth_channel::Secret::new);
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

/// A run of the channel with the daemon's answer to "whom do you serve" (`allowlist`) and a
/// state store that counts its saves per key, which [`Running`] does not offer.
struct Run {
    sink: RecordingSink,
    status: hearth_channel::StatusReporter,
    shutdown: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<Result<(), hearth_channel::ChannelError>>,
    _dir: tempfile::TempDir,
}

impl Run {
    fn start(channel: Arc<dyn Channel>, state: CountingState, allowlist: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let sink = RecordingSink::new();
        let shutdown = tokio_util::sync::CancellationToken::new();
        let status = hearth_channel::StatusReporter::new();
        let listed = Listed(allowlist.iter().map(|s| s.to_string()).collect());
        let ctx = hearth_channel::ChannelContext::new(
            channel.name(),
            shutdown.clone(),
            Arc::new(sink.clone()),
            Arc::new(state.clone()),
            dir.path().to_path_buf(),
            status.clone(),
        )
        .with_allowlist(Arc::new(listed));
        let task = tokio::spawn(async move { channel.run(ctx).await });
        Self {
            sink,
            status,
            shutdown,
            task,
            _dir: dir,
        }
    }

    async fn connected(&self) {
        let mut status = self.status.subscribe();
        let connected = tokio::time::timeout(
            Duration::from_secs(30),
            status.wait_for(|s| s.as_str() == "connected"),
        )
        .await;
        assert!(
            matches!(connected, Ok(Ok(_))),
            "not connected: {:?}",
            self.status.current()
        );
    }

    async fn stop(self) {
        self.shutdown.cancel();
        match tokio::time::timeout(Duration::from_secs(5), self.task).await {
            Ok(Ok(Ok(()))) => {}
            other => panic!("run did not stop cleanly: {other:?}"),
        }
    }
}

/// The daemon's identities, as a fixed list.
struct Listed(Vec<String>);

#[async_trait]
impl hearth_channel::Allowlist for Listed {
    async fn allows(&self, _channel: &str, user: &str) -> Result<bool, hearth_channel::SinkError> {
        Ok(self.0.iter().any(|u| u == user))
    }
}

/// A [`MemoryState`] that counts how often each key was saved.
#[derive(Clone, Default)]
struct CountingState {
    inner: MemoryState,
    saves: Arc<Mutex<std::collections::HashMap<String, usize>>>,
}

impl CountingState {
    fn saves(&self, key: &str) -> usize {
        self.saves
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .copied()
            .unwrap_or(0)
    }

    fn get(&self, key: &str) -> Option<String> {
        self.inner.get("matrix", key)
    }
}

#[async_trait]
impl hearth_channel::StateStore for CountingState {
    async fn load(
        &self,
        channel: &str,
        key: &str,
    ) -> Result<Option<String>, hearth_channel::SinkError> {
        self.inner.load(channel, key).await
    }

    async fn save(
        &self,
        channel: &str,
        key: &str,
        value: &str,
    ) -> Result<(), hearth_channel::SinkError> {
        *self
            .saves
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.to_owned())
            .or_default() += 1;
        self.inner.save(channel, key, value).await
    }
}

/// Waits until `user`'s membership in `room` is `want`.
async fn wait_membership(person: &Human, room: &str, user: &str, want: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let now = person.membership(room, user).await;
        if now.as_deref() == Some(want) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{user} in {room} is {now:?}, wanted {want}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Files come by reference: an image larger than the old 200 KiB limit arrives with its mxc
/// source and declared size but no content, and the receive loop downloads nothing (the proxy
/// in front of Synapse counts the media requests), whoever sent it. `fetch_attachment` then
/// returns the exact bytes; a limit below the declared size is refused for good without a
/// request, and a file that declares no size is cut off at the limit.
#[tokio::test]
async fn files_arrive_by_reference_and_are_fetched_only_on_request_within_the_limit() {
    use hearth_channel::AttachmentKind;
    let h = harness().await;
    let proxy = hearth_testkit::matrix::Proxy::start(&h.server.url())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut settings = settings(h.server, &h.bot, "bot-password", dir.path());
    settings.homeserver = proxy.url();
    let channel = Arc::new(MatrixChannel::new(settings).unwrap_or_else(|e| panic!("{e}")));
    let running = Running::start(channel.clone(), RecordingSink::new(), MemoryState::new());
    running
        .wait_for_status(|s| s.as_str() == "connected", Duration::from_secs(20))
        .await;

    // 300 KiB that no compression or text decoding would leave intact.
    let photo: Vec<u8> = (0..300 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let url = h
        .human
        .upload(photo.clone(), "image/jpeg", "photo.jpg")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.human
        .send(
            &h.room,
            "m.room.message",
            serde_json::json!({"msgtype": "m.image", "body": "my cat", "filename": "photo.jpg", "url": url,
                "info": {"mimetype": "image/jpeg", "size": photo.len()}}),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let event = running
        .sink
        .wait_for_event(
            |e| matches!(&e.kind, InboundKind::Message { text, .. } if text == "my cat"),
            Duration::from_secs(20),
        )
        .await
        .unwrap_or_else(|| panic!("the image message never arrived"));
    let InboundKind::Message { attachments, .. } = &event.kind else {
        unreachable!("matched a message");
    };
    assert_eq!(attachments.len(), 1, "{attachments:?}");
    let image = &attachments[0];
    assert_eq!(image.kind, AttachmentKind::Image);
    assert_eq!(image.source.as_deref(), Some(url.as_str()));
    assert_eq!(image.size, Some(photo.len() as u64));
    assert_eq!(image.data_base64, None, "the loop downloaded the image");
    assert_eq!(
        proxy.count("/media/download"),
        0,
        "the receive loop downloaded a file before anyone checked its sender"
    );

    let fetched = channel
        .fetch_attachment(image, 1 << 20)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        fetched == photo,
        "the fetched image differs from the upload"
    );
    assert_eq!(proxy.count("/_matrix/client/v1/media/download"), 1);

    let refused = channel
        .fetch_attachment(image, 100 * 1024)
        .await
        .expect_err("a file over the limit must be refused");
    assert!(!refused.is_temporary(), "{refused}");
    assert!(refused.message.contains("over the limit"), "{refused}");
    assert_eq!(
        proxy.count("/media/download"),
        1,
        "a file declared over the limit was requested anyway"
    );

    // A sender may leave the size out (or lie): the download stops at the limit.
    let mut undeclared = image.clone();
    undeclared.size = None;
    let refused = channel
        .fetch_attachment(&undeclared, 100 * 1024)
        .await
        .expect_err("a file over the limit must be refused");
    assert!(!refused.is_temporary(), "{refused}");
    let mut understated = image.clone();
    understated.size = Some(10);
    assert!(
        channel
            .fetch_attachment(&understated, 100 * 1024)
            .await
            .is_err_and(|e| !e.is_temporary()),
        "a file that understated its size was read past the limit"
    );
    // A forged source naming no file on this server is refused for good too.
    let mut gone = image.clone();
    gone.source = Some("mxc://localhost/nosuchmedia".into());
    let missing = channel
        .fetch_attachment(&gone, 1 << 20)
        .await
        .expect_err("a missing file");
    assert!(!missing.is_temporary(), "{missing}");
    running.stop().await;
}

/// `m.notice` is what bots send: another bot's notice gets no answer. With
/// `require_verified_devices`, a message from a new device the owner has not cross-signed is
/// delivered as from an unverified sender (the daemon treats it as a stranger's), and so is an
/// unencrypted one (it proves no device); once the owner's device is cross-signed, its messages
/// are the owner's again.
#[tokio::test]
async fn notices_are_ignored_and_unsigned_devices_are_unverified_when_required() {
    use matrix_sdk::ruma::RoomId;
    use matrix_sdk::ruma::events::room::message::RoomMessageEventContent;

    let (server, bot) = server_and_bot().await;
    let owner = Human::register(server, "owner")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // The owner's new session (as after a stolen password): not cross-signed.
    let client = session(server, &owner.user, false).await;

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut settings = settings(server, &bot, "bot-password", dir.path());
    settings.allowed_users = vec![owner.user.user_id.clone()];
    settings.require_verified_devices = true;
    let channel = Arc::new(MatrixChannel::new(settings).unwrap_or_else(|e| panic!("{e}")));
    let running = Running::start(channel.clone(), RecordingSink::new(), MemoryState::new());
    running
        .wait_for_status(|s| s.as_str() == "connected", Duration::from_secs(20))
        .await;
    let arrives = |text: String| {
        let sink = running.sink.clone();
        async move {
            sink.wait_for_event(
                |e| matches!(&e.kind, InboundKind::Message { text: t, .. } if *t == text),
                Duration::from_secs(30),
            )
            .await
            .unwrap_or_else(|| panic!("{text:?} did not arrive"))
        }
    };

    // An unencrypted DM proves no device.
    let plain = owner
        .create_room(&[&bot.user_id], true, false)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_membership(&owner, &plain, &bot.user_id, "join").await;
    owner
        .send(
            &plain,
            "m.room.message",
            serde_json::json!({"msgtype": "m.notice", "body": "another bot's notice"}),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    owner
        .text(&plain, "unencrypted hello", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let event = arrives("unencrypted hello".into()).await;
    assert!(!event.sender.verified, "an unencrypted message was obeyed");
    assert!(
        !running.sink.events().iter().any(|e| matches!(&e.kind,
            InboundKind::Message { text, .. } if text.contains("notice"))),
        "a notice was delivered"
    );

    let room_id = owner
        .create_room(&[&bot.user_id], true, true)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_membership(&owner, &room_id, &bot.user_id, "join").await;
    client
        .sync_once(quick())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let room = client
        .get_room(&RoomId::parse(&room_id).unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or_else(|| panic!("the owner's client has no room"));
    room.send(RoomMessageEventContent::text_plain("from a new device"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let event = arrives("from a new device".into()).await;
    assert_eq!(event.sender.id, owner.user.user_id);
    assert!(
        !event.sender.verified,
        "a device its owner never cross-signed was obeyed"
    );

    // The owner sets up cross-signing on that session, which signs it.
    client
        .encryption()
        .bootstrap_cross_signing(None)
        .await
        .unwrap_or_else(|e| panic!("cross-signing: {e}"));
    client
        .sync_once(quick())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // hearth learns of the new signature from its next key query: ask until it did.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    for n in 0.. {
        let text = format!("cross-signed now {n}");
        room.send(RoomMessageEventContent::text_plain(text.clone()))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        if arrives(text).await.sender.verified {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cross-signed device is still unverified"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    running.stop().await;
}

/// Invites are accepted from the daemon's identities (owner, allow list, paired users), not
/// only from the section's `allowed_users`; a stranger's invite is declined.
#[tokio::test]
async fn invites_from_the_daemons_identities_are_accepted_and_strangers_declined() {
    let (server, bot) = server_and_bot().await;
    let paired = Human::register(server, "paired")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let stranger = Human::register(server, "stranger")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let channel = Arc::new(
        MatrixChannel::new(settings(server, &bot, "bot-password", dir.path()))
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let run = Run::start(
        channel,
        CountingState::default(),
        &[paired.user.user_id.as_str()],
    );
    run.connected().await;
    let theirs = paired
        .create_room(&[&bot.user_id], true, false)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let strangers = stranger
        .create_room(&[&bot.user_id], true, false)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_membership(&paired, &theirs, &bot.user_id, "join").await;
    wait_membership(&stranger, &strangers, &bot.user_id, "leave").await;
    run.stop().await;
}

/// A member of a group room who is not served floods it with junk ciphertext, reactions and
/// edits, never addressing hearth: nothing reaches the inbox and nothing is kept. The served
/// owner's one undecryptable message is kept, saved once, and not rewritten on later syncs.
#[tokio::test]
async fn a_flood_in_a_group_room_stores_nothing_and_the_waiting_list_is_saved_once() {
    let h = harness().await;
    let member = Human::register(h.server, "member")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut settings = settings(h.server, &h.bot, "bot-password", dir.path());
    settings.allowed_users = vec![h.human.user.user_id.clone()];
    let channel = Arc::new(MatrixChannel::new(settings).unwrap_or_else(|e| panic!("{e}")));
    let state = CountingState::default();
    let run = Run::start(channel, state.clone(), &[]);
    run.connected().await;

    let group = h
        .human
        .create_room(&[&h.bot.user_id, &member.user.user_id], false, true)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    Human::new(&h.server.url(), h.bot.clone())
        .join(&group)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    member.join(&group).await.unwrap_or_else(|e| panic!("{e}"));
    let target = h
        .human
        .text(&group, "what shall we eat", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let junk = |n: usize| {
        serde_json::json!({
            "algorithm": "m.megolm.v1.aes-sha2", "ciphertext": format!("junk{n}"),
            "sender_key": "c2VuZGVyIGtleQ", "session_id": format!("nosuchsession{n}"), "device_id": "JUNK",
        })
    };
    let own = member
        .text(&group, "pizza", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for n in 0..30 {
        member
            .send(&group, "m.room.encrypted", junk(n))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    for emoji in ["👍", "🍕", "❤️", "😂", "🎉"] {
        member
            .react(&group, &target, emoji)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    for n in 0..5 {
        member
            .edit(&group, &own, &format!("pizza {n}"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    // The owner's own undecryptable message (its key never comes) is worth waiting for.
    h.human
        .send(&group, "m.room.encrypted", junk(99))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Several later syncs, each marked by a message hearth must answer.
    for n in 0..3 {
        let probe = format!("hearth, probe {n}");
        h.human
            .text(&h.room, &probe, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        run.sink
            .wait_for_event(
                |e| matches!(&e.kind, InboundKind::Message { text, .. } if *text == probe),
                Duration::from_secs(20),
            )
            .await
            .unwrap_or_else(|| panic!("{probe} did not arrive"));
    }
    let from_member: Vec<_> = run
        .sink
        .events()
        .into_iter()
        .filter(|e| e.sender.id == member.user.user_id)
        .collect();
    assert_eq!(
        from_member,
        [],
        "the member's unaddressed events reached the inbox"
    );
    let waiting: Vec<serde_json::Value> = state
        .get("undecrypted")
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    assert_eq!(waiting.len(), 1, "{waiting:#?}");
    assert_eq!(waiting[0]["sender"], h.human.user.user_id.as_str());
    assert_eq!(
        state.saves("undecrypted"),
        1,
        "the waiting list was rewritten without a change"
    );
    assert!(state.saves("since") >= 3);
    run.stop().await;
}

/// A send never syncs beside the loop (matrix-sdk would drop the loop's next response as a
/// repeat, and hearth would save a position past events it never saw): before the loop's first
/// sync a room the client does not know is a temporary failure the outbox retries, without a
/// request to /sync; once the loop synced, the send goes out; a room hearth is not in is
/// refused for good, again without a sync.
#[tokio::test]
async fn a_send_never_syncs_beside_the_loop() {
    let h = harness().await;
    let proxy = hearth_testkit::matrix::Proxy::start(&h.server.url())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut settings = settings(h.server, &h.bot, "bot-password", dir.path());
    settings.homeserver = proxy.url();
    let channel = Arc::new(MatrixChannel::new(settings).unwrap_or_else(|e| panic!("{e}")));
    let early = channel
        .send(&OutboundMessage::text(h.chat(), "before any sync"))
        .await
        .expect_err("the room is not known before the loop synced");
    assert!(early.is_temporary(), "{early}");
    assert_eq!(proxy.count("/sync"), 0, "the send synced by itself");

    let running = Running::start(channel.clone(), RecordingSink::new(), MemoryState::new());
    running
        .wait_for_status(|s| s.as_str() == "connected", Duration::from_secs(20))
        .await;
    let sent = channel
        .send(&OutboundMessage::text(h.chat(), "after the loop synced"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let seen = h.human.seen(&h.room).await.unwrap_or_default();
    assert!(
        seen.iter()
            .any(|m| m.event_id == sent.message_id && m.text == "after the loop synced"),
        "{seen:?}"
    );
    running.stop().await;

    let elsewhere = h
        .human
        .create_room(&[], false, false)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let syncs = proxy.count("/sync");
    let refused = channel
        .send(&OutboundMessage::text(
            ChatRef::new(&elsewhere),
            "not my room",
        ))
        .await
        .expect_err("hearth is not in that room");
    assert!(!refused.is_temporary(), "{refused}");
    assert_eq!(proxy.count("/sync"), syncs, "the send synced by itself");
}

/// A gap fetch that fails does not move the position past the gap (the homeserver's answer to
/// `/messages` is cut off twice, as by a restarting reverse proxy): while the sink held the
/// loop, 60 messages arrived (more than one sync's timeline), the limited sync's gap fetch
/// fails, is tried again with the channel reported reconnecting, and every message arrives
/// once, in order; the same holds for the read-back at start after a restart.
#[tokio::test]
async fn a_failed_gap_fetch_is_tried_again_and_loses_nothing() {
    let h = harness().await;
    let proxy = hearth_testkit::matrix::Proxy::start(&h.server.url())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut settings = settings(h.server, &h.bot, "bot-password", dir.path());
    settings.homeserver = proxy.url();
    let channel = Arc::new(MatrixChannel::new(settings).unwrap_or_else(|e| panic!("{e}")));
    let state = MemoryState::new();
    let sink = RecordingSink::new();
    let running = Running::start(channel.clone(), sink.clone(), state.clone());
    running
        .wait_for_status(|s| s.as_str() == "connected", Duration::from_secs(20))
        .await;
    let statuses = Arc::new(Mutex::new(Vec::new()));
    let mut watch = running.status.subscribe();
    let recorder = {
        let statuses = statuses.clone();
        tokio::spawn(async move {
            while watch.changed().await.is_ok() {
                let now = watch.borrow().as_str();
                statuses.lock().unwrap_or_else(|p| p.into_inner()).push(now);
            }
        })
    };
    let texts =
        |prefix: &str| -> Vec<String> { (0..60).map(|i| format!("{prefix} {i:02}")).collect() };
    let received = |sink: &RecordingSink, prefix: &str| -> Vec<String> {
        sink.events()
            .iter()
            .filter_map(|e| match &e.kind {
                InboundKind::Message { text, .. } if text.starts_with(prefix) => Some(text.clone()),
                _ => None,
            })
            .collect()
    };

    sink.pause();
    h.human
        .text(&h.room, "hold the loop", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    sink.wait_for_attempt(
        |e| matches!(&e.kind, InboundKind::Message { text, .. } if text == "hold the loop"),
        Duration::from_secs(20),
    )
    .await
    .unwrap_or_else(|| panic!("the first message never reached the sink"));
    for text in texts("gap") {
        h.human
            .text(&h.room, &text, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let before = proxy.count("/messages");
    proxy.reset_next("/messages", 2);
    sink.resume();
    sink.wait_for_events(61, Duration::from_secs(40)).await;
    assert_eq!(received(&sink, "gap "), texts("gap"), "the gap was lost");
    assert!(
        proxy.count("/messages") >= before + 3,
        "the gap fetch was not tried again"
    );
    let seen = statuses.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert!(
        seen.contains(&"reconnecting"),
        "the failure was not reported: {seen:?}"
    );
    assert_eq!(running.status.current().as_str(), "connected");
    running.stop().await;
    recorder.abort();

    // Down: the read-back at start fails once, is tried again, and loses nothing.
    for text in texts("down") {
        h.human
            .text(&h.room, &text, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    proxy.reset_next("/messages", 1);
    let sink = RecordingSink::new();
    let running = Running::start(channel, sink.clone(), state);
    sink.wait_for_events(60, Duration::from_secs(40)).await;
    assert_eq!(
        received(&sink, "down "),
        texts("down"),
        "messages sent while down were lost"
    );
    running.stop().await;
}

/// The reply that replaces a streamed preview is an edit. When the connection breaks after the
/// edit went out (it landed, but hearth cannot know), the send fails temporarily instead of
/// posting the reply again as a new message, and the outbox's retry repeats the edit under the
/// same transaction id, which the homeserver shows once: one message, edited once, with the
/// final text.
#[tokio::test]
async fn a_preview_edit_with_an_unknown_outcome_is_retried_not_sent_twice() {
    let h = harness().await;
    let proxy = hearth_testkit::matrix::Proxy::start(&h.server.url())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut settings = settings(h.server, &h.bot, "bot-password", dir.path());
    settings.homeserver = proxy.url();
    let channel = Arc::new(MatrixChannel::new(settings).unwrap_or_else(|e| panic!("{e}")));
    connect_once(&channel).await;
    let chat = h.chat();
    let preview = channel
        .preview(PreviewUpdate::first(&chat, "thinking"))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("no preview"));
    let delivery = unique_name("delivery");
    let mut reply = OutboundMessage::text(h.chat(), "the final answer");
    reply.replaces = Some(preview.clone());
    reply.delivery_id = Some(delivery.clone());
    proxy.lose_answer_next(&format!("{delivery}.edit"), 1);
    let unknown = channel
        .send(&reply)
        .await
        .expect_err("the answer to the edit was lost");
    assert!(unknown.is_temporary(), "{unknown}");
    let sent = channel.send(&reply).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sent.message_id, preview.message_id);
    let from_bot: Vec<SeenMessage> = h
        .human
        .seen(&h.room)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.sender == h.bot.user_id)
        .collect();
    assert_eq!(
        from_bot.len(),
        1,
        "the reply was posted twice: {from_bot:#?}"
    );
    assert_eq!(from_bot[0].text, "the final answer");
    assert_eq!(from_bot[0].edits, 1, "the edit showed twice: {from_bot:#?}");
}
