//! `[context]`: how long conversations are kept within the model's window.

use serde::{Deserialize, Serialize};

use super::{Checks, Section};

/// `[context]`: how long conversations are kept within the model's window
/// (docs/long-conversations.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContextConfig {
    /// Older turns are summarised once a request would pass this share of the context window
    /// minus the answer's `max_tokens`.
    pub compact_at: f64,
    /// A compaction brings the request down to this share of the same, so the next one is
    /// several turns away.
    pub compact_to: f64,
    /// Turns kept word for word at most; fewer when they do not fit under `compact_to`, never
    /// fewer than the latest one.
    pub keep_turns: usize,
    /// The provider (by name) that writes summaries, e.g. a cheaper model; unset: the agent's.
    pub summary_provider: Option<String>,
    /// Seconds a summary may take before it is given up (and tried again later).
    pub summary_timeout_secs: u64,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            compact_at: 0.6,
            compact_to: 0.35,
            keep_turns: 6,
            summary_provider: None,
            summary_timeout_secs: 60,
        }
    }
}

/// A share of a whole: above 0 and at most 1.
pub(super) fn is_share(value: f64) -> bool {
    value.is_finite() && value > 0.0 && value <= 1.0
}

impl Section for ContextConfig {
    // `summary_provider` names a provider: validate.rs checks it against `[[providers]]`.
    fn check(&self, checks: &mut Checks<'_>) {
        if !is_share(self.compact_at) {
            checks.problem(
                "compact_at",
                "must be a share of the context window above 0 and at most 1, like 0.6",
            );
        }
        if !is_share(self.compact_to) || self.compact_to >= self.compact_at {
            checks.problem(
                "compact_to",
                "must be a share of the context window above 0 and below context.compact_at, like 0.35",
            );
        }
        if self.keep_turns == 0 {
            checks.problem(
                "keep_turns",
                "must be at least 1: the latest turn is always kept",
            );
        }
        if self.summary_timeout_secs == 0 {
            checks.problem("summary_timeout_secs", "must be greater than 0");
        }
    }
}
