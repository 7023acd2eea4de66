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
//! - events are handed to the sink one at a time, in order; one the sink refuses is offered
//!   again until stored (or, after a restart, found again by the backfill);
//! - button presses are acknowledged on receipt (Discord wants an answer within 3 s), then
//!   stored; answers to someone else's press go to the presser alone (ephemeral);
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
pub mod inbound;
mod outbound;

pub use config::{
    DEFAULT_API_URL, DEFAULT_READY_PATIENCE, DEFAULT_REQUEST_TIMEOUT, DiscordConfig, DiscordId,
    DiscordSettings,
};
pub use error::{INTENT_REFUSED, TOKEN_REFUSED};

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use hearth_channel::{
    Capabilities, Channel, ChannelContext, ChannelError, ChatRef, ErrorKind, Format, Inbound,
    Measure, MessageRef, OutboundMessage,
};
use serenity::all::{
    ChannelId, ClientBuilder, Context, CreateInteractionResponse, Event, EventHandler,
    GatewayIntents, Interaction, Message, MessageId, MessagePagination, RatelimitInfo,
    RawEventHandler,
};
use serenity::gateway::ConnectionStage;
use serenity::gateway::ShardStageUpdateEvent;
use serenity::http::{Http, HttpBuilder, Ratelimiter};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::inbound::{Cursors, Rules};

/// The channel's name in config, identities, state and targets.
pub const CHANNEL_NAME: &str = "discord";

/// Backoff while the sink refuses an event, doubling up to the maximum.
const BACKOFF_START: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

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

/// What the gateway handlers pass to the receive loop.
enum Gateway {
    Ready { me: serenity::all::UserId },
    Resumed,
    Lost(String),
    Message(Box<Message>),
    Edit(Box<serenity::model::event::MessageUpdateEvent>),
    Press(Box<Inbound>),
}

impl DiscordChannel {
    /// Builds the channel; no network traffic until `run` or a send.
    pub fn new(settings: DiscordSettings) -> Result<Self, ChannelError> {
        Self::with_http_client(settings, reqwest::Client::builder())
    }

