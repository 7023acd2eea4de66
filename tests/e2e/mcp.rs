//! MCP servers as tool sources, through the runtime with the fake LLM: the fake MCP server of
//! the testkit as a real child process over stdio and over streamable HTTP on 127.0.0.1. Tools
//! listed and called, the write tool asking first, invalid arguments, a crash mid-call, a hang,
//! a server that never starts, no process left behind, `/healthz` and `/metrics`, and the
//! `hearth mcp list` / `hearth check` / SIGKILL behaviour of the binary.

use std::path::Path;
use std::process::Stdio;

use hearth::config::McpServerConfig;
use hearth_testkit::mcp::{FakeMcpHttp, mcp_fake_path};
use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::support::{
    Hearth, USER, WAIT, eventually, free_port, general_agent, hearth_command, poll,
};

/// The agent of these tests: the fake server's tools, called directly or through the meta tools.
fn agents(mode: &str) -> String {
    general_agent(&format!("tool_groups = [\"fake\"]\ntool_mode = \"{mode}\""))
}

/// A `[[mcp_servers]]` entry for the fake over stdio, plus `extra` TOML lines.
fn stdio_server(name: &str, extra: &str) -> McpServerConfig {
    let command = toml::Value::String(mcp_fake_path().display().to_string());
    let text = format!("name = \"{name}\"\ncommand = {command}\ntimeout_secs = 10\n{extra}");
    toml::from_str(&text).expect("server config parses")
}

fn http_server(name: &str, url: &str, extra: &str) -> McpServerConfig {
    let text = format!("name = \"{name}\"\nurl = \"{url}\"\ntimeout_secs = 10\n{extra}");
    toml::from_str(&text).expect("server config parses")
}

/// A started hearth with these servers; the test user is the owner (`admin`), since tools that
/// act outside hearth need the `execute` permission.
async fn hearth_with(servers: Vec<McpServerConfig>, agents: &str) -> Hearth {
    let mut h = Hearth::new().await.with_agents(agents);
    h.config.mcp_servers = servers;
    h.config.daemon.owner = Some(format!("memory:{USER}").into());
    h.start().await;
    h
}

async fn healthz(h: &Hearth) -> (u16, Value) {
    let addr = h.daemon().http_addr().expect("HTTP endpoints");
    let response = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .expect("healthz answers");
    let status = response.status().as_u16();
    (status, response.json().await.expect("healthz is JSON"))
}

/// Polls `/healthz` until the server's entry satisfies `check`; returns that entry.
async fn wait_server(
    h: &Hearth,
    server: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let found = poll(WAIT, async || {
        let (_, body) = healthz(h).await;
        let entry = body["mcp_servers"][server].clone();
        check(&entry).then_some(entry)
    })
    .await;
    found.unwrap_or_else(|| panic!("timed out waiting for {server} to be {what}"))
}

async fn connected(h: &Hearth, server: &str) -> Value {
    wait_server(h, server, "connected", |e| e["state"] == "connected").await
}

fn call(id: &str, name: &str, args: Value) -> ToolCallSpec {
    ToolCallSpec::new(id, name, args.to_string())
}

