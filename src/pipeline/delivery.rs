//! The delivery worker: takes replies from the outbox to the platforms, in order per chat,
//! retrying temporary failures with backoff and waiting as long as a rate limit says.
//!
//! A reply is shown as the parts of its outbound plan (`hearth_channel::plan`: split at the
//! platform's limit, the first part quoting and replacing the preview, the last carrying the
//! buttons), one `send` per part. Each part is recorded as the platform accepts it, so a retry
//! resumes at the part that failed and a restart at the first part not yet sent; only a part in
//! flight when the process died can show twice, and it is flagged in doubt.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_channel::{
    Backoff, Channel, ChannelError, OutboundMessage, plan, plan_edit, sleep_or_shutdown,
};
use rand::Rng;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::Channels;
use super::handler::Handler;
use crate::clock::SharedClock;
use crate::metrics::Metrics;
use crate::store::{OutboxItem, OutboxKind, OutboxPart, PartStatus, Store};

/// Rows read per pass; a backlog larger than this drains over several passes.
const BATCH: usize = 1_000;
/// Longest wait between retries of one row.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// Temporary failures after which a reply is given up (with five-minute waits: about four hours).
const MAX_ATTEMPTS: i64 = 60;
/// How often the worker looks again when nothing woke it.
const IDLE_POLL: Duration = Duration::from_secs(1);
/// First and longest wait between tries to record a delivery's progress (a full disk).
const RECORD_RETRY_FIRST: Duration = Duration::from_millis(250);
const RECORD_RETRY_MAX: Duration = Duration::from_secs(30);

/// A chat's lane while it runs.
struct Lane {
    /// The id of the newest row it was given.
    newest: i64,
    /// A pass found a row newer than that.
    missed: bool,
}

pub struct Delivery {
    pub store: Store,
    pub clock: SharedClock,
    pub channels: Channels,
    pub metrics: Arc<Metrics>,
    /// Notified when rows are committed.
    pub wake: Arc<Notify>,
    pub tracker: TaskTracker,
    /// Cancelled when hearth stops: a lane waiting to record its progress gives up then.
    shutdown: CancellationToken,
    /// Told how each answer ended, so a scheduled run whose answer was refused fails.
    handler: Arc<Handler>,
    /// The chats with a lane running: the newest row handed to the lane, and whether a pass
    /// found a newer row of theirs meanwhile (the lane will not see it: it was read before).
    in_flight: Mutex<HashMap<String, Lane>>,
    /// When each message edited by revisions (a turn's plan, by its outbox id) was last edited:
    /// its edits keep their pace even when the worker finds two of them late.
    revised: Mutex<HashMap<i64, std::time::Instant>>,
}

