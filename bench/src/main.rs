//! `hearth-load`: starts the release `hearth run` against the fake Telegram Bot API and the
//! fake OpenAI-compatible LLM from `hearth-testkit`, drives load through it, and reports the
//! performance budget of issue 7 as a table and as one JSON line.
//!
//! Phases, in order: a start on a fresh database and a second start on the existing one (time
//! to `/healthz` connected and to READY=1), idle memory, sustained throughput with a
//! zero-latency LLM, the daemon's overhead per message at a fixed offered rate, many
//! concurrent conversations with a slow LLM, and one turn at a time over HTTP
//! (`/v1/chat/completions`) beside one at a time over Telegram.

mod compare;
mod daemon;
mod load;
mod report;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;

use daemon::{Daemon, Setup};
use load::Load;
use report::Report;

#[derive(Parser, Debug)]
#[command(name = "hearth-load", about = "Load harness for the hearth daemon")]
struct Args {
    /// The hearth binary to measure (default: target/release/hearth under $CARGO_TARGET_DIR or
    /// the workspace).
    #[arg(long)]
    hearth: Option<PathBuf>,
    /// Small sizes so the whole run takes well under a minute.
    #[arg(long)]
    quick: bool,
    /// Messages in the throughput run.
    #[arg(long)]
    messages: Option<usize>,
    /// Chats the throughput and overhead runs spread their messages over.
    #[arg(long)]
    chats: Option<usize>,
    /// Offered rate of the overhead run, messages per second.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// Messages in the overhead run.
    #[arg(long)]
    rate_messages: Option<usize>,
    /// Turns of the one-at-a-time run, over HTTP and over Telegram each.
    #[arg(long)]
    sequential: Option<usize>,
    /// Concurrent conversations in the slow-LLM run.
    #[arg(long)]
    conversations: Option<usize>,
    /// LLM latency of the slow-LLM run, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    latency_ms: u64,
    /// Seconds to let the daemon settle before reading idle memory.
    #[arg(long)]
    settle_secs: Option<u64>,
    /// An environment variable for the daemon, KEY=VALUE (repeatable), e.g.
    /// `RUST_LOG=sqlx::query=debug` to count statements or `MALLOC_ARENA_MAX=2`.
    #[arg(long = "daemon-env", value_parser = parse_env)]
    daemon_env: Vec<(String, String)>,
    /// Keep the temporary directory (config, database, logs) and print where it is.
    #[arg(long)]
    keep: bool,
    /// Measure two binaries side by side, OLD then NEW, alternating their order each round,
    /// and print NEW/OLD ratios (min / median / max over the rounds) against the budgets.
    #[arg(long, num_args = 2, value_names = ["OLD", "NEW"], conflicts_with = "hearth")]
    compare: Option<Vec<PathBuf>>,
    /// Rounds of `--compare` (each runs both binaries once).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))
}

struct Sizes {
    messages: usize,
    chats: usize,
    rate_messages: usize,
    conversations: usize,
    sequential: usize,
    settle: Duration,
}

