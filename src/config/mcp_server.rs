//! `[mcp_server]`: hearth as an MCP server on `daemon.http_listen` (`/mcp`), for the owner's
//! other AI tools (docs: README, "hearth as an MCP server"). `hearth mcp serve` (stdio) needs
//! none of it.

use serde::{Deserialize, Serialize};

use super::{Checks, Section};

/// `[mcp_server]`: whether `/mcp` is served.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpServeConfig {
    /// Serve streamable HTTP at `/mcp` (tokens of the HTTP channel as `Bearer`).
    pub enabled: bool,
}

impl Section for McpServeConfig {
    fn check(&self, _checks: &mut Checks<'_>) {
        // One switch; what it needs from other sections is checked in validate.rs.
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
