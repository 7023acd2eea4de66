//! The sync loop: Matrix events to [`Inbound`], with hearth's own sync position.
//!
//! hearth drives `/sync` itself and keeps the position (`next_batch`) in its scoped state,
//! saved only after every event of that sync was stored by the sink (the inbox deduplicates by
//! event id). A crash before the save syncs from the older position again: the events come
//! again and the copies are dropped. The very first sync of an account skips the history the
//! rooms already had. The filter asks for 50 events per room; when more arrived (a limited
//! timeline) the gap is fetched with `/messages` back to the previous position, so a burst of
//! messages while hearth was down is delivered whole and in order.
//!
//! Encrypted events the SDK could not decrypt yet (the sender's key has not arrived) are kept
//! in the state and tried again after every sync, until they decrypt or a day has passed.
//!
//! What a room member can make hearth keep is bounded: in group rooms only messages that
//! address hearth, reactions on its prompts and edits (and undecryptable events) from people it
//! serves are taken; the undecryptable ones are capped per sender and per room, and their list
//! is saved only when it changed. Files are not downloaded here (see `media`). A failed
//! `/messages` (a gap, the read-back at start) is tried again before the position moves.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hearth_channel::{
    Attachment, AttachmentKind, Backoff, ChannelContext, ChannelError, ChannelStatus, ChatRef,
    Inbound, InboundKind, ScopedAllowlist, Sender, sleep_or_shutdown,
};
use matrix_sdk::config::{SyncSettings, SyncToken};
use matrix_sdk::deserialized_responses::{
    TimelineEvent, TimelineEventKind, VerificationLevel, VerificationState,
};
use matrix_sdk::room::MessagesOptions;
use matrix_sdk::ruma::api::client::filter::{FilterDefinition, RoomEventFilter, RoomFilter};
use matrix_sdk::ruma::api::client::receipt::create_receipt::v3::ReceiptType;
use matrix_sdk::ruma::api::client::sync::sync_events::v3::Filter;
use matrix_sdk::ruma::events::receipt::ReceiptThread;
use matrix_sdk::ruma::serde::Raw;
use matrix_sdk::ruma::{EventId, OwnedUserId, RoomId, UInt};
use matrix_sdk::{Client, Room};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::error::MatrixError;
use crate::format::strip_reply_fallback;
use crate::media;
use crate::outbound::prompt_key;
use crate::{MatrixChannel, lock};

/// The state key of hearth's sync position.
const SINCE_KEY: &str = "since";
/// The state key of the moment before which events are history (the first start).
const HISTORY_KEY: &str = "history_before";
/// The state key of the encrypted events waiting for their keys.
const UNDECRYPTED_KEY: &str = "undecrypted";
/// How long an undecryptable event is tried again.
const UNDECRYPTED_FOR: Duration = Duration::from_secs(24 * 3600);
/// Undecryptable events kept per sender in one room: a sender's older ones make room for newer
/// ones, so a member flooding a room with junk ciphertext cannot grow the saved list.
const MAX_UNDECRYPTED_PER_SENDER: usize = 20;
/// Undecryptable events kept per room, all senders together.
const MAX_UNDECRYPTED_PER_ROOM: usize = 100;
/// Pages of 100 events fetched at most to fill one gap.
const MAX_GAP_PAGES: usize = 20;
/// Waits while the homeserver or the network fails (sync, history, invites).
const SERVER_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
/// Waits while the daemon's store refuses (the inbox, the sync position).
const STORE_BACKOFF: Backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
/// Tries to join a room hearth was invited to; a later sync that shows the invite tries again.
const JOIN_ATTEMPTS: u32 = 6;

/// An encrypted event waiting for its key.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Undecrypted {
    room_id: String,
    /// Who sent it (empty in lists saved before senders were kept).
    #[serde(default)]
    sender: String,
    /// The `m.room.encrypted` event as received.
    event: String,
    /// When it was first seen (ms since the epoch).
    seen_ms: u64,
}