impl Args {
    fn sizes(&self) -> Sizes {
        let (messages, chats, rate_messages, conversations, sequential, settle) = if self.quick {
            (1_000, 200, 400, 200, 100, 1)
        } else {
            (5_000, 1_000, 2_000, 1_000, 500, 3)
        };
        Sizes {
            messages: self.messages.unwrap_or(messages),
            chats: self.chats.unwrap_or(chats).max(1),
            rate_messages: self.rate_messages.unwrap_or(rate_messages),
            conversations: self.conversations.unwrap_or(conversations).max(1),
            sequential: self.sequential.unwrap_or(sequential).max(1),
            settle: Duration::from_secs(self.settle_secs.unwrap_or(settle)),
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn default_binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from);
    target.join("release").join("hearth")
}

/// Samples VmRSS every 50 ms while a phase runs; returns the highest seen, in kB.
struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let (s, p) = (stop.clone(), peak.clone());
        let task = tokio::spawn(async move {
            while !s.load(Ordering::Relaxed) {
                if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status"))
                    && let Some(kb) = status
                        .lines()
                        .find_map(|l| l.strip_prefix("VmRSS:"))
                        .and_then(|v| v.split_whitespace().next())
                        .and_then(|v| v.parse::<u64>().ok())
                {
                    p.fetch_max(kb, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Self { stop, peak, task }
    }

    async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        // The sampler only reads /proc; a failed join just loses samples.
        let _ = self.task.await;
        self.peak.load(Ordering::Relaxed)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let sizes = args.sizes();
    if let Some(pair) = &args.compare {
        for binary in pair {
            ensure_binary(binary)?;
        }
        return compare::run(&pair[0], &pair[1], &args, &sizes).await;
    }
    let binary = args.hearth.clone().unwrap_or_else(default_binary);
    ensure_binary(&binary)?;
    measure(&binary, &args, &sizes).await?.print();
    Ok(())
}

fn ensure_binary(binary: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(
        binary.is_file(),
        "no hearth binary at {} (build it with `cargo build --release`, or pass --hearth PATH)",
        binary.display()
    );
    Ok(())
}

/// One whole run against `binary`, with fakes and a data directory of its own.
async fn measure(binary: &Path, args: &Args, sizes: &Sizes) -> anyhow::Result<Report> {
    let mut report = Report::new(binary, &workspace_root().join("Cargo.toml"))?;

    let dir = tempfile::Builder::new().prefix("hearth-load-").tempdir()?;
    let mut load = Load::start().await;
    let users: Vec<i64> = (0..sizes.chats.max(sizes.conversations))
        .map(|i| 100_000 + i64::try_from(i).unwrap_or(0))
        .collect();
    let port = daemon::write_config(&Setup {
        dir: dir.path(),
        telegram_url: &load.tg.api_url(),
        llm_url: &load.llm.base_url(),
        users: &users,
        max_concurrent: 1024.max(sizes.conversations),
    })?;

    // Start twice: a fresh database (migrations run), then the existing one. A message waits
    // at Telegram before the first start, as it does for a new user who wrote first: the time
    // from the start to its answer is what that user waits.
    eprintln!("starting hearth (fresh database) ...");
    let waiting = load.burst(&users[..1], 1);
    let (first, fresh) = Daemon::start(binary, dir.path(), port, 1, &args.daemon_env).await?;
    let answered = load
        .collect(waiting, Duration::ZERO, Duration::from_secs(10))
        .await;
    let first_answer = answered
        .last_reply()
        .map(|at| at.saturating_duration_since(fresh.spawned));
    let status = first.stop()?;
    anyhow::ensure!(status.success(), "hearth stopped with {status}");
    eprintln!("starting hearth (existing database) ...");
    let (hearth, warm) = Daemon::start(binary, dir.path(), port, 2, &args.daemon_env).await?;
    report.start(fresh, warm, first_answer);
    let token = daemon::create_token(binary, dir.path(), "bench")?;

    tokio::time::sleep(sizes.settle).await;
    report.idle(hearth.memory()?);

    let result = run_phases(&mut load, &hearth, sizes, &users, args, &mut report).await;
    let result = match result {
        Ok(()) => sequential(&mut load, port, &token, &users, sizes, &mut report).await,
        err => err,
    };
    let log = hearth.log.clone();
    let status = hearth.stop()?;
    if let Err(err) = result {
        eprintln!("hearth's log: {}", log.display());
        // Keep the evidence when a phase failed.
        let _ = dir.keep();
        return Err(err);
    }
    report.stopped(status.success());
    if args.keep {
        let kept = dir.keep();
        eprintln!("kept {}", kept.display());
    }
    Ok(report)
}

async fn run_phases(
    load: &mut Load,
    hearth: &Daemon,
    sizes: &Sizes,
    users: &[i64],
    args: &Args,
    report: &mut Report,
) -> anyhow::Result<()> {
    let chats = &users[..sizes.chats];

    // Sustained throughput: everything pushed at once, zero-latency LLM.
    eprintln!(
        "throughput: {} messages over {} chats ...",
        sizes.messages, sizes.chats
    );
    load.set_latency(Duration::ZERO);
    let sampler = RssSampler::start(hearth.pid);
    let (daemon_cpu, own_cpu) = (hearth.cpu(), daemon::cpu_of("/proc/self/stat"));
    let model_calls = load.llm_requests();
    let sent = load.burst(chats, sizes.messages);
    let outcome = load
        .collect(sent, Duration::ZERO, Duration::from_secs(300))
        .await;
    let cpu = (
        hearth.cpu().saturating_sub(daemon_cpu),
        daemon::cpu_of("/proc/self/stat").saturating_sub(own_cpu),
    );
    let model_calls = load.llm_requests() - model_calls;
    let peak = sampler.finish().await;
    report.throughput(&outcome, peak, cpu, model_calls);

    // Overhead at a fixed offered rate: one message every 1/rate s, round robin over the chats
    // (so no conversation queues behind itself).
    eprintln!(
        "overhead: {} messages at {} msg/s ...",
        sizes.rate_messages, args.rate
    );
    let sent = load.paced(chats, sizes.rate_messages, args.rate).await;
    let outcome = load
        .collect(sent, Duration::ZERO, Duration::from_secs(120))
        .await;
    report.overhead(&outcome, args.rate);

    // Concurrent conversations with a slow LLM: one message in each of N chats at once.
    let latency = Duration::from_millis(args.latency_ms);
    eprintln!(
        "concurrency: {} conversations, LLM latency {} ms ...",
        sizes.conversations, args.latency_ms
    );
    load.set_latency(latency);
    let reset = hearth.reset_peak();
    let sampler = RssSampler::start(hearth.pid);
    let started = Instant::now();
    let sent = load.burst(&users[..sizes.conversations], sizes.conversations);
    let outcome = load
        .collect(sent, latency, latency + Duration::from_secs(120))
        .await;
    let sampled = sampler.finish().await;
    let memory = hearth.memory().context("reading memory after the run")?;
    let hwm = if reset { memory.hwm_kb } else { 0 };
    report.concurrency(&outcome, sampled.max(hwm), started);
    Ok(())
}

/// One turn at a time, zero-latency LLM: over HTTP (`POST /v1/chat/completions`, not
/// streamed, each in a conversation of its own) and over Telegram, so the two overheads stand
/// side by side. An HTTP turn's time is the client's: request sent to answer read.
async fn sequential(
    load: &mut Load,
    port: u16,
    token: &str,
    users: &[i64],
    sizes: &Sizes,
    report: &mut Report,
) -> anyhow::Result<()> {
    eprintln!("one at a time: {} HTTP turns ...", sizes.sequential);
    load.set_latency(Duration::ZERO);
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let mut http = report::Sequential::default();
    for i in 0..sizes.sequential {
        let n = load.next_marker();
        let body = serde_json::json!({
            "model": "hearth",
            "messages": [{ "role": "user", "content": format!("bench q{n}q") }],
        });
        let at = Instant::now();
        let response = client
            .post(&url)
            .bearer_auth(token)
            .header("X-Hearth-Conversation", format!("bench-{i}"))
            .json(&body)
            .send()
            .await
            .context("an HTTP turn")?;
        let status = response.status();
        let text = response.text().await.context("an HTTP turn's answer")?;
        let done = Instant::now();
        anyhow::ensure!(
            status.is_success() && text.contains(&format!("ok q{n}q")),
            "HTTP turn {n}: {status} {text}"
        );
        http.add(at, load.llm_seen(n), done);
    }
    eprintln!("one at a time: {} Telegram turns ...", sizes.sequential);
    let mut telegram = report::Sequential::default();
    for i in 0..sizes.sequential {
        let chat = users[i % users.len()];
        let sent = load.burst(&[chat], 1);
        let outcome = load
            .collect(sent, Duration::ZERO, Duration::from_secs(30))
            .await;
        anyhow::ensure!(outcome.answered() == 1, "a Telegram turn got no answer");
        telegram.add(
            outcome.sent[0].at,
            outcome.llm_at[0],
            outcome.reply_at[0].unwrap_or_else(Instant::now),
        );
    }
    report.sequential(&http, &telegram);
    Ok(())
}
