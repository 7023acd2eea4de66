//! `[mcp_server]`: hearth as an MCP server on `daemon.http_listen` (`/mcp`), for the owner's
//! other AI tools (docs: README, "hearth as an MCP server"). `hearth mcp serve` (stdio) needs
//! none of it.

use serde::{Deserialize, Serialize};

use super::{Checks, Section};

/// `[mcp_server]`: whether `/mcp` is served, and how long a call waits for the owner's
/// approval before it answers with a handle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpServeConfig {
    /// Serve streamable HTTP at `/mcp` (tokens of the HTTP channel as `Bearer`).
    pub enabled: bool,
    /// How long a call that needs the owner's approval waits for the press before it answers
    /// "waiting for the owner's approval" with a handle for `check_approval` (over stdio and
    /// HTTP alike). Under the 60 s after which many clients give up on a call.
    pub inline_wait_secs: u64,
}

/// The most `inline_wait_secs` may be: an MCP request held open longer than this is one no
/// client waits for.
pub const MAX_INLINE_WAIT_SECS: u64 = 3_600;

impl Default for McpServeConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            inline_wait_secs: 50,
        }
    }
}

impl Section for McpServeConfig {
    fn check(&self, checks: &mut Checks<'_>) {
        // What `enabled` needs from other sections is checked in validate.rs.
        if !(1..=MAX_INLINE_WAIT_SECS).contains(&self.inline_wait_secs) {
            checks.problem(
                "inline_wait_secs",
                format!(
                    "must be between 1 and {MAX_INLINE_WAIT_SECS} seconds, like 50 (under the 60 s many MCP clients wait for a call)"
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::config::load_from_str;

    #[test]
    fn off_by_default_and_unknown_keys_are_refused() {
        let config =
            load_from_str("", "hearth.toml", &HashMap::new()).expect("an empty file loads");
        assert!(!config.mcp_server.enabled);
        assert_eq!(config.mcp_server.inline_wait_secs, 50);
        let errors = load_from_str(
            "[mcp_server]\nenabled = true\nport = 1\n",
            "hearth.toml",
            &HashMap::new(),
        )
        .expect_err("an unknown key is refused");
        assert!(
            errors.iter().any(|e| e.key.starts_with("mcp_server")),
            "{errors:?}"
        );
    }

    #[test]
    fn an_inline_wait_of_zero_or_hours_is_refused() {
        for bad in ["0", "3601"] {
            let errors = load_from_str(
                &format!("[mcp_server]\ninline_wait_secs = {bad}\n"),
                "hearth.toml",
                &HashMap::new(),
            )
            .expect_err("out of range");
            assert!(
                errors.iter().any(|e| e.key == "mcp_server.inline_wait_secs"
                    && e.message.contains("between 1 and 3600")),
                "{errors:?}"
            );
        }
        let config = load_from_str(
            "[mcp_server]\ninline_wait_secs = 5\n",
            "hearth.toml",
            &HashMap::new(),
        )
        .expect("a short wait loads");
        assert_eq!(config.mcp_server.inline_wait_secs, 5);
    }

    #[test]
    fn enabled_needs_the_http_channel() {
        let errors = load_from_str(
            "[mcp_server]\nenabled = true\n",
            "hearth.toml",
            &HashMap::new(),
        )
        .expect_err("no [channels.http]");
        let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["mcp_server.enabled"]);
        assert!(
            errors.iter().any(|e| e.message.contains("[channels.http]")),
            "{errors:?}"
        );
    }
}
