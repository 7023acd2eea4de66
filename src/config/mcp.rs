//! `[[mcp_servers]]`: Model Context Protocol servers whose tools hearth offers to agents, and
//! what makes a server's name usable as a tool group and a tool-name prefix.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::KNOWN_GROUPS;

/// Separates the server's name from the tool's in hearth's tool names (`ha__turn_on`).
pub const MCP_SEPARATOR: &str = "__";

/// Longest server name: leaves room for the tool's own name within the 64 characters.
const SERVER_NAME_MAX: usize = 24;

/// Checks a server name for `hearth check`: it names the tool group and prefixes tool names.
pub fn check_server_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if name.trim().is_empty() {
        return Err("must not be empty".into());
    }
    if !valid || name.contains(MCP_SEPARATOR) || name.ends_with('_') {
        return Err(format!(
            "`{name}` is not a valid server name: use lowercase letters, digits and single `_`, starting with a letter (it becomes the tool group and the prefix `{name}__` of its tools)"
        ));
    }
    if name.len() > SERVER_NAME_MAX {
        return Err(format!(
            "`{name}` is too long: at most {SERVER_NAME_MAX} characters, so its tools' names fit in 64"
        ));
    }
    if KNOWN_GROUPS.contains(&name) {
        return Err(format!(
            "`{name}` is the name of a built-in tool group; choose another name"
        ));
    }
    Ok(())
}

/// How risky an MCP tool is, as the user declares it in `[[mcp_servers]] risk`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum McpRisk {
    /// Only reads; never asks.
    Read,
    /// Changes the user's data; asks at autonomy `low` and below.
    Write,
    /// Deletes; asks at the default autonomy.
    Destructive,
    /// Acts on the world outside hearth; asks at the default autonomy.
    Outward,
}

/// One `[[mcp_servers]]` entry: a Model Context Protocol server whose tools agents may use,
/// either a program hearth starts (`command`, spoken to over stdin/stdout) or a streamable HTTP
/// endpoint (`url`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Unique; its tools are named `<name>__<tool>` and form the tool group `<name>`.
    pub name: String,
    /// `false` keeps the entry without starting the server.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// A stdio server: the program to start.
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables for the program (not secrets: they are shown by `hearth check`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Secret environment variables: variable name -> the name of the environment variable (or
    /// credential) holding its value.
    #[serde(default)]
    pub secrets_env: BTreeMap<String, String>,
    /// Working directory of the program; default: hearth's own.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// A streamable HTTP server: its endpoint, `http://` or `https://`.
    #[serde(default)]
    pub url: Option<String>,
    /// Extra HTTP headers sent with every request (not secrets).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Secret HTTP headers: header name -> the name of the environment variable (or credential)
    /// holding its value.
    #[serde(default)]
    pub headers_env: BTreeMap<String, String>,
    /// Sends `Authorization: Bearer <token>` with the token from this variable or credential.
    #[serde(default)]
    pub bearer_token_env: Option<String>,
    /// Seconds to start and initialize the server, to list its tools, and for one tool call.
    #[serde(default = "default_mcp_timeout")]
    pub timeout_secs: u64,
    /// Tool name patterns (`*` matches anything) to offer; empty offers every tool.
    #[serde(default)]
    pub enabled_tools: Vec<String>,
    /// Tool name patterns never offered, even when `enabled_tools` matches them.
    #[serde(default)]
    pub disabled_tools: Vec<String>,
    /// Tool name pattern -> risk. Unlisted tools are `read` when the server marks them read-only
    /// (`readOnlyHint`) and `outward` (asks first) otherwise. An exact name beats a pattern, a
    /// longer pattern a shorter one.
    #[serde(default)]
    pub risk: BTreeMap<String, McpRisk>,
}

fn default_mcp_timeout() -> u64 {
    30
}

fn default_true() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_must_make_valid_groups_and_prefixes() {
        assert!(check_server_name("homeassistant").is_ok());
        assert!(check_server_name("git_2").is_ok());
        for bad in ["", "Home", "2fa", "a__b", "trailing_", "with-dash", "tasks"] {
            assert!(check_server_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_server_name(&"a".repeat(25)).is_err());
    }
}
