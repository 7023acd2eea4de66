//! hearth's Discord channel, on serenity 0.12.5's gateway and REST client (no framework).
//!
//! [`DiscordConfig`] is the `[channels.discord]` section and builds the channel
//! ([`hearth_channel::ChannelConfig`]); [`DiscordChannel`] implements [`hearth_channel::Channel`]:
//! - the gateway with the Guild Messages, Direct Messages and (privileged) Message Content
//!   intents; connected only once READY arrived, reconnecting while serenity reconnects, failed
//!   with one line saying what to switch on in the developer portal when Discord closes with
//!   4014 (intent refused) or 4004 (token refused);
//! - **nothing lost across reconnects**: serenity re-IDENTIFIES after a zombie connection and
//!   cannot resume across restarts, so events in such a gap never arrive. After every READY the
//!   channel reads each channel it serves from the last message it handled there
//!   (`GET /channels/{id}/messages?after=`, the cursors in its state under
//!   [`inbound::CURSORS_KEY`]) and hands what it missed to the sink, which drops what the inbox
//!   already has;
//!   The server rules hold there too: each cursor remembers whether its channel is a server
//!   channel, because Discord's REST messages do not say so;
//! - **a gap is never skipped**: when a channel's history cannot be read (a 502, a timeout),
//!   its cursor stays where it was, live messages there do not move it, the channel reports
//!   `reconnecting` with the reason, and the whole gap is read again later, with backoff;
//! - **bounded memory**: the gateway hands events to the receive loop through a queue of
//!   `queue_capacity`; a message that finds it full is dropped with a warning and read back
//!   from its channel's history (the cursor does not pass it meanwhile). Attachments are passed
//!   on by reference and downloaded only by [`Channel::fetch_attachment`], after the daemon
//!   checked the sender, streamed up to its limit and only from Discord's CDN (or the
//!   `api_url` host);
//! - events are handed to the sink one at a time, in order; one the sink refuses is offered
//!   again until stored (or, after a restart, found again by the backfill);
//! - button presses are acknowledged on receipt (Discord wants an answer within 3 s), then
//!   stored; answers to someone else's press go to the presser alone (ephemeral). Interaction
//!   calls carry the interaction token in their URL: hearth makes them itself, not through
//!   serenity (whose request spans print the route, token included, into debug lines), and
//!   strips the URL from their errors, so the token never reaches a log line;
//! - sends carry a nonce from the delivery id with `enforce_nonce`, so a reply sent again after
//!   a crash shows once.
//!
//! REST goes to `api_url`. On Discord itself serenity's ratelimiter is on and its rate-limit
//! events are counted (`hearth_channel_events_total{channel="discord",event="ratelimited"}`).
//! Another `api_url` is an API proxy (a local fake in tests): serenity sends REST there only
//! with its ratelimiter off, so the proxy does the rate limiting and a 429 it answers is
//! counted the same way and retried by the outbox. Every request has a timeout.

mod config;
mod error;
pub mod format;
#[doc(hidden)]
pub mod fuzzing;
pub mod inbound;
mod outbound;
mod receive;

pub use config::{
    DEFAULT_API_URL, DEFAULT_QUEUE_CAPACITY, DEFAULT_READY_PATIENCE, DEFAULT_REQUEST_TIMEOUT,
    DiscordConfig, DiscordId, DiscordSettings,
};
pub use error::{INTENT_REFUSED, TOKEN_REFUSED};

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use hearth_channel::{
    Attachment, Capabilities, Channel, ChannelContext, ChannelError, ChatRef, ErrorKind, Format,
    Measure, MessageRef, OutboundMessage, PreviewUpdate,
};
use serenity::all::{GuildId, Message, RatelimitInfo, UserId};
use serenity::http::{Http, HttpBuilder, Ratelimiter};
use tracing::debug;

use crate::inbound::{Place, ReadError, Rules};

/// The channel's name in config, identities, state and targets.
pub const CHANNEL_NAME: &str = "discord";

