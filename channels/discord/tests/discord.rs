//! The Discord channel against the fake Discord of hearth-testkit: the conformance suite, and
//! the platform's own cases (mention rules, backfill after reconnects, zombies, close codes,
//! rate limits, nonces, presses answered privately, bad input).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hearth_channel::testkit::{Document, Harness, MemoryState, RecordingSink, Running, Shown};
use hearth_channel::{
    Button, Channel, ChannelError, ChannelStatus, ChatRef, ErrorKind, Inbound, InboundKind,
    MessageRef, OutboundMessage, Sender,
};
use hearth_discord::{DiscordChannel, DiscordSettings};
use hearth_testkit::discord::{BOT_ID, FakeDiscord, UserMessage};
use hearth_testkit::tls::{TEST_CA_PEM, TlsFront};

const TOKEN: &str = "MTIz.fake-discord-token";
const PATIENCE: Duration = Duration::from_secs(10);
const USER: u64 = 111_111_111_111_111_111;
const STRANGER: u64 = 222_222_222_222_222_222;
const DM: u64 = 500_000_000_000_000_001;
const SERVER: u64 = 600_000_000_000_000_001;
const LISTED: u64 = 600_000_000_000_000_002;
const ROLE: u64 = 700_000_000_000_000_001;

fn crypto() {
    // Logs for a failing test (RUST_LOG=debug); a second init in the same binary fails harmlessly.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

fn settings(fake: &FakeDiscord) -> DiscordSettings {
    let mut settings = DiscordSettings::new(TOKEN).with_api_url(fake.api_url());
    settings.allowed_users = vec![USER];
    settings.allowed_roles = vec![ROLE];
    settings.channels = vec![LISTED];
    settings.request_timeout = Duration::from_secs(5);
    settings
}

async fn setup() -> (FakeDiscord, Arc<DiscordChannel>) {
    crypto();
    let fake = FakeDiscord::start(TOKEN).await;
    fake.server_channel(SERVER);
    fake.server_channel(LISTED);
    let channel = Arc::new(DiscordChannel::new(settings(&fake)).expect("valid settings"));
    (fake, channel)
}

async fn online(fake: &FakeDiscord, running: &Running) {
    assert!(
        fake.wait_connected(PATIENCE).await,
        "the bot never connected"
    );
    running
        .wait_for_status(|s| *s == ChannelStatus::Connected, PATIENCE)
        .await;
}

fn id(what: &str, value: &str) -> Result<u64, String> {
    value
        .parse()
        .map_err(|_| format!("{what} {value:?} is not a Discord id"))
}

/// The fake Discord as the conformance suite sees it: the checks talk in the DM of [`USER`].
struct DcHarness {
    fake: FakeDiscord,
    channel: Arc<DiscordChannel>,
}

#[async_trait]
impl Harness for DcHarness {
    fn channel(&self) -> Arc<dyn Channel> {
        self.channel.clone()
    }
    fn chat(&self) -> ChatRef {
        ChatRef::new(DM.to_string())
    }
    fn sender(&self) -> Sender {
        Sender::new(USER.to_string())
    }
    async fn inject_text(&self, chat: &ChatRef, sender: &Sender, text: &str) -> Result<(), String> {
        // A user writes while the bot is online (what it missed offline is the backfill's).
        if !self.fake.wait_connected(PATIENCE).await {
            return Err("the bot is not connected".into());
        }
        let channel = id("chat", &chat.chat_id)?;
        self.fake
            .send(UserMessage::new(channel, id("user", &sender.id)?, text));
        Ok(())
    }
    async fn inject_document(
        &self,
        chat: &ChatRef,
        sender: &Sender,
        caption: &str,
        document: &Document,
    ) -> Result<(), String> {
        if !self.fake.wait_connected(PATIENCE).await {
            return Err("the bot is not connected".into());
        }
        let message = UserMessage::new(
            id("chat", &chat.chat_id)?,
            id("user", &sender.id)?,
            caption,
        )
        .attach(&document.name, &document.mime, document.bytes.clone());
        self.fake.send(message);
        Ok(())
    }
    async fn inject_edit(
        &self,
        _chat: &ChatRef,
        sender: &Sender,
        message_id: &str,
        text: &str,
    ) -> Result<(), String> {
        if self
            .fake
            .edit(id("message", message_id)?, id("user", &sender.id)?, text)
        {
            Ok(())
        } else {
            Err(format!("no message {message_id} of {}", sender.id))
        }
    }
    async fn inject_press(
        &self,
        message: &MessageRef,
        sender: &Sender,
        data: &str,
    ) -> Result<(), String> {
        if !self.fake.wait_connected(PATIENCE).await {
            return Err("the bot is not connected".into());
        }
        self.fake
            .press(
                id("message", &message.message_id)?,
                id("user", &sender.id)?,
                data,
            )
            .map(|_| ())
            .ok_or_else(|| format!("no message {}", message.message_id))
    }
    async fn redeliver(&self, platform_id: &str) -> Result<(), String> {
        if self.fake.redeliver(id("message", platform_id)?) {
            Ok(())
        } else {
            Err(format!("no message {platform_id}"))
        }
    }
    async fn shown(&self, chat: &ChatRef) -> Vec<Shown> {
        let Ok(channel) = id("chat", &chat.chat_id) else {
            return Vec::new();
        };
        self.fake
            .bot_messages(channel)
            .into_iter()
            .map(|m| Shown {
                id: m.id.to_string(),
                text: m.content,
                buttons: m
                    .buttons
                    .into_iter()
                    .map(|(label, data)| Button::new(label, data))
                    .collect(),
                reactions: Vec::new(),
                reply_to: m.reply_to.map(|r| r.to_string()),
            })
            .collect()
    }
    async fn answered_presses(&self) -> Vec<String> {
        // The press id starts with the interaction id.
        let acknowledged = self.fake.acknowledged();
        let tokens = acknowledged
            .iter()
            .map(|(id, _)| id.clone())
            .collect::<Vec<_>>();
        tokens
            .into_iter()
            .map(|interaction| format!("{interaction}:{BOT_ID}:itoken{interaction}"))
            .collect()
    }
    async fn typing_shown(&self, chat: &ChatRef) -> Option<usize> {
        Some(self.fake.typing(id("chat", &chat.chat_id).ok()?))
    }
    async fn refuse_login(&self) -> Result<(), String> {
        self.fake.refuse_token();
        Ok(())
    }
}

async fn harness() -> DcHarness {
    let (fake, channel) = setup().await;
    DcHarness { fake, channel }
}

mod conformance {
    hearth_channel::conformance_tests!(super::harness);
}

fn start(channel: &Arc<DiscordChannel>, sink: &RecordingSink, state: &MemoryState) -> Running {
    Running::start(channel.clone(), sink.clone(), state.clone())
}

fn dm(text: &str) -> UserMessage {
    UserMessage::new(DM, USER, text)
}

/// A first run that gets `text` in the DM (so the DM has a cursor) and then stops: the state it
/// leaves behind.
async fn a_run_that_saw(
    fake: &FakeDiscord,
    channel: &Arc<DiscordChannel>,
    text: &str,
) -> MemoryState {
    let state = MemoryState::new();
    let first = RecordingSink::new();
    let running = start(channel, &first, &state);
    online(fake, &running).await;
    fake.send(dm(text));
    first.wait_text(text, PATIENCE).await;
    running.stop().await;
    state
}

/// How often `text` was offered to the sink.
fn offered(sink: &RecordingSink, text: &str) -> usize {
    sink.attempts()
        .iter()
        .filter(|e| e.text() == Some(text))
        .count()
}

#[tokio::test]
async fn server_channels_need_a_mention_a_reply_or_a_listed_channel_and_an_allowed_sender() {
    let (fake, channel) = setup().await;
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &MemoryState::new());
    online(&fake, &running).await;

    fake.send(UserMessage::new(SERVER, USER, "chatter, not for the bot"));
    fake.send(UserMessage::new(SERVER, USER, "what time is it?").mention());
    fake.send(UserMessage::new(SERVER, STRANGER, "stranger mentions").mention());
    fake.send(
        UserMessage::new(SERVER, STRANGER, "member of the role")
            .mention()
            .roles(&[ROLE]),
    );
    fake.send(UserMessage::new(LISTED, USER, "in the listed channel"));
    fake.send(UserMessage::new(DM, STRANGER, "a stranger's DM"));
    let asked = sink.wait_text("what time is it?", PATIENCE).await;
    assert_eq!(asked.chat, ChatRef::new(SERVER.to_string()));
    sink.wait_text("member of the role", PATIENCE).await;
    sink.wait_text("in the listed channel", PATIENCE).await;
    let stranger_dm = sink.wait_text("a stranger's DM", PATIENCE).await;
    assert_eq!(
        stranger_dm.sender.id,
        STRANGER.to_string(),
        "strangers in DMs reach the daemon, which offers them a pairing code"
    );

    // A reply to the bot's message counts as addressing it.
    let sent = channel
        .send(&OutboundMessage::text(
            ChatRef::new(SERVER.to_string()),
            "It is noon.",
        ))
        .await
        .expect("sent");
    let bot_message: u64 = sent.message_id.parse().expect("an id");
    fake.send(UserMessage::new(SERVER, USER, "and tomorrow?").reply_to(bot_message));
    let reply = sink.wait_text("and tomorrow?", PATIENCE).await;
    let InboundKind::Message { reply_to, .. } = &reply.kind else {
        unreachable!("a text");
    };
    assert_eq!(reply_to.as_deref(), Some(sent.message_id.as_str()));
    running.stop().await;

    let all = sink.texts();
    assert!(!all.iter().any(|t| t.contains("chatter")), "{all:?}");
    assert!(
        !all.iter().any(|t| t.contains("stranger mentions")),
        "{all:?}"
    );
}

