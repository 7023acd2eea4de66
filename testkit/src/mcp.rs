//! A small Model Context Protocol server for hearth's tests, written with rmcp's server side, in
//! two forms: the `mcp_fake` binary speaking over stdio (a real child process, so tests can
//! crash it, hang it and look for it in /proc) and [`FakeMcpHttp`], the same tools over
//! streamable HTTP on `127.0.0.1`.
//!
//! Its tools:
//! - `read_note {key}`: marked read-only; answers `note <key>: <text>` (or `no note <key>`).
//! - `write_note {key, text}`: not read-only; stores the note (and, for the binary, appends
//!   `key=text` to the file named by `$MCP_FAKE_LOG`, so a test can see it ran).
//! - `whoami {}`: read-only; its process id, working directory, `$FAKE_SECRET`, `$FAKE_PLAIN`,
//!   the names of all its environment variables, and (over HTTP) the `Authorization` and
//!   `X-Test` headers.
//! - `spawn_helper {}`: read-only; starts `sleep 300` as its own child and answers its pid.
//! - `fail {}`: read-only; answers a tool error (`isError`).
//! - `crash {}`: read-only; the binary exits with status 3 in the middle of the call.
//! - `hang {}`: read-only; never answers.
//! - `grow {}`: read-only; adds the read-only tool `bonus` and tells the client its tool list
//!   changed.
//!
//! The binary's `$MCP_FAKE_MODE`: `slow` waits 1.5 s before it answers the handshake; `leak` writes `login refused for token $FAKE_SECRET` to stderr
//! and exits 1; `exit` writes `boom: no configuration` to stderr and exits 1
//! before the handshake; `silent` reads stdin and never answers.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The fake server's tools and notes. Cheap to clone; clones share the notes.
#[derive(Clone, Debug, Default)]
pub struct FakeMcp {
    notes: Arc<Mutex<BTreeMap<String, String>>>,
    /// `$MCP_FAKE_LOG` of the binary: each write is appended there too.
    log: Option<PathBuf>,
    /// Whether `crash` may end the process (only the binary; never a test process).
    may_exit: bool,
    /// Set by `grow`: the `bonus` tool is listed.
    grown: Arc<std::sync::atomic::AtomicBool>,
}

fn schema(properties: Value, required: &[&str]) -> Arc<serde_json::Map<String, Value>> {
    let value = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::default(),
    }
}

fn read_only() -> ToolAnnotations {
    ToolAnnotations::new().read_only(true)
}

fn tools() -> Vec<Tool> {
    let key = json!({"key": {"type": "string", "description": "the note's name"}});
    let none = || schema(json!({}), &[]);
    vec![
        Tool::new("read_note", "Read a note by its key", schema(key, &["key"]))
            .annotate(read_only()),
        Tool::new(
            "write_note",
            "Write a note under a key",
            schema(
                json!({"key": {"type": "string"}, "text": {"type": "string"}}),
                &["key", "text"],
            ),
        )
        .annotate(ToolAnnotations::new().read_only(false).destructive(false)),
        Tool::new("whoami", "Who and where the server is", none()).annotate(read_only()),
        Tool::new("spawn_helper", "Start a helper process", none()).annotate(read_only()),
        Tool::new("fail", "Always fails", none()).annotate(read_only()),
        Tool::new("crash", "Exits in the middle of the call", none()).annotate(read_only()),
        Tool::new("hang", "Never answers", none()).annotate(read_only()),
        Tool::new("grow", "Adds the bonus tool", none()).annotate(read_only()),
    ]
}

fn text(value: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(value)]).into())
}

impl FakeMcp {
    /// The server as the `mcp_fake` binary runs it.
    pub fn for_process() -> Self {
        Self {
            notes: Arc::default(),
            log: std::env::var_os("MCP_FAKE_LOG").map(PathBuf::from),
            may_exit: true,
            grown: Arc::default(),
        }
    }