pub(crate) async fn run(channel: &MatrixChannel, ctx: ChannelContext) -> Result<(), ChannelError> {
    let shutdown = ctx.shutdown.clone();
    // Taken before the login, which can take a second: messages sent meanwhile are news.
    let started_ms = now_ms();
    let client = tokio::select! {
        _ = shutdown.cancelled() => return stopped(&ctx),
        result = channel.client() => match result {
            Ok(client) => client,
            Err(error) => {
                if matches!(error.kind, hearth_channel::ErrorKind::Auth | hearth_channel::ErrorKind::Config) {
                    ctx.status.failed(error.message.clone());
                }
                return Err(error);
            }
        },
    };
    let Some(own) = client.user_id().map(ToOwned::to_owned) else {
        return Err(ChannelError::protocol("logged in without a user id"));
    };
    if let Some(key) = &channel.settings.recovery_key {
        recover(&client, key).await;
    }
    let Some(mut since) = load(&ctx, SINCE_KEY).await else {
        return stopped(&ctx);
    };
    // The very first sync of this account: what the rooms already hold is history, not news.
    // Anything the homeserver stamped since the first `run` started is news. The moment is
    // kept, so a restart before the first position was saved still delivers what came after.
    let cutoff = match load(&ctx, HISTORY_KEY).await {
        None => return stopped(&ctx),
        Some(Some(saved)) => saved.parse().ok(),
        Some(None) if since.is_none() => {
            if !save(&ctx, HISTORY_KEY, &started_ms.to_string()).await {
                return stopped(&ctx);
            }
            Some(started_ms)
        }
        Some(None) => None,
    };
    let mut undecrypted: Vec<Undecrypted> = match load(&ctx, UNDECRYPTED_KEY).await {
        None => return stopped(&ctx),
        Some(None) => Vec::new(),
        Some(Some(text)) => serde_json::from_str(&text).unwrap_or_else(|e| {
            tracing::warn!(
                "matrix: the list of undecryptable events is unreadable ({e}); starting a new one"
            );
            Vec::new()
        }),
    };
    // The SDK saves its own sync position before hearth has stored the events, and drops a
    // sync response that ends where its position is. So what a crash (or a lost delivery)
    // left unstored is not fetched with /sync again but read back with /messages, down to
    // hearth's position (or, before the first position was saved, the first start).
    if (since.is_some() || cutoff.is_some())
        && !catch_up(channel, &client, &own, &ctx, since.as_deref(), cutoff).await
    {
        return stopped(&ctx);
    }
    let filter = filter(channel.settings.timeline_limit);
    let invites = Arc::new(std::sync::Mutex::new(HashSet::new()));
    let mut backoff = SERVER_BACKOFF;
    let mut synced_once = false;
    loop {
        let rewind = lock(&channel.rewind).take();
        if let Some(position) = rewind {
            tracing::debug!(%position, "matrix: reading again from an earlier position");
            let (to, not_before) = if position.is_empty() {
                (None, cutoff)
            } else {
                (Some(position.as_str()), None)
            };
            if !catch_up(channel, &client, &own, &ctx, to, not_before).await {
                return stopped(&ctx);
            }
        }
        let token = since.clone();
        let mut settings = SyncSettings::default()
            .filter(Filter::FilterDefinition(filter.clone()))
            .timeout(if synced_once {
                channel.settings.sync_timeout
            } else {
                Duration::ZERO
            });
        // hearth's position, never the SDK's own: without one, a full (initial) sync.
        settings = settings.token(match &token {
            Some(token) => SyncToken::Specific(token.clone()),
            None => SyncToken::NoToken,
        });
        tracing::debug!(
            token = token.as_deref().unwrap_or("none"),
            "matrix: syncing"
        );
        let response = tokio::select! {
            _ = shutdown.cancelled() => return stopped(&ctx),
            _ = channel.rewound.notified() => continue,
            result = client.sync_once(settings) => result,
        };
        let response = match response {
            Ok(response) => response,
            Err(error) => {
                let error = MatrixError::sdk("syncing", error);
                if error.is_unknown_token() {
                    // Deleted or logged out elsewhere: the supervisor restarts the channel,
                    // which logs in as a new device.
                    channel.forget_client().await;
                    ctx.status
                        .reconnecting("the homeserver no longer knows hearth's session");
                    return Err(ChannelError::transient(format!(
                        "{error}; logging in again as a new device"
                    )));
                }
                let error = error.kind_error();
                if error.kind == hearth_channel::ErrorKind::Auth {
                    ctx.status.failed(error.message.clone());
                    return Err(error);
                }
                let step = backoff.next();
                tracing::warn!(%error, "matrix: sync failed; trying again in {step:?}");
                ctx.status.reconnecting(error.message.clone());
                if sleep_or_shutdown(&shutdown, error.retry_after().unwrap_or(step)).await {
                    return stopped(&ctx);
                }
                continue;
            }
        };
        backoff.reset();
        ctx.status.connected();
        synced_once = true;
        channel
            .synced
            .store(true, std::sync::atomic::Ordering::SeqCst);

        for room_id in response.rooms.invited.keys() {
            if !lock(&invites).insert(room_id.clone()) {
                continue;
            }
            if let Some(room) = client.get_room(room_id) {
                let span = tracing::info_span!("invite", room = %room_id);
                tokio::spawn(
                    answer_invite(
                        room,
                        channel.settings.allowed_users.clone(),
                        ctx.allowlist.clone(),
                        shutdown.clone(),
                        invites.clone(),
                    )
                    .instrument(span),
                );
            }
        }

        let position = token.clone().unwrap_or_default();
        let mut undecrypted_changed = false;
        let skip_before = token.is_none().then_some(cutoff).flatten();
        for (room_id, update) in response.rooms.joined {
            let Some(room) = client.get_room(&room_id) else {
                continue;
            };
            let mut events = Vec::new();
            if update.timeline.limited
                && let Some(token) = &token
            {
                let gap = fill_gap(&ctx, &room, update.timeline.prev_batch.as_deref(), token);
                match gap.await {
                    Some(gap) => events = gap,
                    None => return stopped(&ctx),
                }
            }
            events.extend(update.timeline.events);
            tracing::debug!(room = %room_id, events = events.len(), limited = update.timeline.limited, "matrix: sync");
            let mut last = None;
            for event in events {
                let converted =
                    convert(channel, &client, &room, &own, &ctx, &event, skip_before).await;
                match converted {
                    Converted::Deliver(inbound) => {
                        let id = inbound.platform_id.clone();
                        lock(&channel.replay).insert(id.clone(), position.clone());
                        if !deliver(&ctx, *inbound).await {
                            return stopped(&ctx);
                        }
                        last = Some(id);
                    }
                    Converted::Undecryptable { sender, event } => {
                        tracing::info!(room = %room_id, %sender, "matrix: a message could not be decrypted yet; trying again when its key arrives");
                        undecrypted_changed |= keep(
                            &mut undecrypted,
                            Undecrypted {
                                room_id: room_id.to_string(),
                                sender,
                                event,
                                seen_ms: now_ms(),
                            },
                        );
                    }
                    Converted::Skip => {}
                }
            }
            if let Some(last) = last {
                read_receipt(room, last);
            }
        }

        if !undecrypted.is_empty() {
            let before = undecrypted.len();
            let Some(left) = retry_undecrypted(channel, &client, &own, &ctx, undecrypted).await
            else {
                return stopped(&ctx);
            };
            undecrypted = left;
            undecrypted_changed |= undecrypted.len() != before;
        }
        // Saved only when it changed: a list that merely waits is not rewritten every sync.
        if undecrypted_changed {
            let text = serde_json::to_string(&undecrypted).unwrap_or_else(|_| "[]".into());
            if !save(&ctx, UNDECRYPTED_KEY, &text).await {
                return stopped(&ctx);
            }
        }
        // Everything of this sync is stored: only now may the position move past it.
        if !save(&ctx, SINCE_KEY, &response.next_batch).await {
            return stopped(&ctx);
        }
        since = Some(response.next_batch);
    }
}

