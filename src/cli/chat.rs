//! `hearth chat`: the same runtime, talked to in this terminal.

use std::path::PathBuf;
use std::sync::Arc;

use crate::daemon::{DaemonBuilder, Role};
use crate::terminal::{LOCAL, TerminalChannel};

use super::{Failure, load_agents, load_config, start_failure, usage};

/// How long `hearth chat` waits, after Ctrl-C cancelled the running answer, for it to wind up.
const CHAT_INTERRUPT_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
/// How long `hearth chat` waits for the model server to accept a connection before the chat.
const PROVIDER_PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

pub(super) async fn run(path: Option<PathBuf>, agent: Option<String>) -> Result<(), Failure> {
    let config = load_config(path)?.config;
    let (agents, _) = load_agents(&config)?;
    if let Some(id) = &agent
        && agents.get(id).is_none()
    {
        return Err(usage(anyhow::anyhow!(
            "there is no agent `{id}`; see `hearth agents`"
        )));
    }
    // With no provider configured hearth guesses one from the environment; when nothing listens
    // there, say how to get one instead of opening a chat that cannot answer.
    let (providers, hint) = crate::provider::effective_providers(&config.providers);
    if let (Some(hint), Some(provider)) = (hint, providers.first())
        && !crate::provider::accepts_connections(&provider.base_url, PROVIDER_PROBE_TIMEOUT).await
    {
        let hint = hint.trim_start_matches("⚠️").trim_start();
        return Err(Failure::from(anyhow::anyhow!("{hint}")));
    }
    let terminal = Arc::new(TerminalChannel::new());
    let finished = terminal.finished();
    let interactive = terminal.interactive();
    let daemon = DaemonBuilder::new(config)
        .role(Role::Chat)
        .agents(agents)
        .channel(terminal, &[LOCAL.to_string()])
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
    } else {
        daemon.stop().await;
    }
    Ok(())
}
