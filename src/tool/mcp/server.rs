//! One MCP server: connecting to it (a child process over stdio, or streamable HTTP), the
//! supervisor that keeps it running, its calls and its health.
//!
//! The supervisor starts the server, lists its tools into the registry and waits. When the
//! server exits, or a call finds the connection broken, it is started again after a backoff
//! (1 s, doubling to 5 minutes; back to 1 s once a connection has lasted a minute). On shutdown
//! the server is closed the way the MCP specification asks (stdin closed, then SIGTERM, then
//! SIGKILL, to the whole process group) and whatever is left of its group is killed.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, Peer, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use hearth_channel::{Backoff, error_chain, sleep_or_shutdown};

use super::http::McpHttpClient;
use super::process::{self, Launch, Spawner, StderrTail};
use crate::config::{McpServerConfig, Secret};
use crate::metrics::Metrics;
use crate::tool::{Tool, ToolError, ToolRegistry};

const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// A connection that lasted this long resets the backoff.
const STABLE: Duration = Duration::from_secs(60);
/// How long a stopping server gets (rmcp waits 3 s after closing stdin, 3 s after SIGTERM).
const CLOSE_GRACE: Duration = Duration::from_secs(8);
/// How long to wait for a dead server's last stderr lines before reporting why it died.
const STDERR_GRACE: Duration = Duration::from_millis(500);
/// Longest result text handed to the model.
const RESULT_MAX: usize = 16_000;

type Service = RunningService<RoleClient, Client>;

/// hearth's side of a connection: it introduces itself, and hears when the server's tool list
/// changes (the supervisor then lists the tools again).
#[derive(Clone)]
struct Client {
    tools_changed: Arc<Notify>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("hearth", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }
}

/// A server's state as `/healthz` shows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct McpServerHealth {
    /// `starting`, `connected`, `failed` (restarting after `retry_in_secs`), `stopped` or
    /// `disabled`.
    pub state: &'static str,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// Tools it offers to agents.
    pub tools: usize,
    /// The server's process (and process group) id, for a running stdio server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_in_secs: Option<u64>,
    /// Starts after the first one.
    pub restarts: u64,
    pub calls: u64,
    pub failed_calls: u64,
}

#[derive(Clone)]
enum Status {
    Starting,
    Connected {
        peer: Peer<RoleClient>,
        /// Cancelled by a call that found the connection broken: the supervisor reconnects.
        broken: CancellationToken,
    },
    Failed {
        error: String,
        retry_at: Instant,
    },
    Stopped,
}

pub(super) struct Server {
    pub config: McpServerConfig,
    registry: ToolRegistry,
    metrics: Arc<Metrics>,
    status: watch::Sender<Status>,
    tools: AtomicUsize,
    restarts: AtomicU64,
    calls: AtomicU64,
    failed_calls: AtomicU64,
    /// The running process, for killing what is left of its group.
    pid: Mutex<Option<u32>>,
    stderr: Mutex<Arc<StderrTail>>,
    /// Why a call gave up on the connection.
    broken_reason: Mutex<Option<String>>,
    /// The server said its tool list changed.
    tools_changed: Arc<Notify>,
    /// Where its last tool list is kept between runs.
    cache: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.config.name)
            .field("health", &self.health())
            .finish()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the model reads of a tool result: its text, a note for each image, audio or resource
/// block, the structured result when there is no text; cut at [`RESULT_MAX`] characters.
fn render(result: &rmcp::model::CallToolResult) -> String {
    // Read as JSON: the content types are open-ended and grow with the protocol.
    let value = serde_json::to_value(result).unwrap_or(Value::Null);
    let mut parts: Vec<String> = Vec::new();
    for block in value["content"].as_array().into_iter().flatten() {
        let part = match block["type"].as_str().unwrap_or("") {
            "text" => block["text"].as_str().unwrap_or("").to_string(),
            kind @ ("image" | "audio") => format!(
                "[{kind} {}, {} bytes of base64, not shown]",
                block["mimeType"].as_str().unwrap_or("of unknown type"),
                block["data"].as_str().map_or(0, str::len)
            ),
            "resource" => {
                let resource = &block["resource"];
                match resource["text"].as_str() {
                    Some(text) => text.to_string(),
                    None => format!(
                        "[resource {}, not shown]",
                        resource["uri"].as_str().unwrap_or("?")
                    ),
                }
            }
            "resource_link" => format!(
                "[link: {} {}]",
                block["name"].as_str().unwrap_or(""),
                block["uri"].as_str().unwrap_or("")
            ),
            other => format!("[{other} content, not shown]"),
        };
        parts.push(part);
    }
    let mut text = parts.join("\n");
    if text.trim().is_empty() {
        text = match value.get("structuredContent") {
            Some(structured) => structured.to_string(),
            None => "(the tool returned nothing)".to_string(),
        };
    }
    let length = text.chars().count();
    if length > RESULT_MAX {
        let cut: String = text.chars().take(RESULT_MAX).collect();
        text = format!("{cut}\n… (cut: the result had {length} characters)");
    }
    text
}

