//! The command line (DESIGN.md §8). Exit codes: 0 ok, 2 bad usage or configuration, 1 a
//! failure at run time; errors print as one line plus their causes.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::agent::{AgentSet, AgentSource};
use crate::config::{self, Config, LoadedConfig};
use crate::daemon::DaemonBuilder;
use crate::router::{RouteInput, Router, explain};
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
    /// Pending pairing codes and known identities (the default).
    List,
    /// Allow the sender who got this code.
    Approve { code: String },
    /// Revoke an identity, given as channel:user_id.
    Revoke { identity: String },
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
    }
}

fn load_config(path: Option<PathBuf>) -> Result<LoadedConfig, Failure> {
    config::load(path.as_deref()).map_err(|errors| usage(anyhow::anyhow!("{errors}")))
}

fn load_agents(config: &Config) -> Result<(AgentSet, AgentSource), Failure> {
    AgentSet::load(&config.router.agents_file).map_err(|err| usage(anyhow::anyhow!("{err}")))
}

async fn run_daemon(path: Option<PathBuf>) -> Result<(), Failure> {
    let loaded = load_config(path)?;
    match &loaded.path {
        Some(path) => tracing::info!(config = %path.display(), "configuration loaded"),
        None => tracing::warn!("no configuration file found; running on defaults"),
    }
    let config = loaded.config;
    let mut builder = DaemonBuilder::new(config.clone());
    let channels = crate::channels::build(&config.channels, &config.daemon.data_dir)
        .map_err(|err| usage(anyhow::anyhow!("{err}")))?;
    for built in channels {
        builder = builder.channel(built.channel, &built.allowed);
    }
    let agents_file = config.router.agents_file.clone();
    let notifier = crate::systemd::Notifier::from_env();
    notifier.status("starting");
    let daemon = builder.start().await.context("hearth could not start")?;
    notifier.ready(&daemon.status_line());
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
    let terminal = Arc::new(TerminalChannel::new());
    let finished = terminal.finished();
    let daemon = DaemonBuilder::new(config)
        .agents(agents)
        .channel(terminal, &[LOCAL.to_string()])
        .owner("terminal", LOCAL)
        .without_http()
        .start()
        .await
        .context("hearth could not start")?;
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
    tokio::select! {
        () = finished.cancelled() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    daemon.stop().await;
    Ok(())
}

fn check(path: Option<PathBuf>) -> Result<(), Failure> {
    let loaded = load_config(path)?;
    let config = &loaded.config;
    let (agents, source) = load_agents(config)?;
    let provider_names: Vec<String> = config.providers.iter().map(|p| p.name.clone()).collect();
    let mut problems = agents.validate_against(&config.router.default_agent, &provider_names);
    let registry = crate::tool::ToolRegistry::with_builtin();
    let groups: Vec<&str> = crate::tool::KNOWN_GROUPS.to_vec();
    let tools: Vec<&str> = registry.iter().map(|t| t.info().name.as_str()).collect();
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
    println!(
        "configuration OK: {file}\n  {} provider(s), {} schedule(s), {} agent(s) from {agents_from}",
        config.providers.len(),
        config.schedules.len(),
        agents.len()
    );
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
    let router = Router::new(&agents);
    let decision = router.route(RouteInput {
        text,
        current_agent: current,
        sticky: current.is_some(),
        default_agent: &config.router.default_agent,
    });
    println!("{}", explain(&decision, &agents));
    Ok(())
}

async fn pair(path: Option<PathBuf>, action: PairAction) -> Result<(), Failure> {
    let config = load_config(path)?.config;
    let store = Store::open(&config.daemon.database_url())
        .await
        .context("cannot open the database")?;
    let now = chrono::Utc::now().timestamp_millis();
    let result = match action {
        PairAction::List => {
            let open = store.open_pairings(now).await?;
            if open.is_empty() {
                println!("no pending pairing codes");
            } else {
                println!("pending pairing codes:");
                for p in open {
                    let minutes = (p.expires_at - now) / 60_000;
                    let name = p.display_name.as_deref().unwrap_or("");
                    println!(
                        "  {}  {}:{} {name} (expires in {minutes} min)",
                        p.code, p.channel, p.platform_user_id
                    );
                }
            }
            println!("identities:");
            for identity in store.identities().await? {
                let status = match identity.status {
                    crate::store::IdentityStatus::Allowed => "allowed",
                    crate::store::IdentityStatus::Revoked => "revoked",
                };
                let owner = if identity.is_owner { ", owner" } else { "" };
                println!(
                    "  {}:{}  {status} ({}{owner})",
                    identity.channel, identity.platform_user_id, identity.source
                );
            }
            Ok(())
        }
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