    /// [`DiscordChannel::new`] on an HTTP client prepared by the caller (a CA to trust, a route
    /// to a host); the request timeouts are added here. The tests use it to reach their fake
    /// Discord on the real `https://discord.com`, where serenity's ratelimiter is on.
    pub fn with_http_client(
        settings: DiscordSettings,
        client: reqwest::ClientBuilder,
    ) -> Result<Self, ChannelError> {
        if settings.token.trim().is_empty() || settings.token.chars().any(char::is_whitespace) {
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
        let client = client
            .timeout(settings.request_timeout)
            .connect_timeout(settings.request_timeout.min(Duration::from_secs(10)))
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

    fn rules(&self, me: serenity::all::UserId) -> Rules {
        Rules {
            me,
            allowed_users: self.settings.allowed_users.iter().copied().collect(),
            allowed_roles: self.settings.allowed_roles.iter().copied().collect(),
            channels: self.settings.channels.iter().copied().collect(),
        }
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
    let builder = HttpBuilder::new(&settings.token).client(client.clone());
    if settings.is_discord() {
        // serenity's HttpBuilder puts "Bot " before a token, its Ratelimiter does not: without
        // it Discord answers every call 401.
        let mut ratelimiter = Ratelimiter::new(client.clone(), format!("Bot {}", settings.token));
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

/// Forwards gateway events to the receive loop, acknowledging presses on the spot.
struct Handlers {
    tx: mpsc::UnboundedSender<Gateway>,
    ratelimits: Arc<AtomicU64>,
}

/// serenity takes raw handlers by value; this one shares [`Handlers`].
struct Raw(Arc<Handlers>);

#[async_trait]
impl RawEventHandler for Raw {
    async fn raw_event(&self, ctx: Context, event: Event) {
        self.0.raw(ctx, event).await;
    }
}

impl Handlers {
    async fn raw(&self, ctx: Context, event: Event) {
        // A closed receiver means `run` is ending; nothing to hand the event to.
        let forwarded = match event {
            Event::Ready(ready) => self.tx.send(Gateway::Ready {
                me: ready.ready.user.id,
            }),
            Event::Resumed(_) => self.tx.send(Gateway::Resumed),
            Event::MessageCreate(created) => {
                self.tx.send(Gateway::Message(Box::new(created.message)))
            }
            Event::MessageUpdate(update) => self.tx.send(Gateway::Edit(Box::new(update))),
            Event::InteractionCreate(created) => {
                let Interaction::Component(press) = created.interaction else {
                    return;
                };
                // Discord wants an answer within 3 seconds; the stored event is answered later
                // by an edit of the prompt or a follow-up.
                if let Err(error) = ctx
                    .http
                    .create_interaction_response(
                        press.id,
                        &press.token,
                        &CreateInteractionResponse::Acknowledge,
                        Vec::new(),
                    )
                    .await
                {
                    warn!(%error, "a discord button press could not be acknowledged");
                }
                self.tx
                    .send(Gateway::Press(Box::new(inbound::press(&press))))
            }
            Event::Unknown(unknown) => {
                // serenity 0.12 turns events it cannot parse into `Unknown` and drops the error.
                warn!(event = %unknown.kind, "discord sent an event serenity could not read; it is skipped (the backfill after the next READY finds missed messages)");
                Ok(())
            }
            _ => Ok(()),
        };
        if forwarded.is_err() {
            debug!("discord event after the receive loop ended; dropped");
        }
    }
}

#[async_trait]
impl EventHandler for Handlers {
    async fn ratelimit(&self, info: RatelimitInfo) {
        debug!(path = %info.path, timeout = ?info.timeout, "discord rate limit (gateway client)");
        self.ratelimits.fetch_add(1, Ordering::Relaxed);
    }

    async fn shard_stage_update(&self, _ctx: Context, event: ShardStageUpdateEvent) {
        if event.old == ConnectionStage::Connected && event.new != ConnectionStage::Connected {
            // The receiver is gone only when `run` ends.
            let _ = self
                .tx
                .send(Gateway::Lost(format!("gateway connection {}", event.new)));
        }
    }
}

/// The receive loop's own state.
struct Pump<'a> {
    channel: &'a DiscordChannel,
    ctx: &'a ChannelContext,
    rules: Option<Rules>,
    cursors: Cursors,
    /// Messages the last backfill handled, so the live copy queued meanwhile is not offered
    /// again (a redelivery by the platform still is).
    backfilled: HashSet<u64>,
    /// Messages that arrived before READY (serenity runs handlers as separate tasks), handled
    /// once READY told who the bot is.
    early: Vec<Message>,
}

/// Why the loop stopped early.
enum Stop {
    Shutdown,
}

impl<'a> Pump<'a> {
    async fn handle(&mut self, event: Gateway) -> Result<(), Stop> {
        match event {
            Gateway::Ready { me } => {
                info!(bot_id = %me, "discord gateway ready");
                self.rules = Some(self.channel.rules(me));
                self.ctx.status.connected();
                self.backfill().await?;
                for message in std::mem::take(&mut self.early) {
                    if !self.backfilled.remove(&message.id.get()) {
                        self.message(&message).await?;
                    }
                }
            }
            Gateway::Resumed => {
                info!("discord gateway resumed");
                self.ctx.status.connected();
            }
            Gateway::Lost(reason) => {
                warn!(%reason, "discord gateway connection lost; serenity reconnects");
                self.ctx.status.reconnecting(reason);
            }
            Gateway::Message(message) => {
                if self.backfilled.remove(&message.id.get()) {
                    return Ok(());
                }
                self.message(&message).await?;
            }
            Gateway::Edit(update) => {
                if let Some(event) = self.rules.as_ref().and_then(|r| r.edit(&update)) {
                    self.deliver(event).await?;
                }
            }
            Gateway::Press(event) => self.deliver(*event).await?,
        }
        Ok(())
    }

    /// One message, live or from the backfill: stored if it is for hearth, and the channel's
    /// cursor moved past it either way (in channels hearth serves).
    async fn message(&mut self, message: &Message) -> Result<(), Stop> {
        let Some(rules) = self.rules.clone() else {
            self.early.push(message.clone());
            return Ok(());
        };
        let channel = message.channel_id.get();
        let accepted = rules.accepts(message);
        if accepted && !self.cursors.0.contains_key(&channel) {
            // A chat seen for the first time: remember it from just before this message, so a
            // restart before it is stored still finds it.
            self.cursors.advance(channel, message.id.get() - 1);
            self.save_cursors().await;
        }
        if accepted {
            let event = inbound::message(&rules, message, &self.channel.client).await;
            self.deliver(event).await?;
        }
        if self.cursors.0.contains_key(&channel) && self.cursors.advance(channel, message.id.get())
        {
            self.save_cursors().await;
        }
        Ok(())
    }

    async fn save_cursors(&self) {
        if let Err(error) = self
            .ctx
            .state
            .save(inbound::CURSORS_KEY, &self.cursors.to_json())
            .await
        {
            // A stale cursor only means messages fetched again by the backfill, which the inbox
            // drops as duplicates.
            warn!(%error, "could not save the discord cursors");
        }
    }

    /// Hands `event` to the sink until it is stored (or shutdown).
    async fn deliver(&self, event: Inbound) -> Result<(), Stop> {
        let mut backoff = BACKOFF_START;
        loop {
            let stored = tokio::select! {
                () = self.ctx.shutdown.cancelled() => return Err(Stop::Shutdown),
                stored = self.ctx.sink.deliver(event.clone()) => stored,
            };
            match stored {
                Ok(()) => {
                    debug!(platform_id = %event.platform_id, "discord event stored");
                    return Ok(());
                }
                Err(error) => {
                    warn!(platform_id = %event.platform_id, %error, "inbox refused a discord event; offering it again");
                    if sleep_or_shutdown(&self.ctx.shutdown, backoff).await {
                        return Err(Stop::Shutdown);
                    }
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
    }

    /// Reads what was missed in every channel hearth serves, oldest first.
    async fn backfill(&mut self) -> Result<(), Stop> {
        self.backfilled.clear();
        let channels: Vec<(u64, u64)> = self.cursors.0.iter().map(|(c, m)| (*c, *m)).collect();
        for (channel, mut after) in channels {
            loop {
                let page = self.history(channel, after).await?;
                let Some(mut page) = page else { break };
                page.sort_by_key(|m| m.id);
                let full = page.len() >= usize::from(PAGE);
                for message in &page {
                    self.backfilled.insert(message.id.get());
                    self.message(message).await?;
                    after = after.max(message.id.get());
                }
                if !full {
                    break;
                }
            }
        }
        Ok(())
    }

    /// One page of history after `after`, retried a few times when Discord is briefly away;
    /// `None` when there is nothing (more) to read there.
    async fn history(&self, channel: u64, after: u64) -> Result<Option<Vec<Message>>, Stop> {
        let mut backoff = BACKOFF_START;
        for attempt in 1..=4 {
            let result = outbound::within(
                "reading channel history",
                self.channel.deadline(),
                self.channel.http.get_messages(
                    ChannelId::new(channel),
                    Some(MessagePagination::After(MessageId::new(after.max(1)))),
                    Some(PAGE),
                ),
            )
            .await;
            self.channel.count_rejection(&result);
            match result {
                Ok(page) if page.is_empty() => return Ok(None),
                Ok(page) => return Ok(Some(page)),
                Err(error) if error.is_temporary() && attempt < 4 => {
                    warn!(channel, %error, "discord history unavailable; trying again");
                    let wait = error.retry_after().unwrap_or(backoff).max(backoff);
                    if sleep_or_shutdown(&self.ctx.shutdown, wait).await {
                        return Err(Stop::Shutdown);
                    }
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
                Err(error) => {
                    warn!(channel, %error, "discord history could not be read; messages missed there while disconnected are not fetched");
                    return Ok(None);
                }
            }
        }
        Ok(None)
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
            buttons_as_reactions: false,
            acks_presses_on_receipt: true,
            deduplicates_sends: true,
            silent_with_strangers: false,
        }
    }

    async fn run(&self, ctx: ChannelContext) -> Result<(), ChannelError> {
        ctx.status.connecting();
        // Asked here first: serenity falls back to Discord's public gateway when this fails,
        // and a refused token is a failed channel, not a gateway retry loop.
        let gateway = tokio::select! {
            () = ctx.shutdown.cancelled() => return Ok(()),
            gateway = outbound::within("asking for the gateway", self.deadline(), self.http.get_gateway()) => gateway,
        };
        if let Err(error) = gateway {
            if matches!(error.kind, ErrorKind::Auth | ErrorKind::Config) {
                tracing::error!(%error, "discord channel stopped");
                ctx.status.failed(error.to_string());
            } else {
                ctx.status.reconnecting(error.to_string());
            }
            return Err(error);
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        let handlers = Arc::new(Handlers {
            tx,
            ratelimits: self.ratelimits.clone(),
        });
        let intents = GatewayIntents::GUILD_MESSAGES
            | GatewayIntents::DIRECT_MESSAGES
            | GatewayIntents::MESSAGE_CONTENT;
        let http = build_http(&self.settings, &self.client, None);
        let mut client = ClientBuilder::new_with_http(http, intents)
            .event_handler_arc(handlers.clone())
            .raw_event_handler(Raw(handlers))
            .await
            .map_err(|e| error::map("starting the gateway client", e))?;
        let shards = client.shard_manager.clone();
        let mut started = tokio::spawn(async move { client.start().await });
        let stored = ctx
            .state
            .load(inbound::CURSORS_KEY)
            .await
            .map_err(|e| ChannelError::transient(format!("discord: loading the cursors: {e}")));
        let cursors = match stored {
            Ok(stored) => Cursors::parse(stored.as_deref()),
            Err(error) => {
                stop_gateway(&shards, started).await;
                return Err(error);
            }
        };
        let mut pump = Pump {
            channel: self,
            ctx: &ctx,
            rules: None,
            cursors,
            backfilled: HashSet::new(),
            early: Vec::new(),
        };
        // serenity retries a gateway it cannot reach by itself, silently: say so after a while,
        // so `/healthz` and systemd's READY=1 do not wait on "connecting" forever.
        let first_ready = tokio::time::sleep(self.settings.ready_patience);
        tokio::pin!(first_ready);
        let mut waited = false;
        let result = loop {
            tokio::select! {
                () = ctx.shutdown.cancelled() => break Ok(()),
                () = &mut first_ready, if !waited => {
                    waited = true;
                    if pump.rules.is_none() {
                        warn!("no READY from the discord gateway yet; serenity keeps trying");
                        ctx.status.reconnecting(format!(
                            "no READY from the Discord gateway within {}s; still trying",
                            self.settings.ready_patience.as_secs()
                        ));
                    }
                }
                ended = &mut started => {
                    let error = match ended {
                        Ok(Ok(())) => ChannelError::transient("discord: the gateway client stopped"),
                        Ok(Err(e)) => error::map("gateway", e),
                        Err(e) => ChannelError::transient(format!("discord: the gateway task ended: {e}")),
                    };
                    if matches!(error.kind, ErrorKind::Auth | ErrorKind::Config) {
                        tracing::error!(%error, "discord channel stopped");
                        ctx.status.failed(error.to_string());
                    } else {
                        ctx.status.reconnecting(error.to_string());
                    }
                    return Err(error);
                }
                event = rx.recv() => {
                    let Some(event) = event else {
                        break Err(ChannelError::transient("discord: the gateway handlers stopped"));
                    };
                    let mut stopped = false;
                    for event in in_order(event, &mut rx).await {
                        if let Err(Stop::Shutdown) = pump.handle(event).await {
                            stopped = true;
                            break;
                        }
                    }
                    if stopped {
                        break Ok(());
                    }
                }
            }
        };
        stop_gateway(&shards, started).await;
        result
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, ChannelError> {
        let result = outbound::send(&self.http, self.deadline(), message).await;
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

    async fn preview(
        &self,
        chat: &ChatRef,
        draft: Option<&MessageRef>,
        text: &str,
    ) -> Result<Option<MessageRef>, ChannelError> {
        let result = outbound::preview(&self.http, self.deadline(), chat, draft, text).await;
        self.count_rejection(&result);
        result
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("ratelimited", self.ratelimits.load(Ordering::Relaxed))]
    }
}

/// How long the loop waits for events dispatched together to reach it, so they can be put in
/// order: serenity runs each event's handler as a task of its own, and on a multi-threaded
/// runtime two messages sent a moment apart may reach the loop swapped.
const ORDER_WINDOW: Duration = Duration::from_millis(15);

/// `first` and whatever arrives within [`ORDER_WINDOW`], in the order Discord created them:
/// connection events first, then messages, edits and presses by their snowflake ids, which
/// grow with time.
async fn in_order(first: Gateway, rx: &mut mpsc::UnboundedReceiver<Gateway>) -> Vec<Gateway> {
    let mut batch = vec![first];
    tokio::time::sleep(ORDER_WINDOW).await;
    while let Ok(event) = rx.try_recv() {
        batch.push(event);
    }
    batch.sort_by_key(|event| match event {
        Gateway::Ready { .. } | Gateway::Resumed | Gateway::Lost(_) => 0,
        Gateway::Message(message) => message.id.get(),
        Gateway::Edit(update) => update.id.get(),
        Gateway::Press(event) => event
            .platform_id
            .strip_prefix("press:")
            .and_then(|id| id.parse().ok())
            .unwrap_or(u64::MAX),
    });
    batch
}

/// Closes the gateway connection and waits (briefly) for serenity's task to end.
async fn stop_gateway(
    shards: &Arc<serenity::gateway::ShardManager>,
    started: tokio::task::JoinHandle<serenity::Result<()>>,
) {
    let abort = started.abort_handle();
    if tokio::time::timeout(Duration::from_secs(1), shards.shutdown_all())
        .await
        .is_err()
    {
        debug!("discord shards did not stop within a second; aborting");
    }
    abort.abort();
    // The task ends aborted or with the shutdown's result; either is the end wanted.
    let _ = tokio::time::timeout(Duration::from_millis(500), started).await;
}

/// Sleeps, or returns `true` early when shutdown comes first.
async fn sleep_or_shutdown(shutdown: &CancellationToken, wait: Duration) -> bool {
    tokio::select! {
        () = shutdown.cancelled() => true,
        () = tokio::time::sleep(wait) => false,
    }
}