impl Server {
    pub fn new(config: McpServerConfig, registry: ToolRegistry, metrics: Arc<Metrics>) -> Self {
        let (status, _) = watch::channel(Status::Stopped);
        Self {
            config,
            registry,
            metrics,
            status,
            tools: AtomicUsize::new(0),
            restarts: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            failed_calls: AtomicU64::new(0),
            pid: Mutex::new(None),
            stderr: Mutex::new(Arc::default()),
            broken_reason: Mutex::new(None),
            tools_changed: Arc::new(Notify::new()),
            cache: None,
        }
    }

    pub fn cached_at(mut self, cache: Option<std::path::PathBuf>) -> Self {
        self.cache = cache;
        self
    }

    /// Registers the tool list of the last run, if one was kept, and marks the server as
    /// starting (calls wait for it rather than fail).
    /// Waits while this server is starting for the first time and no tools of it are known
    /// (none kept from an earlier run), at most its start timeout.
    pub async fn first_start(&self) {
        if self.tools.load(Ordering::Relaxed) > 0 || self.restarts.load(Ordering::Relaxed) > 0 {
            return;
        }
        let mut status = self.status.subscribe();
        let started = status.wait_for(|s| !matches!(s, Status::Starting));
        if tokio::time::timeout(self.timeout(), started).await.is_err() {
            tracing::debug!(server = %self.name(), "a turn stopped waiting for the MCP server to start");
        }
    }

