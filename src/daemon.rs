//! Wiring: opens the store, loads agents and providers, and starts the dispatcher, the delivery
//! worker, the channels (each under a supervisor) and the HTTP endpoints. `hearth run`,
//! `hearth chat` and the end-to-end tests all start hearth through [`DaemonBuilder`].
//!
//! Several processes may share one database, each in a [`Role`]: one daemon (`hearth run`, the
//! platform channels and the scheduler) and one terminal chat. Each handles only the work of its
//! own channels (pending inbox entries, replies to deliver, confirmations to expire) and leaves
//! the rest to the process that runs those channels; a lock keeps a second daemon (or a second
//! chat) from starting on the same database.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hearth_channel::{
    Backoff, Channel, ChannelContext, ChannelStatus, ErrorKind, StatusReporter, sleep_or_shutdown,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::agent::AgentSet;
use crate::clock::{SharedClock, SystemClock};
use crate::config::Config;
use crate::health::{ChannelHealth, Health};
use crate::metrics::Metrics;
use crate::pipeline::Channels;
use crate::pipeline::delivery::Delivery;
use crate::pipeline::dispatcher::Dispatcher;
use crate::pipeline::handler::Handler;
use crate::pipeline::sink::{InboxSink, StoreState};
use crate::provider::Providers;
use crate::runtime::Runtime;
use crate::store::{LockKind, ProcessLock, Store};
use crate::tool::ToolRegistry;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot open the database")]
    Store(#[from] crate::store::StoreError),
    /// Another process of the same role holds the database.
    #[error(transparent)]
    Lock(#[from] crate::store::LockError),
    #[error("cannot load the agents file")]
    Agents(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("cannot load the schedules")]
    Schedules(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("cannot set up the model providers")]
    Providers(#[source] crate::provider::ProviderError),
    #[error("cannot listen on {addr} (daemon.http_listen)")]
    Http {
        addr: String,
        source: std::io::Error,
    },
}

/// What a process is for; it decides which shared work the process takes on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Role {
    /// `hearth run`: the platform channels, the scheduler and `/healthz`. One per database.
    #[default]
    Daemon,
    /// `hearth chat`: the terminal only. It runs beside the daemon and never fires schedules;
    /// what a chat session leaves unfinished is closed, not resumed by the next session.
    Chat,
}

/// Why a chat session's leftovers are closed (stored with them).
const SESSION_ENDED: &str = "the chat session ended before it finished";

/// How often a chat looks for work the daemon stored for it (a schedule fired into the terminal).
const CHAT_PICKUP_INTERVAL: Duration = Duration::from_secs(2);

/// The longest the HTTP listener waits for open answers once the daemon stops.
const HTTP_STOP_LIMIT: Duration = Duration::from_secs(5);

/// A channel to run, with the platform user ids allowed to talk through it.
struct ChannelEntry {
    channel: Arc<dyn Channel>,
    allowed: Vec<String>,
}

pub struct DaemonBuilder {
    config: Config,
    clock: SharedClock,
    channels: Vec<ChannelEntry>,
    tools: Option<ToolRegistry>,
    agents: Option<AgentSet>,
    owner: Option<(String, String)>,
    http: bool,
    /// The HTTP channel's API, mounted on the listener.
    #[cfg(feature = "http")]
    http_api: Option<hearth_http::HttpApi>,
    role: Role,
}

impl DaemonBuilder {
    pub fn new(config: Config) -> Self {
        Self {
            config,
            clock: Arc::new(SystemClock),
            channels: Vec::new(),
            tools: None,
            agents: None,
            owner: None,
            http: true,
            #[cfg(feature = "http")]
            http_api: None,
            role: Role::Daemon,
        }
    }

    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Adds a channel whose `allowed` platform user ids may talk to hearth.
    pub fn channel(mut self, channel: Arc<dyn Channel>, allowed: &[String]) -> Self {
        self.channels.push(ChannelEntry {
            channel,
            allowed: allowed.to_vec(),
        });
        self
    }

    /// Replaces the built-in tool registry (tests add tools with observable side effects).
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = Some(tools);
        self
    }

    /// Uses these agents instead of loading `router.agents_file`.
    pub fn agents(mut self, agents: AgentSet) -> Self {
        self.agents = Some(agents);
        self
    }

    /// Makes `channel:user` the owner in addition to `daemon.owner` (the terminal's local user).
    pub fn owner(mut self, channel: &str, user: &str) -> Self {
        self.owner = Some((channel.into(), user.into()));
        self
    }

    /// Runs as `role` (the default is [`Role::Daemon`]).
    pub fn role(mut self, role: Role) -> Self {
        self.role = role;
        self
    }

    /// Serves the HTTP channel's API on the listener, answering with the daemon's store and
    /// agents (`http::backend`).
    #[cfg(feature = "http")]
    pub fn http_api(mut self, api: hearth_http::HttpApi) -> Self {
        self.http_api = Some(api);
        self
    }

    /// Skips the HTTP endpoints (the terminal chat does not need them).
    pub fn without_http(mut self) -> Self {
        self.http = false;
        self
    }

    /// Starts hearth: opens the store, syncs agents and identities, makes the runtime, then
    /// starts the workers, the channels and the HTTP endpoints, in that order.
    pub async fn start(self) -> Result<Daemon, StartError> {
        let config = Arc::new(self.config);
        let clock = self.clock;
        let role = self.role;
        // The built-in tools' schemas take a few milliseconds of CPU to make: another thread
        // makes them while this one waits for the database.
        let tools = self.tools;
        let tools =
            tokio::task::spawn_blocking(|| tools.unwrap_or_else(ToolRegistry::with_builtin));
        let (store, lock) = open_store(&config, role).await?;
        let now = clock.now_ms();
        let channel_names: Vec<String> = self
            .channels
            .iter()
            .map(|e| e.channel.name().to_string())
            .collect();

        let agents = match self.agents {
            Some(agents) => agents,
            None => AgentSet::load(&config.router.agents_file)
                .map(|(set, _)| set)
                .map_err(|err| StartError::Agents(Box::new(err)))?,
        };
        let agent_versions = store.sync_agents(&agents, now).await?;
        sync_identities(&store, &config, &self.channels, self.owner, now).await?;

        let (provider_configs, provider_hint) =
            crate::provider::effective_providers(&config.providers);
        let providers = Providers::from_config(&provider_configs, clock.clone())
            .map_err(StartError::Providers)?;
        let metrics = Arc::new(Metrics::default());
        let tools = tools
            .await
            .unwrap_or_else(|failed| std::panic::resume_unwind(failed.into_panic()));
        let rt = Arc::new(Runtime::new(
            store.clone(),
            clock.clone(),
            config.clone(),
            providers,
            tools,
            crate::runtime::Agents::new(agents, agent_versions),
            metrics.clone(),
            provider_hint,
        ));
        // What earlier runs learned of each model's tokens (README "Long conversations and cost").
        rt.estimator
            .load(store.calibrations().await?.iter().map(|row| {
                let calibration = crate::runtime::context::Calibration::from_row(row);
                (row.model.clone(), calibration)
            }));

        let channels: Channels = Arc::new(
            self.channels
                .iter()
                .map(|e| (e.channel.name().to_string(), e.channel.clone()))
                .collect(),
        );
        warn_unusable_approvals_route(&config, &channels);
        let workers = Workers::spawn(&rt, channels.clone(), role, &channel_names).await?;
        let statuses = spawn_channels(&self.channels, &workers, &config).await;
        let http_addr = match config.daemon.http_listen {
            Some(addr) if self.http => {
                // The HTTP channel's API, answering with the daemon's side of the channel.
                #[cfg(feature = "http")]
                let api = self.http_api.as_ref().map(|api| {
                    let routes = api.router(Arc::new(crate::http::backend::StoreBackend {
                        rt: rt.clone(),
                    }));
                    // `/mcp` logs in with the same tokens, behind the API's own check.
                    if config.mcp_server.enabled {
                        let mcp =
                            crate::mcp_server::http::routes(rt.clone(), workers.shutdown.clone());
                        routes.merge(api.guard(mcp))
                    } else {
                        routes
                    }
                });
                #[cfg(not(feature = "http"))]
                let api = None;
                Some(serve_http(addr, &rt, &workers, channels.clone(), api).await?)
            }
            _ => None,
        };
        tracing::info!(
            channels = channels.len(),
            agents = rt.agents().set.len(),
            "hearth is up"
        );

        Ok(Daemon {
            statuses,
            rt,
            shutdown: workers.shutdown,
            intake: workers.intake,
            tracker: workers.tracker,
            http_addr,
            outbox_wake: workers.outbox_wake,
            dispatcher: workers.dispatcher,
            role,
            channel_names,
            lock,
            health: workers.health,
        })
    }
}

