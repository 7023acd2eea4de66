//! Model Context Protocol servers as tool sources (`[[mcp_servers]]`).
//!
//! Each configured server's tools join the [`ToolRegistry`] as `<server>__<tool>` in the tool
//! group `<server>`, so an agent enables them with `tool_groups` like any built-in family, and
//! every call passes the same checks as a built-in tool: JSON Schema, permission, rate limits,
//! Approve / Deny, audit. A tool the server marks read-only (`readOnlyHint`) is `read`; every
//! other tool asks first (`outward`) unless the user's `risk` table says otherwise.
//!
//! Servers start with the daemon, in the background: their tools appear as soon as each has
//! answered, and a slow or broken server never holds up the chats. A supervisor per server
//! (see [`server`]) restarts it with backoff when it dies, and stops it (its whole process
//! group) on shutdown. A call to a server that is down or slow ends with a clear tool error
//! within the server's `timeout_secs`.

mod http;
mod process;
mod server;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::{Risk, Tool, ToolContext, ToolError, ToolInfo, ToolRegistry};
use crate::config::{MCP_SEPARATOR, McpRisk, McpServerConfig};
use crate::metrics::Metrics;

pub use process::{EXEC_ARG, exec_main, use_exec_wrapper};
pub use server::McpServerHealth;
use server::Server;

/// Longest tool description kept; some servers put whole manuals there.
const DESCRIPTION_MAX: usize = 2_000;

/// `*` matches any run of characters, everything else itself.
fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || !name.ends_with(last) || name.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

/// Whether the user's `enabled_tools` / `disabled_tools` let `tool` through.
fn offered(config: &McpServerConfig, tool: &str) -> bool {
    let enabled =
        config.enabled_tools.is_empty() || config.enabled_tools.iter().any(|p| glob(p, tool));
    enabled && !config.disabled_tools.iter().any(|p| glob(p, tool))
}

/// The risk of `tool`: the user's `risk` entry (an exact name first, then the longest matching
/// pattern), else `read` for a tool the server marks read-only and `outward` for the rest.
fn risk_of(config: &McpServerConfig, tool: &str, read_only: bool) -> Risk {
    let chosen = config.risk.get(tool).copied().or_else(|| {
        config
            .risk
            .iter()
            .filter(|(pattern, _)| glob(pattern, tool))
            .max_by_key(|(pattern, _)| pattern.len())
            .map(|(_, risk)| *risk)
    });
    match chosen {
        Some(McpRisk::Read) => Risk::Safe,
        Some(McpRisk::Write) => Risk::Write,
        Some(McpRisk::Destructive) => Risk::Destructive,
        Some(McpRisk::Outward) => Risk::Outward,
        None if read_only => Risk::Safe,
        None => Risk::Outward,
    }
}

/// The name `hearth check`, `hearth mcp list` and the model use for a risk.
pub fn risk_name(risk: Risk) -> &'static str {
    match risk {
        Risk::Safe => "read",
        Risk::Write => "write",
        Risk::Destructive => "destructive",
        Risk::Outward => "outward",
    }
}

/// hearth's name for a server's tool: `<server>__<tool>`, with characters a tool name cannot
/// have replaced by `_`, cut to 64 characters.
fn hearth_name(server: &str, tool: &str) -> String {
    let cleaned: String = tool
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut name = format!("{server}{MCP_SEPARATOR}{cleaned}");
    name.truncate(64);
    name
}

/// One tool of an MCP server, as the registry sees it.
struct McpTool {
    info: ToolInfo,
    /// The tool's own name on the server.
    remote: String,
    server: Arc<Server>,
}

#[async_trait]
impl Tool for McpTool {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(&self, _ctx: &ToolContext, arguments: Value) -> Result<String, ToolError> {
        self.server.call(&self.remote, arguments).await
    }
}

