//! The harness for end-to-end tests: a temporary data directory, a fake LLM, a `MemoryChannel`
//! standing in for a chat platform, and a daemon started (and restarted) on them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hearth::agent::AgentSet;
use hearth::clock::{ManualClock, SharedClock};
use hearth::config::{Config, ProviderConfig, ProviderKind};
use hearth::daemon::{Daemon, DaemonBuilder};
use hearth::tool::{Tool, ToolContext, ToolError, ToolInfo, ToolRegistry};
use hearth_channel::{MemoryChannel, SentMessage};
use hearth_testkit::FakeOpenAi;
pub use hearth_testkit::net::free_port;
pub use rustix::process::Signal;
use serde_json::Value;

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

/// An agents file with one agent, "general" (its system prompt is `PROMPT:general`), and `rest`
/// on it: its tools, tool mode …
pub fn general_agent(rest: &str) -> String {
    format!(
        "[[agent]]\nid = \"general\"\nname = \"General\"\nemoji = \"🏠\"\nsystem_prompt = \"PROMPT:general\"\n{rest}\n"
    )
}

/// The tools of the channel tests' agent ([`general_agent`]): the task tools, called directly.
pub const TASK_TOOLS: &str = "tool_groups = [\"tasks\"]\ntool_mode = \"direct\"";

