//! The command line (DESIGN.md §8). Exit codes: 0 ok, 2 bad usage or configuration, 1 a
//! failure at run time; errors print as one line plus their causes.

mod agents;
mod chat;
mod check;
mod daemon;
mod database;
mod mcp;
mod pair;
pub mod schedule;
mod usage;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::agent::{AgentSet, AgentSource};
use crate::config::{self, Config, LoadedConfig};
use crate::daemon::StartError;

pub use agents::{AgentsAction, route_report};
pub use database::existing_database;
pub use mcp::McpAction;
pub use pair::PairAction;
pub use schedule::ScheduleAction;

#[derive(Debug, Parser)]
#[command(name = "hearth", version, about = "A personal AI assistant daemon")]
pub struct Cli {
    /// Configuration file (default: $HEARTH_CONFIG, ./hearth.toml, then /etc/hearth/hearth.toml; none is fine).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon with the configured channels until SIGTERM or SIGINT.
    Run,
    /// Talk to hearth in this terminal (one reply per input line when piped).
    Chat {
        /// Talk to this agent instead of letting keywords choose.
        #[arg(long)]
        agent: Option<String>,
    },
    /// Validate the configuration and the agents file, naming every problem.
    Check,
    /// Apply pending database migrations.
    Migrate,
    /// Show or export the agents.
    Agents {
        #[command(subcommand)]
        action: Option<AgentsAction>,
    },
    /// Show which agent a message would go to, and every agent's keyword score.
    Route {
        text: String,
        /// Pretend the conversation currently talks to this agent.
        #[arg(long)]
        current: Option<String>,
    },
    /// Write a consistent copy of the SQLite database while hearth runs.
    Backup {
        /// The file to write; must not exist yet.
        file: PathBuf,
    },
    /// Manage who may talk to hearth.
    Pair {
        #[command(subcommand)]
        action: Option<PairAction>,
    },
    /// Scheduled runs: list, add, remove, or run one now.
    Schedule {
        #[command(subcommand)]
        action: Option<ScheduleAction>,
    },
    /// MCP servers: connect to each and list its tools.
    Mcp {
        #[command(subcommand)]
        action: Option<McpAction>,
    },
    /// Tokens and cost of the model calls, from the database.
    Usage {
        /// The last N days, today included.
        #[arg(long, default_value_t = 30)]
        days: u32,
        /// Group by day, agent, schedule, user or model.
        #[arg(long, default_value = "day")]
        by: String,
    },
}

/// An error and the exit code it deserves.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(err: E) -> Self {
        Self {
            code: 1,
            error: err.into(),
        }
    }
}

pub(crate) fn usage(error: anyhow::Error) -> Failure {
    Failure { code: 2, error }
}

pub async fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Run => daemon::run(cli.config).await,
        Command::Chat { agent } => chat::run(cli.config, agent).await,
        Command::Check => check::run(cli.config),
        Command::Migrate => database::migrate(cli.config).await,
        Command::Agents { action } => agents::run(cli.config, action.unwrap_or(AgentsAction::List)),
        Command::Route { text, current } => agents::route(cli.config, &text, current.as_deref()),
        Command::Pair { action } => pair::run(cli.config, action.unwrap_or(PairAction::List)).await,
        Command::Backup { file } => database::backup(cli.config, &file).await,
        Command::Schedule { action } => {
            let config = load_config(cli.config)?.config;
            schedule::run(&config, action.unwrap_or(ScheduleAction::List)).await
        }
        Command::Mcp { action } => match action.unwrap_or(McpAction::List) {
            McpAction::List => mcp::list(cli.config).await,
        },
        Command::Usage { days, by } => usage::run(cli.config, days, &by).await,
    }
}

pub(crate) fn load_config(path: Option<PathBuf>) -> Result<LoadedConfig, Failure> {
    config::load(path.as_deref()).map_err(|errors| usage(anyhow::anyhow!("{errors}")))
}

pub(crate) fn load_agents(config: &Config) -> Result<(AgentSet, AgentSource), Failure> {
    AgentSet::load(&config.router.agents_file).map_err(|err| usage(anyhow::anyhow!("{err}")))
}

/// A failed start as the user sees it: another process holding the database is one line,
/// anything else says hearth could not start and why.
pub(crate) fn start_failure(err: StartError) -> Failure {
    match err {
        StartError::Lock(held @ crate::store::LockError::Held { .. }) => {
            Failure::from(anyhow::anyhow!("{held}"))
        }
        other => Failure::from(anyhow::Error::new(other).context("hearth could not start")),
    }
}
