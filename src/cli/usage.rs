//! `hearth usage [--days N] [--by day|agent|schedule|user|model]`: tokens and cost of the model
//! calls, from the database, and the tool calls MCP clients made (they make no model calls).

use std::path::PathBuf;

use anyhow::Context;

use crate::runtime::budget::usd;
use crate::store::{Store, UsageBy};

use super::{Failure, existing_database, load_config, usage};

pub(super) async fn run(path: Option<PathBuf>, days: u32, by: &str) -> Result<(), Failure> {
    let Some(group) = UsageBy::parse(by) else {
        return Err(usage(anyhow::anyhow!(
            "--by {by:?}: expected one of {}",
            UsageBy::NAMES.join(", ")
        )));
    };
    if days == 0 {
        return Err(usage(anyhow::anyhow!("--days must be at least 1")));
    }
    let config = load_config(path)?.config;
    existing_database(&config)?;
    let timezone = config.daemon.timezone;
    let today = chrono::Utc::now().with_timezone(&timezone).date_naive();
    let from = today - chrono::Days::new(u64::from(days - 1));
    let from = from.format("%Y-%m-%d").to_string();
    let store = Store::open(&config.daemon.database_url())
        .await
        .context("cannot open the database")?;
    let rows = store.usage_by(group, &from, None).await;
    // The first day's midnight in the daemon's zone, as the model calls' days are counted.
    let since_ms = (today - chrono::Days::new(u64::from(days - 1)))
        .and_hms_opt(0, 0, 0)
        .and_then(|midnight| midnight.and_local_timezone(timezone).earliest())
        .map_or(0, |start| start.timestamp_millis());
    let clients = store.mcp_calls_by_client(since_ms).await;
    store.close().await;
    let rows = rows.context("reading the usage failed")?;
    let clients = clients.context("reading the MCP calls failed")?;
    print_models(&rows, &from, days, timezone, by);
    print_clients(&clients);
    Ok(())
}

/// The MCP clients' tool calls (`hearth mcp serve`, `/mcp`): no model calls, counted apart.
fn print_clients(clients: &[(String, i64, i64)]) {
    if clients.is_empty() {
        return;
    }
    let width = clients.iter().map(|c| c.0.len()).max().unwrap_or(0).max(6);
    println!();
    println!("Tool calls by MCP clients (no model calls):");
    println!("{:width$}  {:>7}  {:>7}", "client", "calls", "ok");
    for (client, calls, ok) in clients {
        println!("{client:width$}  {calls:>7}  {ok:>7}");
    }
}

fn print_models(
    rows: &[crate::store::UsageRow],
    from: &str,
    days: u32,
    timezone: chrono_tz::Tz,
    by: &str,
) {
    println!(
        "Model calls since {from} ({days} day(s), days in {}), by {by}:",
        timezone.name()
    );
    if rows.is_empty() {
        println!("none");
        return;
    }
    let width = rows.iter().map(|r| r.key.len()).max().unwrap_or(0).max(5);
    // "cut short": calls stopped before their end (a cancel, a closed stream, a timeout after
    // the first words), counted with estimated tokens.
    println!(
        "{:width$}  {:>7}  {:>9}  {:>12}  {:>12}  {:>10}",
        by, "calls", "cut short", "tokens in", "tokens out", "cost"
    );
    let mut total = (0, 0, 0, 0, 0);
    for row in rows {
        println!(
            "{:width$}  {:>7}  {:>9}  {:>12}  {:>12}  {:>10}",
            row.key,
            row.calls,
            row.cut_short,
            row.input_tokens,
            row.output_tokens,
            usd(row.cost_nusd)
        );
        total.0 += row.calls;
        total.1 += row.cut_short;
        total.2 += row.input_tokens;
        total.3 += row.output_tokens;
        total.4 += row.cost_nusd;
    }
    println!(
        "{:width$}  {:>7}  {:>9}  {:>12}  {:>12}  {:>10}",
        "total",
        total.0,
        total.1,
        total.2,
        total.3,
        usd(total.4)
    );
    if total.1 > 0 {
        println!(
            "{} call(s) were cut short (a cancel, a closed stream, a timeout); their tokens are estimated.",
            total.1
        );
    }
}