pub fn rustls() {
    // Several tests install it; the first wins and the rest get an Err that means "already done".
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

pub fn provider(name: &str, base_url: &str) -> ProviderConfig {
    ProviderConfig {
        timeout_secs: 10,
        max_retries: 0,
        max_tokens: 1024,
        ..ProviderConfig::new(name, ProviderKind::Openai, base_url, "fake-model")
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
        config.daemon.http_listen = Some(([127, 0, 0, 1], 0).into());
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

    /// Lets `user` of the memory channel in (as "friend"), besides the allowed [`USER`].
    pub async fn allow(&self, user: &str) {
        self.daemon()
            .store()
            .allow_identity("memory", user, None, "friend", false, 0)
            .await
            .expect("allow the user");
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
    eventually("the inbox to drain", async || {
        store.inbox_depth().await.unwrap_or(1) == 0 && h.daemon().busy() == 0
    })
    .await;
}

/// Polls `check` until it gives a value, or `within` has passed (then `None`). The one poll
/// loop of the e2e tests: the helpers below and the child-process harness build on it.
pub async fn poll<T>(within: Duration, mut check: impl AsyncFnMut() -> Option<T>) -> Option<T> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `check` holds, polling; panics with `what` after [`WAIT`].
pub async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    if poll(WAIT, async || check().await.then_some(()))
        .await
        .is_none()
    {
        panic!("timed out waiting for {what}");
    }
}

/// The `hearth` binary under test. Tests start it through [`HearthProcess`], [`hearth_command`]
/// or [`run_cli`]; the path itself only for one run under another program (`setpriv`, `sh`,
/// `script`) that must be given it.
pub fn hearth_binary() -> &'static str {
    env!("CARGO_BIN_EXE_hearth")
}

/// A started `hearth run` child process in a directory of its own, as a user runs it: its
/// config and agents files are written there, its stderr goes to one log file per start, it is
/// stopped with SIGTERM (and must exit 0 without ever logging `secret`) or killed with SIGKILL.
/// Each channel's e2e harness wraps one and adds its fake or real platform.
pub struct HearthProcess {
    pub dir: tempfile::TempDir,
    /// The channel whose `/healthz` state [`HearthProcess::start`] waits for.
    channel: &'static str,
    /// Text that must never reach a log line: the channel's token or password.
    secret: &'static str,
    /// The environment of the process (it starts with an empty one): secrets, `RUST_LOG`.
    env: Vec<(&'static str, String)>,
    port: u16,
    child: Option<Child>,
    runs: usize,
}

/// How long a start may take before the test fails (Matrix's first sync takes seconds).
const START_PATIENCE: Duration = Duration::from_secs(30);

impl HearthProcess {
    /// A process for `channel` that must never log `secret`; nothing is started yet.
    pub fn new(channel: &'static str, secret: &'static str) -> Self {
        rustls();
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
            channel,
            secret,
            env: vec![("RUST_LOG", "debug".into())],
            port: free_port(),
            child: None,
            runs: 0,
        }
    }

    /// Sets an environment variable of the process (a secret's `*_env`, `RUST_LOG`).
    pub fn env(mut self, key: &'static str, value: &str) -> Self {
        self.env.retain(|(k, _)| *k != key);
        self.env.push((key, value.into()));
        self
    }

    /// Writes `hearth.toml`: a `[daemon]` section listening on this process's port with `owner`,
    /// then `rest`, and `agents.toml` with `agents`.
    pub fn write_config(&self, owner: &str, rest: &str, agents: &str) {
        let config = format!(
            "[daemon]\nhttp_listen = \"127.0.0.1:{}\"\nowner = \"{owner}\"\nshutdown_grace_secs = 1\n\n{rest}",
            self.port
        );
        std::fs::write(self.dir.path().join("hearth.toml"), config).expect("config");
        std::fs::write(self.dir.path().join("agents.toml"), agents).expect("agents");
    }

    /// Rewrites `agents.toml` (a running hearth reads it again on SIGHUP).
    pub fn write_agents(&self, agents: &str) {
        std::fs::write(self.dir.path().join("agents.toml"), agents).expect("agents");
    }

    /// Starts `hearth run` and waits until its channel is connected.
    pub async fn start(&mut self) {
        self.start_until("connected").await;
    }

    /// Starts `hearth run` and waits until its channel reports `state` on `/healthz`.
    pub async fn start_until(&mut self, state: &str) {
        self.runs += 1;
        let log = std::fs::File::create(self.log_path(self.runs)).expect("log file");
        let child = Command::new(hearth_binary())
            .arg("run")
            .current_dir(self.dir.path())
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("hearth run starts");
        self.child = Some(child);
        let channel = self.channel;
        let reached = poll(START_PATIENCE, async || {
            let (_, health) = self.try_healthz().await?;
            (health["channels"][channel]["state"] == state).then_some(())
        })
        .await;
        if reached.is_none() {
            panic!("{channel} never reached {state}:\n{}", self.logs());
        }
    }

    /// Runs `hearth ARGS` to the end in the process's directory, with its environment: what it
    /// printed, stdout then stderr.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new(hearth_binary())
            .args(args)
            .current_dir(self.dir.path())
            .env_clear()
            // The secrets, not the daemon's debug logging: the output is what a user reads.
            .envs(
                self.env
                    .iter()
                    .filter(|(k, _)| *k != "RUST_LOG")
                    .map(|(k, v)| (k, v)),
            )
            .output()
            .expect("hearth cli");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// The process id of the running `hearth run`, to read its memory use.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn log_path(&self, run: usize) -> PathBuf {
        self.dir.path().join(format!("hearth-{run}.log"))
    }

    /// Everything every start logged so far.
    pub fn logs(&self) -> String {
        (1..=self.runs)
            .map(|run| std::fs::read_to_string(self.log_path(run)).unwrap_or_default())
            .collect()
    }

    /// Sends `signal` to the running process.
    pub fn signal(&self, signal: Signal) {
        if let Some(child) = &self.child {
            signal_child(child, signal);
        }
    }

    /// SIGKILL: the process dies mid-work, as on a power cut.
    pub async fn kill(&mut self) {
        self.signal(Signal::KILL);
        self.reap().await;
    }

    /// SIGTERM, expecting exit 0; then checks that the secret never reached a log line.
    pub async fn stop(&mut self) {
        self.signal(Signal::TERM);
        if let Some(status) = self.reap().await {
            assert_eq!(status.code(), Some(0), "{}", self.logs());
        }
        let logs = self.logs();
        assert!(!logs.contains(self.secret), "the secret reached the logs");
        assert!(logs.contains(self.channel), "the logs were captured");
    }

    async fn reap(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .expect("join")
            .expect("wait");
        Some(status)
    }

    /// `/healthz`: the HTTP status and the JSON body (`Null` when it is not JSON).
    pub async fn healthz(&self) -> (u16, Value) {
        self.try_healthz().await.expect("healthz answers")
    }

    async fn try_healthz(&self) -> Option<(u16, Value)> {
        let response = reqwest::get(self.url("/healthz")).await.ok()?;
        let status = response.status().as_u16();
        Some((status, response.json().await.unwrap_or(Value::Null)))
    }

    /// `GET path` on the daemon's HTTP port: the status and the body.
    pub async fn get(&self, path: &str) -> (u16, String) {
        let response = reqwest::get(self.url(path)).await.expect("answers");
        let status = response.status().as_u16();
        (status, response.text().await.unwrap_or_default())
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `http://127.0.0.1:PORT`, the daemon's HTTP address.
    pub fn base_url(&self) -> String {
        self.url("")
    }

    /// Polls `check` until it gives a value; after `within`, fails with `what` and the logs.
    pub async fn wait_for<T>(
        &self,
        within: Duration,
        what: &str,
        check: impl AsyncFnMut() -> Option<T>,
    ) -> T {
        match poll(within, check).await {
            Some(value) => value,
            None => panic!("timed out waiting for {what}\n{}", self.logs()),
        }
    }
}

impl Drop for HearthProcess {
    fn drop(&mut self) {
        // A failed test must not leave a daemon running on the machine.
        if let Some(mut child) = self.child.take() {
            // Already gone, or killed now: either way nothing to report from a drop.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Sends `signal` to a child process (through rustix; no `kill(1)` in between).
pub fn signal_child(child: &Child, signal: Signal) {
    let pid = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .expect("a child's pid");
    rustix::process::kill_process(pid, signal).expect("signal the child");
}

/// The sections of a child-process hearth's config that every channel test shares: the fake
/// LLM as the one provider (`vision` on or off, `prices` per million input and output tokens),
/// the agents file beside the config and streaming on or off.
pub fn llm_sections(llm: &FakeOpenAi, vision: bool, stream: bool, prices: (f64, f64)) -> String {
    format!(
        r#"
[[providers]]
name = "fake"
kind = "openai"
base_url = "{llm}"
model = "fake-model"
max_retries = 0
vision = {vision}
price_input_per_mtok = {input:?}
price_output_per_mtok = {output:?}

[router]
agents_file = "agents.toml"

[runtime]
stream = {stream}
"#,
        llm = llm.base_url(),
        input = prices.0,
        output = prices.1,
    )
}

/// What the fake LLM costs where a test does not count money: nothing, as by default.
pub const FREE: (f64, f64) = (0.0, 0.0);

/// Gives a channel's harness (a struct with a `process: HearthProcess` field) the child-process
/// harness's methods: start, stop, logs, healthz, wait_for …
macro_rules! process_harness {
    ($harness:ty) => {
        impl std::ops::Deref for $harness {
            type Target = $crate::support::HearthProcess;
            fn deref(&self) -> &$crate::support::HearthProcess {
                &self.process
            }
        }

        impl std::ops::DerefMut for $harness {
            fn deref_mut(&mut self) -> &mut $crate::support::HearthProcess {
                &mut self.process
            }
        }
    };
}
pub(crate) use process_harness;

/// `hearth ARGS` in `dir` with a clean environment (but `PATH`, plus `env`), not started.
pub fn hearth_command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(hearth_binary());
    command
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().copied());
    command
}

/// Starts `command` with its output piped and `stdin` written to its input, then closed.
pub fn spawn_with_input(command: &mut Command, stdin: &str) -> Child {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hearth starts");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).expect("write stdin");
    drop(input);
    child
}

/// Runs `hearth ARGS` to the end in `dir` with a clean environment (but `PATH`, plus `env`),
/// feeding it `stdin`.
pub fn run_cli(dir: &Path, args: &[&str], env: &[(&str, &str)], stdin: &str) -> Output {
    spawn_with_input(&mut hearth_command(dir, args, env), stdin)
        .wait_with_output()
        .expect("hearth finishes")
}

/// [`run_cli`] from an async test: on a blocking thread, so the fake servers on the test's
/// runtime go on answering while it runs.
pub async fn run_cli_async(dir: &Path, args: &[&str], env: &[(&str, &str)], stdin: &str) -> Output {
    let dir = dir.to_path_buf();
    let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect();
    let stdin = stdin.to_string();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        run_cli(&dir, &args, &env, &stdin)
    })
    .await
    .expect("join")
}