fn stopped(ctx: &ChannelContext) -> Result<(), ChannelError> {
    ctx.status.set(ChannelStatus::Stopped);
    Ok(())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The sync filter: `limit` events per room, members loaded lazily.
fn filter(limit: u32) -> FilterDefinition {
    let mut timeline = RoomEventFilter::with_lazy_loading();
    timeline.limit = Some(UInt::from(limit));
    let mut room = RoomFilter::with_lazy_loading();
    room.timeline = timeline;
    let mut filter = FilterDefinition::with_lazy_loading();
    filter.room = room;
    filter
}

/// Reads `key` from the state, trying again while the store is unavailable; `None` on
/// shutdown.
async fn load(ctx: &ChannelContext, key: &str) -> Option<Option<String>> {
    let mut backoff = STORE_BACKOFF;
    loop {
        match ctx.state.load(key).await {
            Ok(value) => return Some(value),
            Err(error) => tracing::warn!(%error, "matrix: cannot read {key}; trying again"),
        }
        if sleep_or_shutdown(&ctx.shutdown, backoff.next()).await {
            return None;
        }
    }
}

/// Saves `key`, trying again while the store is unavailable; false on shutdown.
async fn save(ctx: &ChannelContext, key: &str, value: &str) -> bool {
    let mut backoff = STORE_BACKOFF;
    loop {
        match ctx.state.save(key, value).await {
            Ok(()) => return true,
            Err(error) => tracing::warn!(%error, "matrix: cannot save {key}; trying again"),
        }
        if sleep_or_shutdown(&ctx.shutdown, backoff.next()).await {
            return false;
        }
    }
}

/// Hands `event` to the sink until it is stored; later events wait, so the order holds. False
/// on shutdown (the position is not saved, so the next start offers the event again).
async fn deliver(ctx: &ChannelContext, event: Inbound) -> bool {
    let mut backoff = STORE_BACKOFF;
    loop {
        let result = tokio::select! {
            _ = ctx.shutdown.cancelled() => return false,
            result = ctx.sink.deliver(event.clone()) => result,
        };
        match result {
            Ok(()) => return true,
            Err(error) => {
                tracing::warn!(%error, event = %event.platform_id, "matrix: the inbox refused an event; offering it again")
            }
        }
        if sleep_or_shutdown(&ctx.shutdown, backoff.next()).await {
            return false;
        }
    }
}

/// Delivers, oldest first, what every joined room received after the position `to` (or, without
/// one, since `not_before`): the inbox drops what it already has. False on shutdown.
async fn catch_up(
    channel: &MatrixChannel,
    client: &Client,
    own: &OwnedUserId,
    ctx: &ChannelContext,
    to: Option<&str>,
    not_before: Option<u64>,
) -> bool {
    for room in client.joined_rooms() {
        let mut events: Vec<TimelineEvent> = Vec::new();
        let mut from: Option<String> = None;
        for _ in 0..MAX_GAP_PAGES {
            let options = || {
                let mut options = MessagesOptions::backward().from(from.as_deref());
                options.to = to.map(str::to_owned);
                options.limit = UInt::from(100u32);
                options
            };
            let page = match messages(ctx, &room, options).await {
                None => return false,
                Some(Ok(page)) => page,
                Some(Err(error)) => {
                    tracing::warn!(room = %room.room_id(), %error, "matrix: cannot read back the messages since the last position");
                    break;
                }
            };
            let n = page.chunk.len();
            let older = not_before.is_some_and(|cutoff| {
                page.chunk
                    .last()
                    .and_then(|e| e.timestamp)
                    .is_some_and(|ts| u64::from(ts.0) < cutoff)
            });
            events.extend(page.chunk);
            match page.end {
                Some(end) if n > 0 && !older => from = Some(end),
                _ => break,
            }
        }
        events.reverse();
        let position = to.unwrap_or_default().to_owned();
        for event in events {
            match convert(channel, client, &room, own, ctx, &event, not_before).await {
                Converted::Deliver(inbound) => {
                    lock(&channel.replay).insert(inbound.platform_id.clone(), position.clone());
                    if !deliver(ctx, *inbound).await {
                        return false;
                    }
                }
                Converted::Undecryptable { .. } | Converted::Skip => {}
            }
        }
    }
    true
}

/// The events a limited sync left out: `/messages` backwards from the timeline's `prev_batch`
/// to the position the sync started from, oldest first. While the homeserver fails, the fetch
/// is tried again (the sync's position is not saved meanwhile, so nothing is skipped); a
/// refusal for good (hearth left the room) gives the gap up. `None` on shutdown.
async fn fill_gap(
    ctx: &ChannelContext,
    room: &Room,
    prev_batch: Option<&str>,
    since: &str,
) -> Option<Vec<TimelineEvent>> {
    let Some(mut from) = prev_batch.map(str::to_owned) else {
        return Some(Vec::new());
    };
    let mut gap = Vec::new();
    for _ in 0..MAX_GAP_PAGES {
        let options = || {
            let mut options = MessagesOptions::backward().from(from.as_str());
            options.to = Some(since.to_owned());
            options.limit = UInt::from(100u32);
            options
        };
        match messages(ctx, room, options).await? {
            Ok(page) => {
                let n = page.chunk.len();
                gap.extend(page.chunk);
                match page.end {
                    Some(end) if n > 0 => from = end,
                    _ => break,
                }
            }
            Err(error) => {
                tracing::warn!(room = %room.room_id(), %error, "matrix: the homeserver refused the messages a limited sync left out; they are skipped");
                break;
            }
        }
    }
    tracing::info!(room = %room.room_id(), events = gap.len(), "matrix: a limited sync left a gap; fetched it");
    gap.reverse();
    Some(gap)
}

/// One page of `/messages`, asked for again with doubling waits while the homeserver or the
/// network fails, with the channel reported as reconnecting meanwhile (and connected again once
/// the page came). `None` on shutdown; an error the homeserver means for good (403, 404) is
/// returned.
async fn messages(
    ctx: &ChannelContext,
    room: &Room,
    options: impl Fn() -> MessagesOptions,
) -> Option<Result<matrix_sdk::room::Messages, MatrixError>> {
    let mut backoff = SERVER_BACKOFF;
    let mut degraded = false;
    loop {
        let result = tokio::select! {
            _ = ctx.shutdown.cancelled() => return None,
            result = room.messages(options()) => result,
        };
        let error = match result {
            Ok(page) => {
                if degraded {
                    ctx.status.connected();
                }
                return Some(Ok(page));
            }
            Err(error) => MatrixError::sdk("reading back a room's messages", error),
        };
        let kind = error.kind_error();
        if !kind.is_temporary() {
            return Some(Err(error));
        }
        let step = backoff.next();
        tracing::warn!(room = %room.room_id(), %error, "matrix: cannot read back missed messages; trying again in {step:?}");
        ctx.status.reconnecting(format!(
            "cannot read back the messages missed in {} ({kind}); trying again",
            room.room_id()
        ));
        degraded = true;
        if sleep_or_shutdown(&ctx.shutdown, kind.retry_after().unwrap_or(step)).await {
            return None;
        }
    }
}

enum Converted {
    Deliver(Box<Inbound>),
    /// An encrypted event from `sender` that could be meant for hearth, as received.
    Undecryptable {
        sender: String,
        event: String,
    },
    Skip,
}

/// Adds an undecryptable event to the waiting list unless it is there already; at the caps the
/// sender's (or else the room's) oldest one makes room. Whether the list changed.
fn keep(list: &mut Vec<Undecrypted>, item: Undecrypted) -> bool {
    if list.iter().any(|u| u.event == item.event) {
        return false;
    }
    let same_sender = |u: &Undecrypted| u.room_id == item.room_id && u.sender == item.sender;
    let evict = if list.iter().filter(|u| same_sender(u)).count() >= MAX_UNDECRYPTED_PER_SENDER {
        list.iter().position(same_sender)
    } else if list.iter().filter(|u| u.room_id == item.room_id).count() >= MAX_UNDECRYPTED_PER_ROOM
    {
        list.iter().position(|u| u.room_id == item.room_id)
    } else {
        None
    };
    if let Some(i) = evict {
        tracing::info!(room = %item.room_id, sender = %item.sender, "matrix: too many undecryptable messages waiting; the oldest is given up");
        list.remove(i);
    }
    list.push(item);
    true
}

/// Whether the room is a DM: hearth and at most one other member.
fn is_dm(room: &Room) -> bool {
    room.joined_members_count() <= 2
}

/// Whether hearth serves `sender` here: the section's `allowed_users`, or the daemon's
/// identities (owner, allow list, paired users). When the daemon cannot tell (its database is
/// unavailable) the event is kept: the daemon checks the sender again before acting.
async fn serves(channel: &MatrixChannel, ctx: &ChannelContext, sender: &str) -> bool {
    if channel.settings.allowed_users.iter().any(|u| u == sender) {
        return true;
    }
    match ctx.allowlist.allows(sender).await {
        Ok(allowed) => allowed,
        Err(error) => {
            tracing::warn!(%error, %sender, "matrix: cannot tell whether the daemon serves a sender; keeping the event");
            true
        }
    }
}

/// Whether the device that sent `event` is cross-signed by its owner, as far as hearth's
/// crypto store can tell: a decrypted event whose session links it to a device its owner
/// signed. An unencrypted event proves no device at all.
async fn device_verified(client: &Client, event: &TimelineEvent) -> bool {
    let Some(info) = event.encryption_info() else {
        return false;
    };
    match &info.verification_state {
        // Signed by its owner; whether hearth verified the owner plays no part.
        VerificationState::Verified
        | VerificationState::Unverified(VerificationLevel::UnverifiedIdentity) => true,
        // Not signed when the event was decrypted: it may have been since (the owner
        // cross-signed it meanwhile), which the store knows after its next key query.
        VerificationState::Unverified(VerificationLevel::UnsignedDevice) => {
            let Some(device_id) = info.sender_device.as_deref() else {
                return false;
            };
            match client
                .encryption()
                .get_device(&info.sender, device_id)
                .await
            {
                Ok(Some(device)) => device.is_cross_signed_by_owner(),
                Ok(None) => false,
                Err(error) => {
                    tracing::warn!(%error, "matrix: cannot read a sender's device from the crypto store");
                    false
                }
            }
        }
        // A device hearth cannot link to the sender, a changed identity, a mismatched sender.
        VerificationState::Unverified(_) => false,
    }
}

/// One timeline event as hearth sees it.
async fn convert(
    channel: &MatrixChannel,
    client: &Client,
    room: &Room,
    own: &OwnedUserId,
    ctx: &ChannelContext,
    event: &TimelineEvent,
    skip_before: Option<u64>,
) -> Converted {
    let json: Value = match serde_json::from_str(event.raw().json().get()) {
        Ok(json) => json,
        Err(error) => {
            tracing::warn!(%error, "matrix: an event that is not JSON; skipped");
            return Converted::Skip;
        }
    };
    let (Some(event_id), Some(sender)) = (json["event_id"].as_str(), json["sender"].as_str())
    else {
        return Converted::Skip;
    };
    if sender == own.as_str() {
        return Converted::Skip;
    }
    if let Some(cutoff) = skip_before
        && json["origin_server_ts"]
            .as_u64()
            .is_some_and(|ts| ts < cutoff)
    {
        tracing::debug!(event = %event_id, "matrix: history before the first start; skipped");
        return Converted::Skip;
    }
    if let TimelineEventKind::UnableToDecrypt { event, .. } = &event.kind {
        // Kept to be tried again only when it could be meant for hearth: in a DM, or from
        // someone hearth serves (group rooms are full of members hearth never answers).
        if !is_dm(room) && !serves(channel, ctx, sender).await {
            tracing::debug!(event = %event_id, %sender, "matrix: an undecryptable event in a group room from a sender hearth does not serve; skipped");
            return Converted::Skip;
        }
        return Converted::Undecryptable {
            sender: sender.to_owned(),
            event: event.json().get().to_owned(),
        };
    }
    // With `require_verified_devices`, a sender whose device is not cross-signed by its owner
    // (or whose event was not encrypted, which proves no device) is unverified: the daemon
    // treats them as a stranger, whatever account they claim.
    let verified =
        !channel.settings.require_verified_devices || device_verified(client, event).await;
    if !verified {
        tracing::info!(event = %event_id, %sender, "matrix: the sender's device is not cross-signed by its owner; delivered as unverified");
    }
    let who = if verified {
        Sender::new(sender)
    } else {
        Sender::new(sender).unverified()
    };
    let inbound = |chat: ChatRef, kind: InboundKind| {
        Converted::Deliver(Box::new(Inbound {
            platform_id: event_id.to_owned(),
            chat,
            sender: who.clone(),
            kind,
            reply_context: None,
        }))
    };
    let content = &json["content"];
    let chat = ChatRef::new(room.room_id().to_string());
    let Some(reading) = read_event(&json, event_id) else {
        return Converted::Skip;
    };
    let chat = match reading.thread() {
        Some(root) => chat.with_thread(root),
        None => chat,
    };
    match reading {
        Reading::Reaction { target, .. } => {
            // In a group room only a reaction on one of hearth's prompts is for hearth.
            if !is_dm(room) && !is_prompt(channel, target).await {
                return Converted::Skip;
            }
        }
        Reading::Edit { .. } => {
            // In a group room only the edits of people hearth serves matter.
            if !is_dm(room) && !serves(channel, ctx, sender).await {
                return Converted::Skip;
            }
        }
        Reading::Message { text, reply_to, .. } => {
            if !is_dm(room) && !addressed(room, own, content, reply_to).await {
                return Converted::Skip;
            }
            if let Some(target) = reply_to
                && let Some(emoji) = decision_emoji(text)
                && is_prompt(channel, target).await
            {
                return inbound(
                    chat,
                    InboundKind::Reaction {
                        message_id: target.to_owned(),
                        emoji: emoji.to_owned(),
                    },
                );
            }
        }
    }
    inbound(chat, reading.event(content, event_id))
}

/// What a timeline event is to hearth, read from its JSON alone. The checks that need the room,
/// the store or the homeserver (is it a DM, one of hearth's prompts, a sender hearth serves, a
/// reply to hearth) come after it, in [`convert`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Reading<'a> {
    /// An `m.annotation` reaction with `key` on `target`.
    Reaction { target: &'a str, key: &'a str },
    /// An `m.replace` edit of `original` to `text`.
    Edit { original: &'a str, text: &'a str },
    /// A text or file message; `text` is its body without a reply's quoted fallback.
    Message {
        msgtype: &'a str,
        text: &'a str,
        /// The root of the thread it is in.
        thread: Option<&'a str>,
        /// The event it replies to (not a thread's fallback reply to its root).
        reply_to: Option<&'a str>,
    },
}

