//! hearth's Telegram channel, on the Bot API.
//!
//! [`TelegramConfig`] is the `[channels.telegram]` section of hearth's config file and builds
//! the channel ([`hearth_channel::ChannelConfig`]). [`TelegramChannel::new`] takes
//! [`TelegramSettings`] (token, API URL, polling or webhook) and implements
//! [`hearth_channel::Channel`]:
//! - receiving by `getUpdates` long polling (or a webhook), with the update offset kept in the
//!   channel's state (key `offset`) and advanced only after the sink stored the update, so a
//!   restart neither loses nor repeats one;
//! - its state reported as connected once `getMe` accepted the token, reconnecting while
//!   `getUpdates` fails and is retried, failed when the token is refused;
//! - group rules (mentions, replies to the bot, commands), forum topics as threads, photos,
//!   text documents and voice notes as attachments, button presses as callback queries;
//! - one Telegram message per `send` (the daemon splits long replies at 4096 UTF-16 units with
//!   `hearth_channel::plan`), rendered from Markdown to Telegram HTML, sent again as plain text
//!   when Telegram refuses the HTML, paced below Telegram's flood limits.
//!
//! The bot token never appears in a log line or an error message.

mod api;
mod config;
mod error;
pub mod format;
#[doc(hidden)]
pub mod fuzzing;
mod inbound;
mod outbound;
mod receive;

pub use config::{DEFAULT_API_URL, Mode, Pacing, TelegramConfig, TelegramMode, TelegramSettings};

use std::time::Duration;

use async_trait::async_trait;
use hearth_channel::{
    ButtonPress, Capabilities, Channel, ChannelContext, ChannelError, ChatRef, CommandInfo,
    ErrorKind, Format, Measure, MessageRef, OutboundMessage, PreviewUpdate,
};
use serde_json::{Value, json};
use tracing::{info, warn};

use crate::api::Api;
use crate::inbound::Me;
use crate::outbound::{Pacer, chat_id};

/// The channel's name in config, identities, state and targets.
pub const CHANNEL_NAME: &str = "telegram";

/// The state key the update offset is stored under.
pub const OFFSET_KEY: &str = "offset";

/// A Telegram bot as a hearth channel. Cheap to share: `run` and the sending methods may be
/// used concurrently from different tasks.
pub struct TelegramChannel {
    settings: TelegramSettings,
    api: Api,
    pacer: Pacer,
    /// The daemon's chat commands, shown in the command menu at each start of `run`.
    commands: std::sync::Mutex<Vec<CommandInfo>>,
}

