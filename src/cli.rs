//! The command line (DESIGN.md §8). Exit codes: 0 ok, 2 bad usage or configuration, 1 a
//! failure at run time; errors print as one line plus their causes.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::agent::{AgentSet, AgentSource};
use crate::config::{self, Config, LoadedConfig};
use crate::daemon::{DaemonBuilder, Role, StartError};
use crate::router::{Router, Situation, explain};
use crate::scheduler::cli::ScheduleAction;
use crate::store::Store;
use crate::terminal::{LOCAL, TerminalChannel};

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
}

#[derive(Debug, Subcommand)]
pub enum McpAction {
    /// Connect to every configured server and print its tools (name, risk, description) or
    /// why it failed (the default). Exits 1 when a server failed.
    List,
}

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

#[derive(Debug, Subcommand)]
pub enum PairAction {
    /// Pending pairing codes and the users with their identities (the default).
    List,
    /// Allow the sender who got this code.
    Approve { code: String },
    /// Revoke an identity, given as channel:user_id.
    Revoke { identity: String },
    /// Join identity B to A's user: one person, one set of tasks, notes, memories, expenses and
    /// schedules. B's data (when it has its own) moves to A's user. An identity hearth has not
    /// seen yet (an email address, say) is created, allowed.
    Link { a: String, b: String },
    /// Give an identity a user of its own again; the data stays with the other identities.
    Unlink { identity: String },
    /// Set which tools a user may call: none, read, write, execute or admin.
    Permission { identity: String, level: String },
    /// Set how much hearth may do for a user without asking: none, low, medium, high or full.
    Autonomy { identity: String, level: String },
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

fn usage(error: anyhow::Error) -> Failure {
    Failure { code: 2, error }
}

pub async fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Run => run_daemon(cli.config).await,
        Command::Chat { agent } => chat(cli.config, agent).await,
        Command::Check => check(cli.config),
        Command::Migrate => migrate(cli.config).await,
        Command::Agents { action } => agents(cli.config, action.unwrap_or(AgentsAction::List)),
        Command::Route { text, current } => route(cli.config, &text, current.as_deref()),
        Command::Pair { action } => pair(cli.config, action.unwrap_or(PairAction::List)).await,
        Command::Backup { file } => backup(cli.config, &file).await,
        Command::Schedule { action } => {
            let config = load_config(cli.config)?.config;
            crate::scheduler::cli::run(&config, action.unwrap_or(ScheduleAction::List)).await
        }
        Command::Mcp { action } => match action.unwrap_or(McpAction::List) {
            McpAction::List => mcp_list(cli.config).await,
        },
    }
}