/// A schedule's natural target is `discord:<my user id>`, which is no channel: the message goes
/// to the DM with that user, and its reference names the DM channel, so an edit reaches it.
#[tokio::test]
async fn a_message_to_a_user_id_goes_to_the_dm_with_that_user() {
    let (fake, channel) = setup().await;
    fake.user(USER);
    let sent = channel
        .send(&OutboundMessage::text(
            ChatRef::new(USER.to_string()),
            "Good morning",
        ))
        .await
        .expect("sent as a DM");
    let dm = fake.dm_channel(USER).expect("a DM channel was opened");
    assert_eq!(sent.chat.chat_id, dm.to_string());
    assert_eq!(fake.bot_messages(dm)[0].content, "Good morning");
    channel
        .edit(
            &sent,
            &OutboundMessage::text(sent.chat.clone(), "Good morning!"),
        )
        .await
        .expect("edited through the reference");
    assert_eq!(fake.bot_messages(dm)[0].content, "Good morning!");
    // The same DM the next time.
    let again = channel
        .send(&OutboundMessage::text(
            ChatRef::new(USER.to_string()),
            "Again",
        ))
        .await
        .expect("sent");
    assert_eq!(again.chat.chat_id, dm.to_string());
}

#[tokio::test]
async fn messages_sent_while_the_daemon_was_down_arrive_once_after_the_restart() {
    let (fake, channel) = setup().await;
    let state = a_run_that_saw(&fake, &channel, "before the crash").await;

    // Down: nobody is connected, the messages only go into the channel's history.
    for i in 0..3 {
        fake.send(dm(&format!("while down {i}")));
    }
    let second = RecordingSink::new();
    let running = start(&channel, &second, &state);
    for i in 0..3 {
        second.wait_text(&format!("while down {i}"), PATIENCE).await;
    }
    fake.send(dm("after the restart"));
    second.wait_text("after the restart", PATIENCE).await;
    running.stop().await;
    assert_eq!(
        second.texts(),
        [
            "while down 0",
            "while down 1",
            "while down 2",
            "after the restart"
        ],
        "in order, and what was stored before the crash is not offered again"
    );
}

