//! The receive loop: serenity's gateway handlers pass events through a bounded queue to one
//! loop ([`Pump`]) that hands them to the sink in order, reads back every channel's history
//! after each READY and wherever a message was dropped, and keeps the cursors.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hearth_channel::{
    Backoff, ChannelContext, ChannelError, ErrorKind, Inbound, sleep_or_shutdown,
};
use serenity::all::{
    ClientBuilder, Context, Event, EventHandler, GatewayIntents, GuildId, Interaction, Message,
    RatelimitInfo, RawEventHandler, UserId,
};
use serenity::gateway::ConnectionStage;
use serenity::gateway::ShardStageUpdateEvent;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::time::Instant;
use tracing::{Instrument, debug, info, warn};

use crate::inbound::{Cursors, Place, ReadError, Rules, Verdict};

use crate::{DiscordChannel, PAGE, build_http, error, inbound, outbound};

/// Backoff while the sink refuses an event, doubling up to the maximum.
const BACKOFF_START: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Backoff between attempts to read a channel's history that could not be read.
const GAP_RETRY_START: Duration = Duration::from_secs(2);
const GAP_RETRY_MAX: Duration = Duration::from_secs(60);

/// What the gateway handlers pass to the receive loop.
enum Gateway {
    Ready { me: UserId },
    Resumed,
    Lost(String),
    Message(Box<Message>),
    Edit(Box<serenity::model::event::MessageUpdateEvent>),
    Press(Box<Inbound>),
}

