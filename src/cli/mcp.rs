//! `hearth mcp list` (hearth as an MCP client) and `hearth mcp serve` (hearth as an MCP
//! server over stdio, `crate::mcp_server`).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Subcommand;

use crate::daemon::{DaemonBuilder, Role};
use crate::mcp_server::Caller;

use super::{Failure, existing_database, load_agents, load_config, start_failure, usage};

#[derive(Debug, Subcommand)]
pub enum McpAction {
    /// Connect to every configured server and print its tools (name, risk, description) or
    /// why it failed (the default). Exits 1 when a server failed.
    List,
    /// Serve hearth's tools, resources and prompts over stdio to the MCP client that started
    /// this command (stdout carries only MCP; logs go to stderr). Runs beside a running
    /// daemon, on the same database. Calls act as the owner, or as the user of `--user`.
    Serve {
        /// Act as the user of this identity (`CHANNEL:ID`, e.g. `telegram:123456`, `http:phone`)
        /// instead of the owner.
        #[arg(long, value_name = "CHANNEL:ID")]
        user: Option<String>,
    },
}

/// `hearth mcp serve`: the MCP server over stdio, as the owner or `--user`.
pub(super) async fn serve(path: Option<PathBuf>, user: Option<String>) -> Result<(), Failure> {
    let config = load_config(path)?.config;
    // A client that starts hearth against a database that is not there gets one line, not an
    // empty new database.
    existing_database(&config)?;
    let (agents, _) = load_agents(&config)?;
    let daemon = DaemonBuilder::new(config)
        .role(Role::Chat)
        .agents(agents)
        .without_http()
        .start()
        .await
        .map_err(start_failure)?;
    let rt = daemon.runtime().clone();
    let caller = match stdio_caller(&rt, user.as_deref()).await {
        Ok(caller) => caller,
        Err(err) => {
            daemon.stop().await;
            return Err(err);
        }
    };
    tracing::info!(user = caller.user_id, "serving MCP over stdio");
    let served = crate::mcp_server::serve_stdio(Arc::clone(&rt), caller).await;
    daemon.stop().await;
    served.map_err(|err| Failure::from(anyhow::anyhow!("{err}")))
}

/// Who a stdio client acts as: the user of `--user`'s identity, else the owner. A process
/// that can start hearth's binary on this machine can read its database anyway; the owner is
/// what a local client of the owner's own tools means.
async fn stdio_caller(rt: &crate::runtime::Runtime, user: Option<&str>) -> Result<Caller, Failure> {
    let store = &rt.store;
    let (user_id, door) = match user {
        Some(text) => {
            let Some((channel, id)) = text
                .split_once(':')
                .filter(|(c, i)| !c.is_empty() && !i.is_empty())
            else {
                return Err(usage(anyhow::anyhow!(
                    "--user {text:?}: expected CHANNEL:ID, like telegram:123456 or http:phone"
                )));
            };
            let identity = store
                .identity(channel, id)
                .await
                .map_err(anyhow::Error::from)?;
            let Some(identity) =
                identity.filter(|i| i.status == crate::store::IdentityStatus::Allowed)
            else {
                return Err(usage(anyhow::anyhow!(
                    "--user {text}: no allowed identity has this name; `hearth pair list` shows them"
                )));
            };
            (identity.user_id, format!("stdio as {text}"))
        }
        None => {
            let users = store.users().await.map_err(anyhow::Error::from)?;
            let Some(owner) = users.iter().find(|u| u.is_owner) else {
                return Err(usage(anyhow::anyhow!(
                    "there is no owner to act as: set daemon.owner, or name a user with --user CHANNEL:ID"
                )));
            };
            (owner.id, "stdio".to_string())
        }
    };
    Ok(Caller {
        user_id,
        agents: Vec::new(),
        read_only: false,
        door,
    })
}

/// `hearth mcp list`: every server's tools as agents see them, or why it failed.
pub(super) async fn list(path: Option<PathBuf>) -> Result<(), Failure> {
    let loaded = load_config(path)?;
    let config = &loaded.config;
    if config.mcp_servers.is_empty() {
        let file = loaded
            .path
            .as_ref()
            .map_or("the configuration".to_string(), |p| p.display().to_string());
        println!("no MCP servers configured (add [[mcp_servers]] to {file})");
        return Ok(());
    }
    let probes = crate::tool::mcp::probe(&config.mcp_servers).await;
    let mut failed = Vec::new();
    for probe in &probes {
        match &probe.tools {
            None => println!("{} ({}): disabled", probe.name, probe.target),
            Some(Err(error)) => {
                println!("{} ({}): error: {error}", probe.name, probe.target);
                failed.push(probe.name.as_str());
            }
            Some(Ok(tools)) => {
                println!("{} ({}): {} tool(s)", probe.name, probe.target, tools.len());
                let risks: Vec<String> = tools
                    .iter()
                    .map(|tool| {
                        let asks = if tool.risk.needs_confirmation(config.tools.autonomy) {
                            " (asks first)"
                        } else {
                            ""
                        };
                        format!("{}{asks}", crate::tool::mcp::risk_name(tool.risk))
                    })
                    .collect();
                let width = tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
                let risk_width = risks.iter().map(String::len).max().unwrap_or(0);
                for (tool, risk) in tools.iter().zip(&risks) {
                    let description = tool.description.lines().next().unwrap_or("");
                    println!("  {:width$}  {risk:risk_width$}  {description}", tool.name);
                }
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(anyhow::anyhow!("MCP server(s) failed: {}", failed.join(", ")).into())
    }
}