impl std::fmt::Debug for TelegramChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramChannel")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl TelegramChannel {
    /// Builds the channel; no network traffic until `run` or a send. Fails with a `Config`
    /// error for an empty token or an API URL that is not http(s).
    pub fn new(settings: TelegramSettings) -> Result<Self, ChannelError> {
        let token = settings.token.expose();
        if token.trim().is_empty() {
            return Err(ChannelError::config("telegram: the bot token is empty"));
        }
        if token.chars().any(|c| c.is_whitespace() || c == '/') {
            return Err(ChannelError::config(
                "telegram: the bot token contains spaces or slashes",
            ));
        }
        if !(settings.api_url.starts_with("http://") || settings.api_url.starts_with("https://")) {
            return Err(ChannelError::config(format!(
                "telegram: api_url {:?} is not an http(s) URL",
                settings.api_url
            )));
        }
        if let Mode::Webhook { secret_token, .. } = &settings.mode {
            let secret_token = secret_token.expose();
            let valid = (1..=256).contains(&secret_token.len())
                && secret_token
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !valid {
                return Err(ChannelError::config(
                    "telegram: webhook secret_token must be 1-256 characters of A-Z a-z 0-9 _ -",
                ));
            }
        }
        let api = Api::new(&settings.api_url, token).map_err(ChannelError::from)?;
        Ok(Self {
            pacer: Pacer::new(settings.pacing.clone()),
            settings,
            api,
            commands: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The bot's identity; 401 is an `Auth` error.
    async fn me(&self) -> Result<Me, ChannelError> {
        let me: Me = self.api.call("getMe", &json!({})).await?;
        info!(bot_id = me.id, username = %me.username, "telegram bot identified");
        Ok(me)
    }

    async fn set_commands(&self) {
        let commands: Vec<Value> = self
            .commands
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|c| json!({"command": c.name, "description": c.description}))
            .collect();
        if commands.is_empty() {
            return; // nothing registered: leave the menu as it is
        }
        // The menu is a convenience; hearth works without it.
        if let Err(e) = self
            .api
            .call::<Value>("setMyCommands", &json!({ "commands": commands }))
            .await
        {
            warn!(error = %e, "could not register the command menu");
        }
    }
}

#[async_trait]
impl Channel for TelegramChannel {
    fn name(&self) -> &str {
        CHANNEL_NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            buttons: true,
            edits: true,
            // Bots get reactions only as admins of groups (`message_reaction` updates); hearth
            // does not ask for them, and confirmations use buttons here.
            reactions: false,
            threads: true,
            max_message_len: Some(format::MAX_MESSAGE_LEN),
            measure: Measure::Utf16,
            format: Format::InlineHtml,
            preview: Some(Duration::from_secs(1)),
            // Telegram shows a chat action for about 5 s.
            typing_interval: Some(Duration::from_secs(4)),
            // answerCallbackQuery has no hard deadline worth racing: the daemon answers.
            acks_presses_on_receipt: false,
            // Telegram has no idempotency key for sendMessage.
            deduplicates_sends: false,
            ..Capabilities::default()
        }
    }

    async fn register_commands(&self, commands: &[CommandInfo]) -> Result<(), ChannelError> {
        // Sent with setMyCommands at each start of `run`, once the webhook state is settled.
        *self.commands.lock().unwrap_or_else(|p| p.into_inner()) = commands.to_vec();
        Ok(())
    }

    async fn live_checks(&self) -> Vec<Result<String, String>> {
        vec![match self.me().await {
            Ok(me) => Ok(format!(
                "getMe: the token belongs to @{} (id {})",
                me.username, me.id
            )),
            Err(e) if e.kind == ErrorKind::Auth => Err(format!(
                "getMe: {e} — fix: the token in token_env must be the one @BotFather gave (/token there shows it again)"
            )),
            Err(e) => Err(format!(
                "getMe: {} — fix: check api_url and that this machine reaches it",
                hearth_channel::error_chain(&e)
            )),
        }]
    }

    async fn run(&self, ctx: ChannelContext) -> Result<(), ChannelError> {
        receive::run(self, ctx).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, ChannelError> {
        outbound::send(&self.api, &self.pacer, message).await
    }

    async fn edit(
        &self,
        target: &MessageRef,
        message: &OutboundMessage,
    ) -> Result<(), ChannelError> {
        outbound::edit(&self.api, &self.pacer, target, message).await
    }

    async fn fetch_attachment(
        &self,
        attachment: &hearth_channel::Attachment,
        max_bytes: u64,
    ) -> Result<Vec<u8>, ChannelError> {
        if attachment.size.is_some_and(|size| size > max_bytes) {
            return Err(ChannelError::rejected(format!(
                "the file is larger than the {max_bytes} bytes allowed"
            )));
        }
        let file_id = attachment.source.as_deref().unwrap_or_default();
        inbound::fetch(&self.api, file_id, max_bytes).await
    }

    async fn typing(&self, chat: &ChatRef) -> Result<(), ChannelError> {
        let mut body = json!({ "chat_id": chat_id(&chat.chat_id), "action": "typing" });
        if let Some(thread) = chat
            .thread_id
            .as_deref()
            .and_then(|t| t.parse::<i64>().ok())
        {
            body["message_thread_id"] = json!(thread);
        }
        self.api.call::<Value>("sendChatAction", &body).await?;
        Ok(())
    }

    async fn answer_press(
        &self,
        press: &ButtonPress,
        notice: Option<&str>,
        alert: bool,
    ) -> Result<(), ChannelError> {
        let mut body = json!({ "callback_query_id": press.press_id, "show_alert": alert });
        if let Some(notice) = notice {
            body["text"] = json!(notice);
        }
        self.api.call::<Value>("answerCallbackQuery", &body).await?;
        Ok(())
    }

    async fn preview(&self, update: PreviewUpdate<'_>) -> Result<Option<MessageRef>, ChannelError> {
        outbound::preview(&self.api, &self.pacer, update).await
    }
}