/// Turns a server's tool list into registry tools: filtered by `enabled_tools` /
/// `disabled_tools`, named, given their risk and the server's timeout. Names that collide after
/// cleaning keep the first tool.
fn build_tools(server: &Arc<Server>, listed: Vec<rmcp::model::Tool>) -> Vec<Arc<dyn Tool>> {
    let config = &server.config;
    let mut tools: BTreeMap<String, Arc<dyn Tool>> = BTreeMap::new();
    for tool in listed {
        let remote = tool.name.to_string();
        if !offered(config, &remote) {
            continue;
        }
        let name = hearth_name(&config.name, &remote);
        if tools.contains_key(&name) {
            tracing::warn!(server = %config.name, tool = %remote, "two tools share the name {name}; keeping the first");
            continue;
        }
        let read_only = tool
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        let description: String = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or("")
            .chars()
            .take(DESCRIPTION_MAX)
            .collect();
        let title = tool.title.clone().unwrap_or_default();
        let info = ToolInfo::new(
            &name,
            &config.name,
            &description,
            Value::Object(tool.input_schema.as_ref().clone()),
        )
        .tags(["mcp", &config.name, &title])
        .risk(risk_of(config, &remote, read_only))
        // The server's own deadline ends the call first, with the clearer message.
        .timeout(server.timeout() + Duration::from_secs(2));
        tools.insert(
            name,
            Arc::new(McpTool {
                info,
                remote,
                server: server.clone(),
            }),
        );
    }
    tools.into_values().collect()
}

/// The configured MCP servers while hearth runs: a supervisor per server, their health.
#[derive(Clone, Debug, Default)]
pub struct McpManager {
    servers: Arc<Vec<Arc<Server>>>,
}

impl McpManager {
    /// Starts a supervisor for every enabled server on `tracker`; they register their tools in
    /// `registry` as they connect and stop their servers when `shutdown` is cancelled. Must be
    /// called inside the tokio runtime.
    ///
    /// With a `cache_dir`, each server's last tool list is kept there, and registered at once
    /// on the next start: a turn resumed right after a restart, or a message arriving while a
    /// server is still starting or is down, finds its tools (calls then wait for the server or
    /// say it is down) instead of not knowing them at all.
    pub fn start(
        configs: &[McpServerConfig],
        registry: &ToolRegistry,
        metrics: Arc<Metrics>,
        tracker: &TaskTracker,
        shutdown: &CancellationToken,
        cache_dir: Option<&std::path::Path>,
    ) -> Self {
        if configs.is_empty() {
            return Self::default();
        }
        let spawner = process::Spawner::new();
        let servers: Vec<Arc<Server>> = configs
            .iter()
            .map(|config| {
                let cache = cache_dir.map(|dir| dir.join(format!("{}.tools.json", config.name)));
                Arc::new(
                    Server::new(config.clone(), registry.clone(), metrics.clone()).cached_at(cache),
                )
            })
            .collect();
        for server in &servers {
            if !server.config.enabled {
                continue;
            }
            server.register_cached();
            let name = server.config.name.clone();
            tracker.spawn(
                server
                    .clone()
                    .supervise(spawner.clone(), tracker.clone(), shutdown.clone())
                    .instrument(tracing::info_span!("mcp", server = %name)),
            );
        }
        Self {
            servers: Arc::new(servers),
        }
    }

    /// Waits until no enabled server is on its first start without any known tools: each is
    /// connected, failed, or has tools kept from an earlier run. A server still starting is
    /// waited for up to its start timeout (`timeout_secs`). Returns at once when every server
    /// is past that, which is every time but the first turns after a fresh start.
    pub async fn first_start(&self) {
        let waits = self
            .servers
            .iter()
            .filter(|server| server.config.enabled)
            .map(|server| server.first_start());
        futures::future::join_all(waits).await;
    }

    /// Each server's state, in config order.
    pub fn health(&self) -> Vec<(String, McpServerHealth)> {
        self.servers
            .iter()
            .map(|s| (s.config.name.clone(), s.health()))
            .collect()
    }
}

