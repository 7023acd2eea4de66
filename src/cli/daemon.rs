//! `hearth run`: the daemon with the configured channels, until SIGTERM or SIGINT.

use std::path::PathBuf;
use std::sync::Arc;

use crate::agent::AgentSet;
use crate::config;
use crate::daemon::DaemonBuilder;

use super::{Failure, load_config, start_failure, usage};

pub(super) async fn run(path: Option<PathBuf>) -> Result<(), Failure> {
    let loaded = load_config(path)?;
    let old_database = super::old_default_database(&loaded);
    let config = loaded.config;
    for warning in config::warnings(&config) {
        tracing::warn!("{warning}");
    }
    let mut builder = DaemonBuilder::new(config.clone());
    let channels = crate::channels::build(&config.channels, &config.daemon.data_dir)
        .map_err(|err| usage(anyhow::anyhow!("{err}")))?;
    let channel_count = channels.len();
    for built in channels {
        builder = builder.channel(built.channel, &built.allowed);
        #[cfg(feature = "http")]
        if let Some(api) = built.api {
            builder = builder.http_api(api);
        }
    }
    let agents_file = config.router.agents_file.clone();
    let notifier = crate::systemd::Notifier::from_env();
    notifier.status("starting");
    // Nothing is logged before the start: a second daemon on this database refuses with one line.
    let daemon = builder.start().await.map_err(start_failure)?;
    tracing::info!(version = super::version(), "hearth started");
    match &loaded.path {
        Some(path) => tracing::info!(config = %path.display(), "configuration loaded"),
        None => tracing::warn!("no configuration file found; running on defaults"),
    }
    tracing::info!(
        data_dir = %config.daemon.data_dir.display(),
        data_dir_from = %loaded.sources.data_dir,
        timezone = %config.daemon.timezone,
        timezone_from = %loaded.sources.timezone,
        "storage and time"
    );
    if let Some(warning) = old_database {
        tracing::warn!("{warning}");
    }
    if channel_count == 0 {
        tracing::warn!(
            "no channels configured: only schedules and /healthz run, nobody can write to hearth; add a [channels.telegram] section to hearth.toml (see docs/channels.md) or talk to it with `hearth chat`"
        );
    }
    tokio::spawn(notifier.clone().keep_watchdog(daemon.shutdown_token()));
    if let Some(addr) = daemon.http_addr() {
        // Where a newcomer goes next: the owner's page (served on this address with or without
        // an HTTP channel) and, with one, the APIs its clients use.
        tracing::info!(%addr, "health and metrics endpoints listening");
        tracing::info!(
            page = %format!("http://{addr}/"),
            "the owner's page is listening; `hearth web login` prints a code to log in with"
        );
        #[cfg(feature = "http")]
        if config.channels.http.is_some() {
            tracing::info!(
                api = %format!("http://{addr}/api/v1"),
                openai = %format!("http://{addr}/v1"),
                "the HTTP API and the OpenAI-compatible endpoint are listening; `hearth token create NAME` makes a token"
            );
        }
    }
    let shutdown = daemon.stop_token();
    let rt = daemon.runtime().clone();
    tokio::spawn(async move {
        wait_for_signals(&rt, &agents_file).await;
        shutdown.cancel();
    });
    // READY=1 once every channel is connected, failed or retrying, not merely started; a stop
    // asked for meanwhile skips it.
    let stop = daemon.stop_token();
    tokio::select! {
        () = daemon.channels_settled() => notifier.ready(&daemon.status_line()),
        () = stop.cancelled() => {}
    }
    let stopping = daemon.stop_token();
    let on_stop = notifier.clone();
    tokio::spawn(async move {
        stopping.cancelled().await;
        on_stop.stopping();
    });
    daemon.run_until_stopped().await;
    tracing::info!("hearth stopped");
    Ok(())
}

/// Returns on SIGTERM or SIGINT; reloads the agents file on SIGHUP.
async fn wait_for_signals(rt: &Arc<crate::runtime::Runtime>, agents_file: &std::path::Path) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::error!("cannot listen for signals; stop hearth with Ctrl-C");
        // ctrl_c only fails when signals cannot be used at all; then there is nothing to wait for.
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    loop {
        tokio::select! {
            _ = term.recv() => { tracing::info!("SIGTERM: stopping"); return; }
            _ = tokio::signal::ctrl_c() => { tracing::info!("SIGINT: stopping"); return; }
            _ = hup.recv() => {
                match AgentSet::load(agents_file) {
                    Ok((set, source)) => match rt.reload_agents(set).await {
                        Ok(()) => tracing::info!(?source, "agents reloaded"),
                        Err(err) => tracing::error!(error = %err, "agents reload failed; keeping the old ones"),
                    },
                    Err(err) => tracing::error!(error = %err, "agents file invalid; keeping the old agents"),
                }
            }
        }
    }
}
