//! The harness for end-to-end tests: a temporary data directory, a fake LLM, a `MemoryChannel`
//! standing in for a chat platform, and a daemon started (and restarted) on them.

use std::sync::Arc;
use std::time::Duration;

use hearth::agent::AgentSet;
use hearth::clock::{ManualClock, SharedClock};
use hearth::config::{Config, ProviderConfig, ProviderKind};
use hearth::daemon::{Daemon, DaemonBuilder};
use hearth::tool::ToolRegistry;
use hearth_channel::{MemoryChannel, SentMessage};
use hearth_testkit::FakeOpenAi;

pub const WAIT: Duration = Duration::from_secs(10);
pub const USER: &str = "1001";
pub const CHAT: &str = "chat-1";

/// Agents with distinctive prompts so tests can tell from the LLM request who answered.
pub const TEST_AGENTS: &str = r#"
[[agent]]
id = "general"
name = "General"
emoji = "🏠"
description = "Anything"
system_prompt = "PROMPT:general"
tool_groups = ["utilities"]

[[agent]]
id = "finance"
name = "Finance"
emoji = "💰"
description = "Money"
system_prompt = "PROMPT:finance"
tools = ["record"]
[agent.triggers]
keywords = ["spent", "budget", "paid", "grocery bill"]

[[agent]]
id = "tasks"
name = "Tasks"
emoji = "✅"
description = "Todo"
system_prompt = "PROMPT:tasks"
tools = ["record", "slow"]
[agent.triggers]
keywords = ["todo", "remind", "budget"]
"#;

pub fn rustls() {
    // Several tests install it; the first wins and the rest get an Err that means "already done".
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

pub fn provider(name: &str, base_url: &str) -> ProviderConfig {
    ProviderConfig {
        name: name.into(),
        kind: ProviderKind::Openai,
        base_url: base_url.into(),
        api_key_env: None,
        model: "fake-model".into(),
        timeout_secs: 10,
        max_retries: 0,
        fallbacks: Vec::new(),
        max_tokens: 1024,
        vision: false,
        context_window: None,
        price_input_per_mtok: 0.0,
        price_output_per_mtok: 0.0,
        price_cached_input_per_mtok: None,
    }
}

pub struct Hearth {
    /// Holds the database; removed when the test ends.
    _dir: tempfile::TempDir,
    pub llm: FakeOpenAi,
    pub channel: Arc<MemoryChannel>,
    pub config: Config,
    pub clock: Option<Arc<ManualClock>>,
    pub tools: Arc<dyn Fn() -> ToolRegistry + Send + Sync>,
    /// The agents file text; [`TEST_AGENTS`] unless a test sets its own.
    pub agents: String,
    pub daemon: Option<Daemon>,
}

impl Hearth {
    /// A hearth with the test agents and an OpenAI-compatible fake LLM; not started yet.
    pub async fn new() -> Self {
        rustls();
        let dir = tempfile::tempdir().expect("temp dir");
        let llm = FakeOpenAi::start().await;
        let mut config = Config::default();
        config.daemon.data_dir = dir.path().to_path_buf();
        config.daemon.http_listen = "127.0.0.1:0".into();
        config.router.agents_file = dir.path().join("no-such-agents.toml");
        config.runtime.stream = false;
        // Restart tests stop the daemon in the middle of a turn: suspend it at once.
        config.daemon.shutdown_grace_secs = 0;
        config.providers = vec![provider("fake", &llm.base_url())];
        Self {
            _dir: dir,
            llm,
            channel: Arc::new(MemoryChannel::new("memory")),
            config,
            clock: None,
            tools: Arc::new(ToolRegistry::with_builtin),
            agents: TEST_AGENTS.to_string(),
            daemon: None,
        }
    }

    pub fn with_clock(mut self, clock: Arc<ManualClock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Uses these agents (agents file text) instead of [`TEST_AGENTS`].
    pub fn with_agents(mut self, agents: &str) -> Self {
        self.agents = agents.to_string();
        self
    }

    pub fn with_tools(mut self, tools: impl Fn() -> ToolRegistry + Send + Sync + 'static) -> Self {
        self.tools = Arc::new(tools);
        self
    }

    pub async fn start(&mut self) -> &Daemon {
        let mut builder = DaemonBuilder::new(self.config.clone())
            .agents(AgentSet::parse(&self.agents, "test agents").expect("test agents parse"))
            .channel(self.channel.clone(), &[USER.to_string()])
            .tools((self.tools)());
        if let Some(clock) = &self.clock {
            let clock: SharedClock = clock.clone();
            builder = builder.clock(clock);
        }
        self.daemon = Some(builder.start().await.expect("daemon starts"));
        self.daemon.as_ref().expect("just started")
    }

    pub async fn stop(&mut self) {
        if let Some(daemon) = self.daemon.take() {
            daemon.stop().await;
        }
    }

    pub fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().expect("daemon started")
    }

    /// Sends `text` from the allowed user and waits for the reply number `n` (1-based) overall.
    pub async fn say(&self, text: &str) -> SentMessage {
        let before = self.channel.sent().len();
        self.channel.push_text(CHAT, USER, text);
        let sent = self.channel.wait_for_sent(before + 1, WAIT).await;
        assert!(
            sent.len() > before,
            "no reply to {text:?} within {WAIT:?}; sent: {sent:?}"
        );
        sent[before].clone()
    }

    /// The system prompt of the LLM request number `index`.
    pub fn system_prompt(&self, index: usize) -> String {
        let requests = self.llm.requests();
        requests[index]["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// Waits until the daemon has handled everything it was given: the inbox is drained and no
/// entry is queued or running.
pub async fn settle(h: &Hearth) {
    let store = h.daemon().store().clone();
    let deadline = tokio::time::Instant::now() + WAIT;
    while store.inbox_depth().await.unwrap_or(1) > 0 || h.daemon().busy() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "inbox never drained"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `check` holds, polling; panics with `what` after the timeout.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