/// Reads `json`, an event of a room's timeline: `None` for what hearth never takes (other event
/// types, notices, a reaction or edit missing what it needs, a message without a text body).
pub(crate) fn read_event<'a>(json: &'a Value, event_id: &str) -> Option<Reading<'a>> {
    let content = &json["content"];
    let relates = &content["m.relates_to"];
    match json["type"].as_str() {
        Some("m.reaction") => {
            let (Some(target), Some(key)) = (relates["event_id"].as_str(), relates["key"].as_str())
            else {
                tracing::warn!(event = %event_id, "matrix: a reaction without a target or key; skipped");
                return None;
            };
            (relates["rel_type"] == "m.annotation").then_some(Reading::Reaction { target, key })
        }
        Some("m.room.message") => {
            if relates["rel_type"] == "m.replace" {
                let (Some(original), Some(text)) = (
                    relates["event_id"].as_str(),
                    content["m.new_content"]["body"].as_str(),
                ) else {
                    tracing::warn!(event = %event_id, "matrix: an edit without new content; skipped");
                    return None;
                };
                return Some(Reading::Edit { original, text });
            }
            let (Some(msgtype), Some(body)) =
                (content["msgtype"].as_str(), content["body"].as_str())
            else {
                tracing::warn!(event = %event_id, "matrix: a message without a text body; skipped");
                return None;
            };
            // Notices are what bots send (hearth's own replies are notices): answering another
            // bot's notice could start two bots talking forever.
            if msgtype == "m.notice" {
                tracing::debug!(event = %event_id, "matrix: a notice; skipped");
                return None;
            }
            let thread = (relates["rel_type"] == "m.thread")
                .then(|| relates["event_id"].as_str())
                .flatten();
            let falling_back = relates["is_falling_back"].as_bool().unwrap_or(false);
            let reply_to = relates["m.in_reply_to"]["event_id"]
                .as_str()
                .filter(|_| thread.is_none() || !falling_back);
            let text = if reply_to.is_some() {
                strip_reply_fallback(body)
            } else {
                body
            };
            Some(Reading::Message {
                msgtype,
                text,
                thread,
                reply_to,
            })
        }
        _ => None,
    }
}

