//! `hearth status`: what the running daemon says about itself on `/healthz` (at
//! `daemon.http_listen`), as lines a person reads: each channel's state and last error, the
//! queues, what cannot be stored, each MCP server. No curl, no JSON.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::{Failure, load_config, usage};

/// A daemon on the same machine answers at once; a wait longer than this is no answer.
const TIMEOUT: Duration = Duration::from_secs(5);

pub(super) async fn run(path: Option<PathBuf>) -> Result<(), Failure> {
    let config = load_config(path)?.config;
    let Some(listen) = config.daemon.http_listen else {
        return Err(usage(anyhow::anyhow!(
            "daemon.http_listen is \"\", so the daemon serves no /healthz to ask"
        )));
    };
    let url = format!("http://{listen}/healthz");
    let client = hearth_channel::http_client::builder()
        .timeout(TIMEOUT)
        .no_proxy()
        .build()?;
    let response = client.get(&url).send().await.map_err(|err| {
        anyhow::anyhow!(
            "no hearth answered at {url} (daemon.http_listen): is `hearth run` running with this configuration? ({})",
            deepest_cause(&err)
        )
    })?;
    let code = response.status();
    let body: Value = response
        .json()
        .await
        .map_err(|err| anyhow::anyhow!("{url} answered {code} without hearth's JSON: {err}"))?;
    print!("{}", describe(&listen.to_string(), &body));
    // 503 is what a monitor acts on; the command says so with its exit code too.
    if code.is_success() {
        Ok(())
    } else {
        Err(anyhow::anyhow!("hearth is unhealthy (HTTP {})", code.as_u16()).into())
    }
}

/// The innermost cause of an error, e.g. "Connection refused (os error 111)".
fn deepest_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// The `/healthz` body as lines.
fn describe(listen: &str, body: &Value) -> String {
    let text = |value: &Value| match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut out = format!(
        "hearth at {listen}: {}\n  database: {}\n",
        text(&body["status"]),
        text(&body["database"])
    );
    match body["channels"].as_object() {
        Some(channels) if !channels.is_empty() => {
            for (name, channel) in channels {
                out.push_str(&format!("  {name}: {}", text(&channel["state"])));
                if let Some(error) = channel["error"].as_str() {
                    out.push_str(&format!(" ({error})"));
                }
                out.push('\n');
            }
        }
        _ => out.push_str("  no channels\n"),
    }
    if let Some(never) = body["never_connected"].as_array().filter(|n| !n.is_empty()) {
        let names: Vec<String> = never.iter().map(text).collect();
        out.push_str(&format!(
            "  never connected since start: {} (nobody can reach hearth there)\n",
            names.join(", ")
        ));
    }
    out.push_str(&format!(
        "  queues: {} message(s) waiting, {} repl(ies) to deliver, {} in progress\n",
        text(&body["inbox_pending"]),
        text(&body["outbox_pending"]),
        text(&body["in_progress"])
    ));
    if let Some(faults) = body["faults"].as_object() {
        for (path, error) in faults {
            out.push_str(&format!("  cannot store {path}: {}\n", text(error)));
        }
    }
    if let Some(servers) = body["mcp_servers"].as_object() {
        for (name, server) in servers {
            let state = server.get("state").map_or_else(|| text(server), &text);
            out.push_str(&format!("  mcp {name}: {state}"));
            if let Some(error) = server.get("error").and_then(Value::as_str) {
                out.push_str(&format!(" ({error})"));
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_health_body_reads_as_lines() {
        let body = serde_json::json!({
            "status": "degraded",
            "never_connected": ["discord"],
            "database": "ok",
            "channels": {
                "discord": {"state": "connecting", "error": "gateway refused the token"},
                "telegram": {"state": "connected"},
            },
            "faults": {},
            "mcp_servers": {},
            "inbox_pending": 2,
            "outbox_pending": 0,
            "in_progress": 1,
        });
        let text = describe("127.0.0.1:8787", &body);
        assert_eq!(
            text,
            "hearth at 127.0.0.1:8787: degraded\n  database: ok\n  discord: connecting (gateway refused the token)\n  telegram: connected\n  never connected since start: discord (nobody can reach hearth there)\n  queues: 2 message(s) waiting, 0 repl(ies) to deliver, 1 in progress\n"
        );
    }
}