impl Delivery {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Store,
        clock: SharedClock,
        channels: Channels,
        metrics: Arc<Metrics>,
        wake: Arc<Notify>,
        tracker: TaskTracker,
        shutdown: CancellationToken,
        handler: Arc<Handler>,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            clock,
            channels,
            metrics,
            wake,
            tracker,
            shutdown,
            handler,
            in_flight: Mutex::new(HashMap::new()),
            revised: Mutex::new(HashMap::new()),
        })
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<String, Lane>> {
        self.in_flight
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Delivers until hearth stops; then lets the lanes in flight finish their current message.
    pub async fn run(self: Arc<Self>) {
        let shutdown = self.shutdown.clone();
        loop {
            let wait = match self.pass().await {
                Ok(wait) => wait,
                Err(err) => {
                    tracing::error!(error = %err, "reading the outbox failed");
                    IDLE_POLL
                }
            };
            tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
                () = shutdown.cancelled() => return,
            }
        }
    }

    fn revised(&self) -> std::sync::MutexGuard<'_, HashMap<i64, std::time::Instant>> {
        self.revised
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How long the next edit of message `message` waits for the pace of plan edits.
    fn revision_wait(&self, message: i64) -> Duration {
        let pace = crate::runtime::plan::EDIT_INTERVAL;
        let mut revised = self.revised();
        // Only recent edits matter; the map stays as small as the chats being edited now.
        revised.retain(|_, at| at.elapsed() < pace);
        revised
            .get(&message)
            .map_or(Duration::ZERO, |at| pace.saturating_sub(at.elapsed()))
    }

    /// Starts a lane for every chat whose oldest pending row is due and not already being
    /// delivered; returns how long to wait before the next pass.
    async fn pass(self: &Arc<Self>) -> Result<Duration, crate::store::StoreError> {
        // Only this process's channels: another hearth process delivers its own rows.
        let names: Vec<String> = self.channels.keys().cloned().collect();
        let rows = self.store.pending_outbox(BATCH, &names).await?;
        let now = self.clock.now_ms();
        let mut lanes: Vec<(String, VecDeque<(OutboxItem, i64)>)> = Vec::new();
        // Where each chat's lane is in `lanes`: a backlog has many chats.
        let mut lane_of: HashMap<String, usize> = HashMap::new();
        for (item, due) in rows {
            match lane_of.get(&item.chat_key) {
                Some(&at) => lanes[at].1.push_back((item, due)),
                None => {
                    lane_of.insert(item.chat_key.clone(), lanes.len());
                    lanes.push((item.chat_key.clone(), VecDeque::from([(item, due)])));
                }
            }
        }
        let mut wait = IDLE_POLL;
        for (key, lane) in lanes {
            let first_due = lane.front().map_or(now, |(_, due)| *due);
            if first_due > now {
                wait = wait.min(Duration::from_millis(
                    u64::try_from(first_due - now).unwrap_or(0),
                ));
                continue;
            }
            let newest = lane.back().map_or(0, |(item, _)| item.id);
            if let Some(running) = self.in_flight().get_mut(&key) {
                // Rows the lane has already (still pending until it takes them) are not missed:
                // a pass for them would find them again, and again.
                running.missed |= newest > running.newest;
                continue;
            }
            self.in_flight().insert(
                key.clone(),
                Lane {
                    newest,
                    missed: false,
                },
            );
            let this = self.clone();
            let span = tracing::info_span!("lane", chat = %key.replace('\u{1f}', ":"));
            self.tracker.spawn(
                async move {
                    let delivered_all = this.deliver_lane(lane).await;
                    // A lane that delivered all it was given needs another pass only when one
                    // skipped this chat's newer rows while it ran (rows committed later wake
                    // the worker themselves). One that stopped at a row to retry needs a pass
                    // to time that retry.
                    let missed = this
                        .in_flight()
                        .remove(&key)
                        .is_some_and(|lane| lane.missed);
                    if missed || !delivered_all {
                        this.wake.notify_one();
                    }
                }
                .instrument(span),
            );
        }
        Ok(wait)
    }

    /// Delivers one chat's rows in order, stopping at the first that must wait. Says whether
    /// it delivered them all.
    async fn deliver_lane(&self, mut lane: VecDeque<(OutboxItem, i64)>) -> bool {
        while let Some((item, due)) = lane.pop_front() {
            if due > self.clock.now_ms() {
                return false;
            }
            if let OutboxKind::Revise { message } = item.kind {
                // A revision with a newer one of the same message due behind it is never shown:
                // after a rate limit's wait the chat gets the latest text in one edit, not every
                // step.
                let now = self.clock.now_ms();
                if lane
                    .iter()
                    .any(|(later, due)| later.kind == OutboxKind::Revise { message } && *due <= now)
                {
                    if !self
                        .record(item.id, || self.store.mark_outbox_sent(item.id, None, now))
                        .await
                    {
                        return false;
                    }
                    continue;
                }
                // The turn queues them paced; a pass that finds two at once keeps the pace.
                let wait = self.revision_wait(message);
                if !wait.is_zero() && sleep_or_shutdown(&self.shutdown, wait).await {
                    return false;
                }
            }
            let delivered = self.deliver(&item).await;
            if let OutboxKind::Revise { message } = item.kind {
                self.revised().insert(message, std::time::Instant::now());
            }
            if delivered.is_err() {
                return false;
            }
        }
        true
    }

    #[tracing::instrument(skip_all, fields(outbox_id = item.id, inbox_id = item.inbox_id))]
    async fn deliver(&self, item: &OutboxItem) -> Result<(), Stop> {
        let now = self.clock.now_ms();
        let Some(channel) = self.channels.get(&item.channel) else {
            let error = format!("channel {} is not configured", item.channel);
            tracing::error!(outbox_id = item.id, %error, "reply cannot be delivered");
            self.record(item.id, || self.store.mark_outbox_failed(item.id, &error))
                .await;
            self.refused(item, &error).await;
            return Ok(());
        };
        let capabilities = channel.capabilities();
        let mut message = item.message.clone();
        // The message this row edits; none for a new message. An outcome edits its prompt,
        // which is out by now: it is earlier in this chat's queue, and a queue waits for its
        // oldest row.
        let edits = match &item.kind {
            OutboxKind::Send => None,
            OutboxKind::Edit { target } => Some(target.clone()),
            OutboxKind::Outcome { prompt } => match self.store.outbox_message(*prompt).await {
                Ok(Some((prompt, Some(target)))) => {
                    message.text = format!("{}\n\n{}", prompt.text, message.text);
                    Some(target)
                }
                Ok(_) => {
                    let error = "its prompt was never delivered: there is nothing to show it on";
                    tracing::info!(
                        outbox_id = item.id,
                        error,
                        "a confirmation's outcome is not shown"
                    );
                    self.record(item.id, || self.store.mark_outbox_failed(item.id, error))
                        .await;
                    return Ok(());
                }
                Err(err) => {
                    tracing::warn!(outbox_id = item.id, error = %err, "cannot read the prompt to edit; will retry");
                    return Err(Stop);
                }
            },
            // A message never delivered cannot be edited: the revision goes out as a message.
            OutboxKind::Revise { message } => match self.store.outbox_message(*message).await {
                Ok(Some((_, target))) => target,
                Ok(None) => None,
                Err(err) => {
                    tracing::warn!(outbox_id = item.id, error = %err, "cannot read the message to revise; will retry");
                    return Err(Stop);
                }
            },
        };
        // Planned on every attempt (cheap, and replies are capped in length) but stored only the
        // first time: a resumed delivery sends the parts it planned then.
        let planned: Vec<String> = match edits {
            None => plan(&message, &capabilities)
                .into_iter()
                .map(|part| part.text)
                .collect(),
            Some(_) => Vec::new(),
        };
        let parts = match self
            .store
            .start_outbox_delivery(item.id, now, &planned)
            .await
        {
            Ok(Some(parts)) => parts,
            // Read before another lane took it, or waiting for a retry now: not this lane's.
            Ok(None) => return Err(Stop),
            Err(err) => {
                // Without the mark a crash during the send could not be told apart later; wait.
                tracing::warn!(outbox_id = item.id, error = %err, "cannot mark a delivery as started; will retry");
                return Err(Stop);
            }
        };
        message.delivery_id = Some(format!("hearth-{}", item.id));
        match edits {
            Some(target) => {
                let edit = plan_edit(&message, &capabilities);
                match channel.edit(&target, &edit).await {
                    Ok(()) => {
                        self.metrics.message_out(&item.channel);
                        self.record(item.id, || self.store.mark_outbox_sent(item.id, None, now))
                            .await;
                        Ok(())
                    }
                    Err(err) if !err.is_temporary() => {
                        if let OutboxKind::Revise { message: shown } = item.kind {
                            return self
                                .revise_as_new(item, channel.as_ref(), edit, shown, err)
                                .await;
                        }
                        self.failed(item, None, err).await
                    }
                    Err(err) => self.failed(item, None, err).await,
                }
            }
            None => {
                self.send_parts(item, channel.as_ref(), &message, parts)
                    .await
            }
        }
    }

    /// A revision whose edit the platform refused for good (the message was deleted, or is
    /// too old to edit) goes out as a new message, which later revisions of the same message
    /// edit instead.
    async fn revise_as_new(
        &self,
        item: &OutboxItem,
        channel: &dyn Channel,
        mut edit: OutboundMessage,
        shown: i64,
        err: ChannelError,
    ) -> Result<(), Stop> {
        tracing::info!(outbox_id = item.id, error = %err, "cannot edit the message; sending the new text as a message");
        edit.replaces = None;
        edit.reply_to = None;
        match channel.send(&edit).await {
            Ok(reference) => {
                let now = self.clock.now_ms();
                self.metrics.message_out(&item.channel);
                let id = reference.message_id.as_str();
                let moved = self
                    .record(item.id, || self.store.move_outbox_message(shown, id))
                    .await;
                if moved {
                    self.record(item.id, || {
                        self.store.mark_outbox_sent(item.id, Some(id), now)
                    })
                    .await;
                }
                Ok(())
            }
            Err(err) => self.failed(item, None, err).await,
        }
    }

    /// Sends the parts not yet sent, in order, recording each as the platform accepts it.
    async fn send_parts(
        &self,
        item: &OutboxItem,
        channel: &dyn Channel,
        message: &OutboundMessage,
        parts: Vec<OutboxPart>,
    ) -> Result<(), Stop> {
        let Some(first) = parts.iter().position(|p| p.status != PartStatus::Sent) else {
            // Every part was shown already: only a row whose write failed after the last part
            // (it is recorded with that part) gets here; finish it without sending anything.
            let last = parts.last().and_then(|p| p.platform_message_id.clone());
            let now = self.clock.now_ms();
            if self
                .record(item.id, || {
                    self.store.mark_outbox_sent(item.id, last.as_deref(), now)
                })
                .await
            {
                self.handler.answer_delivered(item.id);
            }
            return Ok(());
        };
        if first > 0 {
            tracing::info!(
                outbox_id = item.id,
                part = first + 1,
                parts = parts.len(),
                "resuming a split reply"
            );
        }
        for (position, stored) in parts.iter().enumerate().skip(first) {
            let part = &stored.part;
            let result = channel.send(&part.message(message)).await;
            let reference = match result {
                Ok(reference) => reference,
                Err(err) => return self.failed(item, Some((part.index, part.count)), err).await,
            };
            let next = parts.get(position + 1).map(|p| p.part.index);
            let now = self.clock.now_ms();
            // The next part waits until this one is recorded. Only when hearth stops first does
            // the part stay marked as in flight: the next start sends it again, flagged in doubt.
            let recorded = self
                .record(item.id, || {
                    self.store.record_part_sent(
                        item.id,
                        part.index,
                        &reference.message_id,
                        next,
                        now,
                    )
                })
                .await;
            if !recorded {
                return Err(Stop);
            }
        }
        self.metrics.message_out(&item.channel);
        self.handler.answer_delivered(item.id);
        Ok(())
    }

    /// Handles a refused send or edit: temporary failures wait and retry (from the same part),
    /// anything else fails the reply for good.
    async fn failed(
        &self,
        item: &OutboxItem,
        part: Option<(usize, usize)>,
        err: ChannelError,
    ) -> Result<(), Stop> {
        let now = self.clock.now_ms();
        self.metrics.delivery_error(&item.channel);
        let error = match part {
            Some((index, count)) if count > 1 => format!("part {} of {count}: {err}", index + 1),
            _ => err.to_string(),
        };
        if err.is_temporary() && item.attempts + 1 < MAX_ATTEMPTS {
            let delay = retry_delay(&err, item.attempts);
            let in_doubt = err.outcome_unknown;
            if in_doubt {
                // Sent with the same delivery id, which platforms that deduplicate honour;
                // elsewhere the chat may show this part twice.
                tracing::warn!(outbox_id = item.id, channel = %item.channel, %error, delay_ms = delay.as_millis() as u64, "delivery failed after the platform may have shown it; will retry, flagged in doubt");
            } else {
                tracing::warn!(outbox_id = item.id, channel = %item.channel, %error, delay_ms = delay.as_millis() as u64, "delivery failed; will retry");
            }
            let next = now + i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
            let (store, id, error) = (&self.store, item.id, &error);
            self.record(id, move || async move {
                match part {
                    Some((index, _)) => store.retry_part(id, index, error, next, in_doubt).await,
                    None => store.mark_outbox_retry(id, error, next, in_doubt).await,
                }
            })
            .await;
            // Later replies to this chat wait, so the chat sees them in order.
            return Err(Stop);
        }
        tracing::error!(outbox_id = item.id, channel = %item.channel, %error, "delivery failed for good");
        let (store, id, error) = (&self.store, item.id, &error);
        self.record(id, move || async move {
            match part {
                Some((index, _)) => store.fail_part(id, index, error).await,
                None => store.mark_outbox_failed(id, error).await,
            }
        })
        .await;
        self.refused(item, error).await;
        Ok(())
    }

    /// A reply refused for good may be a scheduled run's answer: the run then fails.
    async fn refused(&self, item: &OutboxItem, error: &str) {
        // Only a reply to an inbox entry can be a run's answer; notices answer nothing.
        if item.inbox_id.is_none() || item.kind != OutboxKind::Send {
            return;
        }
        if let Err(err) = self.handler.answer_refused(item.id, error).await {
            tracing::error!(outbox_id = item.id, error = %err, "cannot record that a scheduled run's answer was refused");
        }
    }

    /// Records a delivery's progress, trying again with growing waits while the store refuses
    /// (a full disk) until it succeeds or hearth stops; false when it stopped first.
    ///
    /// The lane waits meanwhile, so the chat's later replies stay behind this one. Giving up at
    /// once would leave the row marked in flight, untouched until a restart.
    async fn record<W>(&self, outbox_id: i64, mut write: impl FnMut() -> W) -> bool
    where
        W: Future<Output = Result<(), crate::store::StoreError>> + Send,
    {
        let mut backoff = Backoff::new(RECORD_RETRY_FIRST, RECORD_RETRY_MAX);
        loop {
            let err = match write().await {
                Ok(()) => return true,
                Err(err) => err,
            };
            let wait = backoff.next();
            tracing::error!(outbox_id, error = %err, retry_in_ms = wait.as_millis() as u64, "recording a delivery failed; trying again");
            if sleep_or_shutdown(&self.shutdown, wait).await {
                return false;
            }
        }
    }
}

struct Stop;

/// The platform's `retry_after` when it gave one, else exponential backoff with jitter.
pub fn retry_delay(err: &ChannelError, attempts: i64) -> Duration {
    if let Some(after) = err.retry_after() {
        return after.min(MAX_BACKOFF);
    }
    let exp = u32::try_from(attempts.clamp(0, 16)).unwrap_or(16);
    let base = Duration::from_millis(500)
        .saturating_mul(2u32.saturating_pow(exp))
        .min(MAX_BACKOFF);
    let jitter = rand::rng().random_range(0.8..1.2);
    base.mul_f64(jitter).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limits_wait_as_told_and_other_errors_back_off() {
        let limited = ChannelError::rate_limited(Duration::from_secs(7));
        assert_eq!(retry_delay(&limited, 3), Duration::from_secs(7));
        let transient = ChannelError::transient("timeout");
        let first = retry_delay(&transient, 0);
        assert!(
            first >= Duration::from_millis(400) && first <= Duration::from_millis(600),
            "{first:?}"
        );
        assert!(retry_delay(&transient, 40) <= MAX_BACKOFF);
    }
}