impl<'a> Reading<'a> {
    /// The thread root of a message in a thread.
    pub(crate) fn thread(&self) -> Option<&'a str> {
        match self {
            Reading::Message { thread, .. } => *thread,
            _ => None,
        }
    }

    /// The event hearth takes this reading as; `content` is the event's content, for a file
    /// message's attachment.
    pub(crate) fn event(self, content: &Value, event_id: &str) -> InboundKind {
        match self {
            Reading::Reaction { target, key } => InboundKind::Reaction {
                message_id: target.to_owned(),
                emoji: key.to_owned(),
            },
            Reading::Edit { original, text } => InboundKind::Edit {
                message_id: original.to_owned(),
                text: text.to_owned(),
            },
            Reading::Message {
                msgtype,
                text,
                reply_to,
                ..
            } => {
                let (text, attachments) = match msgtype {
                    "m.file" | "m.image" | "m.audio" | "m.video" => {
                        attachment(content, msgtype, event_id)
                    }
                    _ => (text.to_owned(), Vec::new()),
                };
                InboundKind::Message {
                    text,
                    attachments,
                    message_id: Some(event_id.to_owned()),
                    reply_to: reply_to.map(str::to_owned),
                }
            }
        }
    }
}

/// Whether a message in a group room is meant for hearth: it mentions the bot (`m.mentions`,
/// its id in the text or a pill, or its localpart as a word) or replies to one of its messages.
async fn addressed(
    room: &Room,
    own: &OwnedUserId,
    content: &Value,
    reply_to: Option<&str>,
) -> bool {
    if mentions(own, content) {
        return true;
    }
    let Some(target) = reply_to.and_then(|id| EventId::parse(id).ok()) else {
        return false;
    };
    match room.event(&target, None).await {
        Ok(event) => event
            .raw()
            .get_field::<String>("sender")
            .ok()
            .flatten()
            .is_some_and(|sender| sender == own.as_str()),
        Err(error) => {
            tracing::warn!(%error, "matrix: cannot fetch the message a reply answers");
            false
        }
    }
}

