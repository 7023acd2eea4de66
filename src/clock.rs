//! Time as the daemon sees it, so tests can run days of schedules and minutes of backoff in
//! milliseconds.
//!
//! Everything that waits (retry backoff, `Retry-After`, outbox delays) or compares against "now"
//! (sticky agents, expiries) goes through [`Clock`]. Production uses [`SystemClock`]; tests use
//! [`ManualClock`], whose `sleep` advances its own time instead of waiting.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

#[async_trait]
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;
    async fn sleep(&self, duration: Duration);

    /// Milliseconds since the Unix epoch; the unit timestamps are stored in.
    fn now_ms(&self) -> i64 {
        self.now().timestamp_millis()
    }
}

pub type SharedClock = Arc<dyn Clock>;

/// The real wall clock and tokio's timer.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

#[async_trait]
impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

/// A clock that only moves when told to, or when something sleeps on it.
///
/// `sleep` advances the clock by the requested duration and returns at once, and records the
/// duration so a test can assert on the waits (e.g. that `Retry-After: 7` made the client wait 7 s).
#[derive(Debug)]
pub struct ManualClock {
    inner: Mutex<ManualState>,
}

#[derive(Debug)]
struct ManualState {
    now: DateTime<Utc>,
    sleeps: Vec<Duration>,
}

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(ManualState {
                now: start,
                sleeps: Vec::new(),
            }),
        })
    }

    pub fn advance(&self, by: Duration) {
        let mut state = self.lock();
        state.now += chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
    }

    pub fn set(&self, to: DateTime<Utc>) {
        self.lock().now = to;
    }

    /// Every duration something slept on this clock, in order.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.lock().sleeps.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ManualState> {
        // A panic while holding this lock can only come from a test assertion; the state is
        // still consistent, so keep going.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        self.lock().now
    }

    async fn sleep(&self, duration: Duration) {
        {
            let mut state = self.lock();
            state.sleeps.push(duration);
            state.now += chrono::Duration::from_std(duration).unwrap_or(chrono::Duration::MAX);
        }
        // Let other tasks run, as a real sleep would.
        tokio::task::yield_now().await;
    }
}