#[tokio::test]
async fn a_zombie_connection_is_replaced_and_the_gap_is_read_from_history() {
    let (fake, channel) = setup().await;
    fake.set_heartbeat(Duration::from_millis(300));
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &MemoryState::new());
    online(&fake, &running).await;
    fake.send(dm("before the zombie"));
    sink.wait_text("before the zombie", PATIENCE).await;

    fake.zombie();
    fake.send(dm("lost in the zombie gap"));
    fake.send(dm("also in the gap"));
    // serenity notices the missing heartbeat ACK and IDENTIFIES anew (a fresh session that
    // would not replay these); the backfill after READY finds them.
    sink.wait_text("lost in the zombie gap", PATIENCE).await;
    sink.wait_text("also in the gap", PATIENCE).await;
    fake.send(dm("after the zombie"));
    sink.wait_text("after the zombie", PATIENCE).await;
    running.stop().await;
    let (identifies, _) = fake.logins();
    assert!(
        identifies >= 2,
        "no new IDENTIFY after the zombie: {identifies}"
    );
    for text in [
        "lost in the zombie gap",
        "also in the gap",
        "after the zombie",
    ] {
        assert_eq!(
            sink.events()
                .iter()
                .filter(|e| e.text() == Some(text))
                .count(),
            1,
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_dropped_connection_loses_nothing() {
    let (fake, channel) = setup().await;
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &MemoryState::new());
    online(&fake, &running).await;
    fake.drop_connection();
    for i in 0..3 {
        fake.send(dm(&format!("sent during the gap {i}")));
    }
    for i in 0..3 {
        sink.wait_text(&format!("sent during the gap {i}"), PATIENCE)
            .await;
    }
    let (identifies, resumes) = fake.logins();
    assert!(
        resumes >= 1 || identifies >= 2,
        "the connection was not taken up again: {identifies} identifies, {resumes} resumes"
    );
    running
        .wait_for_status(|s| *s == ChannelStatus::Connected, PATIENCE)
        .await;
    running.stop().await;
    for i in 0..3 {
        let text = format!("sent during the gap {i}");
        assert_eq!(
            sink.events()
                .iter()
                .filter(|e| e.text() == Some(&text))
                .count(),
            1
        );
    }
}

/// The error a run ends with when the gateway closes with `code` on IDENTIFY, and the status
/// the channel reports then.
async fn refused_on_identify(code: u16) -> (ChannelError, ChannelStatus) {
    let (fake, channel) = setup().await;
    fake.close_on_identify(code);
    let running = start(&channel, &RecordingSink::new(), &MemoryState::new());
    let status = running.status.clone();
    let error = running
        .returned(PATIENCE)
        .await
        .unwrap_or_else(|| panic!("run ended after {code}"))
        .expect_err("a refusal is an error");
    (error, status.current())
}

#[tokio::test]
async fn intent_refused_4014_fails_the_channel_with_what_to_switch_on() {
    let (error, status) = refused_on_identify(4014).await;
    assert_eq!(error.kind, ErrorKind::Config, "{error}");
    assert!(error.message.contains("Message Content Intent"), "{error}");
    assert_eq!(status.as_str(), "failed");
    assert!(
        status
            .reason()
            .is_some_and(|r| r.contains("developer portal")),
        "{status:?}"
    );
}

#[tokio::test]
async fn token_refused_4004_on_the_gateway_is_an_auth_failure() {
    let (error, status) = refused_on_identify(4004).await;
    assert_eq!(error.kind, ErrorKind::Auth, "{error}");
    assert_eq!(status.as_str(), "failed");
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_temporary_and_counted() {
    let (fake, channel) = setup().await;
    let chat = ChatRef::new(DM.to_string());
    fake.rate_limit_next(1, 0.05);
    let error = channel
        .send(&OutboundMessage::text(chat.clone(), "slow down"))
        .await
        .expect_err("429");
    assert!(
        matches!(error.kind, ErrorKind::RateLimited { .. }),
        "{error}"
    );
    assert_eq!(channel.counters(), [("ratelimited", 1)]);
    fake.fail_next(1);
    let error = channel
        .send(&OutboundMessage::text(chat.clone(), "bad gateway"))
        .await
        .expect_err("502");
    assert_eq!(error.kind, ErrorKind::Transient, "{error}");

    // A storm: every send is refused a few times, retried as the outbox does, and all arrive
    // in order.
    for i in 0..5 {
        fake.rate_limit_next(3, 0.01);
        let message = OutboundMessage::text(chat.clone(), format!("storm {i}"));
        let mut tries = 0;
        loop {
            tries += 1;
            match channel.send(&message).await {
                Ok(_) => break,
                Err(e) if e.is_temporary() && tries < 10 => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(e) => panic!("storm {i}: {e}"),
            }
        }
    }
    let shown: Vec<String> = fake
        .bot_messages(DM)
        .into_iter()
        .map(|m| m.content)
        .filter(|c| c.starts_with("storm"))
        .collect();
    assert_eq!(
        shown,
        ["storm 0", "storm 1", "storm 2", "storm 3", "storm 4"]
    );
    assert_eq!(channel.counters(), [("ratelimited", 16)]);
}

/// On Discord itself (the default `api_url`) serenity's ratelimiter is on: the bot logs in,
/// reads what it missed and sends; the ratelimiter waits out a 429 by itself, so the send
/// succeeds a moment later, and each wait is counted. Run on the real URL: the client trusts
/// the test CA and resolves discord.com to a TLS front of the fake. (Until this test, the
/// ratelimiter sent the token without "Bot ", and real Discord would have refused every call.)
#[tokio::test]
async fn on_discord_itself_the_ratelimiter_waits_out_429s_and_counts_them() {
    crypto();
    let fake = FakeDiscord::start(TOKEN).await;
    let front = TlsFront::discord(fake.addr()).await;
    let mut settings = DiscordSettings::new(TOKEN);
    settings.allowed_users = vec![USER];
    settings.request_timeout = Duration::from_secs(5);
    let ca = reqwest::Certificate::from_pem(TEST_CA_PEM.as_bytes()).expect("the test CA");
    let client = reqwest::Client::builder()
        .resolve("discord.com", front.addr())
        .add_root_certificate(ca);
    let channel =
        Arc::new(DiscordChannel::with_http_client(settings, client).expect("valid settings"));
    let chat = ChatRef::new(DM.to_string());

    // Logged in (the token checked, the gateway URL asked for) and a message received.
    let state = MemoryState::new();
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &state);
    online(&fake, &running).await;
    fake.send(dm("hello over TLS"));
    sink.wait_text("hello over TLS", PATIENCE).await;
    running.stop().await;

    fake.rate_limit_next(2, 0.05);
    for i in 0..3 {
        channel
            .send(&OutboundMessage::text(chat.clone(), format!("limited {i}")))
            .await
            .expect("the ratelimiter waits and sends");
    }
    let shown: Vec<String> = fake
        .bot_messages(DM)
        .into_iter()
        .map(|m| m.content)
        .collect();
    assert_eq!(shown, ["limited 0", "limited 1", "limited 2"]);
    assert_eq!(fake.rate_limited(), 2, "the fake answered 429 twice");
    assert_eq!(channel.counters(), [("ratelimited", 2)]);
}

#[tokio::test]
async fn an_answer_to_someone_elses_press_is_shown_to_the_presser_alone() {
    let (fake, channel) = setup().await;
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &MemoryState::new());
    online(&fake, &running).await;
    let mut prompt = OutboundMessage::text(ChatRef::new(SERVER.to_string()), "Run `rm`?");
    prompt.buttons = vec![
        Button::new("✅ Approve", "c:abc:a").with_emoji("✅"),
        Button::new("❌ Deny", "c:abc:d").with_emoji("❌"),
    ];
    let sent = channel.send(&prompt).await.expect("prompt sent");
    let shown = fake.bot_messages(SERVER);
    assert_eq!(
        shown.last().map(|m| m.buttons.clone()),
        Some(vec![
            ("✅ Approve".to_owned(), "c:abc:a".to_owned()),
            ("❌ Deny".to_owned(), "c:abc:d".to_owned())
        ])
    );
    let interaction = fake
        .press(sent.message_id.parse().expect("id"), STRANGER, "c:abc:a")
        .expect("pressed");
    let event = sink
        .wait_for_event(|e| matches!(e.kind, InboundKind::Press(_)), PATIENCE)
        .await
        .expect("the press arrived");
    running.stop().await;
    assert!(
        fake.acknowledged()
            .iter()
            .any(|(id, kind)| *id == interaction.to_string() && *kind == 6),
        "pressed buttons are acknowledged on receipt (deferred update): {:?}",
        fake.acknowledged()
    );
    let InboundKind::Press(press) = &event.kind else {
        unreachable!("matched");
    };
    // The daemon answers "not yours" with answers_press set.
    let mut answer =
        OutboundMessage::text(event.chat.clone(), "This request isn't yours to decide.");
    answer.reply_to = Some(sent.message_id.clone());
    answer.answers_press = Some(press.press_id.clone());
    channel.send(&answer).await.expect("answered");
    let followups = fake.followups();
    assert_eq!(followups.len(), 1, "{followups:?}");
    assert!(followups[0].ephemeral);
    assert_eq!(followups[0].content, "This request isn't yours to decide.");
    assert!(
        !fake
            .bot_messages(SERVER)
            .iter()
            .any(|m| m.content.contains("isn't yours")),
        "the refusal was shown to the whole channel"
    );

    // The decision removes the buttons.
    let decided = OutboundMessage::text(event.chat.clone(), "Run `rm`?\n\n✅ Approved by user1");
    channel.edit(&sent, &decided).await.expect("edited");
    let shown = fake.bot_messages(SERVER);
    let prompt = shown
        .iter()
        .find(|m| m.id.to_string() == sent.message_id)
        .expect("the prompt");
    assert!(prompt.buttons.is_empty(), "{prompt:?}");
    assert!(prompt.content.contains("Approved by"));
}