/// Whether a message's `content` mentions hearth (`own`): in `m.mentions`, its id in the text
/// or a pill, or its localpart as a word.
pub(crate) fn mentions(own: &OwnedUserId, content: &Value) -> bool {
    let mentioned = content["m.mentions"]["user_ids"]
        .as_array()
        .is_some_and(|ids| ids.iter().any(|id| id.as_str() == Some(own.as_str())));
    if mentioned {
        return true;
    }
    let body = content["body"].as_str().unwrap_or_default();
    let html = content["formatted_body"].as_str().unwrap_or_default();
    if body.contains(own.as_str()) || html.contains(own.as_str()) {
        return true;
    }
    let localpart = own.localpart().to_lowercase();
    body.to_lowercase()
        .split(|c: char| !c.is_alphanumeric() && c != '_' && c != '-')
        .any(|word| word == localpart)
}

/// ✅ for a reply that only says approve/yes, ❌ for deny/no.
pub(crate) fn decision_emoji(text: &str) -> Option<&'static str> {
    let word = text
        .trim()
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase();
    match word.as_str() {
        "approve" | "approved" | "yes" => Some("✅"),
        "deny" | "denied" | "no" => Some("❌"),
        _ => None,
    }
}

async fn is_prompt(channel: &MatrixChannel, event_id: &str) -> bool {
    let Some(state) = channel.state() else {
        return false;
    };
    matches!(state.load(&prompt_key(event_id)).await, Ok(Some(_)))
}