    pub fn register_cached(self: &Arc<Self>) {
        self.set(Status::Starting);
        let Some(path) = &self.cache else {
            return;
        };
        let listed = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice::<Vec<rmcp::model::Tool>>(&bytes),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return,
            Err(err) => {
                tracing::warn!(server = %self.name(), path = %path.display(), error = %err, "cannot read the kept tool list");
                return;
            }
        };
        match listed {
            Ok(listed) => self.register(listed),
            Err(err) => {
                tracing::warn!(server = %self.name(), path = %path.display(), error = %err, "the kept tool list is unreadable; ignoring it");
            }
        }
    }

    /// Keeps a tool list for the next start (best effort: without it, tools appear once the
    /// server answers).
    fn keep(&self, listed: &[rmcp::model::Tool]) {
        let Some(path) = &self.cache else {
            return;
        };
        let written = serde_json::to_vec(listed)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let partial = path.with_extension("json.partial");
                std::fs::write(&partial, bytes)?;
                std::fs::rename(&partial, path)
            });
        if let Err(err) = written {
            tracing::warn!(server = %self.name(), path = %path.display(), error = %err, "cannot keep the tool list for the next start");
        }
    }

    fn client(&self) -> Client {
        Client {
            tools_changed: self.tools_changed.clone(),
        }
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.config.timeout_secs.max(1))
    }

    fn name(&self) -> &str {
        &self.config.name
    }

    /// `stdio <command>` or `http <url>`.
    pub fn target(&self) -> String {
        match (&self.config.command, &self.config.url) {
            (Some(command), _) => format!("stdio {command}"),
            (None, Some(url)) => format!("http {url}"),
            (None, None) => "nothing configured".into(),
        }
    }

    fn set(&self, status: Status) {
        self.status.send_replace(status);
    }

    pub fn health(&self) -> McpServerHealth {
        let (state, error, retry_in_secs) = match &*self.status.borrow() {
            Status::Starting => ("starting", None, None),
            Status::Connected { .. } => ("connected", None, None),
            Status::Failed { error, retry_at } => (
                "failed",
                Some(error.clone()),
                Some(retry_at.saturating_duration_since(Instant::now()).as_secs()),
            ),
            Status::Stopped if !self.config.enabled => ("disabled", None, None),
            Status::Stopped => ("stopped", None, None),
        };
        McpServerHealth {
            state,
            transport: if self.config.command.is_some() {
                "stdio"
            } else {
                "http"
            },
            tools: self.tools.load(Ordering::Relaxed),
            pid: if state == "connected" {
                *lock(&self.pid)
            } else {
                None
            },
            error,
            retry_in_secs,
            restarts: self.restarts.load(Ordering::Relaxed),
            calls: self.calls.load(Ordering::Relaxed),
            failed_calls: self.failed_calls.load(Ordering::Relaxed),
        }
    }

    /// The secret named by `*_env` key `key`, or why it is missing.
    fn secret(key: &str, name: &str) -> Result<String, String> {
        Secret::resolve(name)
            .map(|s| s.expose().to_string())
            .map_err(|err| format!("{key}: {err}"))
    }

    /// Starts the server (or opens the HTTP session) and initializes it. Secrets are read anew
    /// each time, so a rotated credential is picked up at the next restart.
    async fn connect(&self, spawner: &Spawner, tracker: &TaskTracker) -> Result<Service, String> {
        let config = &self.config;
        if let Some(command) = &config.command {
            let mut env = config.env.clone();
            for (variable, secret) in &config.secrets_env {
                env.insert(
                    variable.clone(),
                    Self::secret(&format!("secrets_env.{variable}"), secret)?,
                );
            }
            // What the server prints may echo its secrets (a debug line with its token); its
            // stderr reaches the log, `/healthz` and error messages shown to the model.
            let secrets: Vec<String> = config
                .secrets_env
                .keys()
                .filter_map(|variable| env.get(variable).cloned())
                .collect();
            let launch = Launch {
                command: command.clone(),
                args: config.args.clone(),
                env,
                cwd: config.cwd.clone(),
            };
            let spawned = spawner
                .spawn(launch)
                .await
                .map_err(|err| format!("cannot start `{command}`: {err}"))?;
            *lock(&self.pid) = spawned.pid;
            let tail = Arc::new(StderrTail::default());
            *lock(&self.stderr) = tail.clone();
            if let Some(stderr) = spawned.stderr {
                tracker.spawn(process::read_stderr(
                    config.name.clone(),
                    stderr,
                    tail,
                    secrets,
                ));
            }
            match self.client().serve(spawned.transport).await {
                Ok(service) => Ok(service),
                Err(err) => {
                    let note = self.stderr_note().await;
                    // The exec wrapper could not start the command: say it as plainly as when
                    // hearth starts it itself.
                    let tail = lock(&self.stderr).clone();
                    if let Some(line) = tail.last(1).filter(|l| l.starts_with("cannot start `")) {
                        return Err(line);
                    }
                    Err(format!(
                        "it did not complete the MCP handshake ({}){note}",
                        error_chain(&err)
                    ))
                }
            }
        } else {
            let url = config.url.clone().unwrap_or_default();
            let mut headers = std::collections::HashMap::new();
            let secret_headers = config
                .headers_env
                .iter()
                .map(|(name, secret)| {
                    Self::secret(&format!("headers_env.{name}"), secret)
                        .map(|value| (name.clone(), value))
                })
                .collect::<Result<Vec<_>, String>>()?;
            for (name, value) in config.headers.clone().into_iter().chain(secret_headers) {
                let header = http::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("headers: {name:?} is not an HTTP header name"))?;
                let value = http::HeaderValue::from_str(&value).map_err(|_| {
                    format!("headers: the value of {name} is not a valid header value")
                })?;
                headers.insert(header, value);
            }
            let mut transport_config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(headers);
            if let Some(name) = &config.bearer_token_env {
                transport_config =
                    transport_config.auth_header(Self::secret("bearer_token_env", name)?);
            }
            let client = hearth_channel::http_client::builder()
                .connect_timeout(self.timeout())
                .build()
                .map_err(|err| format!("cannot set up the HTTP client: {}", error_chain(&err)))?;
            let transport =
                StreamableHttpClientTransport::with_client(McpHttpClient(client), transport_config);
            self.client()
                .serve(transport)
                .await
                .map_err(|err| format!("cannot connect to {url}: {}", error_chain(&err)))
        }
    }

    /// " (stderr: …)" with the server's last stderr lines, once it has closed stderr (or
    /// briefly after), or nothing.
    async fn stderr_note(&self) -> String {
        let tail = lock(&self.stderr).clone();
        // Give a dying process a moment to get its last words out.
        let _ = tokio::time::timeout(STDERR_GRACE, tail.closed()).await; // a timeout just means it still runs
        tail.last(3)
            .map(|lines| format!(" (stderr: {lines})"))
            .unwrap_or_default()
    }

    /// Closes a connection within [`CLOSE_GRACE`] and kills what is left of the process group.
    async fn close(&self, service: Service) {
        if tokio::time::timeout(CLOSE_GRACE, service.cancel())
            .await
            .is_err()
        {
            tracing::warn!(server = %self.name(), "the MCP server did not stop in time; killing it");
        }
        process::kill_group(lock(&self.pid).take());
    }

    /// Keeps the server running until `shutdown`; see the module notes.
    pub async fn supervise(
        self: Arc<Self>,
        spawner: Spawner,
        tracker: TaskTracker,
        shutdown: CancellationToken,
    ) {
        let mut backoff = Backoff::new(BACKOFF_MIN, BACKOFF_MAX);
        let mut first = true;
        loop {
            if !std::mem::take(&mut first) {
                self.restarts.fetch_add(1, Ordering::Relaxed);
            }
            self.set(Status::Starting);
            let attempt = tokio::select! {
                attempt = tokio::time::timeout(self.timeout(), self.connect(&spawner, &tracker)) => attempt,
                () = shutdown.cancelled() => {
                    process::kill_group(lock(&self.pid).take());
                    self.set(Status::Stopped);
                    return;
                }
            };
            let error = match attempt {
                Err(_) => {
                    process::kill_group(lock(&self.pid).take());
                    format!(
                        "it did not start within {} s{}",
                        self.timeout().as_secs(),
                        self.stderr_note().await
                    )
                }
                Ok(Err(error)) => {
                    process::kill_group(lock(&self.pid).take());
                    error
                }
                Ok(Ok(service)) => {
                    let since = Instant::now();
                    match self.run(service, &shutdown).await {
                        None => {
                            self.set(Status::Stopped);
                            return;
                        }
                        Some(error) => {
                            if since.elapsed() >= STABLE {
                                backoff.reset();
                            }
                            error
                        }
                    }
                }
            };
            let wait = backoff.next();
            tracing::warn!(server = %self.name(), error = %error, retry_secs = wait.as_secs(), "MCP server is down; starting it again after a pause");
            self.set(Status::Failed {
                error,
                retry_at: Instant::now() + wait,
            });
            if sleep_or_shutdown(&shutdown, wait).await {
                self.set(Status::Stopped);
                return;
            }
        }
    }

    /// Lists the tools of a fresh connection, then waits for its end: `None` on shutdown, else
    /// why it ended.
    async fn run(
        self: &Arc<Self>,
        service: Service,
        shutdown: &CancellationToken,
    ) -> Option<String> {
        let listed = tokio::select! {
            listed = tokio::time::timeout(self.timeout(), service.peer().list_all_tools()) => listed,
            () = shutdown.cancelled() => {
                self.close(service).await;
                return None;
            }
        };
        let listed = match listed {
            Ok(Ok(tools)) => tools,
            Ok(Err(err)) => {
                self.close(service).await;
                return Some(format!("listing its tools failed: {}", error_chain(&err)));
            }
            Err(_) => {
                self.close(service).await;
                return Some(format!(
                    "it did not list its tools within {} s",
                    self.timeout().as_secs()
                ));
            }
        };
        self.register_fresh(listed);
        let broken = CancellationToken::new();
        *lock(&self.broken_reason) = None;
        self.set(Status::Connected {
            peer: service.peer().clone(),
            broken: broken.clone(),
        });
        tracing::info!(server = %self.name(), tools = self.tools.load(Ordering::Relaxed), "MCP server connected");

        let peer = service.peer().clone();
        let stop = service.cancellation_token();
        let waiting = service.waiting();
        tokio::pin!(waiting);
        let ended = loop {
            tokio::select! {
                () = self.tools_changed.notified() => {
                    match tokio::time::timeout(self.timeout(), peer.list_all_tools()).await {
                        Ok(Ok(listed)) => {
                            self.register_fresh(listed);
                            tracing::info!(server = %self.name(), tools = self.tools.load(Ordering::Relaxed), "MCP server changed its tools");
                        }
                        Ok(Err(err)) => tracing::warn!(server = %self.name(), error = %error_chain(&err), "listing the changed tools failed; keeping the old list"),
                        Err(_) => tracing::warn!(server = %self.name(), "listing the changed tools timed out; keeping the old list"),
                    }
                    continue;
                }
                _ = &mut waiting => {
                    break Some(if self.config.command.is_some() {
                        format!("the server process exited{}", self.stderr_note().await)
                    } else {
                        "the connection to the server ended".to_string()
                    });
                }
                () = broken.cancelled() => {
                    stop.cancel();
                    let _ = tokio::time::timeout(CLOSE_GRACE, &mut waiting).await; // late or not, the group is killed next
                    let reason = lock(&self.broken_reason).take().unwrap_or_default();
                    break Some(format!("the connection broke during a call ({reason}){}", self.stderr_note().await));
                }
                () = shutdown.cancelled() => {
                    stop.cancel();
                    if tokio::time::timeout(CLOSE_GRACE, &mut waiting).await.is_err() {
                        tracing::warn!(server = %self.name(), "the MCP server did not stop in time; killing it");
                    }
                    break None;
                }
            };
        };
        process::kill_group(lock(&self.pid).take());
        ended
    }

    /// Puts a fresh tool list into the registry (replacing the server's old one) and keeps it
    /// for the next start.
    fn register_fresh(self: &Arc<Self>, listed: Vec<rmcp::model::Tool>) {
        self.keep(&listed);
        self.register(listed);
    }

    /// Puts a tool list into the registry, replacing the server's old one.
    fn register(self: &Arc<Self>, listed: Vec<rmcp::model::Tool>) {
        let tools = super::build_tools(self, listed);
        let offered = tools.len();
        let errors = self.registry.replace_group(self.name(), tools);
        for err in &errors {
            tracing::warn!(server = %self.name(), error = %err, "an MCP tool was left out");
        }
        self.tools
            .store(offered.saturating_sub(errors.len()), Ordering::Relaxed);
    }

    /// Connects once, lists the tools as agents would see them, and closes (`hearth mcp list`).
    pub async fn probe(
        self: &Arc<Self>,
        spawner: &Spawner,
        tracker: &TaskTracker,
    ) -> Result<Vec<Arc<dyn Tool>>, String> {
        let service =
            match tokio::time::timeout(self.timeout(), self.connect(spawner, tracker)).await {
                Ok(Ok(service)) => service,
                Ok(Err(error)) => {
                    process::kill_group(lock(&self.pid).take());
                    return Err(error);
                }
                Err(_) => {
                    process::kill_group(lock(&self.pid).take());
                    return Err(format!(
                        "it did not start within {} s{}",
                        self.timeout().as_secs(),
                        self.stderr_note().await
                    ));
                }
            };
        let listed = tokio::time::timeout(self.timeout(), service.peer().list_all_tools()).await;
        let result = match listed {
            Ok(Ok(tools)) => Ok(super::build_tools(self, tools)),
            Ok(Err(err)) => Err(format!("listing its tools failed: {}", error_chain(&err))),
            Err(_) => Err(format!(
                "it did not list its tools within {} s",
                self.timeout().as_secs()
            )),
        };
        self.close(service).await;
        result
    }

    /// Calls the server's tool `remote`; every way it can fail is a tool error the model can
    /// act on, within `timeout_secs`.
    pub async fn call(&self, remote: &str, arguments: Value) -> Result<String, ToolError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let (outcome, result) = self.call_inner(remote, arguments).await;
        self.metrics.mcp_call(self.name(), outcome);
        if result.is_err() {
            self.failed_calls.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    async fn call_inner(
        &self,
        remote: &str,
        arguments: Value,
    ) -> (&'static str, Result<String, ToolError>) {
        let name = self.name();
        let seconds = self.timeout().as_secs();
        let deadline = Instant::now() + self.timeout();
        let mut status = self.status.subscribe();
        // A server being (re)started is waited for, within the call's time.
        let (peer, broken) = loop {
            let current = status.borrow_and_update().clone();
            match current {
                Status::Connected { peer, broken } => break (peer, broken),
                Status::Starting => {}
                Status::Failed { error, retry_at } => {
                    let wait = retry_at.saturating_duration_since(Instant::now()).as_secs();
                    return (
                        "unavailable",
                        Err(ToolError::Failed(format!(
                            "the MCP server `{name}` is not running ({error}); hearth tries again in {wait} s. Tell the user; do not retry right away."
                        ))),
                    );
                }
                Status::Stopped => {
                    return (
                        "unavailable",
                        Err(ToolError::Failed(format!(
                            "the MCP server `{name}` is stopped."
                        ))),
                    );
                }
            }
            match tokio::time::timeout_at(deadline, status.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => {
                    return (
                        "unavailable",
                        Err(ToolError::Failed(format!(
                            "the MCP server `{name}` is stopped."
                        ))),
                    );
                }
                Err(_) => {
                    return (
                        "timeout",
                        Err(ToolError::Failed(format!(
                            "the MCP server `{name}` was still starting after {seconds} s. Tell the user; try again later."
                        ))),
                    );
                }
            }
        };
        let mut params = CallToolRequestParams::new(remote.to_string());
        if let Value::Object(map) = arguments {
            params = params.with_arguments(map);
        }
        match tokio::time::timeout_at(deadline, peer.call_tool(params)).await {
            Ok(Ok(result)) if result.is_error == Some(true) => (
                "tool_error",
                Err(ToolError::Failed(format!(
                    "`{remote}` on the MCP server `{name}` failed: {}",
                    render(&result)
                ))),
            ),
            Ok(Ok(result)) => ("ok", Ok(render(&result))),
            Ok(Err(ServiceError::McpError(error))) => {
                let message = format!(
                    "the MCP server `{name}` refused the call: {} (code {})",
                    error.message, error.code.0
                );
                // JSON-RPC "invalid params": the model should fix its arguments.
                if error.code.0 == -32602 {
                    ("invalid", Err(ToolError::InvalidArguments(message)))
                } else {
                    ("error", Err(ToolError::Failed(message)))
                }
            }
            Ok(Err(err @ (ServiceError::TransportClosed | ServiceError::TransportSend(_)))) => {
                *lock(&self.broken_reason) = Some(error_chain(&err));
                broken.cancel();
                (
                    "broken",
                    Err(ToolError::Failed(format!(
                        "the MCP server `{name}` went away during the call ({}). It may or may not have done it; hearth is restarting the server. Tell the user; check before trying again.",
                        error_chain(&err)
                    ))),
                )
            }
            Ok(Err(err)) => (
                "error",
                Err(ToolError::Failed(format!(
                    "the call to the MCP server `{name}` failed: {}",
                    error_chain(&err)
                ))),
            ),
            Err(_) => (
                "timeout",
                Err(ToolError::Failed(format!(
                    "the MCP server `{name}` did not answer within {seconds} s, so the call was cancelled. It may still have done it; check before trying again."
                ))),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolResult, ContentBlock};

    #[test]
    fn results_read_as_text_with_notes_for_what_is_not_text() {
        let result = CallToolResult::success(vec![
            ContentBlock::text("line one"),
            ContentBlock::image("aGVsbG8=", "image/png"),
            ContentBlock::embedded_text("file:///x", "inside"),
        ]);
        let text = render(&result);
        assert_eq!(
            text,
            "line one\n[image image/png, 8 bytes of base64, not shown]\ninside"
        );
        let structured = CallToolResult::structured(serde_json::json!({"on": true}));
        assert!(render(&structured).contains("\"on\":true"));
    }

    #[test]
    fn long_results_are_cut_and_say_so() {
        let result = CallToolResult::success(vec![ContentBlock::text("x".repeat(RESULT_MAX + 5))]);
        let text = render(&result);
        assert!(text.ends_with(&format!(
            "(cut: the result had {} characters)",
            RESULT_MAX + 5
        )));
    }

    #[test]
    fn errors_are_described_with_their_causes_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot connect")]
        struct Outer(#[source] std::io::Error);
        #[derive(Debug, thiserror::Error)]
        #[error("cannot connect: connection refused")]
        struct Quoting(#[source] std::io::Error);
        let refused = || std::io::Error::other("connection refused");
        assert_eq!(
            error_chain(&Outer(refused())),
            "cannot connect: connection refused"
        );
        assert_eq!(
            error_chain(&Quoting(refused())),
            "cannot connect: connection refused",
            "a cause the message already quotes is not repeated"
        );
    }
}
