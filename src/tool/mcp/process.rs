//! Starting a stdio MCP server as a child process, so that it never outlives hearth:
//!
//! - It gets a clean environment: only the basics (`PATH`, `HOME`, `LANG` …) plus what its
//!   config entry gives it, so hearth's own secrets (bot tokens, API keys) never reach a
//!   third-party program.
//! - It leads its own process group. Stopping it signals the whole group, so helpers it started
//!   go too, and a Ctrl-C in hearth's terminal does not reach it before hearth can stop it.
//! - Its stderr goes to hearth's log (debug level), and its last lines into error messages.
//! - When hearth runs as its own binary, the server is started through `hearth __mcp-exec`,
//!   which asks the kernel (Linux `PR_SET_PDEATHSIG`) to kill it when hearth dies, even by
//!   SIGKILL, and then becomes the server with `exec`. The kernel ties that signal to the thread
//!   that started the process, so servers are started from one thread that lives as long as
//!   the manager (a tokio worker or blocking thread may end earlier).

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};

use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::transport::TokioChildProcess;
use tokio::io::AsyncReadExt;
use tokio::process::ChildStderr;

/// The first argument that makes the `hearth` binary act as the exec wrapper.
pub const EXEC_ARG: &str = "__mcp-exec";

/// Environment variables a server inherits from hearth; everything else it gets from its
/// config entry. The same list the official MCP SDKs pass on.
const INHERITED_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR",
];

/// Lines of a server's stderr kept for error messages.
const STDERR_LINES: usize = 20;

/// Longest stderr line kept; longer lines are cut.
const STDERR_LINE_MAX: usize = 1_000;

/// The `hearth` binary, when this process is it (set by `main`); servers are then started
/// through it so they die with hearth.
static EXEC_WRAPPER: OnceLock<PathBuf> = OnceLock::new();

/// Starts MCP servers through this executable (`hearth __mcp-exec …`) from now on.
pub fn use_exec_wrapper(hearth: PathBuf) {
    // A second call changes nothing: the binary does not move while it runs.
    let _ = EXEC_WRAPPER.set(hearth);
}

/// The exec wrapper: when the arguments are `__mcp-exec <hearth pid> <command> [args…]`, arms
/// the parent-death signal and replaces this process with the command. Returns the exit code
/// to exit with (the command could not be started), or `None` for any other command line.
pub fn exec_main() -> Option<i32> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != EXEC_ARG {
        return None;
    }
    let parent: Option<u32> = args
        .next()
        .and_then(|pid| pid.to_str().and_then(|p| p.parse().ok()));
    let (Some(parent), Some(command)) = (parent, args.next()) else {
        eprintln!(
            "usage: hearth {EXEC_ARG} <hearth pid> <command> [args…] (used by hearth itself)"
        );
        return Some(2);
    };
    #[cfg(target_os = "linux")]
    if let Err(err) =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
    {
        eprintln!("hearth {EXEC_ARG}: cannot ask to be stopped with hearth: {err}");
    }
    // hearth may have died between starting us and the line above; then nobody would stop us.
    if std::os::unix::process::parent_id() != parent {
        eprintln!("hearth {EXEC_ARG}: hearth is gone; not starting the server");
        return Some(1);
    }
    let args: Vec<OsString> = args.collect();
    let mut server = std::process::Command::new(&command);
    server.args(&args);
    let err = std::os::unix::process::CommandExt::exec(&mut server);
    // The same words as when hearth starts the server itself.
    eprintln!("cannot start `{}`: {err}", command.to_string_lossy());
    Some(127)
}

/// What a stdio server is started with.
#[derive(Debug, Clone)]
pub struct Launch {
    pub command: String,
    pub args: Vec<String>,
    /// Plain and secret variables together, already resolved.
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
}

/// A started server: the transport rmcp speaks over, its process id (also its process group)
/// and its stderr.
pub struct Spawned {
    pub transport: TokioChildProcess,
    pub pid: Option<u32>,
    pub stderr: Option<ChildStderr>,
}

type Job = Box<dyn FnOnce() + Send>;

/// Starts server processes from one long-lived thread (see the module notes).
#[derive(Clone)]
pub struct Spawner {
    jobs: Option<std::sync::mpsc::Sender<Job>>,
}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawner")
            .field("thread", &self.jobs.is_some())
            .finish()
    }
}

