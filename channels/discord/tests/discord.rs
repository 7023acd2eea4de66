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
    assert!(fake.wait_connected(PATIENCE).await, "the bot never connected");
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
        let message = UserMessage::new(id("chat", &chat.chat_id)?, id("user", &sender.id)?, caption)
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
            .press(id("message", &message.message_id)?, id("user", &sender.id)?, data)
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
