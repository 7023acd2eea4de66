//! `hearth agents` and `hearth route`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;

use crate::agent::{AgentSet, AgentSource};
use crate::config::Config;
use crate::router::{Router, Situation, explain};

use super::{Failure, load_agents, load_config, usage};

#[derive(Debug, Subcommand)]
pub enum AgentsAction {
    /// List the agents (the default).
    List,
    /// Show one agent in full.
    Show { id: String },
    /// Write the shipped agents file out for editing.
    Export {
        /// Where to write it (default: the configured router.agents_file).
        path: Option<PathBuf>,
        /// Overwrite an existing file.
        #[arg(long)]
        force: bool,
    },
}

pub(super) fn run(path: Option<PathBuf>, action: AgentsAction) -> Result<(), Failure> {
    let config = load_config(path)?.config;
    match action {
        AgentsAction::List => {
            let (agents, source) = load_agents(&config)?;
            match source {
                AgentSource::Shipped => println!(
                    "agents shipped with hearth ({} has none):",
                    config.router.agents_file.display()
                ),
                AgentSource::File(path) => println!("agents from {}:", path.display()),
            }
            for agent in agents.iter() {
                let default = if agent.id == config.router.default_agent {
                    " (default)"
                } else {
                    ""
                };
                println!(
                    "  {} {:<10} {}{default} — {}",
                    agent.emoji, agent.id, agent.name, agent.description
                );
            }
        }
        AgentsAction::Show { id } => {
            let (agents, _) = load_agents(&config)?;
            let agent = agents
                .get(&id)
                .ok_or_else(|| usage(anyhow::anyhow!("there is no agent `{id}`")))?;
            let text = toml::to_string_pretty(agent).context("cannot show the agent")?;
            println!("{text}");
        }
        AgentsAction::Export { path, force } => {
            let path = path.unwrap_or_else(|| config.router.agents_file.clone());
            AgentSet::export_shipped(&path, force)
                .map_err(|err| usage(anyhow::anyhow!("{err}")))?;
            println!(
                "wrote the shipped agents to {}; edit it, then restart hearth or send it SIGHUP",
                path.display()
            );
        }
    }
    Ok(())
}

pub(super) fn route(
    path: Option<PathBuf>,
    text: &str,
    current: Option<&str>,
) -> Result<(), Failure> {
    let config = load_config(path)?.config;
    let (agents, _) = load_agents(&config)?;
    // A typo here would silently report the decision for a conversation with nobody.
    if let Some(current) = current
        && agents.get(current).is_none()
    {
        let known: Vec<&str> = agents.iter().map(|a| a.id.as_str()).collect();
        return Err(usage(anyhow::anyhow!(
            "--current: there is no agent `{current}`; the agents are {}",
            known.join(", ")
        )));
    }
    print!("{}", route_report(&agents, &config, text, current));
    Ok(())
}

/// What `hearth route TEXT [--current ID]` prints: the daemon's own decision
/// ([`Router::decide`]) for a conversation that talks to `current` right now (or a new one).
pub fn route_report(
    agents: &AgentSet,
    config: &Config,
    text: &str,
    current: Option<&str>,
) -> String {
    let routing = Router::new(agents).decide(
        text,
        Situation {
            current_agent: current,
            pinned: false,
            recent: true,
            default_agent: &config.router.default_agent,
        },
    );
    format!("{}\n", explain(&routing.decision, agents))
}
