//! Wiring: opens the store, loads agents and providers, and starts the dispatcher, the delivery
//! worker, the channels (each under a supervisor) and the HTTP endpoints. `hearth run`,
//! `hearth chat` and the end-to-end tests all start hearth through [`DaemonBuilder`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_channel::{Channel, ChannelContext, ErrorKind};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::agent::AgentSet;
use crate::clock::{SharedClock, SystemClock};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::pipeline::Channels;
use crate::pipeline::delivery::Delivery;
use crate::pipeline::dispatcher::Dispatcher;
use crate::pipeline::handler::Handler;
use crate::pipeline::sink::{InboxSink, StoreState};
use crate::provider::Providers;
use crate::runtime::Runtime;
use crate::store::Store;
use crate::tool::ToolRegistry;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot open the database")]
    Store(#[from] crate::store::StoreError),
    #[error("cannot load the agents file")]
    Agents(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("cannot load the schedules")]
    Schedules(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("cannot set up the model providers")]
    Providers(#[source] crate::provider::ProviderError),
    #[error("cannot listen on {addr}")]
    Http {
        addr: String,
        source: std::io::Error,
    },
}

/// The state of one channel, as `/healthz` reports it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ChannelHealth {
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub type Health = Arc<Mutex<HashMap<String, ChannelHealth>>>;

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

    /// Skips the HTTP endpoints (the terminal chat does not need them).
    pub fn without_http(mut self) -> Self {
        self.http = false;
        self
    }

    pub async fn start(self) -> Result<Daemon, StartError> {
        let config = Arc::new(self.config);
        let clock = self.clock;
        let store = Store::open(&config.daemon.database_url()).await?;
        let now = clock.now_ms();

        let agents = match self.agents {
            Some(agents) => agents,
            None => AgentSet::load(&config.router.agents_file)
                .map(|(set, _)| set)
                .map_err(|err| StartError::Agents(Box::new(err)))?,
        };
        store.sync_agents(&agents, now).await?;

        let (provider_configs, provider_hint) =
            crate::provider::effective_providers(&config.providers);
        let providers = Providers::from_config(&provider_configs, clock.clone())
            .map_err(StartError::Providers)?;

        // Identities: the allowlists and the owner, as configured now.
        for entry in &self.channels {
            let name = entry.channel.name().to_string();
            let mut keep = entry.allowed.clone();
            if let Some((channel, user)) = config.daemon.owner_identity()
                && channel == name
            {
                keep.push(user.to_string());
            }
            store
                .sync_allowlist(&name, &entry.allowed, &keep, now)
                .await?;
        }
        let owner = config
            .daemon
            .owner_identity()
            .map(|(c, u)| (c.to_string(), u.to_string()));
        for (channel, user) in owner.into_iter().chain(self.owner) {
            store
                .allow_identity(&channel, &user, None, "owner", true, now)
                .await?;
        }

        let metrics = Arc::new(Metrics::default());
        let tools = self.tools.unwrap_or_else(ToolRegistry::with_builtin);
        let rt = Arc::new(Runtime::new(
            store.clone(),
            clock.clone(),
            config.clone(),
            providers,
            tools,
            agents,
            metrics.clone(),
            provider_hint,
        ));

        let shutdown = CancellationToken::new();
        // Cancelled first on stop: channels stop receiving while turns and deliveries finish.
        let intake = shutdown.child_token();
        let tracker = TaskTracker::new();
        let channels: Channels = Arc::new(
            self.channels
                .iter()
                .map(|e| (e.channel.name().to_string(), e.channel.clone()))
                .collect(),
        );
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

        let handler = Arc::new(Handler {
            rt: rt.clone(),
            channels: channels.clone(),
            outbox: outbox_wake.clone(),
            shutdown: shutdown.clone(),
        });
        let dispatcher = Dispatcher::new(
            handler,
            config.daemon.max_concurrent_conversations,
            tracker.clone(),
            shutdown.clone(),
        );
        for (id, key) in store.pending_inbox().await? {
            dispatcher.submit(id, key, false);
        }

        let in_doubt = store.requeue_interrupted_deliveries().await?;
        if in_doubt > 0 {
            tracing::warn!(
                count = in_doubt,
                "replies were being delivered when hearth stopped; sending them again (a chat may show one twice)"
            );
        }
        let delivery = Delivery::new(
            store.clone(),
            clock.clone(),
            channels.clone(),
            metrics.clone(),
            outbox_wake.clone(),
            tracker.clone(),
        );
        tracker.spawn(
            delivery
                .clone()
                .run(shutdown.clone())
                .instrument(tracing::info_span!("delivery")),
        );

        let health: Health = Arc::new(Mutex::new(HashMap::new()));
        let sink = Arc::new(InboxSink {
            store: store.clone(),
            clock: clock.clone(),
            metrics: metrics.clone(),
            dispatcher: dispatcher.clone(),
        });
        crate::scheduler::sync_config(&store, &config.schedules, &config.daemon.timezone, now)
            .await
            .map_err(|err| StartError::Schedules(Box::new(err)))?;
        let scheduler =
            crate::scheduler::Scheduler::new(store.clone(), clock.clone(), sink.clone());
        tracker.spawn(
            scheduler
                .run(shutdown.clone())
                .instrument(tracing::info_span!("scheduler")),
        );
        tracker.spawn(
            expire_confirmations(store.clone(), clock.clone(), sink.clone(), shutdown.clone())
                .instrument(tracing::info_span!("confirmations")),
        );
        let state = Arc::new(StoreState {
            store: store.clone(),
            clock: clock.clone(),
        });
        for entry in &self.channels {
            let ctx = ChannelContext {
                shutdown: intake.child_token(),
                sink: sink.clone(),
                state: state.clone(),
            };
            let name = entry.channel.name().to_string();
            tracker.spawn(
                supervise(entry.channel.clone(), ctx, health.clone())
                    .instrument(tracing::info_span!("channel", %name)),
            );
        }

        let http_addr = if self.http && !config.daemon.http_listen.is_empty() {
            let addr = config.daemon.http_listen.clone();
            let listener = tokio::net::TcpListener::bind(&addr)
                .await
                .map_err(|source| StartError::Http {
                    addr: addr.clone(),
                    source,
                })?;
            let local = listener
                .local_addr()
                .map_err(|source| StartError::Http { addr, source })?;
            let app = crate::http::router(crate::http::HttpState {
                store: store.clone(),
                metrics: metrics.clone(),
                health: health.clone(),
                dispatcher: dispatcher.clone(),
                mcp: mcp.clone(),
            });
            let stop = shutdown.clone();
            tracker.spawn(async move {
                let served = axum::serve(listener, app)
                    .with_graceful_shutdown(async move { stop.cancelled().await })
                    .await;
                if let Err(err) = served {
                    tracing::error!(error = %err, "HTTP server stopped");
                }
            });
            Some(local)
        } else {
            None
        };
        tracing::info!(
            channels = channels.len(),
            agents = rt.agents().set.len(),
            "hearth is up"
        );

        Ok(Daemon {
            health,
            rt,
            shutdown,
            intake,
            tracker,
            http_addr,
            outbox_wake,
            dispatcher,
        })
    }
}