/// Connects to the database and takes the role's lock before anything is written (a second
/// daemon must not even migrate), then migrates.
async fn open_store(config: &Config, role: Role) -> Result<(Store, ProcessLock), StartError> {
    let store = Store::connect(&config.daemon.database_url()).await?;
    let lock = store
        .lock(match role {
            Role::Daemon => LockKind::Daemon,
            Role::Chat => LockKind::Chat,
        })
        .await?;
    store.migrate().await?;
    Ok((store, lock))
}

/// Syncs the identities as configured now: each channel's allowlist and the owner's identities
/// (plus `extra_owner`, the terminal's owner identity for `hearth chat`), linked into one user.
async fn sync_identities(
    store: &Store,
    config: &Config,
    channels: &[ChannelEntry],
    extra_owner: Option<(String, String)>,
    now: i64,
) -> Result<(), StartError> {
    let mut owners = crate::store::configured_owners(&config.daemon);
    if let Some(extra) = extra_owner
        && !owners.contains(&extra)
    {
        owners.push(extra);
    }
    let allowlists: Vec<(String, Vec<String>)> = channels
        .iter()
        .map(|entry| (entry.channel.name().to_string(), entry.allowed.clone()))
        .collect();
    let merges = store
        .sync_configured_identities(&allowlists, &owners, now)
        .await
        .map_err(|err| match err {
            crate::store::LinkError::Store(err) => StartError::Store(err),
            // Every owner identity was just allowed and they are distinct, so a refusal
            // means the identities table is not what it should be.
            refusal => StartError::Store(crate::store::StoreError::Corrupt(format!(
                "linking the owner's identities: {refusal}"
            ))),
        })?;
    for linked in merges {
        if let Some(merge) = &linked.merge {
            tracing::info!(kept = %linked.kept, joined = %linked.joined, %merge, "owner identities linked into one user");
        }
    }
    Ok(())
}

