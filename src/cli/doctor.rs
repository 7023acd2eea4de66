//! `hearth doctor`: live checks of what hearth depends on, one line each, with the fix when one
//! fails: each model provider's `GET /models` (the probe `hearth chat` starts with), each MCP
//! server's tool list, each calendar's collections (or feed), the database and the data directory, the clock and timezone. Exits 1
//! when a check failed.
//!
//! Each configured chat platform is asked what can be asked beside a running daemon without
//! disturbing it (Telegram `getMe`, Discord's bot user and Message Content intent, an IMAP login
//! with IDLE and an SMTP greeting, the Matrix homeserver, the saved session and cross-signing):
//! never a long poll, a gateway session or a new Matrix login. `hearth status` asks the running
//! daemon how its channels are.

use std::path::{Path, PathBuf};

use super::{Failure, load_config};
use crate::config::Secret;
use crate::provider::ProbeFailure;
use crate::store::Store;

/// One check's outcome.
struct Line {
    ok: bool,
    /// Passed, but something may not work as meant (a model the server does not list).
    warn: bool,
    text: String,
}

impl Line {
    fn ok(text: impl Into<String>) -> Self {
        Self {
            ok: true,
            warn: false,
            text: text.into(),
        }
    }

    fn warn(text: impl Into<String>) -> Self {
        Self {
            ok: true,
            warn: true,
            text: text.into(),
        }
    }

    fn failed(text: impl Into<String>) -> Self {
        Self {
            ok: false,
            warn: false,
            text: text.into(),
        }
    }
}

pub(super) async fn run(path: Option<PathBuf>) -> Result<(), Failure> {
    let loaded = load_config(path)?;
    let config = &loaded.config;
    let mut lines = Vec::new();

    let (providers, _) = crate::provider::effective_providers(&config.providers);
    for provider in &providers {
        lines.push(provider_line(provider).await);
    }
    for probe in crate::tool::mcp::probe(&config.mcp_servers).await {
        lines.push(match &probe.tools {
            None => Line::ok(format!("mcp {} ({}): disabled", probe.name, probe.target)),
            Some(Ok(tools)) => Line::ok(format!(
                "mcp {} ({}): {} tool(s)",
                probe.name,
                probe.target,
                tools.len()
            )),
            Some(Err(error)) => Line::failed(format!(
                "mcp {} ({}): {error} — fix: start the server or correct mcp_servers, then `hearth mcp list`",
                probe.name, probe.target
            )),
        });
    }
    for calendar in &config.calendars {
        lines.push(match crate::calendar::doctor(calendar).await {
            Ok(text) => Line::ok(format!("calendar {}: {text}", calendar.name)),
            Err(text) => Line::failed(format!("calendar {}: {text}", calendar.name)),
        });
    }
    lines.push(data_dir_line(&config.daemon.data_dir));
    lines.push(database_line(&config.daemon.database_url()).await);
    lines.push(clock_line(config.daemon.timezone, &loaded.sources.timezone));
    lines.extend(channel_lines(&config.channels, &config.daemon.data_dir).await);

    let failed = lines.iter().filter(|line| !line.ok).count();
    for line in &lines {
        let mark = match (line.ok, line.warn) {
            (false, _) => "FAIL",
            (true, true) => "warn",
            (true, false) => "ok  ",
        };
        println!("{mark} {}", line.text);
    }
    if failed == 0 {
        Ok(())
    } else {
        Err(anyhow::anyhow!("{failed} check(s) failed").into())
    }
}

/// Builds each configured channel (its secrets resolved) and runs its live checks, all at once.
async fn channel_lines(channels: &crate::channels::ChannelsConfig, data_dir: &Path) -> Vec<Line> {
    let built = match crate::channels::build(channels, data_dir) {
        Ok(built) => built,
        Err(error) => {
            return vec![Line::failed(format!(
                "{error} — fix: `hearth check` names what is missing"
            ))];
        }
    };
    let checks = built.iter().map(|built| async {
        let name = built.channel.name().to_string();
        let checks = built.channel.live_checks().await;
        (name, checks)
    });
    let mut lines = Vec::new();
    for (name, checks) in futures::future::join_all(checks).await {
        if checks.is_empty() {
            lines.push(Line::ok(format!("channel {name}: no live check")));
        }
        for check in checks {
            lines.push(match check {
                Ok(text) => Line::ok(format!("channel {name}: {text}")),
                Err(text) => Line::failed(format!("channel {name}: {text}")),
            });
        }
    }
    lines
}

