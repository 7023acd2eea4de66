//! The agent runtime: one set of services shared by every agent, and the tool-calling loop that
//! answers a message (see [`turn`]).

pub mod budget;
pub mod calls;
pub mod compact;
pub mod context;
pub mod plan;
pub mod plan_mode;
pub mod preview;
pub mod prompt;
pub mod tools;
pub mod turn;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::agent::{AgentDef, AgentSet};
use crate::clock::SharedClock;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::provider::Providers;
use crate::router::Router;
use crate::store::Store;
use crate::tool::ToolRegistry;

/// The agents file, the keyword index built from it, and each agent's stored version
/// ([`Store::sync_agents`]); replaced whole on SIGHUP.
#[derive(Debug)]
pub struct Agents {
    pub set: AgentSet,
    pub router: Router,
    versions: HashMap<String, i64>,
}

impl Agents {
    /// `versions`: each agent's current version, as [`Store::sync_agents`] returned them.
    pub fn new(set: AgentSet, versions: HashMap<String, i64>) -> Self {
        let router = Router::new(&set);
        Self {
            set,
            router,
            versions,
        }
    }

    pub fn get(&self, id: &str) -> Option<&AgentDef> {
        self.set.get(id)
    }

    /// The stored version of the agent's definition in this set, which its turns record.
    pub fn version(&self, id: &str) -> Option<i64> {
        self.versions.get(id).copied()
    }
}

/// Everything a turn needs, shared by all conversations.
pub struct Runtime {
    pub store: Store,
    pub clock: SharedClock,
    pub config: Arc<Config>,
    pub providers: Providers,
    pub tools: ToolRegistry,
    pub timezone: chrono_tz::Tz,
    pub metrics: Arc<Metrics>,
    /// Set when no provider was configured and hearth guessed one: printed with provider errors
    /// so a new user learns how to configure one.
    pub provider_hint: Option<String>,
    /// Per-user and global tool call rates.
    pub limiter: tools::RateLimiter,
    /// The MCP servers, once started: a turn waits for the ones still on their first start.
    pub mcp: std::sync::OnceLock<crate::tool::mcp::McpManager>,
    /// Token estimates anchored on what providers reported, per conversation.
    pub estimator: context::Estimator,
    /// Summaries of older turns: failures and their backoff, those running and those wanted.
    pub compactor: compact::Compactor,
    /// Agents already logged as offered the meta-tools for their window's sake (logged once).
    pub(crate) meta_for_window: std::sync::Mutex<std::collections::HashSet<String>>,
    agents: RwLock<Arc<Agents>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Store,
        clock: SharedClock,
        config: Arc<Config>,
        providers: Providers,
        tools: ToolRegistry,
        agents: Agents,
        metrics: Arc<Metrics>,
        provider_hint: Option<String>,
    ) -> Self {
        let timezone = config.daemon.timezone;
        Self {
            store,
            clock,
            config,
            providers,
            tools,
            timezone,
            metrics,
            provider_hint,
            limiter: tools::RateLimiter::default(),
            mcp: std::sync::OnceLock::new(),
            estimator: context::Estimator::default(),
            compactor: compact::Compactor::default(),
            meta_for_window: Default::default(),
            agents: RwLock::new(Arc::new(agents)),
        }
    }

    /// The current agents; a snapshot, so a reload during a turn does not change it midway.
    pub fn agents(&self) -> Arc<Agents> {
        self.agents
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Swaps in a new agents file (SIGHUP) and syncs it to the database.
    pub async fn reload_agents(&self, set: AgentSet) -> Result<(), crate::store::StoreError> {
        let versions = self.store.sync_agents(&set, self.clock.now_ms()).await?;
        let next = Arc::new(Agents::new(set, versions));
        *self
            .agents
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = next;
        Ok(())
    }
}