/// Messages per history page (Discord's maximum).
const PAGE: u8 = 100;

/// A Discord bot as a hearth channel. Cheap to share: `run` and the sending methods may be used
/// concurrently from different tasks.
pub struct DiscordChannel {
    settings: DiscordSettings,
    http: Arc<Http>,
    client: reqwest::Client,
    ratelimits: Arc<AtomicU64>,
}

impl std::fmt::Debug for DiscordChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordChannel")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl DiscordChannel {
    /// Builds the channel; no network traffic until `run` or a send.
    pub fn new(settings: DiscordSettings) -> Result<Self, ChannelError> {
        Self::with_http_client(settings, hearth_channel::http_client::builder())
    }

    /// [`DiscordChannel::new`] on an HTTP client prepared by the caller (a CA to trust, a route
    /// to a host); the request timeouts and the redirect policy are added here. The tests use it
    /// to reach their fake Discord on the real `https://discord.com`, where serenity's
    /// ratelimiter is on.
    pub fn with_http_client(
        settings: DiscordSettings,
        client: reqwest::ClientBuilder,
    ) -> Result<Self, ChannelError> {
        let token = settings.token.expose();
        if token.trim().is_empty() || token.chars().any(char::is_whitespace) {
            return Err(ChannelError::config(
                "discord: the bot token is empty or contains spaces",
            ));
        }
        if hearth_channel::check_url(&settings.api_url, &["http", "https"]).is_err() {
            return Err(ChannelError::config(format!(
                "discord: api_url {:?} is not an http(s) URL",
                settings.api_url
            )));
        }
        let cdn = inbound::Cdn::new(&settings);
        let client = client
            .timeout(settings.request_timeout)
            .connect_timeout(settings.request_timeout.min(Duration::from_secs(10)))
            // A redirect may only lead where a request could have gone in the first place (an
            // attachment's CDN URL must not bounce hearth to another host).
            .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= 5 || !cdn.allows(attempt.url()) {
                    attempt.stop()
                } else {
                    attempt.follow()
                }
            }))
            .build()
            .map_err(|e| ChannelError::config(format!("discord: HTTP client: {e}")))?;
        let ratelimits = Arc::new(AtomicU64::new(0));
        let http = Arc::new(build_http(&settings, &client, Some(ratelimits.clone())));
        Ok(Self {
            settings,
            http,
            client,
            ratelimits,
        })
    }

    /// The deadline of one REST call, ratelimiter waits included.
    fn deadline(&self) -> Duration {
        self.settings.request_timeout * 3
    }

    /// Counts a 429 the proxy answered (serenity's ratelimiter, when on, reports its own).
    fn count_rejection(&self, result: &Result<impl Sized, ChannelError>) {
        if let Err(e) = result
            && matches!(e.kind, ErrorKind::RateLimited { .. })
        {
            self.ratelimits.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn rules(&self, me: UserId) -> Rules {
        Rules {
            me,
            allowed_users: self.settings.allowed_users.iter().copied().collect(),
            allowed_roles: self.settings.allowed_roles.iter().copied().collect(),
            channels: self.settings.channels.iter().copied().collect(),
        }
    }

    /// Where interaction calls go: Discord's API or the proxy in `api_url`.
    fn interactions(&self) -> outbound::Interactions {
        outbound::Interactions::new(
            self.client.clone(),
            &self.settings.api_url,
            self.settings.request_timeout,
        )
    }
}

/// serenity's HTTP client against Discord (ratelimiter on, its events counted in `ratelimits`)
/// or against a proxy (ratelimiter off: serenity ignores the proxy otherwise), on `client`,
/// which has the timeout.
fn build_http(
    settings: &DiscordSettings,
    client: &reqwest::Client,
    ratelimits: Option<Arc<AtomicU64>>,
) -> Http {
    let builder = HttpBuilder::new(settings.token.expose()).client(client.clone());
    if settings.is_discord() {
        // serenity's HttpBuilder puts "Bot " before a token, its Ratelimiter does not: without
        // it Discord answers every call 401.
        let mut ratelimiter =
            Ratelimiter::new(client.clone(), format!("Bot {}", settings.token.expose()));
        if let Some(count) = ratelimits {
            ratelimiter.set_ratelimit_callback(Box::new(move |info: RatelimitInfo| {
                debug!(path = %info.path, timeout = ?info.timeout, global = info.global, "discord rate limit");
                count.fetch_add(1, Ordering::Relaxed);
            }));
        }
        builder.ratelimiter(ratelimiter).build()
    } else {
        builder
            .proxy(settings.api_url.clone())
            .ratelimiter_disabled(true)
            .build()
    }
}

impl DiscordChannel {
    /// `GET /channels/{id}/messages?after=&limit=100`, oldest first.
    async fn read_history(
        &self,
        channel: u64,
        after: u64,
    ) -> Result<Vec<(u64, Option<Message>)>, ReadError> {
        let params = vec![
            ("after", after.max(1).to_string()),
            ("limit", PAGE.to_string()),
        ];
        let page = self
            .read_json(
                "reading channel history",
                serenity::http::Route::ChannelMessages {
                    channel_id: serenity::all::ChannelId::new(channel),
                },
                Some(params),
            )
            .await?;
        inbound::history_page(channel, &page).map_err(ReadError::Failed)
    }

    /// `GET /channels/{id}`: whether the channel belongs to a server.
    async fn read_place(&self, channel: u64) -> Result<Place, ReadError> {
        let found = self
            .read_json(
                "asking what a channel is",
                serenity::http::Route::Channel {
                    channel_id: serenity::all::ChannelId::new(channel),
                },
                None,
            )
            .await?;
        if let Some(guild) = found["guild_id"].as_str().and_then(config::snowflake) {
            return Ok(Place::Server(guild));
        }
        match found["type"].as_u64() {
            // DM and group DM: the only channels without a server.
            Some(1 | 3) => Ok(Place::Direct),
            other => Err(ReadError::Failed(ChannelError::protocol(format!(
                "discord: channel {channel} of type {other:?} names no server"
            )))),
        }
    }

    /// `GET /guilds/{id}/members/{user}`: the member's roles.
    async fn read_roles(&self, guild: GuildId, user: UserId) -> Result<Vec<u64>, ReadError> {
        let member = self
            .read_json(
                "asking for a member's roles",
                serenity::http::Route::GuildMember {
                    guild_id: guild,
                    user_id: user,
                },
                None,
            )
            .await?;
        Ok(member["roles"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|role| role.as_str().and_then(config::snowflake))
            .collect())
    }

    /// A GET through serenity (so its ratelimiter paces it on Discord), as raw JSON: one field
    /// Discord adds or a message serenity cannot read must not cost the whole answer.
    async fn read_json(
        &self,
        what: &str,
        route: serenity::http::Route<'_>,
        params: Option<Vec<(&'static str, String)>>,
    ) -> Result<serde_json::Value, ReadError> {
        let request =
            serenity::http::Request::new(route, serenity::http::LightMethod::Get).params(params);
        let deadline = self.deadline();
        match tokio::time::timeout(deadline, self.http.fire::<serde_json::Value>(request)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                let gone = error::is_gone(&e);
                let mapped = error::map(what, e);
                if matches!(mapped.kind, ErrorKind::RateLimited { .. }) {
                    self.ratelimits.fetch_add(1, Ordering::Relaxed);
                }
                Err(if gone {
                    ReadError::Gone(mapped)
                } else {
                    ReadError::Failed(mapped)
                })
            }
            Err(_) => Err(ReadError::Failed(error::timed_out(what, deadline))),
        }
    }
}

/// Whether the application may receive message content, which hearth asks the gateway for:
/// without it Discord closes the gateway (4014, disallowed intents).
fn message_content_intent(application: &serde_json::Value) -> Result<String, String> {
    // GATEWAY_MESSAGE_CONTENT (verified bots) and GATEWAY_MESSAGE_CONTENT_LIMITED (the switch
    // for bots in fewer than 100 servers).
    const MESSAGE_CONTENT: u64 = (1 << 18) | (1 << 19);
    match application["flags"].as_u64() {
        Some(flags) if flags & MESSAGE_CONTENT != 0 => {
            Ok("the Message Content intent is on".to_string())
        }
        Some(_) => Err(
            "the Message Content intent is off, so Discord would refuse the gateway — fix: Developer Portal → your application → Bot → Privileged Gateway Intents → Message Content Intent".to_string(),
        ),
        None => Err("Discord's answer about the application has no flags".to_string()),
    }
}

#[async_trait]
impl Channel for DiscordChannel {
    fn name(&self) -> &str {
        CHANNEL_NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            buttons: true,
            edits: true,
            reactions: false,
            // A Discord thread has a channel id of its own: to hearth it is a chat, and replies
            // land in it.
            threads: false,
            max_message_len: Some(format::MAX_MESSAGE_LEN),
            measure: Measure::Chars,
            format: Format::Markdown,
            preview: Some(Duration::from_secs(1)),
            // Discord shows "typing…" for 10 s after each call.
            typing_interval: Some(Duration::from_secs(8)),
            buttons_as_reactions: false,
            acks_presses_on_receipt: true,
            deduplicates_sends: true,
            silent_with_strangers: false,
            progress: false,
        }
    }

    async fn live_checks(&self) -> Vec<Result<String, String>> {
        let me = match self
            .read_json("reading the bot user", serenity::http::Route::UserMe, None)
            .await
        {
            Ok(me) => Ok(format!(
                "the token belongs to {} (id {})",
                me["username"].as_str().unwrap_or("?"),
                me["id"].as_str().unwrap_or("?")
            )),
            Err(e) => {
                return vec![Err(format!(
                    "{e} — fix: the token in token_env must be the bot token from the Developer Portal (Bot → Reset Token), and api_url reachable"
                ))];
            }
        };
        let intent = match self
            .read_json(
                "reading the application",
                serenity::http::Route::Oauth2ApplicationCurrent,
                None,
            )
            .await
        {
            Ok(app) => message_content_intent(&app),
            Err(e) => Err(e.to_string()),
        };
        vec![me, intent]
    }

    async fn run(&self, ctx: ChannelContext) -> Result<(), ChannelError> {
        receive::run(self, ctx).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, ChannelError> {
        let result =
            outbound::send(&self.http, &self.interactions(), self.deadline(), message).await;
        self.count_rejection(&result);
        result
    }

    async fn edit(
        &self,
        target: &MessageRef,
        message: &OutboundMessage,
    ) -> Result<(), ChannelError> {
        let result = outbound::edit(&self.http, self.deadline(), target, message).await;
        self.count_rejection(&result);
        result
    }

    async fn typing(&self, chat: &ChatRef) -> Result<(), ChannelError> {
        let channel = outbound::channel_id(chat)?;
        let result = outbound::within(
            "showing typing",
            self.deadline(),
            self.http.broadcast_typing(channel),
        )
        .await;
        self.count_rejection(&result);
        result
    }

    async fn preview(&self, update: PreviewUpdate<'_>) -> Result<Option<MessageRef>, ChannelError> {
        let result = outbound::preview(&self.http, self.deadline(), update).await;
        self.count_rejection(&result);
        result
    }

    async fn fetch_attachment(
        &self,
        attachment: &Attachment,
        max_bytes: u64,
    ) -> Result<Vec<u8>, ChannelError> {
        inbound::fetch(
            &self.client,
            &inbound::Cdn::new(&self.settings),
            attachment,
            max_bytes,
        )
        .await
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("ratelimited", self.ratelimits.load(Ordering::Relaxed))]
    }
}