async fn provider_line(provider: &crate::config::ProviderConfig) -> Line {
    let name = &provider.name;
    let key = match &provider.api_key_env {
        Some(variable) => match Secret::resolve(variable) {
            Ok(key) => Some(key),
            Err(problem) => {
                return Line::failed(format!(
                    "provider `{name}`: API key {variable}: {problem} — fix: export {variable}=… or give it as a systemd credential"
                ));
            }
        },
        None => None,
    };
    match crate::provider::probe_models(provider, key.as_ref(), crate::provider::PROBE_TIMEOUT)
        .await
    {
        Ok(answer) if answer.models.contains(&provider.model) => Line::ok(format!(
            "provider `{name}` at {}: {} model(s); `{}` listed",
            provider.base_url,
            answer.models.len(),
            provider.model
        )),
        // An alias the server resolves is not listed either, so this does not fail.
        Ok(answer) => Line::warn(format!(
            "provider `{name}` at {}: `{}` is not among its {} model(s) ({}) — fix: set model to one of them, unless `{}` is an alias the server knows",
            provider.base_url,
            provider.model,
            answer.models.len(),
            shortlist(&answer.models),
            provider.model
        )),
        // The other failures' messages end with their fix already (the key's variable, the
        // API root, try again later); an unreachable server's names only the cause.
        Err(error) if error.kind == ProbeFailure::Unreachable => Line::failed(format!(
            "{} — fix: start the model server there, or correct base_url",
            one_cause(&error.message)
        )),
        Err(error) => Line::failed(error.message),
    }
}

/// A probe's message with only its first cause: "cannot connect to H: connection refused
/// (nothing listens there)" without the transport's own words for the same thing.
fn one_cause(message: &str) -> &str {
    const CAUSES: [&str; 3] = [
        "connection refused (nothing listens there)",
        "the host name does not resolve (DNS)",
        "TLS failed",
    ];
    CAUSES
        .iter()
        .find_map(|cause| message.find(cause).map(|at| &message[..at + cause.len()]))
        .unwrap_or(message)
}

/// Up to five model ids, then how many more.
fn shortlist(models: &[String]) -> String {
    let shown: Vec<&str> = models.iter().take(5).map(String::as_str).collect();
    match models.len().saturating_sub(shown.len()) {
        0 => shown.join(", "),
        more => format!("{}, and {more} more", shown.join(", ")),
    }
}

/// The data directory exists (or can be made) and takes a file: a read-only mount or a
/// directory owned by another user shows here, not at the first message.
fn data_dir_line(dir: &Path) -> Line {
    if let Err(error) = std::fs::create_dir_all(dir) {
        return Line::failed(format!(
            "data dir {}: cannot be created ({error}) — fix: set daemon.data_dir to a directory this user may write",
            dir.display()
        ));
    }
    let probe = dir.join(".hearth-doctor");
    match std::fs::write(&probe, b"") {
        Ok(()) => {
            // The probe file is hearth's own; failing to remove it leaves an empty file behind.
            let _ = std::fs::remove_file(&probe);
            disk_space_line(dir)
        }
        Err(error) => Line::failed(format!(
            "data dir {}: not writable ({error}) — fix: give this user the directory, or set daemon.data_dir",
            dir.display()
        )),
    }
}

/// Below this much free space the database's write-ahead log, a backup or an attachment can fail
/// to be written: hearth would stop taking messages, so the doctor says so first.
const LOW_DISK_BYTES: u64 = 200 * 1024 * 1024;

/// The free space where the database lives, the fault a home server meets months later.
fn disk_space_line(dir: &Path) -> Line {
    match rustix::fs::statvfs(dir) {
        Ok(stat) => {
            let free = stat.f_bavail.saturating_mul(stat.f_frsize);
            let free_mib = free / (1024 * 1024);
            if free < LOW_DISK_BYTES {
                Line::failed(format!(
                    "data dir {}: writable, but only {free_mib} MiB free — fix: free disk space (hearth needs room for its database log and backups)",
                    dir.display()
                ))
            } else {
                Line::ok(format!(
                    "data dir {}: writable, {free_mib} MiB free",
                    dir.display()
                ))
            }
        }
        // Not knowing the free space is no fault of the setup: the write above worked.
        Err(error) => Line::ok(format!(
            "data dir {}: writable (free space unknown: {error})",
            dir.display()
        )),
    }
}

async fn database_line(url: &str) -> Line {
    if let Some(path) = crate::store::missing_database(url) {
        return Line::ok(format!(
            "database: none yet at {} (`hearth run` or `hearth chat` creates it)",
            path.display()
        ));
    }
    let store = match Store::connect(url).await {
        Ok(store) => store,
        Err(error) => {
            return Line::failed(format!(
                "database: cannot open it ({error}) — fix: check daemon.database_url and that this user may read it"
            ));
        }
    };
    let line = match store.inbox_depth().await {
        Ok(waiting) => Line::ok(format!(
            "database: readable, {waiting} message(s) waiting to be handled"
        )),
        Err(error) => Line::failed(format!(
            "database: opened but cannot be read ({error}) — fix: `hearth migrate`, or restore a backup"
        )),
    };
    store.close().await;
    line
}

fn clock_line(timezone: chrono_tz::Tz, from: &str) -> Line {
    Line::ok(format!(
        "clock: {} in {timezone} ({from})",
        chrono::Utc::now()
            .with_timezone(&timezone)
            .format("%Y-%m-%d %H:%M %Z")
    ))
}