/// The background work of a running hearth, and what the channels and the HTTP endpoints share
/// with it.
struct Workers {
    shutdown: CancellationToken,
    /// Cancelled first on stop: channels stop receiving while turns and deliveries finish.
    intake: CancellationToken,
    tracker: TaskTracker,
    outbox_wake: Arc<Notify>,
    dispatcher: Arc<Dispatcher>,
    sink: Arc<InboxSink>,
    health: Health,
    mcp: crate::tool::mcp::McpManager,
}

impl Workers {
    /// Starts the MCP servers, the dispatcher (with what was pending), the delivery worker, the
    /// scheduler (daemon) or the pickup of work stored for the chat, the confirmation expiry and
    /// the inbox retention.
    async fn spawn(
        rt: &Arc<Runtime>,
        channels: Channels,
        role: Role,
        channel_names: &[String],
    ) -> Result<Self, StartError> {
        let (store, clock, config, metrics) = (&rt.store, &rt.clock, &rt.config, &rt.metrics);
        let now = clock.now_ms();
        let shutdown = CancellationToken::new();
        let intake = shutdown.child_token();
        let tracker = TaskTracker::new();
        let outbox_wake = Arc::new(Notify::new());
        // MCP servers start in the background and add their tools as they connect.
        let mcp = crate::tool::mcp::McpManager::start(
            &config.mcp_servers,
            &rt.tools,
            metrics.clone(),
            &tracker,
            &shutdown,
            Some(&config.daemon.data_dir.join("mcp")),
        );
        // Set once, right after the runtime was made: nothing can have set it before.
        let _ = rt.mcp.set(mcp.clone());

        let background_wake = Arc::new(Notify::new());
        let handler = Arc::new(Handler {
            rt: rt.clone(),
            channels: channels.clone(),
            outbox: outbox_wake.clone(),
            shutdown: shutdown.clone(),
            tasks: tracker.clone(),
            answers: Default::default(),
            background_wake: background_wake.clone(),
        });
        let health = Health::default();
        let dispatcher = Dispatcher::new(
            handler.clone(),
            config.daemon.max_concurrent_conversations,
            tracker.clone(),
            shutdown.clone(),
            health.clone(),
        );
        if role == Role::Chat {
            // A chat that ended without closing its work (killed, a lost terminal) left it here;
            // its answers belong to that session, not to this one's first lines.
            let abandoned = store
                .abandon_channel_work(channel_names, SESSION_ENDED, now)
                .await?;
            if !abandoned.is_empty() {
                tracing::info!(
                    ?abandoned,
                    "closed what the last chat session left unfinished"
                );
            }
        }
        log_work_of_other_channels(store, channel_names).await;
        for (id, key) in store.pending_inbox(channel_names).await? {
            dispatcher.submit(id, key, false);
        }

        let in_doubt = store.requeue_interrupted_deliveries(channel_names).await?;
        if in_doubt > 0 {
            tracing::warn!(
                count = in_doubt,
                "replies were being delivered when hearth stopped; sending them again (a chat may show one twice)"
            );
        }
        let delivery = Delivery::new(
            store.clone(),
            clock.clone(),
            channels,
            metrics.clone(),
            outbox_wake.clone(),
            tracker.clone(),
            shutdown.clone(),
            handler.clone(),
        );
        tracker.spawn(delivery.run().instrument(tracing::info_span!("delivery")));

        let sink = Arc::new(InboxSink {
            store: store.clone(),
            clock: clock.clone(),
            metrics: metrics.clone(),
            dispatcher: dispatcher.clone(),
            health: health.clone(),
        });
        match role {
            Role::Daemon => {
                crate::scheduler::sync_config(
                    store,
                    &config.schedules,
                    config.daemon.timezone,
                    now,
                )
                .await
                .map_err(|err| StartError::Schedules(Box::new(err)))?;
                let scheduler =
                    crate::scheduler::Scheduler::new(store.clone(), clock.clone(), sink.clone());
                tracker.spawn(
                    scheduler
                        .run(shutdown.clone())
                        .instrument(tracing::info_span!("scheduler")),
                );
            }
            Role::Chat => {
                tracker.spawn(
                    pick_up_pending(
                        store.clone(),
                        dispatcher.clone(),
                        channel_names.to_vec(),
                        shutdown.clone(),
                    )
                    .instrument(tracing::info_span!("pickup")),
                );
            }
        }
        let runner = crate::pipeline::background::BackgroundRunner {
            sink: sink.clone(),
            handler,
            channels: channel_names.to_vec(),
            wake: background_wake,
        };
        tracker.spawn(
            runner
                .run(shutdown.clone())
                .instrument(tracing::info_span!("background_tasks")),
        );
        tracker.spawn(
            crate::pipeline::confirm::expire_confirmations(
                store.clone(),
                clock.clone(),
                sink.clone(),
                channel_names.to_vec(),
                shutdown.clone(),
            )
            .instrument(tracing::info_span!("confirmations")),
        );
        tracker.spawn(
            strip_old_inbox(
                store.clone(),
                clock.clone(),
                config.daemon.inbox_retention_days,
                shutdown.clone(),
            )
            .instrument(tracing::info_span!("inbox_retention")),
        );
        Ok(Self {
            shutdown,
            intake,
            tracker,
            outbox_wake,
            dispatcher,
            sink,
            health,
            mcp,
        })
    }
}