/// `hearth mcp list`: every server's tools as agents see them, or why it failed.
async fn mcp_list(path: Option<PathBuf>) -> Result<(), Failure> {
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

fn load_config(path: Option<PathBuf>) -> Result<LoadedConfig, Failure> {
    config::load(path.as_deref()).map_err(|errors| usage(anyhow::anyhow!("{errors}")))
}

fn load_agents(config: &Config) -> Result<(AgentSet, AgentSource), Failure> {
    AgentSet::load(&config.router.agents_file).map_err(|err| usage(anyhow::anyhow!("{err}")))
}

/// A failed start as the user sees it: another process holding the database is one line,
/// anything else says hearth could not start and why.
fn start_failure(err: StartError) -> Failure {
    match err {
        StartError::Lock(held @ crate::store::LockError::Held { .. }) => {
            Failure::from(anyhow::anyhow!("{held}"))
        }
        other => Failure::from(anyhow::Error::new(other).context("hearth could not start")),
    }
}

/// How long `hearth chat` waits, after Ctrl-C cancelled the running answer, for it to wind up.
const CHAT_INTERRUPT_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

async fn run_daemon(path: Option<PathBuf>) -> Result<(), Failure> {
    let loaded = load_config(path)?;
    let config = loaded.config;
    for warning in config::warnings(&config) {
        tracing::warn!("{warning}");
    }
    let mut builder = DaemonBuilder::new(config.clone());
    let channels = crate::channels::build(&config.channels, &config.daemon.data_dir)
        .map_err(|err| usage(anyhow::anyhow!("{err}")))?;
    let channel_count = channels.len();
    for built in channels {
        builder = builder.channel(built.channel, &built.allowed);
    }
    let agents_file = config.router.agents_file.clone();
    let notifier = crate::systemd::Notifier::from_env();
    notifier.status("starting");
    // Nothing is logged before the start: a second daemon on this database refuses with one line.
    let daemon = builder.start().await.map_err(start_failure)?;
    match &loaded.path {
        Some(path) => tracing::info!(config = %path.display(), "configuration loaded"),
        None => tracing::warn!("no configuration file found; running on defaults"),
    }
    if channel_count == 0 {
        tracing::warn!(
            "no channels configured: only schedules and /healthz run, nobody can write to hearth; add a [channels.telegram] section to hearth.toml (see README, Configuration) or talk to it with `hearth chat`"
        );
    }
    tokio::spawn(notifier.clone().keep_watchdog(daemon.shutdown_token()));
    if let Some(addr) = daemon.http_addr() {
        tracing::info!(%addr, "health and metrics endpoints listening");
    }
    let shutdown = daemon.stop_token();
    let rt = daemon.runtime().clone();
    tokio::spawn(async move {
        wait_for_signals(&rt, &agents_file).await;
        shutdown.cancel();
    });
    // READY=1 once every channel is connected, failed or retrying, not merely started; a stop
    // asked for meanwhile skips it.
    let stop = daemon.stop_token();
    tokio::select! {
        () = daemon.channels_settled() => notifier.ready(&daemon.status_line()),
        () = stop.cancelled() => {}
    }
    let stopping = daemon.stop_token();
    let on_stop = notifier.clone();
    tokio::spawn(async move {
        stopping.cancelled().await;
        on_stop.stopping();
    });
    daemon.run_until_stopped().await;
    tracing::info!("hearth stopped");
    Ok(())
}

/// Returns on SIGTERM or SIGINT; reloads the agents file on SIGHUP.
async fn wait_for_signals(rt: &Arc<crate::runtime::Runtime>, agents_file: &std::path::Path) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::error!("cannot listen for signals; stop hearth with Ctrl-C");
        // ctrl_c only fails when signals cannot be used at all; then there is nothing to wait for.
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    loop {
        tokio::select! {
            _ = term.recv() => { tracing::info!("SIGTERM: stopping"); return; }
            _ = tokio::signal::ctrl_c() => { tracing::info!("SIGINT: stopping"); return; }
            _ = hup.recv() => {
                match AgentSet::load(agents_file) {
                    Ok((set, source)) => match rt.reload_agents(set).await {
                        Ok(()) => tracing::info!(?source, "agents reloaded"),
                        Err(err) => tracing::error!(error = %err, "agents reload failed; keeping the old ones"),
                    },
                    Err(err) => tracing::error!(error = %err, "agents file invalid; keeping the old agents"),
                }
            }
        }
    }
}