/// The tool results in an LLM request, in order.
fn results(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn last_result(h: &Hearth) -> String {
    results(&h.llm.last_request().expect("a request"))
        .pop()
        .unwrap_or_default()
}

/// A turn in which the model calls `tool` (call id `id`) with `args` and then answers
/// `answer`: that answer reaches the user. Returns the tool's result as the model saw it.
async fn tool_turn(h: &Hearth, id: &str, tool: &str, args: Value, answer: &str) -> String {
    h.llm.push(Reply::tool_calls(vec![call(id, tool, args)]));
    h.llm.push(Reply::text(answer));
    assert_eq!(h.say(&format!("please run {tool}")).await.text, answer);
    last_result(h)
}

/// Whether a process runs (a zombie has ended; only its parent has not collected it yet).
fn running(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

async fn wait_gone(pid: u64, what: &str) {
    let what = format!("{what} (pid {pid}) to end");
    eventually(&what, async || !running(pid)).await;
}

#[tokio::test]
async fn stdio_tools_are_offered_and_called_through_the_runtime() {
    let log = tempfile::NamedTempFile::new().expect("temp file");
    let extra = format!(
        "env = {{ FAKE_PLAIN = \"plain\", MCP_FAKE_LOG = {} }}\nsecrets_env = {{ FAKE_SECRET = \"PATH\" }}\n",
        toml::Value::String(log.path().display().to_string())
    );
    let mut h = hearth_with(vec![stdio_server("fake", &extra)], &agents("direct")).await;
    let entry = connected(&h, "fake").await;
    assert_eq!(entry["transport"], "stdio");
    assert_eq!(entry["tools"], 8, "{entry}");
    assert!(entry["pid"].as_u64().is_some(), "{entry}");

    h.llm.push(Reply::tool_calls(vec![call(
        "c1",
        "fake__whoami",
        json!({}),
    )]));
    h.llm.push(Reply::tool_calls(vec![call(
        "c2",
        "fake__read_note",
        json!({"key": "milk"}),
    )]));
    h.llm.push(Reply::text("No note about milk."));
    assert_eq!(h.say("what about milk?").await.text, "No note about milk.");

    let requests = h.llm.requests();
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .expect("tools offered")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    for tool in ["fake__read_note", "fake__write_note", "fake__whoami"] {
        assert!(offered.contains(&tool), "{offered:?}");
    }
    let whoami: Value = serde_json::from_str(&results(&requests[1])[0]).expect("whoami JSON");
    assert_eq!(whoami["plain"], "plain");
    assert_eq!(
        whoami["secret"].as_str(),
        std::env::var("PATH").ok().as_deref(),
        "a secret reaches the server through secrets_env"
    );
    let allowed = [
        "HOME",
        "LOGNAME",
        "PATH",
        "SHELL",
        "TERM",
        "USER",
        "LANG",
        "LC_ALL",
        "TZ",
        "TMPDIR",
        "FAKE_PLAIN",
        "FAKE_SECRET",
        "MCP_FAKE_LOG",
    ];
    for name in whoami["env"].as_array().expect("env names") {
        let name = name.as_str().unwrap_or_default();
        assert!(
            allowed.contains(&name),
            "hearth's environment leaked into the server: {name}"
        );
    }
    assert_eq!(results(&requests[2])[1], "no note milk");

    let audit = h.daemon().store().recent_audit(10).await.expect("audit");
    assert!(
        audit.contains(&("fake__read_note".to_string(), "ok".to_string())),
        "{audit:?}"
    );
    let (status, body) = healthz(&h).await;
    assert_eq!(status, 200);
    assert_eq!(body["mcp_servers"]["fake"]["calls"], 2, "{body}");
    let addr = h.daemon().http_addr().expect("HTTP");
    let metrics = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("hearth_mcp_calls_total{server=\"fake\",outcome=\"ok\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("hearth_mcp_server_up{server=\"fake\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("hearth_tool_calls_total{tool=\"fake__read_note\",outcome=\"ok\"} 1"),
        "{metrics}"
    );
    h.stop().await;
}

#[tokio::test]
async fn the_write_tool_asks_first_and_runs_once_approved() {
    let log = tempfile::NamedTempFile::new().expect("temp file");
    let extra = format!(
        "env = {{ MCP_FAKE_LOG = {} }}\n",
        toml::Value::String(log.path().display().to_string())
    );
    let mut h = hearth_with(vec![stdio_server("fake", &extra)], &agents("direct")).await;
    connected(&h, "fake").await;

    h.llm.push(Reply::tool_calls(vec![call(
        "c1",
        "fake__write_note",
        json!({"key": "milk", "text": "2 liters"}),
    )]));
    let prompt = h.say("remember: milk, 2 liters").await;
    assert!(
        prompt.text.contains("wants to run `fake__write_note`"),
        "{}",
        prompt.text
    );
    assert_eq!(prompt.buttons.len(), 2, "Approve and Deny");
    assert_eq!(
        std::fs::read_to_string(log.path()).unwrap_or_default(),
        "",
        "nothing is written before the decision"
    );

    h.llm.push(Reply::text("Noted."));
    h.channel
        .push_press(&prompt.reference(), USER, &prompt.buttons[0].data);
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "Noted.");
    assert_eq!(
        std::fs::read_to_string(log.path()).unwrap_or_default(),
        "milk=2 liters\n"
    );
    assert_eq!(last_result(&h), "saved milk");
    let audit = h.daemon().store().recent_audit(10).await.expect("audit");
    assert!(
        audit.contains(&("fake__write_note".to_string(), "asked".to_string()))
            && audit.contains(&("fake__write_note".to_string(), "ok".to_string())),
        "{audit:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn outward_tools_need_the_execute_permission_like_built_in_ones() {
    // Not the owner: an allowed user has `write`, which is not enough to act outside hearth.
    let mut h = Hearth::new().await.with_agents(&general_agent(
        "tool_groups = [\"fake\"]\ntool_mode = \"direct\"",
    ));
    h.config.mcp_servers = vec![stdio_server("fake", "")];
    h.start().await;
    connected(&h, "fake").await;
    let result = tool_turn(
        &h,
        "c1",
        "fake__write_note",
        json!({"key": "k", "text": "t"}),
        "I may not.",
    )
    .await;
    assert!(
        result.contains("may not use `fake__write_note`") && result.contains("Execute"),
        "{result}"
    );
    h.stop().await;
}

#[tokio::test]
async fn the_risk_table_overrides_the_servers_hints() {
    // The user trusts write_note and distrusts whoami.
    let extra = "[risk]\nwrite_note = \"read\"\n\"who*\" = \"outward\"\n";
    let mut h = hearth_with(vec![stdio_server("fake", extra)], &agents("direct")).await;
    connected(&h, "fake").await;
    tool_turn(
        &h,
        "c1",
        "fake__write_note",
        json!({"key": "k", "text": "t"}),
        "Saved without asking.",
    )
    .await;
    h.llm.push(Reply::tool_calls(vec![call(
        "c2",
        "fake__whoami",
        json!({}),
    )]));
    let prompt = h.say("who are you?").await;
    assert!(
        prompt.text.contains("wants to run `fake__whoami`"),
        "{}",
        prompt.text
    );
    h.stop().await;
}

#[tokio::test]
async fn invalid_arguments_are_refused_with_the_schema_before_the_server_sees_them() {
    let mut h = hearth_with(vec![stdio_server("fake", "")], &agents("direct")).await;
    connected(&h, "fake").await;
    let result = tool_turn(
        &h,
        "c1",
        "fake__read_note",
        json!({"name": "milk"}),
        "Let me fix that.",
    )
    .await;
    assert!(
        result.contains("Invalid arguments for `fake__read_note`")
            && result.contains("\"key\" is a required property")
            && result.contains("key (string, required): the note's name"),
        "{result}"
    );
    let (_, body) = healthz(&h).await;
    assert_eq!(
        body["mcp_servers"]["fake"]["calls"], 0,
        "never reached the server"
    );
    h.stop().await;
}

#[tokio::test]
async fn the_meta_tools_find_and_use_mcp_tools() {
    let mut h = hearth_with(vec![stdio_server("fake", "")], &agents("meta")).await;
    connected(&h, "fake").await;
    h.llm.push(Reply::tool_calls(vec![call(
        "c1",
        "search_tools",
        json!({"query": "note"}),
    )]));
    h.llm.push(Reply::tool_calls(vec![call(
        "c2",
        "get_tool_help",
        json!({"tool_name": "fake__read_note"}),
    )]));
    tool_turn(
        &h,
        "c3",
        "use_tool",
        json!({"tool_name": "fake__read_note", "arguments": {"key": "eggs"}}),
        "Nothing about eggs.",
    )
    .await;
    let all = results(&h.llm.last_request().expect("request"));
    assert!(
        all[0].contains("fake__read_note") && all[0].contains("fake__write_note"),
        "{}",
        all[0]
    );
    assert!(all[1].contains("key (string, required)"), "{}", all[1]);
    assert_eq!(all[2], "no note eggs");
    h.stop().await;
}

#[tokio::test]
async fn a_tool_error_from_the_server_reaches_the_model() {
    let mut h = hearth_with(vec![stdio_server("fake", "")], &agents("direct")).await;
    connected(&h, "fake").await;
    h.llm
        .push(Reply::tool_calls(vec![call("c1", "fake__fail", json!({}))]));
    h.llm.push(Reply::text("The lights do not answer."));
    assert_eq!(h.say("lights on").await.text, "The lights do not answer.");
    let result = last_result(&h);
    assert!(
        result
            .contains("Error: `fail` on the MCP server `fake` failed: the lights are unreachable"),
        "{result}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_server_that_changes_its_tools_has_them_listed_again() {
    let mut h = hearth_with(vec![stdio_server("fake", "")], &agents("direct")).await;
    connected(&h, "fake").await;
    h.llm
        .push(Reply::tool_calls(vec![call("c1", "fake__grow", json!({}))]));
    h.llm.push(Reply::text("Grown."));
    assert_eq!(h.say("grow").await.text, "Grown.");
    wait_server(&h, "fake", "listing 9 tools", |e| e["tools"] == 9).await;
    assert_eq!(
        tool_turn(&h, "c2", "fake__bonus", json!({}), "Got the bonus.").await,
        "bonus!"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_server_that_crashes_mid_call_gives_a_tool_error_and_is_restarted() {
    let mut h = hearth_with(vec![stdio_server("fake", "")], &agents("direct")).await;
    let before = connected(&h, "fake").await;
    let old_pid = before["pid"].as_u64().expect("pid");

    let result = tool_turn(
        &h,
        "c1",
        "fake__crash",
        json!({}),
        "The notes server crashed.",
    )
    .await;
    assert!(
        result.contains("the MCP server `fake` went away during the call")
            && result.contains("restarting"),
        "{result}"
    );

    let after = wait_server(&h, "fake", "restarted", |e| {
        e["state"] == "connected" && e["restarts"].as_u64().unwrap_or(0) >= 1
    })
    .await;
    assert_ne!(after["pid"].as_u64(), Some(old_pid), "a new process");
    assert!(!running(old_pid), "the crashed process is gone");
    assert_eq!(after["failed_calls"], 1, "{after}");

    assert_eq!(
        tool_turn(
            &h,
            "c2",
            "fake__read_note",
            json!({"key": "milk"}),
            "Back again."
        )
        .await,
        "no note milk"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_hanging_call_ends_at_timeout_secs_with_a_clear_error() {
    let mut server = stdio_server("fake", "");
    server.timeout_secs = 2;
    let mut h = hearth_with(vec![server], &agents("direct")).await;
    connected(&h, "fake").await;
    h.llm
        .push(Reply::tool_calls(vec![call("c1", "fake__hang", json!({}))]));
    h.llm.push(Reply::text("It did not answer."));
    let started = tokio::time::Instant::now();
    assert_eq!(h.say("hang").await.text, "It did not answer.");
    assert!(started.elapsed() < WAIT, "the conversation went on");
    let result = last_result(&h);
    assert!(
        result
            .contains("the MCP server `fake` did not answer within 2 s, so the call was cancelled"),
        "{result}"
    );
    // A slow call does not take the server down.
    let (_, body) = healthz(&h).await;
    assert_eq!(body["mcp_servers"]["fake"]["state"], "connected");
    assert_eq!(
        tool_turn(&h, "c2", "fake__read_note", json!({"key": "x"}), "Fine.").await,
        "no note x"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_server_that_never_starts_is_reported_and_hearth_carries_on() {
    let missing: McpServerConfig = toml::from_str(
        "name = \"missing\"\ncommand = \"/nonexistent/mcp-server\"\ntimeout_secs = 5\n",
    )
    .expect("config");
    let dying = stdio_server("dying", "env = { MCP_FAKE_MODE = \"exit\" }");
    let mut silent = stdio_server("silent", "env = { MCP_FAKE_MODE = \"silent\" }");
    silent.timeout_secs = 1;
    let mut h = hearth_with(vec![missing, dying, silent], &agents("direct")).await;

    let entry = wait_server(&h, "missing", "failed", |e| e["state"] == "failed").await;
    let error = entry["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("cannot start `/nonexistent/mcp-server`") && error.contains("No such file"),
        "{entry}"
    );
    assert!(entry["retry_in_secs"].as_u64().is_some(), "{entry}");
    let entry = wait_server(&h, "dying", "failed", |e| e["state"] == "failed").await;
    assert!(
        entry["error"]
            .as_str()
            .unwrap_or_default()
            .contains("boom: no configuration"),
        "the server's last words are in the error: {entry}"
    );
    let entry = wait_server(&h, "silent", "failed", |e| e["state"] == "failed").await;
    assert!(
        entry["error"]
            .as_str()
            .unwrap_or_default()
            .contains("did not start within 1 s"),
        "{entry}"
    );

    let (status, body) = healthz(&h).await;
    assert_eq!(
        status, 200,
        "a failed MCP server does not make hearth unhealthy"
    );
    assert_eq!(body["status"], "ok");
    h.llm.push(Reply::text("Still here."));
    assert_eq!(h.say("hello").await.text, "Still here.");
    assert!(
        h.llm.requests()[0]["tools"].is_null()
            || !h.llm.requests()[0]["tools"]
                .to_string()
                .contains("missing__"),
        "a server that never started offers no tools"
    );
    h.stop().await;
}

/// The defect, as a new user met it: on a fresh data directory the first message was offered
/// none of the tools of a server that was still starting.
#[tokio::test]
async fn the_first_message_after_a_fresh_start_waits_for_a_starting_server() {
    let slow = stdio_server("fake", "env = { MCP_FAKE_MODE = \"slow\" }");
    let mut h = Hearth::new().await.with_agents(&general_agent(
        "tool_groups = [\"fake\"]\ntool_mode = \"direct\"",
    ));
    h.config.mcp_servers = vec![slow];
    h.config.daemon.owner = Some(format!("memory:{USER}").into());
    h.start().await;
    h.llm.push(Reply::text("The lamp is on."));
    assert_eq!(h.say("lamp status please").await.text, "The lamp is on.");
    let offered = h.llm.requests()[0]["tools"].to_string();
    assert!(offered.contains("fake__read_note"), "{offered}");
    h.stop().await;
}

#[tokio::test]
async fn a_servers_secret_in_its_stderr_never_reaches_healthz() {
    // The secret is hearth's PATH, handed to the server as FAKE_SECRET through secrets_env.
    let secret = std::env::var("PATH").expect("PATH is set");
    let leaky = stdio_server(
        "leaky",
        "env = { MCP_FAKE_MODE = \"leak\" }\nsecrets_env = { FAKE_SECRET = \"PATH\" }",
    );
    let mut h = hearth_with(vec![leaky], &agents("direct")).await;
    let entry = wait_server(&h, "leaky", "failed", |e| e["state"] == "failed").await;
    let error = entry["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("login refused for token [redacted]"),
        "the server's last words are shown, redacted: {entry}"
    );
    let (_, body) = healthz(&h).await;
    assert!(!body.to_string().contains(&secret), "{body}");
    h.stop().await;
}

#[tokio::test]
async fn tools_known_from_the_last_run_are_offered_while_the_server_is_down() {
    let mut h = hearth_with(vec![stdio_server("fake", "")], &agents("direct")).await;
    connected(&h, "fake").await;
    h.stop().await;

    // Next start: the server cannot start any more.
    h.config.mcp_servers = vec![stdio_server("fake", "env = { MCP_FAKE_MODE = \"exit\" }")];
    h.start().await;
    let entry = wait_server(&h, "fake", "failed", |e| e["state"] == "failed").await;
    assert_eq!(entry["tools"], 8, "the kept list: {entry}");
    tool_turn(
        &h,
        "c1",
        "fake__read_note",
        json!({"key": "milk"}),
        "The notes server is down.",
    )
    .await;
    let offered = h.llm.requests()[0]["tools"].to_string();
    assert!(offered.contains("fake__read_note"), "{offered}");
    let result = last_result(&h);
    assert!(
        result.contains("the MCP server `fake` is not running")
            && result.contains("boom: no configuration")
            && result.contains("tries again in"),
        "{result}"
    );
    h.stop().await;
}

#[tokio::test]
async fn no_process_is_left_after_shutdown() {
    let mut h = hearth_with(vec![stdio_server("fake", "")], &agents("direct")).await;
    let entry = connected(&h, "fake").await;
    let server_pid = entry["pid"].as_u64().expect("pid");
    let helper_pid: u64 = tool_turn(&h, "c1", "fake__spawn_helper", json!({}), "Helper started.")
        .await
        .trim()
        .parse()
        .expect("the helper's pid");
    assert!(running(server_pid) && running(helper_pid));

    h.stop().await;
    wait_gone(server_pid, "the MCP server").await;
    wait_gone(helper_pid, "the helper the server started").await;
}

#[tokio::test]
async fn http_server_tools_work_with_headers_and_a_bearer_token() {
    let fake = FakeMcpHttp::start().await;
    let extra = "headers = { \"X-Test\" = \"hello\" }\nbearer_token_env = \"PATH\"\n";
    let mut h = hearth_with(
        vec![http_server("fake", &fake.url(), extra)],
        &agents("direct"),
    )
    .await;
    let entry = connected(&h, "fake").await;
    assert_eq!(entry["transport"], "http");
    assert_eq!(entry["tools"], 8);

    let whoami: Value =
        serde_json::from_str(&tool_turn(&h, "c1", "fake__whoami", json!({}), "I see.").await)
            .expect("whoami JSON");
    assert_eq!(whoami["x_test"], "hello");
    assert_eq!(
        whoami["authorization"].as_str(),
        std::env::var("PATH")
            .ok()
            .map(|p| format!("Bearer {p}"))
            .as_deref()
    );

    h.llm.push(Reply::tool_calls(vec![call(
        "c2",
        "fake__write_note",
        json!({"key": "bread", "text": "rye"}),
    )]));
    let prompt = h.say("note: bread, rye").await;
    assert!(prompt.text.contains("wants to run `fake__write_note`"));
    assert!(fake.notes().is_empty());
    h.llm.push(Reply::text("Saved."));
    h.channel
        .push_press(&prompt.reference(), USER, &prompt.buttons[0].data);
    let sent = h.channel.wait_for_sent(3, WAIT).await;
    assert_eq!(sent[2].text, "Saved.");
    assert_eq!(fake.notes().get("bread").map(String::as_str), Some("rye"));
    h.stop().await;
}

#[tokio::test]
async fn an_http_server_that_goes_away_is_reported_and_reconnected() {
    let fake = FakeMcpHttp::start().await;
    let addr = fake.addr();
    let mut h = hearth_with(
        vec![http_server("fake", &fake.url(), "")],
        &agents("direct"),
    )
    .await;
    connected(&h, "fake").await;
    fake.stop();
    drop(fake);

    let result = tool_turn(
        &h,
        "c1",
        "fake__read_note",
        json!({"key": "a"}),
        "The server is down.",
    )
    .await;
    assert!(result.contains("the MCP server `fake`"), "{result}");
    wait_server(&h, "fake", "failed", |e| e["state"] == "failed").await;

    let back = FakeMcpHttp::start_at(addr).await;
    wait_server(&h, "fake", "reconnected", |e| {
        e["state"] == "connected" && e["restarts"].as_u64().unwrap_or(0) >= 1
    })
    .await;
    assert_eq!(
        tool_turn(
            &h,
            "c2",
            "fake__read_note",
            json!({"key": "a"}),
            "It is back."
        )
        .await,
        "no note a"
    );
    drop(back);
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// The binary

fn write(dir: &Path, name: &str, content: &str) {
    std::fs::write(dir.join(name), content).expect("write file");
}

fn hearth_cli(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    hearth_command(dir, args, env)
        .stdin(Stdio::null())
        .output()
        .expect("hearth runs")
}

fn fake_entry(name: &str) -> String {
    format!(
        "[[mcp_servers]]\nname = \"{name}\"\ncommand = {}\ntimeout_secs = 10\n",
        toml::Value::String(mcp_fake_path().display().to_string())
    )
}

#[test]
fn mcp_list_prints_each_servers_tools_or_its_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = format!(
        "{}\n[[mcp_servers]]\nname = \"broken\"\ncommand = \"/nonexistent/server\"\n\n[[mcp_servers]]\nname = \"off\"\ncommand = \"x\"\nenabled = false\n",
        fake_entry("fake")
    );
    write(dir.path(), "hearth.toml", &config);
    let out = hearth_cli(dir.path(), &["mcp", "list"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("fake (stdio "), "{stdout}");
    assert!(stdout.contains("8 tool(s)"), "{stdout}");
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_default()
            .to_string()
    };
    let read = line("fake__read_note ");
    assert!(
        read.contains("read") && read.contains("Read a note by its key"),
        "{read}"
    );
    let write_line = line("fake__write_note ");
    assert!(
        write_line.contains("outward (asks first)") && write_line.contains("Write a note"),
        "{write_line}"
    );
    assert!(
        stdout.contains(
            "broken (stdio /nonexistent/server): error: cannot start `/nonexistent/server`"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("off (stdio x): disabled"), "{stdout}");
    assert!(stderr.contains("MCP server(s) failed: broken"), "{stderr}");

    write(dir.path(), "hearth.toml", &fake_entry("fake"));
    let out = hearth_cli(dir.path(), &["mcp", "list"], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn check_names_every_mcp_server_problem_and_accepts_server_groups() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "hearth.toml",
        r#"
[router]
agents_file = "agents.toml"

[[mcp_servers]]
name = "Home-Assistant"
url = "ftp://ha.local/mcp"
args = ["x"]

[[mcp_servers]]
name = "git"
command = "git-mcp"
headers = { "X-Token" = "t" }
secrets_env = { TOKEN = "HEARTH_TEST_UNSET_SECRET" }
timeout_secs = 0
risk = { "*" = "sometimes" }

[[mcp_servers]]
name = "docs"
cwd = "/nonexistent/dir"

[[mcp_servers]]
name = "tasks"
url = "http://127.0.0.1:1/mcp"
command = "also"
"#,
    );
    write(
        dir.path(),
        "agents.toml",
        "[[agent]]\nid = \"general\"\nname = \"General\"\nsystem_prompt = \"x\"\ntool_groups = [\"git\", \"nope\"]\ntools = [\"git__log\", \"gitx__log\"]\n",
    );
    let out = hearth_cli(dir.path(), &["check"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for expected in [
        "hearth.toml: mcp_servers[0].name: `Home-Assistant` is not a valid server name",
        "hearth.toml: mcp_servers[0].url: `ftp://ha.local/mcp` has the scheme `ftp`",
        "hearth.toml: mcp_servers[0].args: only applies to a program hearth starts",
        "hearth.toml: mcp_servers[1].risk.*: unknown value `sometimes`, expected one of `read`, `write`, `destructive`, `outward`",
        "hearth.toml: mcp_servers[2].command: missing: give `command`",
        "hearth.toml: mcp_servers[2].cwd: /nonexistent/dir is not a directory",
        "hearth.toml: mcp_servers[3].name: `tasks` is the name of a built-in tool group",
        "hearth.toml: mcp_servers[3].url: give either `command`",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }
    // A server whose entry failed to parse is still reported; the agents file is checked
    // only once the configuration itself is valid, so fix it and look again.
    write(
        dir.path(),
        "hearth.toml",
        r#"
[router]
agents_file = "agents.toml"

[[mcp_servers]]
name = "git"
command = "git-mcp"
headers = { "X-Token" = "t" }
secrets_env = { TOKEN = "HEARTH_TEST_UNSET_SECRET" }
timeout_secs = 0
"#,
    );
    let out = hearth_cli(dir.path(), &["check"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for expected in [
        "mcp_servers[0].timeout_secs: must be greater than 0",
        "mcp_servers[0].headers: only applies to an HTTP server",
        "mcp_servers[0].secrets_env.TOKEN: environment variable HEARTH_TEST_UNSET_SECRET is not set",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }

    write(
        dir.path(),
        "hearth.toml",
        "[router]\nagents_file = \"agents.toml\"\n\n[[mcp_servers]]\nname = \"git\"\ncommand = \"git-mcp\"\nsecrets_env = { TOKEN = \"HEARTH_TEST_SECRET\" }\n",
    );
    let out = hearth_cli(dir.path(), &["check"], &[("HEARTH_TEST_SECRET", "s")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        !stderr.contains("unknown group \"git\"") && !stderr.contains("\"git__log\""),
        "a server's group and tools are known: {stderr}"
    );
    assert!(stderr.contains("unknown group \"nope\""), "{stderr}");
    assert!(stderr.contains("unknown tool \"gitx__log\""), "{stderr}");
}

#[tokio::test]
async fn the_server_dies_with_hearth_even_on_sigkill() {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    write(
        dir.path(),
        "hearth.toml",
        &format!(
            "[daemon]\nhttp_listen = \"127.0.0.1:{port}\"\n\n{}",
            fake_entry("fake")
        ),
    );
    let mut child = hearth_command(
        dir.path(),
        &["run"],
        &[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("hearth run starts");
    let url = format!("http://127.0.0.1:{port}/healthz");
    let pid = poll(WAIT, async || {
        let body = reqwest::get(&url).await.ok()?.json::<Value>().await.ok()?;
        let server = &body["mcp_servers"]["fake"];
        (server["state"] == "connected").then(|| server["pid"].as_u64().expect("pid"))
    })
    .await
    .expect("the MCP server connects");
    assert!(running(pid));
    child.kill().expect("SIGKILL hearth");
    child.wait().expect("reap hearth");
    wait_gone(pid, "the MCP server of a SIGKILLed hearth").await;
}