#[tokio::test]
async fn undecodable_gateway_events_are_skipped_and_later_ones_arrive() {
    let (fake, channel) = setup().await;
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &MemoryState::new());
    online(&fake, &running).await;
    fake.push_raw_dispatch(
        "MESSAGE_CREATE",
        serde_json::json!({"id": "not a snowflake", "content": 5}),
    );
    fake.push_raw_frame("this is not JSON at all");
    fake.send(dm("after the garbage"));
    sink.wait_text("after the garbage", PATIENCE).await;
    assert_eq!(offered(&sink, "after the garbage"), 1);
    running.stop().await;
}

#[tokio::test]
async fn an_unreachable_gateway_is_reported_as_reconnecting_not_connecting_forever() {
    let (fake, _) = setup().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    fake.set_gateway_url(&format!("ws://127.0.0.1:{port}"));
    let mut settings = settings(&fake);
    settings.ready_patience = Duration::from_millis(500);
    let channel = Arc::new(DiscordChannel::new(settings).expect("valid settings"));
    let running = start(&channel, &RecordingSink::new(), &MemoryState::new());
    let status = running
        .wait_for_status(|s| s.as_str() == "reconnecting", PATIENCE)
        .await;
    assert!(
        status.reason().is_some_and(|r| r.contains("no READY")),
        "{status:?}"
    );
    assert!(
        status.is_settled(),
        "systemd's READY=1 need not wait for it"
    );
    running.stop().await;
}

#[tokio::test]
async fn a_backfill_that_meets_502s_tries_again_and_finds_the_gap() {
    let (fake, channel) = setup().await;
    fake.set_heartbeat(Duration::from_millis(300));
    let state = a_run_that_saw(&fake, &channel, "known chat").await;
    fake.send(dm("missed while down"));
    let second = RecordingSink::new();
    let running = start(&channel, &second, &state);
    online(&fake, &running).await;
    second.wait_text("missed while down", PATIENCE).await;
    let history = |fake: &FakeDiscord| {
        fake.rest_calls()
            .iter()
            .filter(|c| **c == format!("GET /channels/{DM}/messages"))
            .count()
    };
    let before = history(&fake);
    fake.fail_next(2);
    // A reconnect makes a new READY and so a new backfill, now against the failing history.
    fake.zombie();
    fake.send(dm("sent to the zombie"));
    second.wait_text("sent to the zombie", PATIENCE).await;
    running.stop().await;
    assert_eq!(offered(&second, "sent to the zombie"), 1);
    assert!(
        history(&fake) >= before + 3,
        "the history was not asked again after the 502s"
    );
}

// ---- The doors: whom the server rules let in, after restarts too; files by reference; a
// ---- bounded queue; the interaction token kept out of logs; gaps never skipped.

use hearth_channel::{Allowlist, Attachment, AttachmentKind, ChannelContext, SinkError};
use hearth_testkit::discord::generated_bytes;
use tokio_util::sync::CancellationToken;

