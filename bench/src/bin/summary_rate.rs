//! `hearth-summary-rate`: how often a long conversation asks for a summary (issue 43: compaction
//! goes down to `[context] compact_to`, so a summary is several turns away, not on every turn).
//! It runs the daemon in-process against the fake OpenAI server, which counts tokens as a real
//! one would and writes its summaries under the headings, chats 400 turns of a user message and
//! a few sentences back at a 5,000- and a 32,000-token window, and prints the summary calls per
//! 100 turns and the largest request by the server's count.
//! `cargo run --release -p hearth-bench --bin hearth-summary-rate`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth::agent::AgentSet;
use hearth::config::{Config, ProviderConfig, ProviderKind};
use hearth::daemon::DaemonBuilder;
use hearth_channel::MemoryChannel;
use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::Value;

const TURNS: usize = 400;
const USER: &str = "1001";
const CHAT: &str = "chat-1";
const SUMMARY_MARK: &str = "You keep the record of a long conversation";

fn is_summary(request: &Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with(SUMMARY_MARK))
}

/// One run at `window` tokens: (summary calls, turns answered, largest request in tokens).
async fn run(window: u64) -> anyhow::Result<(usize, usize, u64)> {
    let dir = tempfile::tempdir()?;
    let llm = FakeOpenAi::start().await;
    llm.set_context_window(window);
    llm.set_responder(|request: &Value| {
        if is_summary(request) {
            return Reply::text(
                "## Decisions\nNone.\n## Facts and identifiers\nThe user keeps a garden.\n## Earlier requests (already handled)\nThe user told about the garden.",
            );
        }
        Reply::text("Noted. The garden is doing well this season. ".repeat(6))
    });
    let mut config = Config::default();
    config.daemon.data_dir = dir.path().to_path_buf();
    config.daemon.http_listen = None;
    config.router.agents_file = dir.path().join("no-such-agents.toml");
    config.runtime.stream = false;
    config.providers = vec![ProviderConfig {
        max_retries: 0,
        max_tokens: 500,
        context_window: Some(u32::try_from(window)?),
        ..ProviderConfig::new("fake", ProviderKind::Openai, &llm.base_url(), "fake-model")
    }];
    let agents = AgentSet::parse(
        "[[agent]]\nid = \"general\"\nname = \"General\"\nsystem_prompt = \"You help with the garden.\"\n",
        "bench agents",
    )?;
    let channel = Arc::new(MemoryChannel::new("memory"));
    let daemon = DaemonBuilder::new(config)
        .agents(agents)
        .channel(channel.clone(), &[USER.to_string()])
        .start()
        .await?;
    let mut answered = 0;
    for turn in 1..=TURNS {
        channel.push_text(
            CHAT,
            USER,
            &format!("message {turn}: the tomatoes and the beans in bed {turn} are growing"),
        );
        let sent = channel.wait_for_sent(turn, Duration::from_secs(30)).await;
        if sent.len() >= turn && !sent[turn - 1].text.contains('⚠') {
            answered += 1;
        }
    }
    // Let the last summary, made after its reply, end.
    tokio::time::sleep(Duration::from_millis(300)).await;
    daemon.stop().await;
    let requests = llm.requests();
    let summaries = requests.iter().filter(|r| is_summary(r)).count();
    let largest = requests
        .iter()
        .map(FakeOpenAi::count_tokens)
        .max()
        .unwrap_or(0);
    Ok((summaries, answered, largest))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // rustls has two crypto providers in this build; the daemon's binary picks aws-lc-rs too.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    println!(
        "summary calls per 100 turns ({TURNS} turns, compact_at 0.6, compact_to 0.35, keep_turns 6)"
    );
    for window in [5_000u64, 32_000] {
        let started = Instant::now();
        let (summaries, answered, largest) = run(window).await?;
        println!(
            "  window {window:>6}: {:>5.1} summary calls per 100 turns, {answered}/{TURNS} answered, largest request {largest} tokens ({:.1} s)",
            summaries as f64 * 100.0 / TURNS as f64,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
