//! The Discord channel against the fake Discord of hearth-testkit: the conformance suite, and
//! the platform's own cases (mention rules, backfill after reconnects, zombies, close codes,
//! rate limits, nonces, presses answered privately, bad input).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hearth_channel::testkit::{Document, Harness, MemoryState, RecordingSink, Running, Shown};
use hearth_channel::{
    Button, Channel, ChannelStatus, ChatRef, ErrorKind, Inbound, InboundKind, MessageRef,
    OutboundMessage, Sender,
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

fn text_of(e: &Inbound) -> Option<&str> {
    match &e.kind {
        InboundKind::Message { text, .. } => Some(text),
        _ => None,
    }
}

fn texts(sink: &RecordingSink) -> Vec<String> {
    sink.events()
        .iter()
        .filter_map(|e| text_of(e).map(str::to_owned))
        .collect()
}

async fn wait_text(sink: &RecordingSink, text: &str) -> Inbound {
    sink.wait_for_event(|e| text_of(e) == Some(text), PATIENCE)
        .await
        .unwrap_or_else(|| panic!("{text:?} never arrived; got {:?}", texts(sink)))
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

/// How often `text` was offered to the sink.
fn offered(sink: &RecordingSink, text: &str) -> usize {
    sink.attempts()
        .iter()
        .filter(|e| text_of(e) == Some(text))
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
    let asked = wait_text(&sink, "what time is it?").await;
    assert_eq!(asked.chat, ChatRef::new(SERVER.to_string()));
    wait_text(&sink, "member of the role").await;
    wait_text(&sink, "in the listed channel").await;
    let stranger_dm = wait_text(&sink, "a stranger's DM").await;
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
    let reply = wait_text(&sink, "and tomorrow?").await;
    let InboundKind::Message { reply_to, .. } = &reply.kind else {
        unreachable!("a text");
    };
    assert_eq!(reply_to.as_deref(), Some(sent.message_id.as_str()));
    running.stop().await;

    let all = texts(&sink);
    assert!(!all.iter().any(|t| t.contains("chatter")), "{all:?}");
    assert!(
        !all.iter().any(|t| t.contains("stranger mentions")),
        "{all:?}"
    );
}

#[tokio::test]
async fn messages_sent_while_the_daemon_was_down_arrive_once_after_the_restart() {
    let (fake, channel) = setup().await;
    let state = MemoryState::new();
    let first = RecordingSink::new();
    let running = start(&channel, &first, &state);
    online(&fake, &running).await;
    fake.send(dm("before the crash"));
    wait_text(&first, "before the crash").await;
    running.stop().await;

    // Down: nobody is connected, the messages only go into the channel's history.
    for i in 0..3 {
        fake.send(dm(&format!("while down {i}")));
    }
    let second = RecordingSink::new();
    let running = start(&channel, &second, &state);
    for i in 0..3 {
        wait_text(&second, &format!("while down {i}")).await;
    }
    fake.send(dm("after the restart"));
    wait_text(&second, "after the restart").await;
    running.stop().await;
    assert_eq!(
        texts(&second),
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
    wait_text(&sink, "before the zombie").await;

    fake.zombie();
    fake.send(dm("lost in the zombie gap"));
    fake.send(dm("also in the gap"));
    // serenity notices the missing heartbeat ACK and IDENTIFIES anew (a fresh session that
    // would not replay these); the backfill after READY finds them.
    wait_text(&sink, "lost in the zombie gap").await;
    wait_text(&sink, "also in the gap").await;
    fake.send(dm("after the zombie"));
    wait_text(&sink, "after the zombie").await;
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
                .filter(|e| text_of(e) == Some(text))
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
        wait_text(&sink, &format!("sent during the gap {i}")).await;
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
                .filter(|e| text_of(e) == Some(&text))
                .count(),
            1
        );
    }
}

#[tokio::test]
async fn intent_refused_4014_fails_the_channel_with_what_to_switch_on() {
    let (fake, channel) = setup().await;
    fake.close_on_identify(4014);
    let running = start(&channel, &RecordingSink::new(), &MemoryState::new());
    let status = running.status.clone();
    let result = running
        .returned(PATIENCE)
        .await
        .expect("run ended after 4014");
    let error = result.expect_err("4014 is an error");
    assert_eq!(error.kind, ErrorKind::Config, "{error}");
    assert!(error.message.contains("Message Content Intent"), "{error}");
    assert_eq!(status.current().as_str(), "failed");
    assert!(
        status
            .current()
            .reason()
            .is_some_and(|r| r.contains("developer portal")),
        "{:?}",
        status.current()
    );
}

#[tokio::test]
async fn token_refused_4004_on_the_gateway_is_an_auth_failure() {
    let (fake, channel) = setup().await;
    fake.close_on_identify(4004);
    let running = start(&channel, &RecordingSink::new(), &MemoryState::new());
    let status = running.status.clone();
    let error = running
        .returned(PATIENCE)
        .await
        .expect("run ended after 4004")
        .expect_err("4004 is an error");
    assert_eq!(error.kind, ErrorKind::Auth, "{error}");
    assert_eq!(status.current().as_str(), "failed");
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
    wait_text(&sink, "hello over TLS").await;
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
    wait_text(&sink, "after the garbage").await;
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
    let state = MemoryState::new();
    let first = RecordingSink::new();
    let running = start(&channel, &first, &state);
    online(&fake, &running).await;
    fake.send(dm("known chat"));
    wait_text(&first, "known chat").await;
    running.stop().await;
    fake.send(dm("missed while down"));
    let second = RecordingSink::new();
    let running = start(&channel, &second, &state);
    online(&fake, &running).await;
    wait_text(&second, "missed while down").await;
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
    wait_text(&second, "sent to the zombie").await;
    running.stop().await;
    assert_eq!(offered(&second, "sent to the zombie"), 1);
    assert!(
        history(&fake) >= before + 3,
        "the history was not asked again after the 502s"
    );
}
