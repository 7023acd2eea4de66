//! `[[mcp_servers]]`: Model Context Protocol servers whose tools hearth offers to agents, and
//! what makes a server's name usable as a tool group and a tool-name prefix.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use hearth_channel::check_url;
use serde::{Deserialize, Serialize};
use toml::Value;

use super::load::Parse;
use super::{Checks, KNOWN_GROUPS, Section};

/// Separates the server's name from the tool's in hearth's tool names (`ha__turn_on`).
pub const MCP_SEPARATOR: &str = "__";

/// Longest server name: leaves room for the tool's own name within the 64 characters.
const SERVER_NAME_MAX: usize = 24;

/// Headers the MCP transport sets itself; a configured one would clash.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

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

impl Section for Vec<McpServerConfig> {
    fn parse(value: Value, parse: &mut Parse<'_>) -> Option<Self> {
        parse.array(value)
    }

    fn check(&self, checks: &mut Checks<'_>) {
        let mut seen = HashSet::new();
        for (i, server) in self.iter().enumerate() {
            let key = |field: &str| format!("[{i}].{field}");
            if let Err(message) = check_server_name(&server.name) {
                checks.problem(&key("name"), message);
            } else if !seen.insert(server.name.as_str()) {
                checks.problem(
                    &key("name"),
                    format!("duplicate MCP server name `{}`", server.name),
                );
            }
            if server.timeout_secs == 0 {
                checks.problem(&key("timeout_secs"), "must be greater than 0");
            }
            // Only the keys of the server's own kind make sense; the others would be ignored.
            let stdio_keys = [
                ("args", !server.args.is_empty()),
                ("env", !server.env.is_empty()),
                ("secrets_env", !server.secrets_env.is_empty()),
                ("cwd", server.cwd.is_some()),
            ];
            let http_keys = [
                ("headers", !server.headers.is_empty()),
                ("headers_env", !server.headers_env.is_empty()),
                ("bearer_token_env", server.bearer_token_env.is_some()),
            ];
            match (&server.command, &server.url) {
                (Some(_), Some(_)) => checks.problem(&key("url"),
                    "give either `command` (a program hearth starts) or `url` (an HTTP server), not both",
                ),
                (None, None) => checks.problem(&key("command"),
                    "missing: give `command` (a program hearth starts) or `url` (an HTTP server)",
                ),
                (Some(command), None) => {
                    if command.trim().is_empty() {
                        checks.problem(&key("command"), "must not be empty");
                    }
                    for (field, set) in http_keys {
                        if set {
                            checks.problem(&key(field),
                                "only applies to an HTTP server (`url`), not to a `command`",
                            );
                        }
                    }
                }
                (None, Some(address)) => {
                    if let Err(message) = check_url(address, &["http", "https"]) {
                        checks.problem(&key("url"), message);
                    }
                    for (field, set) in stdio_keys {
                        if set {
                            checks.problem(&key(field),
                                "only applies to a program hearth starts (`command`), not to a `url`",
                            );
                        }
                    }
                }
            }
            if let Some(cwd) = &server.cwd
                && !cwd.is_dir()
            {
                checks.problem(&key("cwd"), format!("{} is not a directory", cwd.display()));
            }
            for name in server.env.keys().chain(server.secrets_env.keys()) {
                if name.is_empty() || name.contains(['=', '\0']) {
                    checks.problem(
                        &key("env"),
                        format!("{name:?} is not an environment variable name"),
                    );
                }
            }
            for (name, secret_name) in &server.secrets_env {
                checks.secret(&format!("{}.{name}", key("secrets_env")), secret_name);
            }
            for name in server.headers.keys().chain(server.headers_env.keys()) {
                if RESERVED_HEADERS
                    .iter()
                    .any(|r| r.eq_ignore_ascii_case(name))
                {
                    checks.problem(
                        &key("headers"),
                        format!("{name} is set by hearth itself for the MCP protocol"),
                    );
                } else if server.bearer_token_env.is_some()
                    && name.eq_ignore_ascii_case("authorization")
                {
                    checks.problem(
                        &key("headers"),
                        "Authorization is set by `bearer_token_env`; give one or the other",
                    );
                }
            }
            for (name, value) in &server.headers {
                if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    checks.problem(
                        &key("headers"),
                        format!("{name:?} is not an HTTP header name"),
                    );
                }
                if http::HeaderValue::from_str(value).is_err() {
                    checks.problem(
                        &format!("{}.{name}", key("headers")),
                        "is not a valid HTTP header value (no line breaks or control characters)",
                    );
                }
            }
            for (name, secret_name) in &server.headers_env {
                if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    checks.problem(
                        &key("headers_env"),
                        format!("{name:?} is not an HTTP header name"),
                    );
                }
                checks.secret(&format!("{}.{name}", key("headers_env")), secret_name);
            }
            if let Some(name) = &server.bearer_token_env {
                checks.secret(&key("bearer_token_env"), name);
            }
            for (field, patterns) in [
                ("enabled_tools", &server.enabled_tools),
                ("disabled_tools", &server.disabled_tools),
            ] {
                for (j, pattern) in patterns.iter().enumerate() {
                    if pattern.trim().is_empty() {
                        checks.problem(
                            &format!("{}[{j}]", key(field)),
                            "must not be empty (use \"*\" for every tool)",
                        );
                    }
                }
            }
            for pattern in server.risk.keys() {
                if pattern.trim().is_empty() {
                    checks.problem(
                        &key("risk"),
                        "a tool pattern must not be empty (use \"*\" for every tool)",
                    );
                }
            }
        }
    }
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