async fn chat(path: Option<PathBuf>, agent: Option<String>) -> Result<(), Failure> {
    let config = load_config(path)?.config;
    let (agents, _) = load_agents(&config)?;
    if let Some(id) = &agent
        && agents.get(id).is_none()
    {
        return Err(usage(anyhow::anyhow!(
            "there is no agent `{id}`; see `hearth agents`"
        )));
    }
    // Ask each provider the agents use for its model list, and say what is wrong in one line
    // each instead of opening a chat whose every message fails.
    let (providers, hint) = crate::provider::effective_providers(&config.providers);
    let used: Vec<&str> = agents.iter().map(|a| a.provider.as_str()).collect();
    let hint = hint
        .as_deref()
        .map(|h| h.trim_start_matches("⚠️").trim_start());
    let found = crate::provider::probe::check_providers(
        &providers,
        &used,
        hint,
        crate::provider::PROBE_TIMEOUT,
    )
    .await;
    for warning in &found.warnings {
        eprintln!("warning: {warning}");
    }
    if !found.errors.is_empty() {
        return Err(Failure::from(anyhow::anyhow!(
            "{}",
            found.errors.join("\n")
        )));
    }
    let started_ms = chrono::Utc::now().timestamp_millis();
    let terminal = Arc::new(TerminalChannel::new());
    let finished = terminal.finished();
    let interactive = terminal.interactive();
    let daemon = DaemonBuilder::new(config)
        .role(Role::Chat)
        .agents(agents)
        .channel(terminal, &[LOCAL.to_string()])
        .owner("terminal", LOCAL)
        .without_http()
        .start()
        .await
        .map_err(start_failure)?;
    if let Some(id) = agent {
        let store = daemon.store();
        let now = daemon.runtime().clock.now_ms();
        let conversation = store
            .conversation("terminal", &hearth_channel::ChatRef::new(LOCAL), now)
            .await?;
        store
            .set_conversation_agent(conversation.id, Some(&id), true, now)
            .await?;
    }
    let interrupted = tokio::select! {
        () = finished.cancelled() => false,
        _ = tokio::signal::ctrl_c() => true,
    };
    if interrupted {
        // Ctrl-C leaves now: the answer being written is cancelled like `/cancel` does, not left
        // to finish (or to be resumed by the next chat).
        daemon.cancel_turns();
        if interactive {
            println!();
        }
        daemon.stop_within(CHAT_INTERRUPT_GRACE).await;
        return Ok(());
    }
    // A script piping lines in learns from the exit code that nothing was answered.
    let outcomes = if interactive {
        None
    } else {
        let store = daemon.store();
        let conversation = store
            .conversation("terminal", &hearth_channel::ChatRef::new(LOCAL), started_ms)
            .await?;
        Some(
            store
                .turn_outcomes_since(conversation.id, started_ms)
                .await?,
        )
    };
    daemon.stop().await;
    if let Some(outcomes) = outcomes
        && outcomes.total > 0
        && outcomes.failed == outcomes.total
    {
        return Err(Failure::from(anyhow::anyhow!(
            "every message failed ({} of {}); the last error: {}",
            outcomes.failed,
            outcomes.total,
            outcomes.last_error.as_deref().unwrap_or("unknown")
        )));
    }
    Ok(())
}

fn check(path: Option<PathBuf>) -> Result<(), Failure> {
    let loaded = load_config(path)?;
    let config = &loaded.config;
    let (agents, source) = load_agents(config)?;
    let provider_names: Vec<String> = config.providers.iter().map(|p| p.name.clone()).collect();
    let mut problems = agents.validate_against(&config.router.default_agent, &provider_names);
    let registry = crate::tool::ToolRegistry::with_builtin();
    let mut groups: Vec<&str> = crate::tool::KNOWN_GROUPS.to_vec();
    let mut tools: Vec<String> = registry.iter().map(|t| t.info().name.clone()).collect();
    // MCP servers are groups too; their tools are only known once connected, so any
    // `<server>__…` name of a configured server passes here.
    for server in &config.mcp_servers {
        groups.push(&server.name);
        let prefix = format!("{}__", server.name);
        for agent in agents.iter() {
            tools.extend(
                agent
                    .tools
                    .iter()
                    .filter(|t| t.starts_with(&prefix))
                    .cloned(),
            );
        }
    }
    let tools: Vec<&str> = tools.iter().map(String::as_str).collect();
    problems.extend(agents.validate_tools(&groups, &tools));
    for schedule in &config.schedules {
        if agents.get(&schedule.agent).is_none() {
            problems.push(format!(
                "schedules ({}): agent: there is no agent `{}`",
                schedule.name, schedule.agent
            ));
        }
    }
    let file = loaded
        .path
        .as_ref()
        .map_or("(defaults)".to_string(), |p| p.display().to_string());
    if !problems.is_empty() {
        let lines: Vec<String> = problems.iter().map(|p| format!("{file}: {p}")).collect();
        return Err(usage(anyhow::anyhow!("{}", lines.join("\n"))));
    }
    let agents_from = match source {
        AgentSource::Shipped => "the agents shipped with hearth".to_string(),
        AgentSource::File(path) => path.display().to_string(),
    };
    let providers = if config.providers.is_empty() {
        // What `hearth chat` and `hearth run` will use: the provider found in the environment.
        let (found, _) = crate::provider::effective_providers(&config.providers);
        match found.first() {
            Some(provider) => format!(
                "no [[providers]] configured: hearth uses {}",
                crate::provider::describe_discovered(provider)
            ),
            None => "no [[providers]] configured".to_string(),
        }
    } else {
        let names: Vec<&str> = config.providers.iter().map(|p| p.name.as_str()).collect();
        format!(
            "{} provider(s): {}",
            config.providers.len(),
            names.join(", ")
        )
    };
    println!(
        "configuration OK: {file}\n  {providers}\n  {} schedule(s), {} agent(s) from {agents_from}",
        config.schedules.len(),
        agents.len()
    );
    for warning in config::warnings(config) {
        println!("warning: {warning}");
    }
    Ok(())
}

