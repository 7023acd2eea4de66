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

pub use config::{DEFAULT_API_URL, Mode, Pacing, TelegramConfig, TelegramMode, TelegramSettings};

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use hearth_channel::{
    Backoff, ButtonPress, Capabilities, Channel, ChannelContext, ChannelError, ChatRef,
    CommandInfo, ErrorKind, Format, Measure, MessageRef, OutboundMessage, sleep_or_shutdown,
};
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use crate::api::Api;
use crate::inbound::{Decoded, Mapper, Me, decode_update};
use crate::outbound::{Pacer, chat_id};

/// The channel's name in config, identities, state and targets.
pub const CHANNEL_NAME: &str = "telegram";

/// The state key the update offset is stored under.
pub const OFFSET_KEY: &str = "offset";

/// The update kinds hearth asks for.
const ALLOWED_UPDATES: &[&str] = &["message", "edited_message", "callback_query"];

/// Backoff after a failed poll or delivery, doubling up to the maximum.
const BACKOFF_START: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

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
        if settings.token.trim().is_empty() {
            return Err(ChannelError::config("telegram: the bot token is empty"));
        }
        if settings
            .token
            .chars()
            .any(|c| c.is_whitespace() || c == '/')
        {
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
        let api = Api::new(&settings.api_url, &settings.token).map_err(ChannelError::from)?;
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

    async fn poll(&self, ctx: &ChannelContext, me: &Me) -> Result<(), ChannelError> {
        // A webhook left behind would make getUpdates fail with 409.
        self.api
            .call::<Value>("deleteWebhook", &json!({ "drop_pending_updates": false }))
            .await?;
        self.set_commands().await;
        let mut offset = match ctx.state.load(OFFSET_KEY).await {
            Ok(Some(saved)) => saved.trim().parse::<i64>().ok().or_else(|| {
                warn!(saved = %saved, "stored telegram offset is not a number; starting over");
                None
            }),
            Ok(None) => None,
            Err(e) => return Err(ChannelError::transient(format!("loading the offset: {e}"))),
        };
        let mapper = Mapper {
            me,
            max_document_bytes: self.settings.max_document_bytes,
        };
        let timeout = self.settings.poll_timeout_secs;
        // Two backoffs: a poll that works says nothing about the inbox that refused the last
        // update (a full disk), so its own wait must keep growing until an update is stored.
        let mut poll_backoff = Backoff::new(BACKOFF_START, BACKOFF_MAX);
        let mut store_backoff = Backoff::new(BACKOFF_START, BACKOFF_MAX);
        info!(?offset, "telegram long polling");
        loop {
            let mut body = json!({ "timeout": timeout, "allowed_updates": ALLOWED_UPDATES });
            if let Some(offset) = offset {
                body["offset"] = json!(offset);
            }
            let poll = self
                .api
                .get_updates(&body, Duration::from_secs(timeout + 15));
            let updates = tokio::select! {
                () = ctx.shutdown.cancelled() => return Ok(()),
                result = poll => result,
            };
            let updates = match updates {
                Ok(updates) => updates,
                Err(e) => {
                    let error = ChannelError::from(e);
                    if !error.is_temporary() {
                        return Err(error);
                    }
                    warn!(%error, "getUpdates failed; retrying");
                    ctx.status.reconnecting(error.to_string());
                    let wait = error.retry_after().unwrap_or_else(|| poll_backoff.next());
                    if sleep_or_shutdown(&ctx.shutdown, wait).await {
                        return Ok(());
                    }
                    continue;
                }
            };
            poll_backoff.reset();
            ctx.status.connected();
            let confirmed = offset;
            let mut stop = false;
            for raw in updates {
                let update = match decode_update(&raw) {
                    Decoded::Update { update, repaired } => {
                        if repaired {
                            let update_id = update.get("update_id").and_then(Value::as_i64);
                            warn!(
                                update_id,
                                "telegram update had broken text (a lone UTF-16 surrogate); delivered with U+FFFD in its place"
                            );
                        }
                        update
                    }
                    Decoded::Poison {
                        update_id: Some(update_id),
                        error,
                    } => {
                        // Fetching it again would fail the same way: confirm it and move on.
                        warn!(update_id, %error, "telegram update cannot be decoded; skipped");
                        offset = Some(update_id + 1);
                        continue;
                    }
                    Decoded::Poison {
                        update_id: None,
                        error,
                    } => {
                        warn!(%error, "telegram update without a readable update_id cannot be decoded; skipped");
                        continue;
                    }
                };
                let Some(update_id) = update.get("update_id").and_then(Value::as_i64) else {
                    warn!("update without update_id skipped");
                    continue;
                };
                match self.deliver(ctx, &mapper, &update).await {
                    Delivery::Stored => store_backoff.reset(),
                    Delivery::Shutdown => {
                        stop = true;
                        break;
                    }
                    Delivery::Retry => {
                        // Keep the offset: the next poll returns this update again.
                        stop = sleep_or_shutdown(&ctx.shutdown, store_backoff.next()).await;
                        break;
                    }
                }
                offset = Some(update_id + 1);
            }
            // The offset is saved once per batch rather than once per update (one write
            // instead of up to a hundred): every update before it is already in the inbox, and
            // the inbox deduplicates on the update id, so a crash before this line only means
            // the batch's stored updates are fetched again and dropped as duplicates.
            if offset != confirmed
                && let Some(next) = offset
                && let Err(e) = ctx.state.save(OFFSET_KEY, &next.to_string()).await
            {
                // A stale offset only means a redelivery after a restart (see above).
                warn!(error = %e, "could not save the telegram offset");
            }
            if stop {
                return Ok(());
            }
        }
    }

    /// Maps one update and hands it to the sink.
    async fn deliver(&self, ctx: &ChannelContext, mapper: &Mapper<'_>, update: &Value) -> Delivery {
        let event = tokio::select! {
            () = ctx.shutdown.cancelled() => return Delivery::Shutdown,
            event = mapper.map(update) => event,
        };
        let event = match event {
            Ok(Some(event)) => event,
            Ok(None) => return Delivery::Stored,
            Err(error) => {
                warn!(%error, "update could not be processed; will retry");
                return Delivery::Retry;
            }
        };
        let platform_id = event.platform_id.clone();
        let stored = tokio::select! {
            () = ctx.shutdown.cancelled() => return Delivery::Shutdown,
            stored = ctx.sink.deliver(event) => stored,
        };
        match stored {
            Ok(()) => {
                debug!(update_id = %platform_id, "telegram update stored");
                Delivery::Stored
            }
            Err(error) => {
                warn!(update_id = %platform_id, %error, "inbox refused a telegram update; will retry");
                Delivery::Retry
            }
        }
    }

    async fn webhook(
        &self,
        ctx: &ChannelContext,
        me: Me,
        listen: std::net::SocketAddr,
        url: &str,
        secret_token: &str,
    ) -> Result<(), ChannelError> {
        let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
            ChannelError::config(format!("telegram webhook: cannot listen on {listen}: {e}"))
        })?;
        self.api
            .call::<Value>(
                "setWebhook",
                &json!({
                    "url": url,
                    "secret_token": secret_token,
                    "allowed_updates": ALLOWED_UPDATES,
                }),
            )
            .await?;
        self.set_commands().await;
        info!(%listen, "telegram webhook listening");
        let hook = Arc::new(Hook {
            me,
            max_document_bytes: self.settings.max_document_bytes,
            secret_token: secret_token.to_owned(),
            ctx: ctx.clone(),
        });
        let app = axum::Router::new()
            .fallback(axum::routing::post(receive))
            .with_state(hook);
        let shutdown = ctx.shutdown.clone();
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
            .map_err(|e| ChannelError::transient(format!("telegram webhook server: {e}")))
    }
}

