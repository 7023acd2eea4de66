//! `[tools]`: the tool catalogue's limits, the file workspace, web access and confirmations.

use std::path::PathBuf;

use hearth_channel::check_url;
use hearth_channel::net::Cidr;
use serde::{Deserialize, Serialize};

use super::{Checks, Section};

/// The file tools' directory inside `daemon.data_dir` when `tools.workspace_dir` is not set.
pub const WORKSPACE_DIR_NAME: &str = "workspace";

/// How much hearth may do without asking (docs/architecture.md, "Autonomy: what asks first"): which
/// tools need an Approve first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Autonomy {
    /// Every tool that changes anything asks first.
    None,
    /// Writes ask too, not only deletions and outward actions.
    Low,
    /// Deletions, outward actions (email, HTTP writes) and unattended schedules ask. The default.
    #[default]
    Medium,
    /// Only outward actions ask.
    High,
    /// Nothing asks. For people who read the audit log.
    Full,
}

/// The tool families an agent's `tool_groups` may name; an MCP server may not take one of these
/// names for its own group.
pub const KNOWN_GROUPS: &[&str] = &[
    "tasks",
    "notes",
    "memory",
    "expenses",
    "goals",
    "calendar",
    "contacts",
    "bookmarks",
    "utilities",
    "web",
    "files",
    "schedules",
    "weather",
    "feeds",
    "background",
    "email",
];

/// The tool catalogue: its limits, the file workspace, web access and confirmations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// The only directory the file tools can read and write. Default: `workspace` in
    /// `daemon.data_dir`.
    pub workspace_dir: PathBuf,
    /// Hosts or addresses (`nas.local`, `192.168.1.10`, `10.0.0.0/8`) the web tools may reach
    /// although they are private or loopback; everything else private is refused (SSRF).
    pub allowed_private_hosts: Vec<String>,
    /// Default autonomy for every user and agent.
    pub autonomy: Autonomy,
    /// Seconds an Approve / Deny prompt stays open.
    pub confirmation_timeout_secs: u64,
    /// Calls one user may make of one tool per minute.
    pub per_user_tool_calls_per_minute: u32,
    /// Tool calls per minute across everyone.
    pub global_calls_per_minute: u32,
    /// `[tools.web_search]`: where the `web_search` tool searches. Without it the tool tells
    /// the model that search is not set up.
    pub web_search: Option<WebSearchConfig>,
}

/// The search service behind the `web_search` tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchBackend {
    /// A SearXNG instance with its JSON API on (`search.formats` includes `json`).
    Searxng,
    /// Brave's Web Search API, with a subscription token.
    Brave,
}

/// `[tools.web_search]`. The owner writes the endpoint, so it is reached even when it is on
/// loopback or the LAN; the model only supplies the words to search for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSearchConfig {
    pub backend: SearchBackend,
    /// SearXNG: the instance, e.g. `http://127.0.0.1:8888` (required). Brave: defaults to
    /// `https://api.search.brave.com`.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Brave: the variable (or credential) holding the subscription token (required).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Results returned when the model does not ask for a number; at most 20.
    #[serde(default = "default_search_results")]
    pub max_results: u32,
}

/// The most results one search returns (Brave's own limit per request).
pub const MAX_SEARCH_RESULTS: u32 = 20;

fn default_search_results() -> u32 {
    8
}

impl WebSearchConfig {
    /// The endpoint's base URL, the backend's default filled in.
    pub fn base_url(&self) -> Option<&str> {
        match (&self.base_url, self.backend) {
            (Some(url), _) => Some(url.as_str()),
            (None, SearchBackend::Brave) => Some("https://api.search.brave.com"),
            (None, SearchBackend::Searxng) => None,
        }
    }
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            workspace_dir: PathBuf::from("./data/workspace"),
            allowed_private_hosts: Vec::new(),
            autonomy: Autonomy::Medium,
            confirmation_timeout_secs: 600,
            per_user_tool_calls_per_minute: 30,
            global_calls_per_minute: 300,
            web_search: None,
        }
    }
}

impl Section for ToolsConfig {
    fn check(&self, checks: &mut Checks<'_>) {
        for (key, value) in [
            ("confirmation_timeout_secs", self.confirmation_timeout_secs),
            (
                "per_user_tool_calls_per_minute",
                u64::from(self.per_user_tool_calls_per_minute),
            ),
            (
                "global_calls_per_minute",
                u64::from(self.global_calls_per_minute),
            ),
        ] {
            if value == 0 {
                checks.problem(key, "must be greater than 0");
            }
        }
        for (index, host) in self.allowed_private_hosts.iter().enumerate() {
            if host.trim().is_empty() || host.contains('/') && host.parse::<Cidr>().is_err() {
                checks.problem(
                    &format!("allowed_private_hosts[{index}]"),
                    format!("{host:?} is not a host name, address or CIDR range like 10.0.0.0/8"),
                );
            }
        }
        if let Some(search) = &self.web_search {
            search.check(checks);
        }
    }
}

impl WebSearchConfig {
    /// `[tools.web_search]`: an endpoint, and a key exactly when the backend takes one.
    fn check(&self, checks: &mut Checks<'_>) {
        match self.base_url() {
            Some(base) => {
                if let Err(message) = check_url(base, &["http", "https"]) {
                    checks.problem("web_search.base_url", message);
                }
            }
            None => checks.problem(
                "web_search.base_url",
                "SearXNG needs the instance's address, e.g. `http://127.0.0.1:8888`",
            ),
        }
        match (self.backend, &self.api_key_env) {
            (SearchBackend::Brave, Some(name)) => checks.secret("web_search.api_key_env", name),
            (SearchBackend::Brave, None) => checks.problem(
                "web_search.api_key_env",
                "Brave Search needs a subscription token: name the variable that holds it",
            ),
            (SearchBackend::Searxng, Some(_)) => checks.problem(
                "web_search.api_key_env",
                "SearXNG takes no API key; remove it (or use backend = \"brave\")",
            ),
            (SearchBackend::Searxng, None) => {}
        }
        if !(1..=MAX_SEARCH_RESULTS).contains(&self.max_results) {
            checks.problem(
                "web_search.max_results",
                format!("must be between 1 and {MAX_SEARCH_RESULTS}"),
            );
        }
    }
}