/// The caption and the file of an `m.file`/`m.image`/… message, by reference: the file is not
/// downloaded here (see [`crate::media`]), so a stranger's files cost nothing. A file message
/// that names no file says so in the text.
fn attachment(content: &Value, msgtype: &str, event_id: &str) -> (String, Vec<Attachment>) {
    let body = content["body"].as_str().unwrap_or_default().to_owned();
    let filename = content["filename"].as_str().map(str::to_owned);
    // Spec: with a `filename` different from `body`, `body` is a caption.
    let caption = match &filename {
        Some(name) if *name != body => body.clone(),
        _ => String::new(),
    };
    let name = filename.or(Some(body)).filter(|n| !n.is_empty());
    let mime = content["info"]["mimetype"]
        .as_str()
        .unwrap_or("application/octet-stream")
        .to_owned();
    let kind = match msgtype {
        "m.image" => AttachmentKind::Image,
        "m.audio" => AttachmentKind::Voice,
        _ => AttachmentKind::Document,
    };
    let Some(source) = media::source_of(content) else {
        tracing::warn!(event = %event_id, "matrix: a file message without a file");
        let text = format!("{caption}\n[an attachment without a file]");
        return (text.trim().to_owned(), Vec::new());
    };
    let mut attachment = Attachment::remote(kind, mime, source);
    attachment.name = name;
    if let Some(size) = content["info"]["size"].as_u64() {
        attachment = attachment.with_size(size);
    }
    (caption, vec![attachment])
}

/// Tells the homeserver (and so the sender) that hearth read up to `event_id`, in the
/// background: a lost receipt changes nothing for hearth.
fn read_receipt(room: Room, event_id: String) {
    let span = tracing::info_span!("read_receipt", room = %room.room_id(), event = %event_id);
    tokio::spawn(
        async move {
            let Ok(event_id) = EventId::parse(&event_id) else {
                return;
            };
            if let Err(error) = room
                .send_single_receipt(ReceiptType::Read, ReceiptThread::Unthreaded, event_id)
                .await
            {
                tracing::debug!(%error, "matrix: a read receipt was not accepted");
            }
        }
        .instrument(span),
    );
}

