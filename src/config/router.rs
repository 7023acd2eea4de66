//! `[router]`: which agent answers a message.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{Checks, Section};

/// The agents file inside `daemon.data_dir` when `router.agents_file` is not set.
pub const AGENTS_FILE_NAME: &str = "agents.toml";

/// `[router]`: which agent answers a message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RouterConfig {
    /// The agent for messages no trigger matches.
    pub default_agent: String,
    /// The agents file; when it does not exist the agents shipped in the binary are used.
    /// Default: `agents.toml` in `daemon.data_dir`.
    pub agents_file: PathBuf,
    /// Minutes a conversation keeps its agent without a new keyword match.
    pub sticky_minutes: u64,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            default_agent: "general".into(),
            agents_file: PathBuf::from("./data/agents.toml"),
            sticky_minutes: 30,
        }
    }
}

impl Section for RouterConfig {
    fn check(&self, checks: &mut Checks<'_>) {
        if self.default_agent.trim().is_empty() {
            checks.problem("default_agent", "must not be empty");
        }
    }
}