/// The text of the last user message in an OpenAI request (`""` when there is none; a content
/// that is not a string, such as an image message, as its JSON).
pub fn last_user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

/// The tool results an OpenAI request shows the model, in order: (tool call id, content).
pub fn tool_results(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or("").to_string(),
                m["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The content of the last tool result an OpenAI request shows the model (`""` when none).
pub fn last_tool_result(request: &Value) -> String {
    tool_results(request)
        .pop()
        .map(|(_, content)| content)
        .unwrap_or_default()
}

/// The database URL of a PostgreSQL test: the server `HEARTH_TEST_POSTGRES_URL` names, or a
/// throwaway one started here with the database `name` (kept alive by the returned handle).
/// `None` when neither is there: the test is then skipped, as the note printed says.
pub fn postgres_url(
    name: &str,
) -> Option<(String, Option<hearth_testkit::postgres::TestPostgres>)> {
    if let Ok(url) = std::env::var("HEARTH_TEST_POSTGRES_URL") {
        return Some((url, None));
    }
    let server = hearth_testkit::postgres::TestPostgres::start()?;
    let url = server.create_database(name).expect("create database");
    Some((url, Some(server)))
}

/// What a [`TestTool`] call returns, from the arguments.
type Answer = Box<dyn Fn(&Value) -> Result<String, ToolError> + Send + Sync>;

/// A tool made for a test: its description and what a call returns.
pub struct TestTool {
    info: ToolInfo,
    call: Answer,
    /// After `call`, the call never ends: a turn that runs it stays running until cancelled.
    hangs: bool,
}

impl TestTool {
    /// A tool whose calls return what `call` makes of the arguments.
    pub fn answering(
        info: ToolInfo,
        call: impl Fn(&Value) -> Result<String, ToolError> + Send + Sync + 'static,
    ) -> Arc<dyn Tool> {
        Arc::new(Self::plain(info, call))
    }

    /// A tool that runs `call` and then never returns.
    pub fn hanging(
        info: ToolInfo,
        call: impl Fn(&Value) -> Result<String, ToolError> + Send + Sync + 'static,
    ) -> Arc<dyn Tool> {
        Arc::new(Self {
            hangs: true,
            ..Self::plain(info, call)
        })
    }

    fn plain(
        info: ToolInfo,
        call: impl Fn(&Value) -> Result<String, ToolError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            info,
            call: Box::new(call),
            hangs: false,
        }
    }
}

#[async_trait]
impl Tool for TestTool {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let result = (self.call)(&args);
        if self.hangs {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        result
    }
}

/// Stores a pending pairing code from Telegram user `user` called `name` in the database at
/// `url`, as a stranger writing to the bot gets one, valid for an hour.
pub async fn pending_pairing(url: &str, code: &str, user: &str, name: &str) {
    let store = hearth::store::Store::open(url).await.expect("open");
    let now = chrono::Utc::now().timestamp_millis();
    store
        .create_pairing(&hearth::store::PairingRequest {
            code: code.into(),
            channel: "telegram".into(),
            platform_user_id: user.into(),
            display_name: Some(name.into()),
            chat_id: user.into(),
            status: hearth::store::PairingStatus::Pending,
            created_at: now,
            expires_at: now + 3_600_000,
        })
        .await
        .expect("pairing");
    store.close().await;
}
