//! Runs inbox entries: one ordered queue per conversation, conversations in parallel up to a
//! bound, so a slow model in one chat never holds up another.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::handler::Handler;
use crate::health::Health;
use crate::store::InboxEntry;

#[derive(Default)]
struct State {
    /// Each conversation's entries in order, with the entry itself when its submitter had it
    /// (the sink, which just stored it).
    queues: HashMap<String, VecDeque<(i64, Option<InboxEntry>)>>,
    /// Conversations with a worker task.
    active: HashSet<String>,
    /// Every queued or running entry, so a second submission of one is ignored.
    known: HashSet<i64>,
    /// The inbox entry each conversation is running, and the token that cancels it.
    running: HashMap<String, (i64, CancellationToken)>,
    /// `/cancel` entries that stopped a running turn (their own reply is then not needed).
    cancelled_something: HashSet<i64>,
}

pub struct Dispatcher {
    state: Mutex<State>,
    permits: Arc<Semaphore>,
    handler: Arc<Handler>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    health: Health,
}

/// How often an entry whose handling hit a database error is tried before it is set aside.
/// Errors that mean the database cannot be written right now (a full disk, a read-only file)
/// do not count: such an entry is tried until it goes through, so it is answered once space is
/// back without a restart.
const MAX_HANDLE_ATTEMPTS: u32 = 5;
/// The longest wait between two tries of an entry the database cannot take yet. Each try of a
/// turn may call the model again (its answer could not be stored), so the tries thin out.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);
/// The write path name under which handling failures appear in `/healthz`.
pub const TURNS_PATH: &str = "turns";

impl Dispatcher {
    pub fn new(
        handler: Arc<Handler>,
        max_concurrent: usize,
        tracker: TaskTracker,
        shutdown: CancellationToken,
        health: Health,
    ) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            permits: Arc::new(Semaphore::new(max_concurrent.max(1))),
            handler,
            tracker,
            shutdown,
            health,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues an entry behind the others of its conversation. A `/cancel` also stops the
    /// conversation's running turn right away.
    pub fn submit(self: &Arc<Self>, id: i64, key: String, is_cancel: bool) {
        self.queue(id, None, key, is_cancel);
    }

    /// Queues an entry the caller has just stored, as [`Dispatcher::submit`]: its first try
    /// takes it as it is instead of reading it back, and looks for no earlier turn.
    pub fn submit_stored(self: &Arc<Self>, entry: InboxEntry, key: String, is_cancel: bool) {
        self.queue(entry.id, Some(entry), key, is_cancel);
    }

    fn queue(self: &Arc<Self>, id: i64, entry: Option<InboxEntry>, key: String, is_cancel: bool) {
        let spawn = {
            let mut state = self.lock();
            if is_cancel && let Some((_, token)) = state.running.get(&key) {
                token.cancel();
                state.cancelled_something.insert(id);
            }
            if !state.known.insert(id) {
                return;
            }
            state
                .queues
                .entry(key.clone())
                .or_default()
                .push_back((id, entry));
            state.active.insert(key.clone())
        };
        if spawn {
            let this = self.clone();
            let span = tracing::info_span!("conversation", key = %key.replace('\u{1f}', ":"));
            self.tracker
                .spawn(async move { this.work(key).await }.instrument(span));
        }
    }

    /// Cancels every running turn for good, as `/cancel` would (`hearth chat` on Ctrl-C);
    /// returns how many there were.
    pub fn cancel_running(&self) -> usize {
        let state = self.lock();
        for (_, token) in state.running.values() {
            token.cancel();
        }
        state.running.len()
    }

    /// Cancels the entry the conversation `key` is running now (a background task's run, for
    /// `/cancel N`); false when it runs none.
    pub fn cancel_conversation(&self, key: &str) -> bool {
        match self.lock().running.get(key) {
            Some((_, token)) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// The inbox entry the conversation `key` is running now, if any: a `/cancel` stops it only
    /// when it comes from the same person or the owner.
    pub fn running_entry(&self, key: &str) -> Option<i64> {
        self.lock().running.get(key).map(|(id, _)| *id)
    }

    /// Whether a `/cancel` entry stopped a running turn.
    pub fn took_cancel(&self, id: i64) -> bool {
        self.lock().cancelled_something.remove(&id)
    }

    async fn work(self: Arc<Self>, key: String) {
        loop {
            let permit = tokio::select! {
                permit = self.permits.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => return, // the semaphore is never closed; nothing left to do if it is
                },
                () = self.shutdown.cancelled() => {
                    self.lock().active.remove(&key);
                    return;
                }
            };
            let next = {
                let mut state = self.lock();
                match state.queues.get_mut(&key).and_then(VecDeque::pop_front) {
                    Some((id, entry)) => {
                        // Not a child of shutdown: stopping the daemon suspends a turn, while
                        // this token cancels it for good.
                        let token = CancellationToken::new();
                        state.running.insert(key.clone(), (id, token.clone()));
                        Some((id, entry, token))
                    }
                    None => {
                        state.queues.remove(&key);
                        state.active.remove(&key);
                        None
                    }
                }
            };
            let Some((id, entry, cancel)) = next else {
                return;
            };
            self.handle_with_retries(id, entry, cancel).await;
            drop(permit);
            let mut state = self.lock();
            state.running.remove(&key);
            state.known.remove(&id);
        }
    }

    /// Handles entry `id` (`entry` is it as just stored, for the first try only: a retry reads
    /// it back, and resumes the turn the failed try may have started).
    async fn handle_with_retries(
        &self,
        id: i64,
        mut entry: Option<InboxEntry>,
        cancel: CancellationToken,
    ) {
        let mut attempt: u32 = 0;
        // Tries that failed for another reason than an unwritable database.
        let mut other_failures = 0;
        loop {
            attempt = attempt.saturating_add(1);
            let err = match self.handler.handle(id, entry.take(), &cancel, self).await {
                Ok(()) => {
                    self.health.clear_fault(TURNS_PATH);
                    return;
                }
                Err(err) => err,
            };
            let unavailable = err.is_unavailable();
            if unavailable {
                self.health.set_fault(TURNS_PATH, &err.reason());
            } else {
                other_failures += 1;
            }
            if other_failures < MAX_HANDLE_ATTEMPTS && !self.shutdown.is_cancelled() {
                let wait = Duration::from_millis(200)
                    .saturating_mul(2u32.saturating_pow(attempt.min(16)))
                    .min(MAX_RETRY_WAIT);
                if unavailable {
                    tracing::warn!(inbox_id = id, attempt, error = %err, wait_secs = wait.as_secs_f64(), "cannot store the handling of an entry; retrying until the database takes writes again");
                } else {
                    tracing::warn!(inbox_id = id, attempt, error = %err, "handling failed; retrying");
                }
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = self.shutdown.cancelled() => return,
                }
                continue;
            }
            // Left pending in the inbox: the next start tries it again.
            tracing::error!(inbox_id = id, error = %err, "handling failed; leaving the entry for the next start");
            return;
        }
    }

    /// Entries queued or running, for `/healthz`.
    pub fn queued(&self) -> usize {
        self.lock().known.len()
    }
}
