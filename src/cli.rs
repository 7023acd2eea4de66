//! The command line (docs/cli.md; the contract: docs/architecture.md, "Contracts"). Exit codes:
//! 0 ok, 2 bad usage or configuration, 1 a failure at run time; errors print as one line plus
//! their causes.

mod agents;
mod chat;
mod check;
mod daemon;
mod database;
mod doctor;
mod init;
mod mcp;
mod pair;
pub mod schedule;
mod status;
#[cfg(feature = "http")]
mod token;
mod usage;
mod web;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::agent::{AgentSet, AgentSource};
use crate::config::{self, Config, LoadedConfig};
use crate::daemon::StartError;

pub use agents::{AgentsAction, route_report};
pub use database::existing_database;
pub use init::InitArgs;
pub use mcp::McpAction;
pub use pair::PairAction;
pub use schedule::ScheduleAction;
#[cfg(feature = "http")]
pub use token::TokenAction;
pub use web::WebAction;

/// What `hearth --version` says: the version, the commit built from and the chat channels built
/// in, e.g. `0.1.0 (commit 0810672a1b2c; channels: telegram, discord, matrix, email)`.
pub fn version() -> &'static str {
    static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        struct Built(Vec<&'static str>);
        impl crate::channels::EachChannel for Built {
            fn built<C: hearth_channel::ChannelConfig>(&mut self, _section: &mut Option<C>) {
                self.0.push(C::NAME);
            }
            fn not_built(&mut self, _name: &'static str) {}
        }
        let mut built = Built(Vec::new());
        crate::channels::each(&mut config::ChannelsConfig::default(), &mut built);
        let channels = built.0;
        format!(
            "{} (commit {}; channels: {})",
            env!("CARGO_PKG_VERSION"),
            env!("HEARTH_COMMIT"),
            if channels.is_empty() {
                "none".to_string()
            } else {
                channels.join(", ")
            }
        )
    });
    &VERSION
}

#[derive(Debug, Parser)]
#[command(name = "hearth", version = version(), about = "A personal AI assistant daemon")]
pub struct Cli {
    /// Configuration file (default: $HEARTH_CONFIG, ./hearth.toml, ~/.config/hearth/hearth.toml, then /etc/hearth/hearth.toml; none is fine).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Log more on stderr: -v info, -vv debug, -vvv trace.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// The log level on stderr (default: info for `run`, warn otherwise, or $RUST_LOG).
    #[arg(long, global = true, value_name = "LEVEL", value_parser = ["error", "warn", "info", "debug", "trace"])]
    pub log_level: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The log level the flags ask for, if they ask: `--log-level` wins over `-v`.
    pub fn requested_log_level(&self) -> Option<&str> {
        self.log_level.as_deref().or(match self.verbose {
            0 => None,
            1 => Some("info"),
            2 => Some("debug"),
            _ => Some("trace"),
        })
    }
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
    /// Write a minimal working configuration (asks in a terminal; flags when piped), then check it.
    Init(InitArgs),
    /// Validate the configuration and the agents file, naming every problem.
    Check,
    /// Live checks, one line each with the fix: model providers, MCP servers, the database
    /// and data directory, the clock and timezone. Exits 1 when one failed.
    Doctor,
    /// Ask the running daemon (on daemon.http_listen) how it is: channels, queues, errors.
    Status,
    /// Print the shell completion script, e.g. `hearth completions bash > /etc/bash_completion.d/hearth`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Apply pending database migrations.
    Migrate,
    /// Show or export the agents, or list an agent's versions.
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
    /// Tokens of the HTTP API: create (printed once), list, revoke.
    #[cfg(feature = "http")]
    Token {
        #[command(subcommand)]
        action: Option<TokenAction>,
    },
    /// Scheduled runs: list, add, remove, or run one now.
    Schedule {
        #[command(subcommand)]
        action: Option<ScheduleAction>,
    },
    /// MCP: list the configured servers' tools, or serve hearth itself over stdio (`serve`).
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
    /// The owner's page on daemon.http_listen: a one-time login code, or end every session.
    Web {
        #[command(subcommand)]
        action: WebAction,
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

/// Writes `bytes` to stdout; a reader that closed the pipe early (`| head`) is not an error.
fn write_output(bytes: &[u8]) -> Result<(), Failure> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

pub(crate) fn usage(error: anyhow::Error) -> Failure {
    Failure { code: 2, error }
}

pub async fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Run => daemon::run(cli.config).await,
        Command::Chat { agent } => chat::run(cli.config, agent).await,
        Command::Init(args) => init::run(cli.config, args).await,
        Command::Check => check::run(cli.config),
        Command::Doctor => doctor::run(cli.config).await,
        Command::Status => status::run(cli.config).await,
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            // Written to a buffer first: clap_complete panics on a failed write, and a reader
            // that stops early (`hearth completions bash | head`) is no failure.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "hearth", &mut script);
            write_output(&script)
        }
        Command::Migrate => database::migrate(cli.config).await,
        Command::Agents { action } => {
            agents::run(cli.config, action.unwrap_or(AgentsAction::List)).await
        }
        Command::Route { text, current } => agents::route(cli.config, &text, current.as_deref()),
        Command::Pair { action } => pair::run(cli.config, action.unwrap_or(PairAction::List)).await,
        #[cfg(feature = "http")]
        Command::Token { action } => {
            token::run(cli.config, action.unwrap_or(TokenAction::List)).await
        }
        Command::Backup { file } => database::backup(cli.config, &file).await,
        Command::Schedule { action } => {
            let config = load_config(cli.config)?.config;
            schedule::run(&config, action.unwrap_or(ScheduleAction::List)).await
        }
        Command::Mcp { action } => match action.unwrap_or(McpAction::List) {
            McpAction::List => mcp::list(cli.config).await,
            McpAction::Serve { user } => mcp::serve(cli.config, user).await,
        },
        Command::Usage { days, by } => usage::run(cli.config, days, &by).await,
        Command::Web { action } => web::run(cli.config, action).await,
    }
}

pub(crate) fn load_config(path: Option<PathBuf>) -> Result<LoadedConfig, Failure> {
    config::load(path.as_deref()).map_err(|errors| usage(anyhow::anyhow!("{errors}")))
}

/// Before the data dir followed the user, a configuration without `data_dir` kept the database
/// in `./data` of the current directory. One left there is named, so that an upgrade does not
/// look like a fresh start with nothing remembered.
pub(crate) fn old_default_database(loaded: &LoadedConfig) -> Option<String> {
    let old = std::path::Path::new("./data/hearth.db");
    let data_dir = &loaded.config.daemon.data_dir;
    (loaded.sources.data_dir_is_default
        && data_dir != std::path::Path::new("./data")
        && old.exists())
    .then(|| {
        format!(
            "./data/hearth.db here is the database of an older default; hearth now keeps its data in {}: to go on with the old one, set data_dir = \"{}\" in [daemon]",
            data_dir.display(),
            std::fs::canonicalize("./data").map_or("./data".into(), |p| p.display().to_string())
        )
    })
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