/// The receive loop: the gateway, its events in order to the sink, and the history read back
/// after every READY and wherever a gap opened, until shutdown.
pub(crate) async fn run(channel: &DiscordChannel, ctx: ChannelContext) -> Result<(), ChannelError> {
    ctx.status.connecting();
    // Asked here first: serenity falls back to Discord's public gateway when this fails,
    // and a refused token is a failed channel, not a gateway retry loop.
    let gateway = tokio::select! {
        () = ctx.shutdown.cancelled() => return Ok(()),
        gateway = outbound::within("asking for the gateway", channel.deadline(), channel.http.get_gateway()) => gateway,
    };
    if let Err(error) = gateway {
        return Err(stopped(&ctx, error));
    }
    let capacity = channel.settings.queue_capacity.max(1);
    let (tx, mut rx) = mpsc::channel(capacity);
    let dropped = Arc::new(Dropped::default());
    let handlers = Arc::new(Handlers {
        tx,
        dropped: dropped.clone(),
        capacity,
        ratelimits: channel.ratelimits.clone(),
        interactions: channel.interactions(),
    });
    let intents = GatewayIntents::GUILD_MESSAGES
        | GatewayIntents::DIRECT_MESSAGES
        | GatewayIntents::MESSAGE_CONTENT;
    let http = build_http(&channel.settings, &channel.client, None);
    let mut client = ClientBuilder::new_with_http(http, intents)
        .event_handler_arc(handlers.clone())
        .raw_event_handler(Raw(handlers))
        .await
        .map_err(|e| error::map("starting the gateway client", e))?;
    let shards = client.shard_manager.clone();
    let mut started = tokio::spawn(
        async move { client.start().await }.instrument(tracing::info_span!("gateway")),
    );
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
        channel,
        ctx: &ctx,
        rules: None,
        cursors,
        backfilled: HashSet::new(),
        early: Vec::new(),
        dropped,
        gaps: BTreeMap::new(),
        retry_at: None,
        gap_backoff: Backoff::new(GAP_RETRY_START, GAP_RETRY_MAX),
        online: false,
        roles: HashMap::new(),
        live_in_gaps: HashSet::new(),
    };
    // serenity retries a gateway it cannot reach by itself, silently: say so after a while,
    // so `/healthz` and systemd's READY=1 do not wait on "connecting" forever.
    let first_ready = tokio::time::sleep(channel.settings.ready_patience);
    tokio::pin!(first_ready);
    let mut waited = false;
    let result = loop {
        let retry_at = pump.retry_at;
        tokio::select! {
            () = ctx.shutdown.cancelled() => break Ok(()),
            () = &mut first_ready, if !waited => {
                waited = true;
                if pump.rules.is_none() {
                    warn!("no READY from the discord gateway yet; serenity keeps trying");
                    ctx.status.reconnecting(format!(
                        "no READY from the Discord gateway within {}s; still trying",
                        channel.settings.ready_patience.as_secs()
                    ));
                }
            }
            () = sleep_until(retry_at), if retry_at.is_some() => {
                if let Err(Stop::Shutdown) = pump.catch_up().await {
                    break Ok(());
                }
            }
            ended = &mut started => {
                let error = match ended {
                    Ok(Ok(())) => ChannelError::transient("discord: the gateway client stopped"),
                    Ok(Err(e)) => error::map("gateway", e),
                    Err(e) => ChannelError::transient(format!("discord: the gateway task ended: {e}")),
                };
                return Err(stopped(&ctx, error));
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
                // Messages the queue had no room for are read back from history now.
                if !stopped && pump.rules.is_some() && pump.take_dropped()
                    && let Err(Stop::Shutdown) = pump.catch_up().await
                {
                    stopped = true;
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

/// Messages the gateway delivered while the receive loop's queue was full: per channel, the
/// first one dropped and the kind of channel. The loop reads those channels from history and
/// does not move their cursors past a dropped message meanwhile.
#[derive(Default)]
struct Dropped {
    inner: Mutex<DroppedInner>,
}

#[derive(Default)]
struct DroppedInner {
    /// Events dropped since the loop last took the list (messages, edits and presses).
    count: u64,
    channels: BTreeMap<u64, (u64, Place)>,
}

impl Dropped {
    fn lock(&self) -> std::sync::MutexGuard<'_, DroppedInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a dropped event (and remembers a message's channel); returns the count.
    fn record(&self, message: Option<&Message>) -> u64 {
        let mut inner = self.lock();
        inner.count += 1;
        if let Some(message) = message {
            let id = message.id.get();
            let entry = inner
                .channels
                .entry(message.channel_id.get())
                .or_insert((id, Place::of(message)));
            entry.0 = entry.0.min(id);
        }
        inner.count
    }

    /// Whether a message before `id` was dropped in `channel`.
    fn holds(&self, channel: u64, id: u64) -> bool {
        self.lock()
            .channels
            .get(&channel)
            .is_some_and(|(first, _)| *first < id)
    }

    /// The list so far, emptied.
    fn take(&self) -> (u64, BTreeMap<u64, (u64, Place)>) {
        let mut inner = self.lock();
        (
            std::mem::take(&mut inner.count),
            std::mem::take(&mut inner.channels),
        )
    }
}

/// Forwards gateway events to the receive loop, acknowledging presses on the spot.
struct Handlers {
    tx: mpsc::Sender<Gateway>,
    dropped: Arc<Dropped>,
    capacity: usize,
    ratelimits: Arc<AtomicU64>,
    interactions: outbound::Interactions,
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
    async fn raw(&self, _ctx: Context, event: Event) {
        let event = match event {
            // Connection events are few (one per connection) and must not be lost: they wait
            // for room in the queue (serenity runs each handler as a task of its own).
            Event::Ready(ready) => {
                return self
                    .control(Gateway::Ready {
                        me: ready.ready.user.id,
                    })
                    .await;
            }
            Event::Resumed(_) => return self.control(Gateway::Resumed).await,
            Event::MessageCreate(created) => Gateway::Message(Box::new(created.message)),
            Event::MessageUpdate(update) => Gateway::Edit(Box::new(update)),
            Event::InteractionCreate(created) => {
                let Interaction::Component(press) = created.interaction else {
                    return;
                };
                // Discord wants an answer within 3 seconds; the stored event is answered later
                // by an edit of the prompt or a follow-up.
                if let Err(error) = self
                    .interactions
                    .acknowledge(press.id.get(), &press.token)
                    .await
                {
                    warn!(%error, "a discord button press could not be acknowledged");
                }
                Gateway::Press(Box::new(inbound::press(&press)))
            }
            Event::Unknown(unknown) => {
                // serenity 0.12 turns events it cannot parse into `Unknown` and drops the error.
                warn!(event = %unknown.kind, "discord sent an event serenity could not read; it is skipped (the backfill after the next READY finds missed messages)");
                return;
            }
            _ => return,
        };
        match self.tx.try_send(event) {
            Ok(()) => {}
            Err(TrySendError::Full(event)) => {
                let message = match &event {
                    Gateway::Message(message) => Some(&**message),
                    _ => None,
                };
                let count = self.dropped.record(message);
                // One line for the first drop of a burst, then one per hundred.
                if count == 1 || count.is_multiple_of(100) {
                    warn!(
                        dropped = count,
                        capacity = self.capacity,
                        "the discord receive queue is full; events are dropped (messages are read again from history, a dropped button press must be pressed again)"
                    );
                }
            }
            Err(TrySendError::Closed(_)) => {
                debug!("discord event after the receive loop ended; dropped");
            }
        }
    }

    async fn control(&self, event: Gateway) {
        if self.tx.send(event).await.is_err() {
            debug!("discord connection event after the receive loop ended; dropped");
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
            self.control(Gateway::Lost(format!("gateway connection {}", event.new)))
                .await;
        }
    }
}

/// A stretch of a channel's history still to be read: from just after `after`.
#[derive(Clone, Debug)]
struct Gap {
    after: u64,
    place: Place,
    reason: String,
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
    /// Messages the gateway could not queue.
    dropped: Arc<Dropped>,
    /// Channels whose history must be read (again) before their cursors move on.
    gaps: BTreeMap<u64, Gap>,
    /// When the gaps are tried next, and the waits between tries.
    retry_at: Option<Instant>,
    gap_backoff: Backoff,
    /// Whether the gateway is connected (between READY/RESUMED and a lost connection).
    online: bool,
    /// Roles of server members, asked for while reading history (REST messages do not carry
    /// them); forgotten at each READY.
    roles: HashMap<(u64, u64), Vec<u64>>,
    /// Messages handled live in a channel whose gap was still open: reading the gap later
    /// passes over them rather than offering them again.
    live_in_gaps: HashSet<u64>,
}

/// Why the loop stopped early.
enum Stop {
    Shutdown,
}

/// What became of one message.
enum Outcome {
    /// Stored if it was for hearth; the cursor moved past it where allowed.
    Handled,
    /// Whether it is for hearth could not be told now (the member's roles could not be read):
    /// the channel's history is read again from before it later.
    Unsure(String),
}

impl<'a> Pump<'a> {
    async fn handle(&mut self, event: Gateway) -> Result<(), Stop> {
        match event {
            Gateway::Ready { me } => {
                info!(bot_id = %me, "discord gateway ready");
                self.rules = Some(self.channel.rules(me));
                self.online = true;
                self.report();
                self.backfill().await?;
                for message in std::mem::take(&mut self.early) {
                    if !self.backfilled.remove(&message.id.get()) {
                        self.live(&message).await?;
                    }
                }
            }
            Gateway::Resumed => {
                info!("discord gateway resumed");
                self.online = true;
                self.report();
            }
            Gateway::Lost(reason) => {
                warn!(%reason, "discord gateway connection lost; serenity reconnects");
                self.online = false;
                self.ctx.status.reconnecting(reason);
            }
            Gateway::Message(message) => {
                if self.backfilled.remove(&message.id.get()) {
                    return Ok(());
                }
                self.live(&message).await?;
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

    /// Reports the state: connected, or reconnecting while some history could not be read.
    fn report(&self) {
        if !self.online {
            return;
        }
        match self.gaps.values().next() {
            None => self.ctx.status.connected(),
            Some(gap) => self.ctx.status.reconnecting(format!(
                "the history of {} discord channel(s) could not be read ({}); trying again",
                self.gaps.len(),
                gap.reason
            )),
        }
    }

    /// A message from the gateway, which names its server itself.
    async fn live(&mut self, message: &Message) -> Result<(), Stop> {
        if let Outcome::Unsure(reason) = self.message(message).await? {
            let channel = message.channel_id.get();
            let after = self
                .cursors
                .get(channel)
                .map_or(message.id.get() - 1, |c| c.after);
            self.gap(channel, after, Place::of(message), reason);
        }
        Ok(())
    }

    /// One message, live or from the backfill: stored if it is for hearth, and the channel's
    /// cursor moved past it either way (in channels hearth serves), unless a gap before it is
    /// still to be read.
    async fn message(&mut self, message: &Message) -> Result<Outcome, Stop> {
        let Some(rules) = self.rules.clone() else {
            self.early.push(message.clone());
            return Ok(Outcome::Handled);
        };
        let channel = message.channel_id.get();
        let id = message.id.get();
        let accepted = match self.accepts(&rules, message).await? {
            Ok(accepted) => accepted,
            Err(reason) => return Ok(Outcome::Unsure(reason)),
        };
        if accepted && self.cursors.get(channel).is_none() {
            // A chat seen for the first time: remember it from just before this message, so a
            // restart before it is stored still finds it.
            self.cursors.insert(channel, id - 1, Place::of(message));
            self.save_cursors().await;
        }
        if accepted {
            self.deliver(inbound::message(&rules, message)).await?;
            if self.gaps.contains_key(&channel) {
                self.live_in_gaps.insert(id);
            }
        }
        self.pass(channel, id).await;
        Ok(Outcome::Handled)
    }

    /// Moves `channel`'s cursor past message `id`, unless a gap or a dropped message before it
    /// is still to be read there.
    async fn pass(&mut self, channel: u64, id: u64) {
        let held = self.gaps.contains_key(&channel) || self.dropped.holds(channel, id);
        if !held && self.cursors.advance(channel, id) {
            self.save_cursors().await;
        }
    }

    /// Whether `message` is for hearth: the rules, then the daemon's allowlist, then (while
    /// reading history, where messages carry no member) the author's roles. `Err` when the roles
    /// could not be read.
    async fn accepts(
        &mut self,
        rules: &Rules,
        message: &Message,
    ) -> Result<Result<bool, String>, Stop> {
        let (guild, author) = match rules.screen(message) {
            Verdict::Ignore => return Ok(Ok(false)),
            Verdict::Take => return Ok(Ok(true)),
            Verdict::AskAbout { guild, author } => (guild, author),
        };
        if self.served(author).await? {
            return Ok(Ok(true));
        }
        if rules.allowed_roles.is_empty() || message.member.is_some() {
            return Ok(Ok(false));
        }
        match self.roles_of(guild, author).await {
            Ok(roles) => Ok(Ok(rules.any_allowed_role(roles.into_iter()))),
            Err(ReadError::Gone(_)) => Ok(Ok(false)),
            Err(ReadError::Failed(error)) => Ok(Err(error.to_string())),
        }
    }

    /// Whether the daemon serves `user` (owner, allowlist, paired). The database being away is
    /// no answer: asked again until it answers, so the event waits rather than its sender
    /// counting as a stranger.
    async fn served(&self, user: UserId) -> Result<bool, Stop> {
        let user = user.to_string();
        let mut backoff = Backoff::new(BACKOFF_START, BACKOFF_MAX);
        loop {
            let answer = tokio::select! {
                () = self.ctx.shutdown.cancelled() => return Err(Stop::Shutdown),
                answer = self.ctx.allowlist.allows(&user) => answer,
            };
            match answer {
                Ok(served) => return Ok(served),
                Err(error) => {
                    warn!(%error, "the allowlist could not be read; asking again");
                    if sleep_or_shutdown(&self.ctx.shutdown, backoff.next()).await {
                        return Err(Stop::Shutdown);
                    }
                }
            }
        }
    }

    /// A server member's roles (`GET /guilds/{id}/members/{user}`), remembered until READY.
    async fn roles_of(&mut self, guild: GuildId, user: UserId) -> Result<Vec<u64>, ReadError> {
        let key = (guild.get(), user.get());
        if let Some(roles) = self.roles.get(&key) {
            return Ok(roles.clone());
        }
        let roles = self.channel.read_roles(guild, user).await?;
        self.roles.insert(key, roles.clone());
        Ok(roles)
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
        let mut backoff = Backoff::new(BACKOFF_START, BACKOFF_MAX);
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
                    if sleep_or_shutdown(&self.ctx.shutdown, backoff.next()).await {
                        return Err(Stop::Shutdown);
                    }
                }
            }
        }
    }

    /// Remembers that `channel`'s history from just after `after` is still to be read; its
    /// cursor stays meanwhile.
    fn gap(&mut self, channel: u64, after: u64, place: Place, reason: String) {
        warn!(channel, %reason, "discord history could not be read; the cursor stays and the gap is read again later");
        let gap = self.gaps.entry(channel).or_insert(Gap {
            after,
            place,
            reason: reason.clone(),
        });
        gap.after = gap.after.min(after);
        gap.reason = reason;
        if gap.place == Place::Unknown {
            gap.place = place;
        }
    }

    /// Moves the messages the gateway dropped into the gaps to read.
    fn take_dropped(&mut self) -> bool {
        let (count, channels) = self.dropped.take();
        if count == 0 && channels.is_empty() {
            return false;
        }
        warn!(
            dropped = count,
            channels = channels.len(),
            "discord events were dropped while the receive loop was busy; reading those channels from history"
        );
        for (channel, (first, place)) in channels {
            let (after, place) = match self.cursors.get(channel) {
                Some(cursor) => (cursor.after, cursor.place),
                None => (first - 1, place),
            };
            let gap = self.gaps.entry(channel).or_insert(Gap {
                after,
                place,
                reason: "events dropped".into(),
            });
            gap.after = gap.after.min(after);
        }
        true
    }

    /// After READY: reads what was missed in every channel hearth serves, oldest first, and
    /// every gap still open.
    async fn backfill(&mut self) -> Result<(), Stop> {
        self.backfilled.clear();
        self.roles.clear();
        self.take_dropped();
        let mut targets: BTreeMap<u64, (u64, Place)> = self
            .cursors
            .0
            .iter()
            .map(|(channel, cursor)| (*channel, (cursor.after, cursor.place)))
            .collect();
        for (channel, gap) in std::mem::take(&mut self.gaps) {
            let target = targets.entry(channel).or_insert((gap.after, gap.place));
            target.0 = target.0.min(gap.after);
            if target.1 == Place::Unknown {
                target.1 = gap.place;
            }
        }
        for (channel, (after, place)) in targets {
            self.read(channel, after, place).await?;
        }
        self.settle();
        Ok(())
    }

    /// Reads the open gaps again (after drops, or when their retry is due).
    async fn catch_up(&mut self) -> Result<(), Stop> {
        if self.rules.is_none() {
            self.retry_at = None; // READY reads them all
            return Ok(());
        }
        self.take_dropped();
        for (channel, gap) in std::mem::take(&mut self.gaps) {
            self.read(channel, gap.after, gap.place).await?;
        }
        self.settle();
        Ok(())
    }

    /// Schedules the next try of the gaps still open, and reports the state.
    fn settle(&mut self) {
        if self.gaps.is_empty() {
            self.retry_at = None;
            self.gap_backoff.reset();
        } else {
            self.retry_at = Some(Instant::now() + self.gap_backoff.next());
        }
        self.report();
    }

    /// Reads `channel` from just after `after` to its newest message, applying the rules of its
    /// place; on a failure the rest becomes a gap.
    async fn read(&mut self, channel: u64, mut after: u64, place: Place) -> Result<(), Stop> {
        let place = match place {
            Place::Unknown => match self.channel.read_place(channel).await {
                Ok(place) => {
                    self.cursors.set_place(channel, place);
                    self.save_cursors().await;
                    place
                }
                Err(error) => {
                    self.unread(channel, after, place, error);
                    return Ok(());
                }
            },
            known => known,
        };
        loop {
            let page = match self.history(channel, after).await? {
                Ok(page) => page,
                Err(error) => {
                    self.unread(channel, after, place, error);
                    return Ok(());
                }
            };
            let full = page.len() >= usize::from(PAGE);
            for (id, message) in page {
                after = after.max(id);
                // Unreadable, it cannot be handled ever; handled live meanwhile, it is stored.
                let Some(mut message) = message.filter(|_| !self.live_in_gaps.remove(&id)) else {
                    self.pass(channel, id).await;
                    continue;
                };
                // REST messages do not name their server: the cursor knows.
                if let Place::Server(guild) = place {
                    message.guild_id = Some(GuildId::new(guild));
                }
                self.backfilled.insert(id);
                if let Outcome::Unsure(reason) = self.message(&message).await? {
                    self.gap(channel, id - 1, place, reason);
                    return Ok(());
                }
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// A read of `channel` after `after` that failed: a channel that is gone is no longer
    /// followed; any other failure leaves the rest as a gap to fill later.
    fn unread(&mut self, channel: u64, after: u64, place: Place, error: ReadError) {
        match error {
            ReadError::Gone(error) => self.forget(channel, &error),
            ReadError::Failed(error) => self.gap(channel, after, place, error.to_string()),
        }
    }

    /// Stops following a channel hearth can no longer read (deleted, or access taken away).
    fn forget(&mut self, channel: u64, error: &ChannelError) {
        warn!(channel, %error, "discord channel is gone or no longer readable; no longer following it");
        self.cursors.0.remove(&channel);
    }

    /// One page of history after `after`, oldest first, as (id, message) with `None` for a
    /// message serenity cannot read; retried a few times when Discord is briefly away.
    async fn history(
        &self,
        channel: u64,
        after: u64,
    ) -> Result<Result<Vec<(u64, Option<Message>)>, ReadError>, Stop> {
        let mut backoff = Backoff::new(BACKOFF_START, BACKOFF_MAX);
        let mut attempt = 1;
        loop {
            let result = self.channel.read_history(channel, after).await;
            match result {
                Err(ReadError::Failed(error)) if error.is_temporary() && attempt < 4 => {
                    warn!(channel, %error, "discord history unavailable; trying again");
                    let step = backoff.next();
                    let wait = error.retry_after().unwrap_or(step).max(step);
                    if sleep_or_shutdown(&self.ctx.shutdown, wait).await {
                        return Err(Stop::Shutdown);
                    }
                    attempt += 1;
                }
                other => return Ok(other),
            }
        }
    }
}

/// Reports why the loop ends with `error`: the channel failed (a refused token or intent, for
/// good) or is reconnecting (the supervisor starts it again). Gives the error back.
fn stopped(ctx: &ChannelContext, error: ChannelError) -> ChannelError {
    if matches!(error.kind, ErrorKind::Auth | ErrorKind::Config) {
        tracing::error!(%error, "discord channel stopped");
        ctx.status.failed(error.to_string());
    } else {
        ctx.status.reconnecting(error.to_string());
    }
    error
}

/// How long the loop waits for events dispatched together to reach it, so they can be put in
/// order: serenity runs each event's handler as a task of its own, and on a multi-threaded
/// runtime two messages sent a moment apart may reach the loop swapped.
const ORDER_WINDOW: Duration = Duration::from_millis(15);

/// `first` and whatever arrives within [`ORDER_WINDOW`], in the order Discord created them:
/// connection events first, then messages, edits and presses by their snowflake ids, which
/// grow with time.
async fn in_order(first: Gateway, rx: &mut mpsc::Receiver<Gateway>) -> Vec<Gateway> {
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

/// Sleeps until `at` (forever without one; the caller only polls it with one).
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
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