    /// The notes written so far.
    pub fn notes(&self) -> BTreeMap<String, String> {
        self.notes.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl ServerHandler for FakeMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut all = tools();
        if self.grown.load(std::sync::atomic::Ordering::SeqCst) {
            let none = schema(json!({}), &[]);
            all.push(Tool::new("bonus", "Appears after grow", none).annotate(read_only()));
        }
        Ok(ListToolsResult::with_all_items(all))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.clone().unwrap_or_default();
        let arg = |name: &str| args.get(name).and_then(Value::as_str).map(str::to_string);
        match request.name.as_ref() {
            "read_note" => {
                let Some(key) = arg("key") else {
                    return Err(ErrorData::invalid_params("`key` is required", None));
                };
                let notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
                match notes.get(&key) {
                    Some(note) => text(format!("note {key}: {note}")),
                    None => text(format!("no note {key}")),
                }
            }
            "write_note" => {
                let (Some(key), Some(note)) = (arg("key"), arg("text")) else {
                    return Err(ErrorData::invalid_params(
                        "`key` and `text` are required",
                        None,
                    ));
                };
                if let Some(log) = &self.log {
                    use std::io::Write;
                    let written = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(log)
                        .and_then(|mut file| writeln!(file, "{key}={note}"));
                    if let Err(err) = written {
                        return Err(ErrorData::internal_error(err.to_string(), None));
                    }
                }
                self.notes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key.clone(), note);
                text(format!("saved {key}"))
            }
            "whoami" => {
                let header = |name: &str| {
                    context
                        .extensions
                        .get::<http::request::Parts>()
                        .and_then(|parts| parts.headers.get(name))
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string)
                };
                let answer = json!({
                    "pid": std::process::id(),
                    "cwd": std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default(),
                    "secret": std::env::var("FAKE_SECRET").ok(),
                    "plain": std::env::var("FAKE_PLAIN").ok(),
                    "env": std::env::vars_os()
                        .map(|(name, _)| name.to_string_lossy().into_owned())
                        .collect::<Vec<_>>(),
                    "authorization": header("authorization"),
                    "x_test": header("x-test"),
                });
                text(answer.to_string())
            }
            "spawn_helper" => match std::process::Command::new("sleep").arg("300").spawn() {
                Ok(child) => text(child.id().to_string()),
                Err(err) => Err(ErrorData::internal_error(err.to_string(), None)),
            },
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text(
                "the lights are unreachable",
            )])
            .into()),
            "grow" => {
                self.grown.store(true, std::sync::atomic::Ordering::SeqCst);
                if let Err(err) = context.peer.notify_tool_list_changed().await {
                    return Err(ErrorData::internal_error(err.to_string(), None));
                }
                text("grown")
            }
            "bonus" => text("bonus!"),
            "crash" if self.may_exit => {
                eprintln!("fake MCP server: crashing on purpose");
                std::process::exit(3);
            }
            "crash" => text("not crashing inside a test process"),
            "hang" => {
                std::future::pending::<()>().await;
                text("unreachable")
            }
            other => Err(ErrorData::invalid_params(
                format!("no tool named {other}"),
                None,
            )),
        }
    }
}

/// [`FakeMcp`] over streamable HTTP at `url()`; stops when dropped.
#[derive(Debug)]
pub struct FakeMcpHttp {
    addr: SocketAddr,
    server: FakeMcp,
    stop: CancellationToken,
}

impl FakeMcpHttp {
    /// Listens on `127.0.0.1:0`.
    pub async fn start() -> Self {
        let (listener, _) = crate::net::local_listener().await;
        Self::serve(listener).await
    }

    /// Listens on `addr` again (a server that comes back after [`FakeMcpHttp::stop`]).
    pub async fn start_at(addr: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .expect("bind the same port again");
        Self::serve(listener).await
    }

    async fn serve(listener: tokio::net::TcpListener) -> Self {
        let addr = listener.local_addr().expect("local address");
        let stop = CancellationToken::new();
        let server = FakeMcp::default();
        let mut config = StreamableHttpServerConfig::default();
        config.cancellation_token = stop.child_token();
        let factory = server.clone();
        let service: StreamableHttpService<FakeMcp, LocalSessionManager> =
            StreamableHttpService::new(move || Ok(factory.clone()), Arc::default(), config);
        let app = axum::Router::new().nest_service("/mcp", service);
        let until = stop.clone();
        tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move { until.cancelled().await })
                .await;
            if let Err(err) = served {
                eprintln!("fake MCP HTTP server stopped: {err}");
            }
        });
        Self { addr, server, stop }
    }

    /// `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The notes written through this server.
    pub fn notes(&self) -> BTreeMap<String, String> {
        self.server.notes()
    }

    /// Stops listening and ends every session.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for FakeMcpHttp {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The newest modification time of the testkit's sources.
fn sources_changed() -> Option<std::time::SystemTime> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut newest = std::fs::metadata(root.join("Cargo.toml"))
        .ok()?
        .modified()
        .ok()?;
    let mut dirs = vec![root.join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if let Ok(modified) = entry.metadata().and_then(|m| m.modified()) {
                newest = newest.max(modified);
            }
        }
    }
    Some(newest)
}

/// Where the `mcp_fake` binary is, building it first when it is missing or older than the
/// testkit's sources: `cargo test --workspace` builds it, `cargo test -p hearth` does not.
pub fn mcp_fake_path() -> PathBuf {
    static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test binary's path");
        // target/<profile>/deps/<test binary> -> target/<profile>/mcp_fake
        let profile_dir = exe
            .parent()
            .and_then(|deps| deps.parent())
            .expect("the test binary lives in target/<profile>/deps");
        let path = profile_dir.join("mcp_fake");
        let built = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        if built.is_some() && built >= sources_changed() {
            return path;
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = std::process::Command::new(cargo);
        build.args([
            "build",
            "--quiet",
            "-p",
            "hearth-testkit",
            "--bin",
            "mcp_fake",
        ]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        if std::env::var_os("CARGO_TARGET_DIR").is_none()
            && let Some(target) = profile_dir.parent()
        {
            build.env("CARGO_TARGET_DIR", target);
        }
        let status = build
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building mcp_fake failed");
        assert!(path.is_file(), "{} was not built", path.display());
        path
    })
    .clone()
}