/// Joins a room that someone hearth serves invited it to (the section's `allowed_users`, or
/// the daemon's identities: owner, allow list, paired users), trying again with doubling waits
/// (the homeserver may not have finished creating the room); declines other invites. While
/// the daemon cannot tell whom it serves, the invite waits.
async fn answer_invite(
    room: Room,
    allowed: Vec<String>,
    allowlist: ScopedAllowlist,
    shutdown: CancellationToken,
    handled: Arc<std::sync::Mutex<HashSet<matrix_sdk::ruma::OwnedRoomId>>>,
) {
    let inviter = match room.invite_details().await {
        Ok(invite) => invite.inviter_id.to_string(),
        Err(error) => {
            tracing::warn!(room = %room.room_id(), %error, "matrix: cannot tell who sent an invite");
            lock(&handled).remove(room.room_id());
            return;
        }
    };
    let mut backoff = SERVER_BACKOFF;
    let served = loop {
        if allowed.contains(&inviter) {
            break true;
        }
        match allowlist.allows(&inviter).await {
            Ok(served) => break served,
            Err(error) => {
                tracing::warn!(room = %room.room_id(), %inviter, %error, "matrix: cannot tell whether the daemon serves an inviter; asking again in {:?}", backoff.peek());
            }
        }
        if sleep_or_shutdown(&shutdown, backoff.next()).await {
            lock(&handled).remove(room.room_id());
            return;
        }
    };
    if !served {
        tracing::info!(room = %room.room_id(), %inviter, "matrix: declined an invite from someone hearth does not serve");
        if let Err(error) = room.leave().await {
            tracing::warn!(%error, "matrix: cannot decline the invite");
        }
        return;
    }
    let mut backoff = SERVER_BACKOFF;
    for attempt in 1..=JOIN_ATTEMPTS {
        match room.join().await {
            Ok(()) => {
                tracing::info!(room = %room.room_id(), %inviter, "matrix: joined a room on invitation");
                return;
            }
            Err(error) => {
                tracing::warn!(room = %room.room_id(), %error, "matrix: joining failed (attempt {attempt})")
            }
        }
        if sleep_or_shutdown(&shutdown, backoff.next()).await {
            break;
        }
    }
    // A later sync that shows the invite again tries again.
    lock(&handled).remove(room.room_id());
}

/// Imports the cross-signing keys and the backup key with the recovery key, so the device is
/// signed by its owner's identity and missed room keys can be read from the backup.
async fn recover(client: &Client, key: &str) {
    match client.encryption().recovery().recover(key).await {
        Ok(()) => tracing::info!("matrix: recovery key accepted; this device is cross-signed"),
        Err(error) => {
            tracing::warn!(%error, "matrix: the recovery key could not be used; the device stays unverified")
        }
    }
}

/// Tries the waiting encrypted events again; delivers those that decrypt and returns the rest
/// (dropping those older than a day). `None` on shutdown.
async fn retry_undecrypted(
    channel: &MatrixChannel,
    client: &Client,
    own: &OwnedUserId,
    ctx: &ChannelContext,
    waiting: Vec<Undecrypted>,
) -> Option<Vec<Undecrypted>> {
    let mut left = Vec::new();
    for item in waiting {
        let room = RoomId::parse(&item.room_id)
            .ok()
            .and_then(|id| client.get_room(&id));
        let Some(room) = room else {
            continue;
        };
        let Ok(raw) = Raw::from_json_string(item.event.clone()) else {
            continue;
        };
        let decrypted = match room.decrypt_event(&raw, None).await {
            Ok(event) if !matches!(event.kind, TimelineEventKind::UnableToDecrypt { .. }) => event,
            _ => {
                if now_ms().saturating_sub(item.seen_ms) < UNDECRYPTED_FOR.as_millis() as u64 {
                    left.push(item);
                } else {
                    tracing::warn!(room = %item.room_id, "matrix: a message stayed undecryptable for a day; given up");
                }
                continue;
            }
        };
        if let Converted::Deliver(inbound) =
            convert(channel, client, &room, own, ctx, &decrypted, None).await
        {
            tracing::info!(event = %inbound.platform_id, "matrix: a message decrypted after its key arrived");
            if !deliver(ctx, *inbound).await {
                return None;
            }
        }
    }
    Some(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(room: &str, sender: &str, n: usize) -> Undecrypted {
        Undecrypted {
            room_id: room.into(),
            sender: sender.into(),
            event: format!("{{\"event_id\":\"${room}{sender}{n}\"}}"),
            seen_ms: n as u64,
        }
    }

    #[test]
    fn the_waiting_list_is_capped_per_sender_and_per_room() {
        let mut list = Vec::new();
        for n in 0..1000 {
            assert!(keep(&mut list, item("!a", "@flood", n)));
        }
        assert_eq!(list.len(), MAX_UNDECRYPTED_PER_SENDER);
        assert_eq!(
            list[0].seen_ms,
            1000 - MAX_UNDECRYPTED_PER_SENDER as u64,
            "the oldest go first"
        );
        for sender in 0..50 {
            for n in 0..5 {
                keep(&mut list, item("!a", &format!("@s{sender}"), n));
            }
        }
        assert_eq!(
            list.iter().filter(|u| u.room_id == "!a").count(),
            MAX_UNDECRYPTED_PER_ROOM
        );
        // Another room has its own room.
        assert!(keep(&mut list, item("!b", "@me", 0)));
        assert_eq!(list.len(), MAX_UNDECRYPTED_PER_ROOM + 1);
        // The same event again changes nothing (and so is not saved again).
        assert!(!keep(&mut list, item("!b", "@me", 0)));
        assert_eq!(list.len(), MAX_UNDECRYPTED_PER_ROOM + 1);
    }

    #[test]
    fn lists_saved_before_senders_were_kept_still_load() {
        let old = r#"[{"room_id":"!a:hs","event":"{}","seen_ms":5}]"#;
        let list: Vec<Undecrypted> = serde_json::from_str(old).unwrap_or_default();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].sender, "");
    }
}