/// Whom the daemon serves, as the daemon's identities answer: `served` users, and a database
/// that is away for the first `fail` questions.
struct Served {
    served: Vec<u64>,
    fail: std::sync::atomic::AtomicUsize,
    asked: std::sync::atomic::AtomicUsize,
}

impl Served {
    fn new(served: &[u64], fail: usize) -> Arc<Self> {
        Arc::new(Self {
            served: served.to_vec(),
            fail: fail.into(),
            asked: 0.into(),
        })
    }
}

#[async_trait]
impl Allowlist for Served {
    async fn allows(&self, channel: &str, user: &str) -> Result<bool, SinkError> {
        use std::sync::atomic::Ordering::SeqCst;
        assert_eq!(channel, "discord");
        self.asked.fetch_add(1, SeqCst);
        if self
            .fail
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(SinkError("database is locked".into()));
        }
        Ok(self.served.iter().any(|id| id.to_string() == user))
    }
}

/// `run` with the daemon's allowlist in its context (the suite's `Running` has none).
struct RunningWith {
    shutdown: CancellationToken,
    status: hearth_channel::StatusReporter,
    task: tokio::task::JoinHandle<Result<(), hearth_channel::ChannelError>>,
}

impl RunningWith {
    fn start(
        channel: &Arc<DiscordChannel>,
        sink: &RecordingSink,
        state: &MemoryState,
        allowlist: Arc<dyn Allowlist>,
    ) -> Self {
        let shutdown = CancellationToken::new();
        let status = hearth_channel::StatusReporter::new();
        let ctx = ChannelContext::new(
            "discord",
            shutdown.clone(),
            Arc::new(sink.clone()),
            Arc::new(state.clone()),
            std::env::temp_dir(),
            status.clone(),
        )
        .with_allowlist(allowlist);
        let channel = channel.clone();
        let task = tokio::spawn(async move { channel.run(ctx).await });
        Self {
            shutdown,
            status,
            task,
        }
    }

    async fn connected(&self) {
        let mut status = self.status.subscribe();
        tokio::time::timeout(
            PATIENCE,
            status.wait_for(|s| *s == ChannelStatus::Connected),
        )
        .await
        .expect("connected in time")
        .expect("the reporter lives");
    }

    async fn stop(self) {
        self.shutdown.cancel();
        let result = tokio::time::timeout(Duration::from_secs(3), self.task)
            .await
            .expect("run returned after shutdown")
            .expect("run did not panic");
        result.expect("run ended without an error");
    }
}

/// Waits until a DM sent now has come through: everything the channel received before it has
/// been handled (the loop handles events in order).
async fn settle(fake: &FakeDiscord, sink: &RecordingSink, marker: &str) {
    fake.send(dm(marker));
    sink.wait_text(marker, PATIENCE).await;
}

#[tokio::test]
async fn after_a_restart_the_backfill_keeps_the_server_rules() {
    let (fake, channel) = setup().await;
    let state = MemoryState::new();
    let first = RecordingSink::new();
    let running = start(&channel, &first, &state);
    online(&fake, &running).await;
    // The owner once addressed hearth in the server channel and in a DM: both have cursors.
    fake.send(UserMessage::new(SERVER, USER, "hello in the server").mention());
    first.wait_text("hello in the server", PATIENCE).await;
    fake.send(dm("hello in the DM"));
    first.wait_text("hello in the DM", PATIENCE).await;
    running.stop().await;

    // Down: the server channel goes on, the owner writes a DM.
    fake.send(UserMessage::new(SERVER, STRANGER, "stranger asks while down").mention());
    fake.send(UserMessage::new(SERVER, USER, "owner chats while down"));
    fake.send(UserMessage::new(SERVER, USER, "owner asks while down").mention());
    fake.send(
        UserMessage::new(SERVER, STRANGER + 1, "role member asks while down")
            .mention()
            .roles(&[ROLE]),
    );
    fake.send(
        UserMessage::new(SERVER, STRANGER + 2, "other role while down")
            .mention()
            .roles(&[1]),
    );
    fake.send(dm("owner's DM while down"));

    let second = RecordingSink::new();
    let running = start(&channel, &second, &state);
    online(&fake, &running).await;
    second.wait_text("owner asks while down", PATIENCE).await;
    second
        .wait_text("role member asks while down", PATIENCE)
        .await;
    second.wait_text("owner's DM while down", PATIENCE).await;
    settle(&fake, &second, "after the restart").await;
    running.stop().await;

    let got = second.texts();
    for unseen in [
        "stranger asks while down",
        "owner chats while down",
        "other role while down",
    ] {
        assert!(
            !got.iter().any(|t| t == unseen),
            "{unseen:?} was taken from the history of a server channel: {got:?}"
        );
    }
    assert_eq!(offered(&second, "owner asks while down"), 1);
    assert!(
        fake.rest_calls()
            .contains(&format!("GET /channels/{SERVER}/messages")),
        "the server channel's history was never read: {:?}",
        fake.rest_calls()
    );
    let cursors = state.get("discord", "cursors").expect("cursors stored");
    assert!(
        cursors.contains("\"guild\""),
        "the cursor remembers its server: {cursors}"
    );
}

#[tokio::test]
async fn a_cursor_stored_by_an_older_hearth_asks_what_its_channel_is() {
    let (fake, channel) = setup().await;
    // What hearth wrote before it remembered places: channel id → last message id.
    let known = fake.send(UserMessage::new(SERVER, USER, "handled long ago").mention());
    let state = MemoryState::new();
    hearth_channel::StateStore::save(
        &state,
        "discord",
        "cursors",
        &format!(r#"{{"{SERVER}":"{known}"}}"#),
    )
    .await
    .expect("saved");
    fake.send(UserMessage::new(SERVER, STRANGER, "stranger after the upgrade").mention());
    fake.send(UserMessage::new(
        SERVER,
        USER,
        "owner chatter after the upgrade",
    ));
    fake.send(UserMessage::new(SERVER, USER, "owner asks after the upgrade").mention());

    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &state);
    online(&fake, &running).await;
    sink.wait_text("owner asks after the upgrade", PATIENCE)
        .await;
    settle(&fake, &sink, "settled").await;
    running.stop().await;
    assert_eq!(sink.texts(), ["owner asks after the upgrade", "settled"]);
    assert!(
        fake.rest_calls()
            .contains(&format!("GET /channels/{SERVER}")),
        "{:?}",
        fake.rest_calls()
    );
    let cursors = state.get("discord", "cursors").expect("cursors");
    assert!(cursors.contains("\"guild\""), "{cursors}");
}