/// Starts each channel under its supervisor, with a context scoped to it (its own inbox, state
/// and directory); returns each channel's status reporter by name.
async fn spawn_channels(
    entries: &[ChannelEntry],
    workers: &Workers,
    config: &Config,
) -> Vec<(String, StatusReporter)> {
    let store = &workers.sink.store;
    let state = Arc::new(StoreState {
        store: store.clone(),
        clock: workers.sink.clock.clone(),
    });
    let allowlist: Arc<dyn hearth_channel::Allowlist> =
        Arc::new(crate::pipeline::sink::StoreAllowlist {
            store: store.clone(),
        });
    let mut statuses = Vec::with_capacity(entries.len());
    for entry in entries {
        // The command list is the daemon's; channels with a command menu show it.
        if let Err(err) = entry
            .channel
            .register_commands(crate::router::COMMANDS)
            .await
        {
            tracing::warn!(channel = %entry.channel.name(), error = %err, "registering the chat commands failed");
        }
        let name = entry.channel.name().to_string();
        let status = StatusReporter::new();
        // Shown as connecting from the start, before the supervisor task first runs.
        let shown = ChannelHealth::from(&status.current());
        workers.health.set_channel(&name, shown.state, shown.error);
        statuses.push((name.clone(), status.clone()));
        let ctx = ChannelContext::new(
            &name,
            workers.intake.child_token(),
            workers.sink.clone(),
            state.clone(),
            hearth_channel::channel_data_dir(&config.daemon.data_dir, &name),
            status,
        )
        .with_allowlist(allowlist.clone());
        workers.tracker.spawn(
            supervise(entry.channel.clone(), ctx, workers.health.clone())
                .instrument(tracing::info_span!("channel", %name)),
        );
    }
    statuses
}

