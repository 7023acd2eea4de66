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
    Backoff, ChannelContext, ChannelError, ChannelStatus, Inbound, ScopedAllowlist,
    sleep_or_shutdown,
};
use matrix_sdk::config::{SyncSettings, SyncToken};
use matrix_sdk::deserialized_responses::{TimelineEvent, TimelineEventKind};
use matrix_sdk::room::MessagesOptions;
use matrix_sdk::ruma::api::client::filter::{FilterDefinition, RoomEventFilter, RoomFilter};
use matrix_sdk::ruma::api::client::receipt::create_receipt::v3::ReceiptType;
use matrix_sdk::ruma::api::client::sync::sync_events::v3::Filter;
use matrix_sdk::ruma::events::receipt::ReceiptThread;
use matrix_sdk::ruma::serde::Raw;
use matrix_sdk::ruma::{EventId, OwnedUserId, RoomId, UInt};
use matrix_sdk::{Client, Room};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::error::MatrixError;
use crate::inbound::{Converted, convert};
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
        recover(&client, key.expose()).await;
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
                        "{}; logging in again as a new device",
                        hearth_channel::error_chain(&error)
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