#[tokio::test]
async fn the_server_rule_accepts_whom_the_daemon_serves() {
    const PAIRED: u64 = 333_333_333_333_333_333;
    let (fake, channel) = setup().await;
    let state = MemoryState::new();
    let sink = RecordingSink::new();
    // The database is away for the first two questions: the message waits, it is not dropped.
    let served = Served::new(&[PAIRED], 2);
    let running = RunningWith::start(&channel, &sink, &state, served.clone());
    running.connected().await;
    fake.send(UserMessage::new(SERVER, PAIRED, "paired user asks").mention());
    fake.send(UserMessage::new(SERVER, PAIRED, "paired user chats"));
    fake.send(UserMessage::new(SERVER, STRANGER, "stranger asks").mention());
    sink.wait_text("paired user asks", PATIENCE).await;
    settle(&fake, &sink, "marker one").await;
    running.stop().await;

    // And from history after a restart.
    fake.send(UserMessage::new(SERVER, PAIRED, "paired user asks while down").mention());
    fake.send(UserMessage::new(SERVER, STRANGER, "stranger asks while down").mention());
    let running = RunningWith::start(&channel, &sink, &state, Served::new(&[PAIRED], 0));
    running.connected().await;
    sink.wait_text("paired user asks while down", PATIENCE)
        .await;
    settle(&fake, &sink, "marker two").await;
    running.stop().await;
    assert_eq!(
        sink.texts(),
        [
            "paired user asks",
            "marker one",
            "paired user asks while down",
            "marker two"
        ]
    );
    assert_eq!(offered(&sink, "paired user asks"), 1);
    assert!(
        served.asked.load(std::sync::atomic::Ordering::SeqCst) >= 4,
        "the allowlist was asked again after it failed"
    );
}

#[tokio::test]
async fn a_strangers_ten_large_files_are_passed_on_by_reference_and_never_downloaded() {
    const MB8: u64 = 8 * 1024 * 1024;
    let (fake, channel) = setup().await;
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &MemoryState::new());
    online(&fake, &running).await;
    let mut flood = UserMessage::new(DM, STRANGER, "look at these");
    for i in 0..10 {
        flood = flood.attach_generated(&format!("photo{i}.jpg"), "image/jpeg", MB8);
    }
    fake.send(flood);
    let event = sink.wait_text("look at these", PATIENCE).await;
    fake.send(dm("my notes").attach("notes.txt", "text/plain", b"water the plants".to_vec()));
    let notes = sink.wait_text("my notes", PATIENCE).await;
    running.stop().await;

    let InboundKind::Message { attachments, .. } = &event.kind else {
        unreachable!("a text");
    };
    assert_eq!(attachments.len(), 10);
    for attachment in attachments {
        assert_eq!(attachment.kind, AttachmentKind::Image);
        assert_eq!(attachment.size, Some(MB8));
        assert!(attachment.data_base64.is_none() && attachment.text.is_none());
        assert!(
            attachment
                .source
                .as_deref()
                .is_some_and(|s| s.starts_with(&fake.api_url())),
            "{attachment:?}"
        );
    }
    let stored = serde_json::to_string(&event).expect("json");
    assert!(
        stored.len() < 8 * 1024,
        "the stored event is {} bytes",
        stored.len()
    );
    assert_eq!(fake.cdn_traffic(), (0, 0), "nothing was downloaded");

    // The daemon fetches the allowed user's file once it knows the sender.
    let InboundKind::Message { attachments, .. } = &notes.kind else {
        unreachable!("a text");
    };
    let bytes = channel
        .fetch_attachment(&attachments[0], 20_000_000)
        .await
        .expect("fetched");
    assert_eq!(bytes, b"water the plants");
    assert_eq!(fake.cdn_traffic().0, 1);
}

#[tokio::test]
async fn fetch_attachment_reads_up_to_the_limit_and_only_from_discords_cdn() {
    let (fake, channel) = setup().await;
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &MemoryState::new());
    online(&fake, &running).await;
    fake.send(dm("big honest file").attach_generated(
        "big.bin",
        "application/octet-stream",
        8 << 20,
    ));
    // 64 MB behind a declared size of 1 KB, streamed without a Content-Length.
    fake.send(
        dm("big liar")
            .attach_generated("liar.bin", "application/octet-stream", 64 << 20)
            .declare_size(1024),
    );
    let honest = sink.wait_text("big honest file", PATIENCE).await;
    let liar = sink.wait_text("big liar", PATIENCE).await;
    running.stop().await;
    let first = |event: &Inbound| match &event.kind {
        InboundKind::Message { attachments, .. } => attachments[0].clone(),
        _ => unreachable!("a text"),
    };

    // Over the limit by its declared size: refused for good before any request.
    let error = channel
        .fetch_attachment(&first(&honest), 1 << 20)
        .await
        .expect_err("over the limit");
    assert_eq!(error.kind, ErrorKind::Rejected, "{error}");
    assert_eq!(fake.cdn_traffic(), (0, 0), "refused before any request");
    // Within its limit it arrives whole.
    let bytes = channel
        .fetch_attachment(&first(&honest), 8 << 20)
        .await
        .expect("fetched");
    assert!(
        bytes == generated_bytes(8 << 20),
        "the file arrived changed"
    );

    // A lying size: reading stops once more than the limit arrived.
    let (_, before) = fake.cdn_traffic();
    let error = channel
        .fetch_attachment(&first(&liar), 1 << 20)
        .await
        .expect_err("over the limit");
    assert_eq!(error.kind, ErrorKind::Rejected, "{error}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, after) = fake.cdn_traffic();
    assert!(
        after - before < 32 << 20,
        "the fake sent {} bytes of a 64 MB file after the reader stopped at 1 MB",
        after - before
    );

    // A URL the sender chose: not fetched, whatever it points at.
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let elsewhere_url = format!("http://{}/secret", elsewhere.local_addr().expect("addr"));
    for url in [
        elsewhere_url.as_str(),
        "http://169.254.169.254/latest/meta-data/",
        "https://cdn.discordapp.com.evil.example/a.png",
        "file:///etc/passwd",
        "not a url",
    ] {
        let attachment = Attachment::remote(AttachmentKind::Image, "image/png", url).with_size(10);
        let error = channel
            .fetch_attachment(&attachment, 1 << 20)
            .await
            .expect_err("refused");
        assert_eq!(error.kind, ErrorKind::Rejected, "{url}: {error}");
        assert!(!error.is_temporary());
    }
    let accepted = tokio::time::timeout(Duration::from_millis(200), elsewhere.accept()).await;
    assert!(accepted.is_err(), "a connection reached the other host");

    // A file that is gone is refused for good; the CDN being away is worth another try.
    let mut gone = first(&honest);
    gone.source = Some(format!("{}/attachments/nothing-here", fake.api_url()));
    let error = channel
        .fetch_attachment(&gone, 1 << 20)
        .await
        .expect_err("404");
    assert_eq!(error.kind, ErrorKind::Rejected, "{error}");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let mut away_settings = settings(&fake);
    away_settings.api_url = format!("http://127.0.0.1:{port}");
    let away = DiscordChannel::new(away_settings).expect("valid settings");
    let mut unreachable = first(&honest);
    unreachable.size = Some(10);
    unreachable.source = Some(format!("http://127.0.0.1:{port}/attachments/x"));
    let error = away
        .fetch_attachment(&unreachable, 1 << 20)
        .await
        .expect_err("refused connection");
    assert!(error.is_temporary(), "{error}");
}