/// Listens on `addr` and serves `/healthz`, `/metrics`, the owner's page and `api` (the HTTP
/// channel's routes, when it is configured) until shutdown; returns the address it listens on
/// (port 0 picks one).
async fn serve_http(
    addr: SocketAddr,
    rt: &Arc<Runtime>,
    workers: &Workers,
    channels: Channels,
    api: Option<axum::Router>,
) -> Result<SocketAddr, StartError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Http {
            addr: addr.to_string(),
            source,
        })?;
    let local = listener.local_addr().map_err(|source| StartError::Http {
        addr: addr.to_string(),
        source,
    })?;
    let app = crate::http::router(crate::http::HttpState {
        store: rt.store.clone(),
        metrics: rt.metrics.clone(),
        health: workers.health.clone(),
        dispatcher: workers.dispatcher.clone(),
        mcp: workers.mcp.clone(),
        channels: channels.clone(),
    })
    .merge(crate::web::router(crate::web::WebState {
        rt: rt.clone(),
        health: workers.health.clone(),
        dispatcher: workers.dispatcher.clone(),
        mcp: workers.mcp.clone(),
        sink: workers.sink.clone(),
        channels,
        outbox_wake: workers.outbox_wake.clone(),
        shutdown: workers.shutdown.clone(),
        throttle: std::sync::Arc::default(),
        flash: std::sync::Arc::default(),
        started: std::time::Instant::now(),
    }));
    let app = match api {
        Some(api) => app.merge(api),
        None => app,
    };
    let limits = crate::http::listener::Limits {
        header_read_timeout: Duration::from_secs(rt.config.daemon.http_header_timeout_secs),
        max_connections: rt.config.daemon.http_max_connections,
        // The listener stops after the turns' grace period, when event streams have ended
        // already: what is left are short answers, so systemd's stop timeout is not overrun.
        grace: Duration::from_secs(rt.config.daemon.shutdown_grace_secs).min(HTTP_STOP_LIMIT),
    };
    // Checked by the listener for every request, whatever route it is for.
    let hosts = Arc::new(crate::web::auth::HostAllowlist::new(
        &addr.to_string(),
        local.port(),
        &rt.config.web.hosts,
    ));
    workers.tracker.spawn(
        crate::http::listener::serve(listener, app, limits, hosts, workers.shutdown.clone())
            .instrument(tracing::info_span!("http", %local)),
    );
    Ok(local)
}

/// Says, once at start, what waits in the database for channels this process does not run, so
/// a message that nobody answers is never a mystery.
async fn log_work_of_other_channels(store: &Store, own: &[String]) {
    match store.pending_work_by_channel().await {
        Ok(work) => {
            for (channel, inbox, outbox) in work {
                if !own.contains(&channel) {
                    tracing::info!(
                        %channel,
                        inbox,
                        outbox,
                        "work waits for a channel this process does not run; the process that runs it handles it"
                    );
                }
            }
        }
        Err(err) => tracing::debug!(error = %err, "counting pending work failed"),
    }
}

/// The chat's dispatcher learns of its own messages from its sink; entries the daemon stored
/// for the terminal (a schedule's fire) are found here.
async fn pick_up_pending(
    store: Store,
    dispatcher: Arc<Dispatcher>,
    channels: Vec<String>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(CHAT_PICKUP_INTERVAL) => {}
            () = shutdown.cancelled() => return,
        }
        match store.pending_inbox(&channels).await {
            // Entries already queued or running are ignored by `submit`.
            Ok(pending) => {
                for (id, key) in pending {
                    dispatcher.submit(id, key, false);
                }
            }
            Err(err) => tracing::debug!(error = %err, "looking for pending entries failed"),
        }
    }
}

