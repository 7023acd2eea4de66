//! What `/healthz` reports: each channel's state and the write paths that cannot store right
//! now. Process-wide state that the channel supervisors and the pipeline write and the HTTP
//! endpoint reads, like [`crate::metrics`]; a leaf, so none of its writers reach up into the
//! wiring.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hearth_channel::ChannelStatus;

/// The state of one channel, as `/healthz` reports it: `connecting` (the first login is under
/// way), `connected` (the platform accepted the login), `reconnecting` (with the error that
/// interrupted it), `failed` (with the reason; it stays off until the next start) or `stopped`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ChannelHealth {
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What `/healthz` reports: each channel's state, and the write paths that cannot store right
/// now (the inbox on a full disk …). Cheap to clone; all clones share one state.
#[derive(Clone, Default)]
pub struct Health {
    inner: Arc<Mutex<HealthState>>,
}

struct HealthState {
    channels: HashMap<String, ChannelHealth>,
    /// Channels that were connected at least once since start.
    ever_connected: HashSet<String>,
    /// The current error of each failing write path, by path ("inbox", "turns").
    faults: BTreeMap<String, String>,
    started: Instant,
}

impl Default for HealthState {
    fn default() -> Self {
        Self {
            channels: HashMap::new(),
            ever_connected: HashSet::new(),
            faults: BTreeMap::new(),
            started: Instant::now(),
        }
    }
}

/// How long after start a channel may take to connect for the first time before `/healthz`
/// answers 503: a login, a gateway handshake and a first sync take seconds; a minute without
/// one means nobody can reach hearth through it.
pub const FIRST_CONNECT_GRACE: Duration = Duration::from_secs(60);

impl Health {
    fn lock(&self) -> std::sync::MutexGuard<'_, HealthState> {
        // Plain data, updated in one step each: a panic elsewhere cannot leave it half-written.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a channel's state.
    pub fn set_channel(&self, name: &str, state: &'static str, error: Option<String>) {
        let mut health = self.lock();
        if state == ChannelStatus::Connected.as_str() {
            health.ever_connected.insert(name.to_owned());
        }
        health
            .channels
            .insert(name.to_owned(), ChannelHealth { state, error });
    }

    /// The channels that have not been connected once since start (stopped ones aside), and
    /// whether the first-connect grace ([`FIRST_CONNECT_GRACE`]) is over: hearth cannot be
    /// reached through them, and after the grace that makes it unhealthy.
    pub fn never_connected(&self) -> (Vec<String>, bool) {
        let health = self.lock();
        let mut names: Vec<String> = health
            .channels
            .iter()
            .filter(|(name, c)| {
                c.state != ChannelStatus::Stopped.as_str() && !health.ever_connected.contains(*name)
            })
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        (names, health.started.elapsed() >= FIRST_CONNECT_GRACE)
    }

    /// Pretends the daemon started `ago` earlier, for tests of the first-connect grace.
    pub fn started_ago(&self, ago: Duration) {
        let mut health = self.lock();
        if let Some(earlier) = Instant::now().checked_sub(ago) {
            health.started = earlier;
        }
    }

    /// Every channel's state, by name.
    pub fn channels(&self) -> HashMap<String, ChannelHealth> {
        self.lock().channels.clone()
    }

    /// Marks a write path failing with `reason`; `/healthz` answers 503 until it is cleared.
    /// Logged once when the path starts failing, not on every retry.
    pub fn set_fault(&self, path: &str, reason: &str) {
        let previous = self
            .lock()
            .faults
            .insert(path.to_owned(), reason.to_owned());
        if previous.is_none() {
            tracing::error!(
                path,
                reason,
                "cannot store; hearth is unhealthy until this passes"
            );
        }
    }

    /// Marks a write path working again.
    pub fn clear_fault(&self, path: &str) {
        if self.lock().faults.remove(path).is_some() {
            tracing::info!(path, "storing works again");
        }
    }

    /// The failing write paths as `path: reason`, sorted.
    pub fn faults(&self) -> Vec<String> {
        self.lock()
            .faults
            .iter()
            .map(|(path, reason)| format!("{path}: {reason}"))
            .collect()
    }
}

/// The one answer `/healthz` and the page's Status give about the whole daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every channel connected, the database answers, every write path stores.
    Ok,
    /// Working, but a channel has not connected yet within its first-connect grace.
    Degraded,
    /// A channel failed, the database does not answer, a write path cannot store, or a channel
    /// never connected within its grace: `/healthz` answers 503.
    Unhealthy,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Degraded => "degraded",
            Verdict::Unhealthy => "unhealthy",
        }
    }
}

impl Health {
    /// The verdict, given whether the database answered.
    pub fn verdict(&self, database_answers: bool) -> Verdict {
        let failed = self.channels().values().any(|c| c.state == FAILED);
        let (never_connected, grace_over) = self.never_connected();
        if failed
            || !database_answers
            || !self.faults().is_empty()
            || (!never_connected.is_empty() && grace_over)
        {
            Verdict::Unhealthy
        } else if !never_connected.is_empty() {
            Verdict::Degraded
        } else {
            Verdict::Ok
        }
    }
}

/// The state a channel that gave up is in (`ChannelStatus::Failed`).
const FAILED: &str = "failed";

impl From<&ChannelStatus> for ChannelHealth {
    fn from(status: &ChannelStatus) -> Self {
        Self {
            state: status.as_str(),
            error: status.reason().map(str::to_owned),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_listed_until_cleared() {
        let health = Health::default();
        assert!(health.faults().is_empty());
        health.set_fault("inbox", "database or disk is full");
        health.set_fault("inbox", "database or disk is full");
        health.set_fault("turns", "database or disk is full");
        assert_eq!(
            health.faults(),
            [
                "inbox: database or disk is full",
                "turns: database or disk is full"
            ]
        );
        health.clear_fault("inbox");
        assert_eq!(health.faults(), ["turns: database or disk is full"]);
    }

    #[test]
    fn one_verdict_from_channels_database_and_faults() {
        let health = Health::default();
        assert_eq!(health.verdict(true), Verdict::Ok);
        health.set_channel("telegram", "connecting", None);
        assert_eq!(health.verdict(true), Verdict::Degraded, "within its grace");
        health.started_ago(FIRST_CONNECT_GRACE);
        assert_eq!(health.verdict(true), Verdict::Unhealthy, "grace over");
        health.set_channel("telegram", "connected", None);
        assert_eq!(health.verdict(true), Verdict::Ok);
        assert_eq!(health.verdict(false), Verdict::Unhealthy, "database");
        health.set_fault("inbox", "database or disk is full");
        assert_eq!(health.verdict(true), Verdict::Unhealthy, "a write path");
        health.clear_fault("inbox");
        health.set_channel("telegram", FAILED, Some("token revoked".into()));
        assert_eq!(health.verdict(true), Verdict::Unhealthy, "a failed channel");
        assert_eq!(Verdict::Degraded.as_str(), "degraded");
    }
}