enum Delivery {
    Stored,
    Retry,
    Shutdown,
}

/// What the webhook handler needs.
struct Hook {
    me: Me,
    max_document_bytes: u64,
    secret_token: String,
    ctx: ChannelContext,
}

/// One webhook request: 401 without the secret, 200 only once the update is stored, 500 so
/// Telegram sends it again otherwise.
async fn receive(
    State(hook): State<Arc<Hook>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let secret = headers
        .get("x-telegram-bot-api-secret-token")
        .and_then(|v| v.to_str().ok());
    if secret != Some(hook.secret_token.as_str()) {
        warn!("webhook request without the right secret token refused");
        return StatusCode::UNAUTHORIZED;
    }
    let update = match decode_update(&String::from_utf8_lossy(&body)) {
        Decoded::Update { update, repaired } => {
            if repaired {
                let update_id = update.get("update_id").and_then(Value::as_i64);
                warn!(
                    update_id,
                    "telegram update had broken text (a lone UTF-16 surrogate); delivered with U+FFFD in its place"
                );
            }
            update
        }
        Decoded::Poison { update_id, error } => {
            // Telegram would send the same garbage again; acknowledge and move on.
            warn!(?update_id, %error, "webhook update cannot be decoded; skipped");
            return StatusCode::OK;
        }
    };
    let mapper = Mapper {
        me: &hook.me,
        max_document_bytes: hook.max_document_bytes,
    };
    let event = tokio::select! {
        () = hook.ctx.shutdown.cancelled() => return StatusCode::SERVICE_UNAVAILABLE,
        event = mapper.map(&update) => event,
    };
    let event = match event {
        Ok(Some(event)) => event,
        Ok(None) => return StatusCode::OK,
        Err(error) => {
            warn!(%error, "webhook update could not be processed; Telegram will resend it");
            return StatusCode::INTERNAL_SERVER_ERROR;
        }
    };
    let stored = tokio::select! {
        () = hook.ctx.shutdown.cancelled() => return StatusCode::SERVICE_UNAVAILABLE,
        stored = hook.ctx.sink.deliver(event) => stored,
    };
    match stored {
        Ok(()) => StatusCode::OK,
        Err(error) => {
            warn!(%error, "inbox refused a webhook update; Telegram will resend it");
            StatusCode::INTERNAL_SERVER_ERROR
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
        let me = tokio::select! {
            () = ctx.shutdown.cancelled() => return Ok(()),
            me = self.me() => me,
        };
        let me = match me {
            Ok(me) => me,
            Err(error) => {
                if error.kind == ErrorKind::Auth {
                    tracing::error!(%error, "telegram channel stopped: the bot token was refused");
                    ctx.status.failed(error.to_string());
                }
                return Err(error);
            }
        };
        // Telegram accepted the token: the bot is connected, whatever the mode.
        ctx.status.connected();
        let result = match &self.settings.mode {
            Mode::Polling => self.poll(&ctx, &me).await,
            Mode::Webhook {
                listen,
                url,
                secret_token,
            } => self.webhook(&ctx, me, *listen, url, secret_token).await,
        };
        if ctx.shutdown.is_cancelled() && result.as_ref().is_err_and(ChannelError::is_temporary) {
            // Errors from requests cut short by the shutdown are not failures.
            return Ok(());
        }
        result
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

    async fn preview(
        &self,
        chat: &ChatRef,
        draft: Option<&MessageRef>,
        text: &str,
        reply_to: Option<&str>,
    ) -> Result<Option<MessageRef>, ChannelError> {
        outbound::preview(&self.api, &self.pacer, chat, draft, text, reply_to).await
    }
}
