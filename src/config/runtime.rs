//! `[runtime]`: limits of the agent runtime shared by all agents.

use serde::{Deserialize, Serialize};

use super::{Checks, Section};

/// Limits of the agent runtime shared by all agents.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeConfig {
    /// The composed system prompt is cut to this many characters (never the base prompt).
    pub max_prompt_chars: usize,
    /// Token budget of the conversation history sent to the model (estimated at 4 chars/token).
    pub history_tokens: usize,
    /// Seconds one tool call may run.
    pub tool_timeout_secs: u64,
    /// Stream replies and show them while they are generated, where the channel can.
    pub stream: bool,
    /// A turn whose model calls the same tool with the same arguments more often than this is
    /// stopped, with a message to the model and the user.
    pub max_repeated_calls: u32,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            max_prompt_chars: 24_000,
            history_tokens: 8_000,
            tool_timeout_secs: 30,
            stream: true,
            max_repeated_calls: 3,
        }
    }
}

impl Section for RuntimeConfig {
    fn check(&self, checks: &mut Checks<'_>) {
        if self.tool_timeout_secs == 0 {
            checks.problem("tool_timeout_secs", "must be greater than 0");
        }
        if self.max_repeated_calls == 0 {
            checks.problem("max_repeated_calls", "must be at least 1");
        }
    }
}