async fn backup(path: Option<PathBuf>, file: &std::path::Path) -> Result<(), Failure> {
    let config = load_config(path)?.config;
    if file.exists() {
        return Err(usage(anyhow::anyhow!(
            "{} exists already; choose a new file name",
            file.display()
        )));
    }
    existing_database(&config)?;
    let store = Store::connect(&config.daemon.database_url())
        .await
        .context("cannot open the database")?;
    let result = store
        .backup_to(file)
        .await
        .with_context(|| format!("backup to {} failed", file.display()));
    store.close().await;
    result?;
    println!(
        "wrote a consistent copy of the database to {}",
        file.display()
    );
    Ok(())
}

async fn migrate(path: Option<PathBuf>) -> Result<(), Failure> {
    let config = load_config(path)?.config;
    let url = config.daemon.database_url();
    let store = Store::connect(&url)
        .await
        .context("cannot open the database")?;
    let applied = store.migrate().await.context("migration failed")?;
    println!(
        "{applied} migration(s) applied; the database is at version {}",
        store.known_migrations()
    );
    store.close().await;
    Ok(())
}

fn agents(path: Option<PathBuf>, action: AgentsAction) -> Result<(), Failure> {
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

fn route(path: Option<PathBuf>, text: &str, current: Option<&str>) -> Result<(), Failure> {
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

/// `text` safe to print on a terminal: control characters (escape sequences that could move
/// the cursor, rewrite lines or change the title) and bidirectional overrides (which reorder
/// what is shown) are written as `\u{…}` escapes.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            let bidi = matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
            if c.is_control() || bidi {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Refuses to go on when the configured SQLite database does not exist: a command that reads
/// what the daemon stored would otherwise create an empty database (in the current directory,
/// with the default `./data`) and report nothing, or approve nothing, silently.
pub fn existing_database(config: &Config) -> Result<(), Failure> {
    let Some(path) = crate::store::missing_database(&config.daemon.database_url()) else {
        return Ok(());
    };
    Err(usage(anyhow::anyhow!(
        "no database at {}: hearth has not run with this configuration, or runs with another one \
         (a relative data_dir such as \"./data\" is read from the current directory). Give this \
         command the service's configuration, e.g. `sudo hearth --config /etc/hearth/hearth.toml pair list`",
        path.display()
    )))
}

async fn pair(path: Option<PathBuf>, action: PairAction) -> Result<(), Failure> {
    let config = load_config(path)?.config;
    // Linking records an intention before the first start (22.7); everything else reads or
    // changes what the daemon stored.
    if !matches!(action, PairAction::Link { .. }) {
        existing_database(&config)?;
    }
    let store = Store::open(&config.daemon.database_url())
        .await
        .context("cannot open the database")?;
    let now = chrono::Utc::now().timestamp_millis();
    // The same identities the daemon would have at its start: the owner and the allowlists
    // are known even before hearth first ran (`pair link` to an address in daemon.owner).
    let allowlists = crate::channels::allowlists(&config.channels);
    let owners = crate::store::configured_owners(&config.daemon);
    if let Err(err) = store
        .sync_configured_identities(&allowlists, &owners, now)
        .await
    {
        store.close().await;
        return Err(Failure::from(
            anyhow::Error::new(err).context("cannot record the configured identities"),
        ));
    }
    let result = match action {
        PairAction::List => {
            let open = store.open_pairings(now).await?;
            if open.is_empty() {
                println!("no pending pairing codes");
            } else {
                println!("pending pairing codes:");
                for p in open {
                    let minutes = (p.expires_at - now) / 60_000;
                    // Names and ids come from strangers: never let them steer the terminal.
                    let name = printable(p.display_name.as_deref().unwrap_or(""));
                    println!(
                        "  {}  {}:{} {name} (expires in {minutes} min)",
                        p.code,
                        p.channel,
                        printable(&p.platform_user_id)
                    );
                }
            }
            list_users(&store).await
        }
        PairAction::Link { a, b } => link(&store, &a, &b, now).await,
        PairAction::Unlink { identity } => unlink(&store, &config, &identity, now).await,
        PairAction::Approve { code } => approve(&store, &code.to_uppercase(), now).await,
        PairAction::Permission { identity, level } => {
            set_user_setting(
                &store,
                &identity,
                "permission",
                &level,
                &["none", "read", "write", "execute", "admin"],
            )
            .await
        }
        PairAction::Autonomy { identity, level } => {
            set_user_setting(
                &store,
                &identity,
                "autonomy",
                &level,
                &["none", "low", "medium", "high", "full"],
            )
            .await
        }
        PairAction::Revoke { identity } => {
            let (channel, user) = identity.split_once(':').ok_or_else(|| {
                usage(anyhow::anyhow!(
                    "give the identity as channel:user_id, e.g. telegram:12345"
                ))
            })?;
            if store
                .set_identity_status(channel, user, crate::store::IdentityStatus::Revoked)
                .await?
            {
                println!("revoked {identity}; if it is in a config allowlist, remove it there too");
                Ok(())
            } else {
                Err(usage(anyhow::anyhow!(
                    "no identity {identity}; see `hearth pair list`"
                )))
            }
        }
    };
    store.close().await;
    result
}

/// Users with their identities grouped under them (only users that have identities).
async fn list_users(store: &Store) -> Result<(), Failure> {
    let users = store.users().await?;
    let users: Vec<_> = users.iter().filter(|u| !u.identities.is_empty()).collect();
    if users.is_empty() {
        println!("no users yet");
        return Ok(());
    }
    println!("users:");
    for user in users {
        let mut about = Vec::new();
        if user.is_owner {
            about.push("owner".to_string());
        }
        if let Some(permission) = &user.permission {
            about.push(format!("permission {permission}"));
        }
        if let Some(autonomy) = &user.autonomy {
            about.push(format!("autonomy {autonomy}"));
        }
        if about.is_empty() {
            println!("  user #{}", user.id);
        } else {
            println!("  user #{} ({})", user.id, about.join(", "));
        }
        for identity in &user.identities {
            let status = match identity.status {
                crate::store::IdentityStatus::Allowed => "allowed",
                crate::store::IdentityStatus::Revoked => "revoked",
            };
            println!(
                "    {}:{}  {status} ({})",
                identity.channel,
                printable(&identity.platform_user_id),
                identity.source
            );
        }
    }
    Ok(())
}

/// `channel:user_id` checked the way `daemon.owner` entries are.
fn identity_arg(text: &str) -> Result<(&str, &str), Failure> {
    crate::config::parse_identity(text).map_err(|message| usage(anyhow::anyhow!("{message}")))
}

fn link_failure(err: crate::store::LinkError) -> Failure {
    if err.is_refusal() {
        usage(anyhow::anyhow!("{err}"))
    } else {
        Failure::from(err)
    }
}

async fn link(store: &Store, a: &str, b: &str, now: i64) -> Result<(), Failure> {
    let (a, b) = (identity_arg(a)?, identity_arg(b)?);
    let outcome = store
        .link_identities(a, b, now)
        .await
        .map_err(link_failure)?;
    let (kept, joined, user) = (&outcome.kept, &outcome.joined, outcome.user_id);
    if outcome.already {
        println!("{joined} and {kept} are already one user (#{user}); nothing changed");
        return Ok(());
    }
    let mut line = format!("linked {joined} to {kept} (user #{user})");
    if outcome.created {
        line.push_str(&format!("; {joined} was new to hearth and is allowed now"));
    }
    if outcome.allowed_again {
        line.push_str(&format!("; {joined} was revoked and is allowed again"));
    }
    if let Some(merge) = &outcome.merge {
        line.push_str(&format!("; {merge}"));
    }
    println!("{line}");
    Ok(())
}

async fn unlink(store: &Store, config: &Config, identity: &str, now: i64) -> Result<(), Failure> {
    let (channel, user) = identity_arg(identity)?;
    // Owner identities are linked again at every start; unlinking them would not last.
    if config.daemon.owner_identities().contains(&(channel, user)) {
        return Err(usage(anyhow::anyhow!(
            "{identity} is listed in daemon.owner, and the owner's identities are linked again at every start; remove it there first"
        )));
    }
    if channel == "terminal" && user == LOCAL {
        return Err(usage(anyhow::anyhow!(
            "{identity} is the terminal of `hearth chat`, which always belongs to the owner"
        )));
    }
    let outcome = store
        .unlink_identity(channel, user, now)
        .await
        .map_err(link_failure)?;
    println!(
        "unlinked {identity}: it is user #{} now, with no data and default settings; the data stays with user #{} ({})",
        outcome.new_user,
        outcome.old_user,
        outcome.remaining.join(", ")
    );
    Ok(())
}

async fn set_user_setting(
    store: &Store,
    identity: &str,
    setting: &str,
    level: &str,
    levels: &[&str],
) -> Result<(), Failure> {
    let level = level.to_lowercase();
    if !levels.contains(&level.as_str()) {
        return Err(usage(anyhow::anyhow!(
            "{setting} must be one of {}",
            levels.join(", ")
        )));
    }
    let (channel, user) = identity.split_once(':').ok_or_else(|| {
        usage(anyhow::anyhow!(
            "give the identity as channel:user_id, e.g. telegram:12345"
        ))
    })?;
    if !store
        .set_user_setting(channel, user, setting, &level)
        .await?
    {
        return Err(usage(anyhow::anyhow!(
            "no identity {identity}; see `hearth pair list`"
        )));
    }
    println!("{identity}: {setting} is now {level}");
    Ok(())
}

async fn approve(store: &Store, code: &str, now: i64) -> Result<(), Failure> {
    let request = store.pairing(code).await?;
    let request = match request {
        Some(r) if r.status == "pending" && r.expires_at > now => r,
        Some(r) if r.status == "pending" => {
            return Err(usage(anyhow::anyhow!(
                "the code {code} has expired; the sender can write again for a new one"
            )));
        }
        Some(_) => return Err(usage(anyhow::anyhow!("the code {code} was already used"))),
        None => {
            return Err(usage(anyhow::anyhow!(
                "no pairing code {code}; see `hearth pair list`"
            )));
        }
    };
    store
        .allow_identity(
            &request.channel,
            &request.platform_user_id,
            request.display_name.as_deref(),
            "paired",
            false,
            now,
        )
        .await?;
    store.set_pairing_status(code, "approved").await?;
    let welcome = crate::store::NewOutbox {
        inbox_id: None,
        seq: 0,
        channel: request.channel.clone(),
        kind: crate::store::OutboxKind::Send,
        message: hearth_channel::OutboundMessage::text(
            hearth_channel::ChatRef::new(request.chat_id.clone()),
            "✅ You are approved. Say hello!",
        ),
    };
    store.enqueue_outbox(&[welcome], now).await?;
    println!(
        "approved {}:{}; they can talk to hearth now",
        request.channel, request.platform_user_id
    );
    Ok(())
}
