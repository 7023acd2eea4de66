//! `hearth chat`: the same runtime, talked to in this terminal.

use std::path::PathBuf;
use std::sync::Arc;

use crate::daemon::{DaemonBuilder, Role};
use crate::terminal::{LOCAL, TerminalChannel};

use super::{Failure, load_agents, load_config, start_failure, usage};

/// The exit code of a chat ended by Ctrl-C: 128 + SIGINT.
const INTERRUPTED_EXIT: i32 = 130;

/// How long `hearth chat` waits, after Ctrl-C cancelled the running answer, for it to wind up.
const CHAT_INTERRUPT_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// `No configuration file was found (hearth looked for …).` when none was, for the messages
/// that come from running on defaults.
pub(super) fn no_file_note(loaded: &crate::config::LoadedConfig) -> Option<String> {
    (loaded.path.is_none() && !loaded.searched.is_empty()).then(|| {
        format!(
            "No configuration file was found (hearth looked for {}); `hearth init` writes one, or name one with --config.",
            loaded.searched_list()
        )
    })
}

pub(super) async fn run(path: Option<PathBuf>, agent: Option<String>) -> Result<(), Failure> {
    let loaded = load_config(path)?;
    let no_file = no_file_note(&loaded);
    let mut config = loaded.config;
    // With no owner configured, the person at this terminal is the owner (the identity
    // `.owner` below makes them): owner notices (budget warnings, failed runs) come to this
    // chat rather than to nobody, as a raw log line.
    if config.daemon.owner.is_none() {
        config.daemon.owner = Some(crate::config::Owner::One(format!("terminal:{LOCAL}")));
    }
    let (agents, _) = load_agents(&config)?;
    if let Some(id) = &agent
        && agents.get(id).is_none()
    {
        return Err(usage(anyhow::anyhow!(
            "there is no agent `{id}`; see `hearth agents`"
        )));
    }
    // Ask each provider the agents use for its model list, and say what is wrong in one line
    // each instead of opening a chat whose every message fails.
    let (providers, hint) = crate::provider::effective_providers(&config.providers);
    let used: Vec<&str> = agents.iter().map(|a| a.provider.as_str()).collect();
    // Without a configuration file the guessed provider is likely not the one meant: say where
    // hearth looked, so a file written elsewhere (`hearth init` in another directory) is found.
    let hint = hint.map(|h| {
        let h = h.trim_start_matches("⚠️").trim_start();
        match &no_file {
            Some(note) => format!("{h} {note}"),
            None => h.to_string(),
        }
    });
    let hint = hint.as_deref();
    let found = crate::provider::probe::check_providers(
        &providers,
        &used,
        hint,
        crate::provider::PROBE_TIMEOUT,
    )
    .await;
    for warning in &found.warnings {
        eprintln!("warning: {warning}");
    }
    if !found.errors.is_empty() {
        return Err(Failure::from(anyhow::anyhow!(
            "{}",
            found.errors.join("\n")
        )));
    }
    let started_ms = chrono::Utc::now().timestamp_millis();
    let terminal = Arc::new(TerminalChannel::new());
    let finished = terminal.finished();
    let interactive = terminal.interactive();
    let daemon = DaemonBuilder::new(config)
        .role(Role::Chat)
        .agents(agents)
        .channel(terminal.clone(), &[LOCAL.to_string()])
        .owner("terminal", LOCAL)
        .without_http()
        .start()
        .await
        .map_err(start_failure)?;
    if let Some(id) = agent {
        let store = daemon.store();
        let now = daemon.runtime().clock.now_ms();
        let conversation = store
            .conversation("terminal", &hearth_channel::ChatRef::new(LOCAL), now)
            .await?;
        store
            .set_conversation_agent(conversation.id, Some(&id), true, now)
            .await?;
    }
    let interrupted = tokio::select! {
        () = finished.cancelled() => false,
        _ = tokio::signal::ctrl_c() => true,
    };
    if interrupted {
        // Ctrl-C leaves now: the answer being written is cancelled like `/cancel` does, not left
        // to finish (or to be resumed by the next chat).
        daemon.cancel_turns();
        if interactive {
            println!();
        }
        daemon.stop_within(CHAT_INTERRUPT_GRACE).await;
        // The channel gives the echo back as it stops, unless the grace ran out first.
        terminal.restore_echo();
        // Ended by Ctrl-C: exit 130 (128 + SIGINT) as shells and most CLIs do, so a script can
        // tell it from a chat that ended at EOF; there is no error to print.
        use std::io::Write;
        if let Err(err) = std::io::stdout().flush() {
            tracing::debug!(error = %err, "flushing the chat's output at Ctrl-C failed");
        }
        std::process::exit(INTERRUPTED_EXIT);
    }
    // A script piping lines in learns from the exit code that nothing was answered.
    let outcomes = if interactive {
        None
    } else {
        let store = daemon.store();
        let conversation = store
            .conversation("terminal", &hearth_channel::ChatRef::new(LOCAL), started_ms)
            .await?;
        Some(
            store
                .turn_outcomes_since(conversation.id, started_ms)
                .await?,
        )
    };
    daemon.stop().await;
    if let Some(outcomes) = outcomes
        && outcomes.total > 0
        && outcomes.failed == outcomes.total
    {
        return Err(Failure::from(anyhow::anyhow!(
            "every message failed ({} of {}); the last error: {}",
            outcomes.failed,
            outcomes.total,
            outcomes.last_error.as_deref().unwrap_or("unknown")
        )));
    }
    Ok(())
}
