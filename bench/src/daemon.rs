//! The hearth process under test: its configuration, start, readiness, memory and stop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The bot token the fake Telegram accepts; it only ever travels over 127.0.0.1.
pub const TOKEN: &str = "123456:BENCH-token";

/// What the configuration needs to know about the fakes and the load.
pub struct Setup<'a> {
    pub dir: &'a Path,
    pub telegram_url: &'a str,
    pub llm_url: &'a str,
    pub users: &'a [i64],
    pub max_concurrent: usize,
}

/// Writes `hearth.toml` into `setup.dir`: Telegram without pacing (the fake has no flood
/// limits), the HTTP API (for the HTTP turns beside the Telegram ones), one provider, one schedule (so the scheduler is part of the idle footprint), and
/// everything else at its defaults, built-in agents included.
pub fn write_config(setup: &Setup<'_>) -> anyhow::Result<u16> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let owner = setup.users.first().copied().unwrap_or(1);
    let users = setup
        .users
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let data = setup.dir.join("data");
    let config = format!(
        r#"[daemon]
data_dir = "{data}"
database_url = "sqlite://{data}/hearth.db"
http_listen = "127.0.0.1:{port}"
owner = "telegram:{owner}"
max_concurrent_conversations = {max_concurrent}
shutdown_grace_secs = 2

[[providers]]
name = "fake"
kind = "openai"
base_url = "{llm}"
model = "fake-model"
max_retries = 0
timeout_secs = 60

[router]
agents_file = "{data}/agents.toml"

[channels.telegram]
token_env = "HEARTH_TELEGRAM_TOKEN"
api_url = "{tg}"
allowed_users = [{users}]
pacing = false

[channels.http]

[[schedules]]
name = "morning-briefing"
cron = "0 30 7 * * Mon-Fri"
agent = "briefing"
prompt = "Give me my briefing."
target = "telegram:{owner}"
"#,
        data = data.display(),
        max_concurrent = setup.max_concurrent,
        llm = setup.llm_url,
        tg = setup.telegram_url,
    );
    std::fs::write(setup.dir.join("hearth.toml"), config)?;
    Ok(port)
}

/// Makes a token of the HTTP API with `hearth token create` on the configuration in `dir`.
pub fn create_token(binary: &Path, dir: &Path, name: &str) -> anyhow::Result<String> {
    let out = Command::new(binary)
        .args(["token", "create", name, "--config"])
        .arg(dir.join("hearth.toml"))
        .current_dir(dir)
        .env_clear()
        .env("HEARTH_TELEGRAM_TOKEN", TOKEN)
        .output()
        .context("running hearth token create")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find(|line| line.starts_with("hth_"))
        .map(str::to_string)
        .with_context(|| {
            format!(
                "hearth token create printed no token: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// A running `hearth run`.
pub struct Daemon {
    child: Child,
    pub pid: u32,
    port: u16,
    pub log: PathBuf,
    _notify: Option<tokio::net::UnixDatagram>,
}

/// How long a start took, measured from just before `spawn`.
#[derive(Clone, Copy, Debug)]
pub struct StartTimes {
    /// When the process was spawned.
    pub spawned: Instant,
    /// `/healthz` answered with the Telegram channel `connected`.
    pub healthz: Duration,
    /// READY=1 arrived on the notify socket.
    pub ready: Option<Duration>,
}

impl Daemon {
    /// Starts `hearth run` in `dir` and waits until `/healthz` shows Telegram connected.
    pub async fn start(
        binary: &Path,
        dir: &Path,
        port: u16,
        run: usize,
        env: &[(String, String)],
    ) -> anyhow::Result<(Self, StartTimes)> {
        let log = dir.join(format!("hearth-{run}.log"));
        let socket_path = dir.join(format!("notify-{run}.sock"));
        let socket =
            tokio::net::UnixDatagram::bind(&socket_path).context("binding the notify socket")?;
        let started = Instant::now();
        let child = Command::new(binary)
            .arg("run")
            .arg("--config")
            .arg(dir.join("hearth.toml"))
            .current_dir(dir)
            .env_clear()
            .env("HEARTH_TELEGRAM_TOKEN", TOKEN)
            .env("NOTIFY_SOCKET", &socket_path)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log)?))
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let ready = tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            loop {
                let Ok(n) = socket.recv(&mut buf).await else {
                    return (None, socket);
                };
                if String::from_utf8_lossy(&buf[..n]).contains("READY=1") {
                    return (Some(started.elapsed()), socket);
                }
            }
        });
        let pid = child.id();
        let mut daemon = Self {
            child,
            pid,
            port,
            log,
            _notify: None,
        };
        let deadline = started + Duration::from_secs(30);
        let healthz = loop {
            if let Ok(body) = daemon.healthz().await
                && body.contains(r#""state":"connected""#)
            {
                break started.elapsed();
            }
            if let Some(status) = daemon.child.try_wait()? {
                bail!(
                    "hearth exited with {status} before it was ready; see {}",
                    daemon.log.display()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "hearth was not ready after 30 s; see {}",
                    daemon.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        let ready = match tokio::time::timeout(Duration::from_secs(2), ready).await {
            Ok(Ok((at, socket))) => {
                // Kept open so the daemon's later STATUS/STOPPING messages have a reader.
                daemon._notify = Some(socket);
                at
            }
            _ => None,
        };
        Ok((
            daemon,
            StartTimes {
                spawned: started,
                healthz,
                ready,
            },
        ))
    }

    /// `GET /healthz` over a plain connection (no client library: the poll must be cheap).
    async fn healthz(&mut self) -> anyhow::Result<String> {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await?;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok(String::from_utf8_lossy(&response).into_owned())
    }

    /// (VmRSS, VmHWM) in kB.
    pub fn memory(&self) -> anyhow::Result<Memory> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Ok(Memory {
            rss_kb: field("VmRSS:"),
            hwm_kb: field("VmHWM:"),
            anon_kb: field("RssAnon:"),
            file_kb: field("RssFile:"),
            threads: field("Threads:"),
        })
    }

    /// CPU time the daemon used so far (user + system), from /proc/PID/stat.
    pub fn cpu(&self) -> Duration {
        cpu_of(&format!("/proc/{}/stat", self.pid))
    }

    /// Resets VmHWM to the current RSS (`echo 5 > /proc/PID/clear_refs`), so the next peak
    /// belongs to the next phase.
    pub fn reset_peak(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid), "5").is_ok()
    }

    /// SIGTERM and wait for the exit.
    pub fn stop(mut self) -> anyhow::Result<std::process::ExitStatus> {
        Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()?;
        Ok(self.child.wait()?)
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Memory {
    pub rss_kb: u64,
    pub hwm_kb: u64,
    /// Heap and stacks.
    pub anon_kb: u64,
    /// Mapped files: mostly the pages of the binary that ran.
    pub file_kb: u64,
    pub threads: u64,
}

/// User + system CPU time of the process whose `/proc/…/stat` is at `path` (assumes the usual
/// 100 clock ticks a second).
pub fn cpu_of(path: &str) -> Duration {
    let Ok(stat) = std::fs::read_to_string(path) else {
        return Duration::ZERO;
    };
    // Fields after the command name (which may contain spaces) start at state = field 3.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime is field 14 and stime field 15, i.e. indexes 11 and 12 after the command.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}