#[tokio::test]
async fn a_full_queue_drops_messages_and_reads_them_back_from_history() {
    crypto();
    let fake = FakeDiscord::start(TOKEN).await;
    let mut settings = settings(&fake);
    settings.queue_capacity = 2;
    let channel = Arc::new(DiscordChannel::new(settings).expect("valid settings"));
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &MemoryState::new());
    online(&fake, &running).await;
    fake.send(dm("first"));
    sink.wait_text("first", PATIENCE).await;
    // The inbox stalls; the gateway goes on.
    sink.pause();
    fake.send(dm("stalls the loop"));
    sink.wait_for_attempt(|e| e.text() == Some("stalls the loop"), PATIENCE)
        .await
        .expect("offered");
    let flood: Vec<String> = (0..30).map(|i| format!("flood {i}")).collect();
    for text in &flood {
        fake.send(dm(text));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    sink.resume();
    for text in &flood {
        sink.wait_text(text, PATIENCE).await;
    }
    settle(&fake, &sink, "after the flood").await;
    running.stop().await;
    let mut expected = vec!["first".to_owned(), "stalls the loop".to_owned()];
    expected.extend(flood.iter().cloned());
    expected.push("after the flood".to_owned());
    assert_eq!(sink.texts(), expected, "each once, in order");
    for text in &flood {
        assert_eq!(offered(&sink, text), 1, "{text}");
    }
    assert!(
        fake.rest_calls()
            .contains(&format!("GET /channels/{DM}/messages")),
        "nothing was dropped (the history was never read): {:?}",
        fake.rest_calls()
    );
}

/// Every log line written on this thread while the guard lives, down to DEBUG (what an operator
/// turns on to look into a problem). TRACE is left out: there the websocket library prints
/// every gateway frame as it is, interaction tokens included, as it prints every message.
fn capture_logs() -> (
    Arc<std::sync::Mutex<Vec<u8>>>,
    tracing::subscriber::DefaultGuard,
) {
    use tracing_subscriber::util::SubscriberInitExt;
    #[derive(Clone)]
    struct Buffer(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer(Arc::new(std::sync::Mutex::new(Vec::new())));
    let writer = buffer.clone();
    let guard = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish()
        .set_default();
    (buffer.0, guard)
}

fn logged(buffer: &Arc<std::sync::Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&buffer.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
}

/// The cause chain, as the daemon logs it.
fn chain(error: &hearth_channel::ChannelError) -> String {
    let mut text = format!("{error} {error:?}");
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(" | {cause} {cause:?}"));
        source = cause.source();
    }
    text
}

#[tokio::test]
async fn the_interaction_token_never_reaches_a_log_line_or_an_error() {
    let (buffer, _guard) = capture_logs();
    let (fake, channel) = setup().await;
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &MemoryState::new());
    online(&fake, &running).await;
    let mut prompt = OutboundMessage::text(ChatRef::new(SERVER.to_string()), "Delete it?");
    prompt.buttons = vec![Button::new("✅ Approve", "c:x:a").with_emoji("✅")];
    let sent = channel.send(&prompt).await.expect("prompt");
    let interaction = fake
        .press(sent.message_id.parse().expect("id"), STRANGER, "c:x:a")
        .expect("pressed");
    let token = format!("itoken{interaction}");
    let event = sink
        .wait_for_event(|e| matches!(e.kind, InboundKind::Press(_)), PATIENCE)
        .await
        .expect("the press arrived");
    running.stop().await;
    assert!(
        fake.acknowledged()
            .iter()
            .any(|(id, _)| *id == interaction.to_string()),
        "acknowledged"
    );
    let InboundKind::Press(press) = &event.kind else {
        unreachable!("matched");
    };
    let mut answer = OutboundMessage::text(event.chat.clone(), "This request isn't yours.");
    answer.answers_press = Some(press.press_id.clone());
    channel.send(&answer).await.expect("answered privately");
    assert_eq!(fake.followups().len(), 1);

    // Discord refuses the follow-up for good (an unknown webhook): said in the chat instead.
    let refused_token = "SECRET-interaction-token-refused";
    answer.answers_press = Some(format!("{interaction}:{BOT_ID}:{refused_token}"));
    channel.send(&answer).await.expect("answered in the chat");
    assert!(
        fake.bot_messages(SERVER)
            .iter()
            .any(|m| m.content.contains("isn't yours")),
        "the refused follow-up was said in the chat"
    );

    // Discord cannot be reached: an error to retry, without the URL.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let mut away_settings = settings(&fake);
    away_settings.api_url = format!("http://127.0.0.1:{port}");
    let away = DiscordChannel::new(away_settings).expect("valid settings");
    let away_token = "SECRET-interaction-token-unreachable";
    answer.answers_press = Some(format!("{interaction}:{BOT_ID}:{away_token}"));
    let error = away.send(&answer).await.expect_err("nobody there");
    assert!(error.is_temporary(), "{error}");
    let error_text = chain(&error);

    let logs = logged(&buffer);
    assert!(
        logs.contains("the press could not be answered privately"),
        "the capture missed the adapter's lines:\n{logs}"
    );
    for secret in [token.as_str(), refused_token, away_token] {
        assert!(
            !logs.contains(secret),
            "the interaction token {secret} reached a log line:\n{}",
            logs.lines()
                .filter(|l| l.contains(secret))
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert!(!error_text.contains(secret), "{error_text}");
    }
}

