//! The `hearth` binary: parses the command line, sets up logging and runs the command.

use std::io::IsTerminal;

use clap::Parser;
use hearth::cli::{Cli, Command};

fn main() {
    // `hearth __extract-pdf …` is hearth reading a PDF where a panic cannot stop the daemon:
    // first, before threads or logging, so that its memory limit measures only itself.
    if let Some(code) = hearth::pdf::child_main() {
        std::process::exit(code);
    }
    // `hearth __mcp-exec …` is hearth starting an MCP server so that it dies with hearth.
    if let Some(code) = hearth::tool::mcp::exec_main() {
        std::process::exit(code);
    }
    if let Ok(exe) = std::env::current_exe() {
        hearth::tool::mcp::use_exec_wrapper(exe);
    }
    let cli = Cli::parse();
    init_logging(&cli);
    // aws-lc-rs is the one TLS crypto provider in the binary (reqwest, matrix-sdk, sqlx, lettre,
    // serenity's gateway), installed as the process default so every rustls config that does not
    // name one uses it. Failing means it is installed already, which is just as good.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(hearth::cli::run(cli));
    // Everything the command started has finished; a blocking task left behind (a read that
    // cannot be cancelled) must not keep the process from exiting.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    if let Err(failure) = result {
        eprintln!("error: {}", failure.error);
        for cause in failure.error.chain().skip(1) {
            eprintln!("  caused by: {cause}");
        }
        std::process::exit(failure.code);
    }
}

/// Logs go to stderr, in colour only on a terminal. Under systemd (JOURNAL_STREAM set)
/// journald adds timestamps itself. `--log-level` / `-v` win over RUST_LOG, which wins over the
/// default: the terminal chat only shows warnings so the conversation stays readable.
fn init_logging(cli: &Cli) {
    let default = match cli.command {
        Command::Run => "info",
        _ => "warn",
    };
    let mut filter = match cli.requested_log_level() {
        Some(level) => tracing_subscriber::EnvFilter::new(level),
        None => tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default)),
    };
    // Whatever RUST_LOG says: below info these print whole gateway frames and request routes,
    // Discord interaction tokens among them, and secrets never reach a log.
    for quiet in [
        "tungstenite=info",
        "tokio_tungstenite=info",
        "serenity=info",
    ] {
        if let Ok(directive) = quiet.parse() {
            filter = filter.add_directive(directive);
        }
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        builder.without_time().with_ansi(false).init();
    } else {
        builder.with_ansi(std::io::stderr().is_terminal()).init();
    }
}