/// Strips the content of inbox entries handled more than `retention_days` ago, and the texts
/// of HTTP turns that ended that long ago, once a minute after start and then hourly, a batch
/// at a time so no transaction holds the database long.
async fn strip_old_inbox(
    store: Store,
    clock: SharedClock,
    retention_days: u32,
    shutdown: CancellationToken,
) {
    const BATCH: usize = 500;
    let retention_ms = i64::from(retention_days) * 24 * 60 * 60 * 1000;
    let mut wait = Duration::from_secs(60);
    loop {
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shutdown.cancelled() => return,
        }
        wait = Duration::from_secs(60 * 60);
        loop {
            let now = clock.now_ms();
            match store
                .strip_handled_inbox(now - retention_ms, BATCH, now)
                .await
            {
                Ok(stripped) => {
                    if stripped > 0 {
                        tracing::info!(
                            stripped,
                            retention_days,
                            "old inbox entries stripped of their content"
                        );
                    }
                    if stripped < BATCH || shutdown.is_cancelled() {
                        break;
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "stripping old inbox entries failed; will retry");
                    break;
                }
            }
        }
        // What HTTP clients' turns said (events with tool results, answers, the transcripts a
        // chat app sent) is kept as long as the inbox keeps its messages, and no longer.
        loop {
            match store
                .strip_ended_http_turns(clock.now_ms() - retention_ms, BATCH)
                .await
            {
                Ok(stripped) => {
                    if stripped > 0 {
                        tracing::info!(
                            stripped,
                            retention_days,
                            "old HTTP turns stripped of their events and texts"
                        );
                    }
                    if stripped < BATCH || shutdown.is_cancelled() {
                        break;
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "stripping old HTTP turns failed; will retry");
                    break;
                }
            }
        }
    }
}

/// The wait before the first restart of a channel after a temporary failure; it doubles with
/// each failure in a row, up to [`RESTART_BACKOFF_MAX`].
const RESTART_BACKOFF_START: Duration = Duration::from_secs(1);
const RESTART_BACKOFF_MAX: Duration = Duration::from_secs(300);
/// A run at least this long counts as healthy: when it ends, the backoff starts over at
/// [`RESTART_BACKOFF_START`]. A fixed minute rather than "longer than the current backoff",
/// so the rule does not depend on how deaf the channel already was: a connection that held
/// for a minute was a working session, and its end says nothing about the glitches before it,
/// while a channel that fails within seconds of each start keeps doubling its wait.
const HEALTHY_RUN: Duration = Duration::from_secs(60);

/// Runs a channel, restarting it with backoff after temporary failures; configuration and
/// authentication failures mark it failed without a hot loop, and never touch other channels.
///
/// The health map shows what the adapter reports through its context (connecting until the
/// platform accepted the login, then connected); the supervisor itself reports reconnecting
/// after a failed run, failed when it gives up and stopped at shutdown.
async fn supervise(channel: Arc<dyn Channel>, ctx: ChannelContext, health: Health) {
    let name = channel.name().to_string();
    let status = ctx.status.clone();
    let mut reported = status.subscribe();
    let set = |state: &ChannelStatus| {
        let shown = ChannelHealth::from(state);
        health.set_channel(&name, shown.state, shown.error);
    };
    // Stores that must persist (Matrix's crypto store) live here; the adapter may rely on it.
    if let Err(err) = crate::store::create_private_dir(&ctx.data_dir) {
        let reason = format!(
            "cannot create its data directory {}: {err}",
            ctx.data_dir.display()
        );
        tracing::error!(channel = %name, %reason, "channel failed; it stays off until the next start");
        status.failed(reason);
        set(&status.current());
        return;
    }
    let mut backoff = Backoff::new(RESTART_BACKOFF_START, RESTART_BACKOFF_MAX);
    loop {
        set(&status.current());
        let started = tokio::time::Instant::now();
        let run = channel.run(ctx.clone());
        tokio::pin!(run);
        let result = loop {
            tokio::select! {
                result = &mut run => break result,
                // The sender lives in `ctx`, so this only ends with a new report.
                Ok(()) = reported.changed() => {
                    let now = reported.borrow_and_update().clone();
                    set(&now);
                }
            }
        };
        match result {
            Ok(()) => {
                status.set(ChannelStatus::Stopped);
                set(&ChannelStatus::Stopped);
                return;
            }
            Err(err) if matches!(err.kind, ErrorKind::Config | ErrorKind::Auth) => {
                tracing::error!(channel = %name, error = %err, "channel failed; it stays off until the next start");
                status.failed(err.to_string());
                set(&status.current());
                return;
            }
            Err(err) => {
                if started.elapsed() >= HEALTHY_RUN {
                    backoff.reset();
                }
                let step = backoff.next();
                let wait = err.retry_after().unwrap_or(step);
                tracing::warn!(channel = %name, error = %err, wait_secs = wait.as_secs_f64(), "channel stopped; reconnecting");
                status.reconnecting(err.to_string());
                set(&status.current());
                if sleep_or_shutdown(&ctx.shutdown, wait).await {
                    status.set(ChannelStatus::Stopped);
                    set(&ChannelStatus::Stopped);
                    return;
                }
            }
        }
    }
}