/// Turns confirmations whose time is up into expiry events in their conversation's queue.
async fn expire_confirmations(
    store: Store,
    clock: SharedClock,
    sink: Arc<InboxSink>,
    shutdown: CancellationToken,
) {
    use hearth_channel::InboundSink;
    loop {
        match store.expired_confirmations(clock.now_ms()).await {
            Ok(expired) => {
                for confirmation in expired {
                    let chat = hearth_channel::ChatRef {
                        chat_id: confirmation.chat_id.clone(),
                        thread_id: confirmation.thread_id.clone(),
                    };
                    let event = crate::pipeline::confirm::expiry_event(&confirmation.id, chat);
                    if let Err(err) = sink.deliver(&confirmation.channel, event).await {
                        tracing::warn!(error = %err, "queueing a confirmation expiry failed; will retry");
                    }
                }
            }
            Err(err) => tracing::warn!(error = %err, "reading expired confirmations failed"),
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
            () = shutdown.cancelled() => return,
        }
    }
}

/// Runs a channel, restarting it with backoff after temporary failures; configuration and
/// authentication failures mark it failed without a hot loop, and never touch other channels.
async fn supervise(channel: Arc<dyn Channel>, ctx: ChannelContext, health: Health) {
    let name = channel.name().to_string();
    let set = |state: &'static str, error: Option<String>| {
        health
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.clone(), ChannelHealth { state, error });
    };
    let mut backoff = Duration::from_secs(1);
    loop {
        set("connected", None);
        match channel.run(ctx.clone()).await {
            Ok(()) => {
                set("stopped", None);
                return;
            }
            Err(err) if matches!(err.kind, ErrorKind::Config | ErrorKind::Auth) => {
                tracing::error!(channel = %name, error = %err, "channel failed; it stays off until the next start");
                set("failed", Some(err.to_string()));
                return;
            }
            Err(err) => {
                let wait = err.retry_after().unwrap_or(backoff);
                tracing::warn!(channel = %name, error = %err, wait_secs = wait.as_secs(), "channel stopped; reconnecting");
                set("reconnecting", Some(err.to_string()));
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = ctx.shutdown.cancelled() => {
                        set("stopped", None);
                        return;
                    }
                }
                backoff = (backoff * 2).min(Duration::from_secs(300));
            }
        }
    }
}

/// A running hearth.
pub struct Daemon {
    health: Health,
    rt: Arc<Runtime>,
    shutdown: CancellationToken,
    intake: CancellationToken,
    tracker: TaskTracker,
    http_addr: Option<SocketAddr>,
    outbox_wake: Arc<Notify>,
    dispatcher: Arc<Dispatcher>,
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

    /// One line for systemd's STATUS=: the channels and their states.
    pub fn status_line(&self) -> String {
        let health = self.health.lock().unwrap_or_else(|p| p.into_inner());
        if health.is_empty() {
            return "running, no channels configured".into();
        }
        let mut channels: Vec<String> = health
            .iter()
            .map(|(name, h)| format!("{name} {}", h.state))
            .collect();
        channels.sort();
        format!("running: {}", channels.join(", "))
    }

    /// Entries queued or being handled.
    pub fn busy(&self) -> usize {
        self.dispatcher.queued()
    }

    /// Stops gracefully: channels stop receiving, running turns get up to
    /// `daemon.shutdown_grace_secs` to finish and their replies to go out, then whatever is
    /// still running is suspended (it resumes at the next start) and the database is closed.
    pub async fn stop(self) {
        self.intake.cancel();
        let grace = Duration::from_secs(self.rt.config.daemon.shutdown_grace_secs);
        let deadline = tokio::time::Instant::now() + grace;
        while tokio::time::Instant::now() < deadline && !self.shutdown.is_cancelled() {
            let outbox_empty = self
                .rt
                .store
                .outbox_depth()
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
        self.rt.store.close().await;
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