impl Spawner {
    /// Must be called inside the tokio runtime that will drive the processes.
    pub fn new() -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let handle = tokio::runtime::Handle::current();
        let thread = std::thread::Builder::new()
            .name("hearth-mcp-spawn".into())
            .spawn(move || {
                // Pipes and child reaping register with the runtime.
                let _runtime = handle.enter();
                while let Ok(job) = rx.recv() {
                    job();
                }
            });
        match thread {
            Ok(_) => Self { jobs: Some(tx) },
            Err(err) => {
                tracing::warn!(error = %err, "cannot start the MCP spawner thread; starting servers from tokio's threads");
                Self { jobs: None }
            }
        }
    }

    pub async fn spawn(&self, launch: Launch) -> std::io::Result<Spawned> {
        let Some(jobs) = &self.jobs else {
            return spawn_now(&launch);
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            // The receiver is gone only when the start was abandoned (timeout, shutdown); the
            // transport then drops here and its process is killed.
            let _ = tx.send(spawn_now(&launch));
        });
        if jobs.send(job).is_err() {
            return Err(std::io::Error::other("the MCP spawner thread has stopped"));
        }
        rx.await
            .map_err(|_| std::io::Error::other("the MCP spawner thread has stopped"))?
    }
}

fn spawn_now(launch: &Launch) -> std::io::Result<Spawned> {
    let mut command = match EXEC_WRAPPER.get().filter(|path| path.is_file()) {
        Some(hearth) => {
            let mut command = tokio::process::Command::new(hearth);
            command
                .arg(EXEC_ARG)
                .arg(std::process::id().to_string())
                .arg(&launch.command);
            command
        }
        None => tokio::process::Command::new(&launch.command),
    };
    command.args(&launch.args).env_clear();
    for name in INHERITED_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.envs(&launch.env);
    if let Some(cwd) = &launch.cwd {
        command.current_dir(cwd);
    }
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
    let (transport, stderr) = TokioChildProcess::builder(wrapped)
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = transport.id();
    Ok(Spawned {
        transport,
        pid,
        stderr,
    })
}

/// Sends SIGKILL to what is left of a server's process group (helpers it started); a group
/// that is already empty is fine.
pub fn kill_group(pid: Option<u32>) {
    let Some(pgid) = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    match rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(err) => {
            tracing::debug!(pgid = pgid.as_raw_pid(), error = %err, "killing an MCP server's process group failed")
        }
    }
}

/// `text` with every occurrence of each secret replaced by `[redacted]`. Empty secrets are
/// skipped (they would match everywhere).
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut text = text.to_string();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        if text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), "[redacted]");
        }
    }
    text
}

/// The last lines a server wrote to stderr.
#[derive(Debug, Default)]
pub struct StderrTail {
    lines: Mutex<VecDeque<String>>,
    /// Cancelled when the server closed its stderr (it has usually exited then).
    done: tokio_util::sync::CancellationToken,
}

impl StderrTail {
    /// Waits until the server has closed its stderr.
    pub async fn closed(&self) {
        self.done.cancelled().await;
    }

    fn push(&self, line: String) {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The last `n` lines, joined with " | ", for an error message.
    pub fn last(&self, n: usize) -> Option<String> {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if lines.is_empty() {
            return None;
        }
        let start = lines.len().saturating_sub(n);
        Some(
            lines
                .iter()
                .skip(start)
                .cloned()
                .collect::<Vec<_>>()
                .join(" | "),
        )
    }
}

/// Reads a server's stderr until it closes: every line to the log, the last ones kept, each
/// with the server's own `secrets` (its resolved `secrets_env` values) replaced by
/// `[redacted]`.
pub async fn read_stderr(
    server: String,
    mut stderr: ChildStderr,
    tail: Arc<StderrTail>,
    secrets: Vec<String>,
) {
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    let emit = |line: &[u8]| {
        let text = String::from_utf8_lossy(line);
        let text = redact(text.trim_end(), &secrets);
        if text.is_empty() {
            return;
        }
        let text: String = text.chars().take(STDERR_LINE_MAX).collect();
        tracing::debug!(server = %server, "stderr: {text}");
        tail.push(text);
    };
    loop {
        let read = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..read]);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            emit(&pending[..end]);
            pending.drain(..=end);
        }
        // A line without an end is cut rather than grown without bound.
        if pending.len() > STDERR_LINE_MAX * 4 {
            emit(&pending);
            pending.clear();
        }
    }
    emit(&pending);
    tail.done.cancel();
}