/// A running hearth.
pub struct Daemon {
    /// Each channel's reported state by name, for [`Daemon::channels_settled`] and the status
    /// line (read at the source, so READY=1 never shows a state older than the one it waited
    /// for).
    statuses: Vec<(String, StatusReporter)>,
    rt: Arc<Runtime>,
    shutdown: CancellationToken,
    intake: CancellationToken,
    tracker: TaskTracker,
    http_addr: Option<SocketAddr>,
    outbox_wake: Arc<Notify>,
    dispatcher: Arc<Dispatcher>,
    role: Role,
    /// The channels this process runs: the only ones whose work it touches.
    channel_names: Vec<String>,
    /// Held until the daemon has stopped and closed the database.
    lock: ProcessLock,
    /// What `/healthz` reports.
    health: Health,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("http_addr", &self.http_addr)
            .finish_non_exhaustive()
    }
}

impl Daemon {
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.rt
    }

    pub fn store(&self) -> &Store {
        &self.rt.store
    }

    /// What `/healthz` reports, shared with it.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// Where `/healthz` and `/metrics` listen, when they do.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Cancelled when the daemon stops; a channel or the CLI may cancel it to stop the daemon.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Wakes the delivery worker (after replies were added to the outbox from outside).
    pub fn wake_delivery(&self) {
        self.outbox_wake.notify_one();
    }

    /// Waits until every channel got past its first login: connected, failed, or retrying after
    /// a failed attempt (see [`ChannelStatus::is_settled`]). `hearth run` sends systemd READY=1
    /// only then, so "active" means the channels are up (or known to be down).
    pub async fn channels_settled(&self) {
        for (_, status) in &self.statuses {
            let mut seen = status.subscribe();
            // The sender lives in `self.statuses`, so this only ends when the state settles.
            let _ = seen.wait_for(ChannelStatus::is_settled).await;
        }
    }

    /// One line for systemd's STATUS=: the channels and their states.
    pub fn status_line(&self) -> String {
        if self.statuses.is_empty() {
            return "running, no channels configured".into();
        }
        let mut channels: Vec<String> = self
            .statuses
            .iter()
            .map(|(name, status)| format!("{name} {}", status.current().as_str()))
            .collect();
        channels.sort();
        format!("running: {}", channels.join(", "))
    }

    /// Entries queued or being handled.
    pub fn busy(&self) -> usize {
        self.dispatcher.queued()
    }

    /// Cancels every running turn for good, as `/cancel` does: each ends with "Cancelled" and
    /// is not resumed later. `hearth chat` does this on Ctrl-C before it stops.
    pub fn cancel_turns(&self) -> usize {
        self.dispatcher.cancel_running()
    }

    /// Stops gracefully: channels stop receiving, running turns get up to
    /// `daemon.shutdown_grace_secs` to finish and their replies to go out, then whatever is
    /// still running is suspended (it resumes at the next start) and the database is closed.
    pub async fn stop(self) {
        let grace = Duration::from_secs(self.rt.config.daemon.shutdown_grace_secs);
        self.stop_within(grace).await;
    }

    /// [`Daemon::stop`] with a grace period of `grace` instead of the configured one.
    pub async fn stop_within(self, grace: Duration) {
        self.intake.cancel();
        let deadline = tokio::time::Instant::now() + grace;
        while tokio::time::Instant::now() < deadline && !self.shutdown.is_cancelled() {
            let outbox_empty = self
                .rt
                .store
                .outbox_depth_of(&self.channel_names)
                .await
                .map_or(true, |depth| depth == 0);
            if self.dispatcher.queued() == 0 && outbox_empty {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.shutdown.cancel();
        self.tracker.close();
        self.tracker.wait().await;
        if self.role == Role::Chat {
            let closed = self
                .rt
                .store
                .abandon_channel_work(&self.channel_names, SESSION_ENDED, self.rt.clock.now_ms())
                .await;
            match closed {
                Ok(abandoned) if !abandoned.is_empty() => {
                    tracing::debug!(?abandoned, "closed the session's unfinished work");
                }
                Ok(_) => {}
                // The next chat's start closes it instead.
                Err(err) => {
                    tracing::warn!(error = %err, "closing the session's unfinished work failed")
                }
            }
        }
        self.rt.store.close().await;
        self.lock.release().await;
    }

    /// Cancelled to begin a graceful stop (see [`Daemon::stop`]); the CLI cancels it on SIGTERM.
    pub fn stop_token(&self) -> CancellationToken {
        self.intake.clone()
    }

    /// Waits until [`Daemon::stop_token`] (or the shutdown token) is cancelled, then stops.
    pub async fn run_until_stopped(self) {
        self.intake.cancelled().await;
        self.stop().await;
    }
}

/// Says at start when `daemon.approvals_to` cannot be used by this process: its channel is not
/// run here, or shows no buttons. Prompts then wait in their own chat only.
fn warn_unusable_approvals_route(config: &Config, channels: &Channels) {
    let Some((name, _)) = config.daemon.approvals_to() else {
        return;
    };
    match channels.get(name) {
        None => tracing::info!(
            channel = name,
            "daemon.approvals_to names a channel this process does not run; its prompts are not routed"
        ),
        Some(channel) if !channel.capabilities().shows_buttons() => tracing::warn!(
            channel = name,
            "daemon.approvals_to names a channel that shows no buttons; prompts are not routed there"
        ),
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use async_trait::async_trait;
    use hearth_channel::testkit::{MemoryState, RecordingSink};
    use hearth_channel::{Capabilities, ChannelError, MessageRef, OutboundMessage};
    use tokio::time::Instant;

    use super::*;

    /// A channel whose runs each last a scripted time and then fail with a temporary error;
    /// once the script is used up it runs until shutdown.
    #[derive(Default)]
    struct Glitchy {
        script: Mutex<VecDeque<Duration>>,
        /// When each run started and, for failed ones, when it failed.
        runs: Mutex<Vec<(Instant, Option<Instant>)>>,
    }

    impl Glitchy {
        fn runs(&self) -> Vec<(Instant, Option<Instant>)> {
            self.runs.lock().unwrap_or_else(|p| p.into_inner()).clone()
        }
    }

    #[async_trait]
    impl Channel for Glitchy {
        fn name(&self) -> &str {
            "glitchy"
        }
        fn capabilities(&self) -> Capabilities {
            Capabilities::default()
        }
        async fn run(&self, ctx: ChannelContext) -> Result<(), ChannelError> {
            let started = Instant::now();
            let next = self
                .script
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front();
            ctx.status.connected();
            let Some(lasts) = next else {
                self.runs
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((started, None));
                ctx.shutdown.cancelled().await;
                return Ok(());
            };
            tokio::time::sleep(lasts).await;
            self.runs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((started, Some(Instant::now())));
            Err(ChannelError::transient("connection reset"))
        }
        async fn send(&self, _message: &OutboundMessage) -> Result<MessageRef, ChannelError> {
            Err(ChannelError::rejected("receive-only test channel"))
        }
        async fn edit(
            &self,
            _target: &MessageRef,
            _message: &OutboundMessage,
        ) -> Result<(), ChannelError> {
            Err(ChannelError::rejected("receive-only test channel"))
        }
    }

    /// The defect: every glitch doubled the wait, however long the channel had worked in
    /// between, so isolated glitches made it deaf for up to five minutes.
    #[tokio::test(start_paused = true)]
    async fn the_restart_backoff_starts_over_after_a_healthy_run() {
        let secs = Duration::from_secs;
        let script = [0, 0, 0, 0, 120, 0, 0, 90, 0, 59].map(secs);
        let channel = Arc::new(Glitchy {
            script: Mutex::new(script.into_iter().collect()),
            ..Glitchy::default()
        });
        let health = Health::default();
        let shutdown = CancellationToken::new();
        let data_dir = std::env::temp_dir().join("hearth-supervise-test");
        let ctx = ChannelContext::new(
            "glitchy",
            shutdown.clone(),
            Arc::new(RecordingSink::new()),
            Arc::new(MemoryState::new()),
            data_dir,
            StatusReporter::new(),
        );
        let supervisor = tokio::spawn(supervise(channel.clone(), ctx, health.clone()));
        while channel.runs().len() <= script.len() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let runs = channel.runs();
        let waits: Vec<Duration> = runs
            .windows(2)
            .map(|pair| pair[1].0 - pair[0].1.expect("a failed run"))
            .collect();
        // Doubling while glitches come in a row; back to 1 s after the 120 s and 90 s runs;
        // a 59 s run is not long enough to count as healthy.
        assert_eq!(waits, [1, 2, 4, 8, 1, 2, 4, 1, 2, 4].map(secs));
        assert_eq!(health.channels()["glitchy"].state, "connected");
        shutdown.cancel();
        supervisor.await.expect("supervisor ends");
        assert_eq!(health.channels()["glitchy"].state, "stopped");
    }
}
