//! `hearth agents` and `hearth route`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;

use crate::agent::{AgentSet, AgentSource};
use crate::config::Config;
use crate::router::{Router, Situation, explain};
use crate::store::{AgentVersion, Store};

use super::{Failure, existing_database, load_agents, load_config, usage};

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
    /// List the versions of an agent's definition, newest first, with what changed.
    History { id: String },
}

pub(super) async fn run(path: Option<PathBuf>, action: AgentsAction) -> Result<(), Failure> {
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
        AgentsAction::History { id } => history(&config, &id).await?,
    }
    Ok(())
}

/// `hearth agents history ID`: the versions hearth stored of the agent, newest first.
async fn history(config: &Config, id: &str) -> Result<(), Failure> {
    existing_database(config)?;
    let store = Store::open(&config.daemon.database_url())
        .await
        .context("cannot open the database")?;
    let read = async {
        let versions = store.agent_versions(id).await?;
        let known = if versions.is_empty() {
            store.known_agent_ids().await?
        } else {
            Vec::new()
        };
        Ok::<_, crate::store::StoreError>((versions, known))
    }
    .await;
    store.close().await;
    let (versions, known) = read.context("reading the agent versions failed")?;
    if versions.is_empty() {
        let known = if known.is_empty() {
            "none yet: versions are stored when hearth starts or reloads its agents".to_string()
        } else {
            known.join(", ")
        };
        return Err(usage(anyhow::anyhow!(
            "there is no agent `{id}` in the database (agents seen: {known})"
        )));
    }
    let timezone = config.daemon.timezone;
    print!("{}", history_report(id, &versions, timezone));
    Ok(())
}

/// What `hearth agents history ID` prints: one line per version, newest first.
pub fn history_report(id: &str, versions: &[AgentVersion], timezone: chrono_tz::Tz) -> String {
    let mut out = format!("versions of agent `{id}`, newest first:\n");
    for version in versions {
        let date = chrono::DateTime::from_timestamp_millis(version.created_at)
            .map(|at| {
                at.with_timezone(&timezone)
                    .format("%Y-%m-%d %H:%M")
                    .to_string()
            })
            .unwrap_or_else(|| "unknown date".into());
        let turns = match version.turns {
            1 => "1 turn".to_string(),
            n => format!("{n} turns"),
        };
        out.push_str(&format!(
            "  v{:<3} {date}  {turns:>9}  {}\n",
            version.version, version.changes
        ));
    }
    out
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