#[tokio::test]
async fn a_press_answer_whose_outcome_is_unknown_is_not_also_posted_in_the_chat() {
    let (fake, channel) = setup().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    // The follow-up goes nowhere (a refused connection, as after a reset or a timeout).
    let mut answer = OutboundMessage::text(ChatRef::new(SERVER.to_string()), "Not yours.");
    answer.answers_press = Some(format!("1:{BOT_ID}:itoken1"));
    let mut settings = settings(&fake);
    settings.api_url = format!("http://127.0.0.1:{port}");
    let away = DiscordChannel::new(settings).expect("valid settings");
    let error = away.send(&answer).await.expect_err("unknown outcome");
    assert!(error.is_temporary(), "{error}");
    // Discord answers 502 to the follow-up: retried, not posted for everyone.
    fake.fail_next(1);
    let error = channel.send(&answer).await.expect_err("502");
    assert!(error.is_temporary(), "{error}");
    assert!(fake.bot_messages(SERVER).is_empty(), "posted in the chat");
    // The retry goes through privately.
    channel.send(&answer).await.expect("answered");
    assert_eq!(fake.followups().len(), 1);
    assert!(fake.followups()[0].ephemeral);
    assert!(fake.bot_messages(SERVER).is_empty());
}

#[tokio::test]
async fn a_history_that_fails_during_ready_keeps_the_cursor_and_reads_the_gap_later() {
    let (fake, channel) = setup().await;
    let state = a_run_that_saw(&fake, &channel, "known chat").await;
    let cursor_before = state.get("discord", "cursors").expect("cursor");

    for i in 0..3 {
        fake.send(dm(&format!("gap {i}")));
    }
    // Every try of the READY backfill meets a 502.
    fake.fail_history(4);
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &state);
    let status = running
        .wait_for_status(
            |s| s.reason().is_some_and(|r| r.contains("history")),
            PATIENCE,
        )
        .await;
    assert_eq!(status.as_str(), "reconnecting", "{status:?}");
    // A live message meanwhile is taken, but does not move the cursor past the gap.
    fake.send(dm("live during the gap"));
    sink.wait_text("live during the gap", PATIENCE).await;
    assert_eq!(
        state.get("discord", "cursors").expect("cursor"),
        cursor_before,
        "the cursor moved past the gap"
    );
    // The history answers again: the whole gap arrives, each once, and the channel recovers.
    for i in 0..3 {
        sink.wait_text(&format!("gap {i}"), PATIENCE).await;
    }
    running
        .wait_for_status(|s| *s == ChannelStatus::Connected, PATIENCE)
        .await;
    settle(&fake, &sink, "after the gap").await;
    running.stop().await;
    for text in [
        "gap 0",
        "gap 1",
        "gap 2",
        "live during the gap",
        "after the gap",
    ] {
        assert_eq!(offered(&sink, text), 1, "{text}: {:?}", sink.texts());
    }
    assert_ne!(
        state.get("discord", "cursors").expect("cursor"),
        cursor_before
    );
}

#[tokio::test]
async fn a_forty_section_answer_separated_by_rules_arrives_whole() {
    let (fake, channel) = setup().await;
    let sections: Vec<String> = (0..40)
        .map(|i| format!("Section {i}: {}", "word ".repeat(12).trim_end()))
        .collect();
    let answer = OutboundMessage::text(ChatRef::new(DM.to_string()), sections.join("\n---\n"));
    let parts = hearth_channel::plan(&answer, &channel.capabilities());
    assert!(parts.len() >= 2, "the answer is split: {}", parts.len());
    assert!(
        parts
            .iter()
            .any(|p| hearth_discord::format::render(&p.text).chars().count() > 2000),
        "no part renders over the limit; the test proves nothing"
    );
    for part in &parts {
        channel
            .send(&part.message(&answer))
            .await
            .unwrap_or_else(|e| panic!("a part was refused: {e}"));
    }
    let shown = fake.bot_messages(DM);
    assert_eq!(shown.len(), parts.len());
    let all: String = shown.iter().map(|m| m.content.clone()).collect();
    for (i, message) in shown.iter().enumerate() {
        assert!(message.content.chars().count() <= 2000, "part {i}");
    }
    for section in &sections {
        assert!(all.contains(section.as_str()), "{section} is missing");
    }
}

#[tokio::test]
async fn a_send_that_timed_out_is_sent_again_with_the_same_nonce_and_shows_once() {
    crypto();
    let fake = FakeDiscord::start(TOKEN).await;
    let mut settings = settings(&fake);
    settings.request_timeout = Duration::from_millis(300);
    let channel = DiscordChannel::new(settings).expect("valid settings");
    let mut reply = OutboundMessage::text(ChatRef::new(DM.to_string()), "Your answer.");
    reply.delivery_id = Some("outbox-42.0".into());
    // Discord stores the message, but its answer comes too late: the outcome is unknown.
    fake.delay_send_answers(Duration::from_secs(2));
    let error = channel.send(&reply).await.expect_err("timed out");
    assert!(error.is_temporary(), "{error}");
    assert_eq!(fake.bot_messages(DM).len(), 1, "Discord did store it");
    // The outbox tries again with the same delivery id: Discord recognises the nonce.
    fake.delay_send_answers(Duration::ZERO);
    let sent = channel.send(&reply).await.expect("sent again");
    let shown = fake.bot_messages(DM);
    assert_eq!(shown.len(), 1, "shown twice: {shown:?}");
    assert_eq!(sent.message_id, shown[0].id.to_string());
    assert_eq!(shown[0].nonce.as_deref(), Some("outbox-42.0"));
}