/// What `hearth mcp list` shows for one server.
#[derive(Debug)]
pub struct Probe {
    pub name: String,
    /// `stdio <command>` or `http <url>`.
    pub target: String,
    /// The tools (name, risk, description), or why they could not be listed; `None` for a
    /// server with `enabled = false`.
    pub tools: Option<Result<Vec<ProbedTool>, String>>,
}

/// One tool in `hearth mcp list`.
#[derive(Debug)]
pub struct ProbedTool {
    pub name: String,
    pub risk: Risk,
    pub description: String,
}

/// Connects to every enabled server once (concurrently), lists its tools as agents would see
/// them, and stops it again.
pub async fn probe(configs: &[McpServerConfig]) -> Vec<Probe> {
    let spawner = process::Spawner::new();
    let tracker = TaskTracker::new();
    let metrics = Arc::new(Metrics::default());
    let probes = configs.iter().map(|config| {
        let spawner = spawner.clone();
        let tracker = tracker.clone();
        let metrics = metrics.clone();
        async move {
            let server = Arc::new(Server::new(config.clone(), ToolRegistry::new(), metrics));
            let tools = if config.enabled {
                Some(server.probe(&spawner, &tracker).await.map(|tools| {
                    tools
                        .iter()
                        .map(|t| {
                            let info = t.info();
                            ProbedTool {
                                name: info.name.clone(),
                                risk: info.risk,
                                description: info.description.clone(),
                            }
                        })
                        .collect()
                }))
            } else {
                None
            };
            Probe {
                name: config.name.clone(),
                target: server.target(),
                tools,
            }
        }
    });
    let results = futures::future::join_all(probes).await;
    tracker.close();
    tracker.wait().await;
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml: &str) -> McpServerConfig {
        let text = format!("name = \"home\"\ncommand = \"x\"\n{toml}");
        toml::from_str(&text).expect("config parses")
    }

    #[test]
    fn globs_match_prefixes_suffixes_and_middles() {
        assert!(glob("*", "anything"));
        assert!(glob("get_*", "get_state"));
        assert!(!glob("get_*", "set_state"));
        assert!(glob("*_state", "get_state"));
        assert!(glob("a*b*c", "a-x-b-y-c"));
        assert!(!glob("a*b*c", "a-x-c-y-b"));
        assert!(glob("exact", "exact") && !glob("exact", "exactly"));
        assert!(!glob("ab*ba", "aba"), "the ends may not overlap");
    }

    #[test]
    fn read_only_tools_are_read_and_everything_else_asks_unless_configured() {
        let plain = config("");
        assert_eq!(risk_of(&plain, "get_state", true), Risk::Safe);
        assert_eq!(risk_of(&plain, "turn_on", false), Risk::Outward);
        let tuned =
            config("[risk]\n\"*\" = \"write\"\n\"turn_*\" = \"destructive\"\nturn_on = \"read\"\n");
        assert_eq!(risk_of(&tuned, "turn_on", false), Risk::Safe, "exact wins");
        assert_eq!(
            risk_of(&tuned, "turn_off", false),
            Risk::Destructive,
            "the longer pattern wins"
        );
        assert_eq!(
            risk_of(&tuned, "get_state", true),
            Risk::Write,
            "the user's word beats the server's hint"
        );
    }

    #[test]
    fn enabled_and_disabled_patterns_filter_tools() {
        let all = config("");
        assert!(offered(&all, "anything"));
        let some =
            config("enabled_tools = [\"get_*\", \"list\"]\ndisabled_tools = [\"get_secret\"]");
        assert!(offered(&some, "get_state") && offered(&some, "list"));
        assert!(!offered(&some, "get_secret") && !offered(&some, "delete"));
    }

    #[test]
    fn names_get_the_server_prefix_and_lose_what_a_tool_name_cannot_hold() {
        assert_eq!(hearth_name("ha", "turn_on"), "ha__turn_on");
        assert_eq!(hearth_name("git", "git.log-v2"), "git__git_log_v2");
        let long = hearth_name("server", &"x".repeat(100));
        assert_eq!(long.len(), 64);
        assert!(super::super::valid_tool_name(&long));
    }
}
