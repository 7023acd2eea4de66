//! `hearth mcp list`.

use std::path::PathBuf;

use clap::Subcommand;

use super::{Failure, load_config};

#[derive(Debug, Subcommand)]
pub enum McpAction {
    /// Connect to every configured server and print its tools (name, risk, description) or
    /// why it failed (the default). Exits 1 when a server failed.
    List,
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
