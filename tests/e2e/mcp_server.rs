//! hearth as an MCP server, driven by the official MCP Python SDK (`mcp_server_client.py`, in
//! a cached venv) over streamable HTTP at `/mcp` and over stdio (`hearth mcp serve`), and by
//! rmcp's client from Rust: tools, resources and prompts listed; a task added and read back as
//! a resource; a risky call refused rather than run unasked; what a token's scope and agents
//! let it see; a wrong token, a foreign Host and a foreign Origin refused; a task added over
//! stdio beside the running daemon showing up in its chat answers; the calls counted by client
//! in `hearth usage`; no token in any log.

use std::time::Duration;

use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::http::{Api, answer};
use crate::support::last_tool_result;

const SCRIPT: &str = include_str!("mcp_server_client.py");

/// `[mcp_server]` on, after `[channels.http]`.
pub(crate) const ENABLED: &str = "\n[mcp_server]\nenabled = true\n";

/// Runs the Python SDK client with `plan` (see the script's header): its JSON answer.
pub(crate) async fn python(plan: Value) -> Value {
    let python = hearth_testkit::python::mcp_python().expect("the MCP Python SDK installs");
    let run = tokio::process::Command::new(python)
        .args(["-c", SCRIPT])
        .arg(plan.to_string())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(90), run)
        .await
        .expect("the Python client finishes")
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut got: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|_| panic!("the client printed no JSON: {stdout}\n{stderr}"));
    // What the client (and a stdio server) said on stderr, for the messages of failed asserts.
    got["stderr"] = Value::String(
        stderr
            .chars()
            .rev()
            .take(4_000)
            .collect::<String>()
            .chars()
            .rev()
            .collect(),
    );
    got
}

pub(crate) fn over_http(api: &Api, token: &str, steps: Value) -> Value {
    json!({
        "transport": "http",
        "url": api.process.url("/mcp"),
        "headers": {"Authorization": format!("Bearer {token}")},
        "steps": steps,
    })
}

fn names(listed: &Value, key: &str) -> Vec<String> {
    listed[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key}: {listed}"))
        .iter()
        .map(|item| item["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The text of a tool result (its first content block).
pub(crate) fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn the_python_sdk_over_http_lists_calls_and_reads_as_the_tokens_user() {
    let mut api = Api::new(ENABLED).await;
    api.process.start().await;
    let steps = json!([
        {"op": "list_tools"},
        {"op": "list_resources"},
        {"op": "list_prompts"},
        {"op": "get_prompt", "name": "general"},
        {"op": "call", "name": "add_task", "args": {"title": "Buy oat milk"}},
        {"op": "read", "uri": "hearth://tasks"},
        {"op": "call", "name": "delete_task", "args": {"task_id": 1}},
        {"op": "call", "name": "add_task", "args": {"title": 7}},
        {"op": "read", "uri": "hearth://calendar/today"},
    ]);
    let got = python(over_http(&api, &api.owner, steps)).await;
    assert!(got.get("error").is_none(), "{got}");
    let r = got["results"].as_array().expect("results");

    // The general agent's built-in tools, as the model sees them, with hints from their risk.
    let tools = &r[0]["tools"];
    let listed = names(&r[0], "tools");
    for tool in ["add_task", "delete_task", "list_tasks", "complete_task"] {
        assert!(listed.contains(&tool.to_string()), "{listed:?}");
    }
    assert!(!listed.iter().any(|t| t == "tool_result"), "{listed:?}");
    let find = |name: &str| {
        tools
            .as_array()
            .and_then(|all| all.iter().find(|t| t["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("{name} listed: {tools}"))
    };
    assert_eq!(find("list_tasks")["annotations"]["readOnlyHint"], true);
    assert_eq!(find("delete_task")["annotations"]["destructiveHint"], true);
    assert_eq!(find("add_task")["annotations"]["readOnlyHint"], false);
    assert_eq!(
        find("add_task")["inputSchema"]["required"],
        json!(["title"]),
        "the registry's schema"
    );
    assert_eq!(
        find("add_task")["description"],
        "Add a task to the user's to-do list. Returns its id."
    );

    let uris: Vec<&str> = r[1]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|res| res["uri"].as_str())
        .collect();
    assert_eq!(
        uris,
        [
            "hearth://tasks",
            "hearth://notes",
            "hearth://memories",
            "hearth://calendar/today"
        ]
    );
    assert_eq!(names(&r[2], "prompts"), ["general", "finance"]);
    assert_eq!(r[3]["messages"][0]["content"]["text"], "PROMPT:general");

    assert_eq!(r[4]["isError"], false, "{}", r[4]);
    assert!(
        r[5]["contents"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Buy oat milk"),
        "the task read back: {}",
        r[5]
    );
    // Deleting needs the owner's approval at the default autonomy, and without an approvals
    // chat to ask in it does not run.
    assert_eq!(r[6]["isError"], true, "{}", r[6]);
    assert!(
        text(&r[6]).contains("needs the owner's approval"),
        "{}",
        r[6]
    );
    // Invalid arguments: the registry's check, as for the model.
    assert_eq!(r[7]["isError"], true);
    assert!(
        text(&r[7]).contains("Invalid arguments for `add_task`"),
        "{}",
        r[7]
    );
    assert!(r[8]["contents"][0]["text"].is_string(), "{}", r[8]);

    // The task is the owner's, as the HTTP API's own turn would see it; the calls are audited
    // and counted by client.
    let usage = api.process.cli(&["usage"]);
    assert!(usage.contains("Tool calls by MCP clients"), "{usage}");
    assert!(usage.contains("(token owner)"), "{usage}");
    api.process.stop().await;
}

#[tokio::test]
async fn a_tokens_scope_and_agents_decide_what_it_sees() {
    let mut api = Api::new(ENABLED).await;
    let reader = api.create_token(&["reader", "--scope", "chat"]);
    let money = api.create_token(&["money", "--scope", "admin", "--agents", "finance"]);
    api.process.start().await;

    let steps = json!([
        {"op": "list_tools"},
        {"op": "call", "name": "add_task", "args": {"title": "sneaky"}},
        {"op": "call", "name": "list_tasks", "args": {}},
    ]);
    let got = python(over_http(&api, &reader, steps)).await;
    assert!(got.get("error").is_none(), "{got}");
    let r = got["results"].as_array().expect("results");
    // A chat token talks, it does not act: only tools that change nothing.
    let listed = names(&r[0], "tools");
    assert!(listed.contains(&"list_tasks".to_string()), "{listed:?}");
    assert!(!listed.contains(&"add_task".to_string()), "{listed:?}");
    assert!(!listed.contains(&"delete_task".to_string()), "{listed:?}");
    assert_eq!(r[1]["isError"], true);
    assert!(text(&r[1]).contains("Unknown tool `add_task`"), "{}", r[1]);
    assert_eq!(r[2]["isError"], false, "{}", r[2]);

    let steps = json!([
        {"op": "list_tools"},
        {"op": "list_prompts"},
        {"op": "call", "name": "list_tasks", "args": {}},
    ]);
    let got = python(over_http(&api, &money, steps)).await;
    assert!(got.get("error").is_none(), "{got}");
    let r = got["results"].as_array().expect("results");
    // The finance agent has no task tools, and the token may use no other agent.
    assert!(names(&r[0], "tools").is_empty(), "{}", r[0]);
    assert_eq!(names(&r[1], "prompts"), ["finance"]);
    assert_eq!(r[2]["isError"], true);
    api.process.stop().await;
}

#[tokio::test]
async fn a_wrong_token_a_foreign_host_and_a_foreign_origin_are_refused() {
    let mut api = Api::new(ENABLED).await;
    api.process.start().await;

    // The SDK with a wrong token fails, on a 401.
    let got = python(over_http(&api, "hth_wrong", json!([{"op": "list_tools"}]))).await;
    assert!(got["error"].is_string(), "{got}");
    assert!(
        got["statuses"]
            .as_array()
            .is_some_and(|s| s.contains(&json!(401))),
        "{got}"
    );
    assert!(
        got["results"].as_array().is_some_and(Vec::is_empty),
        "{got}"
    );

    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let post = |token: &str| {
        api.client
            .post(api.process.url("/mcp"))
            .bearer_auth(token)
            .header("Accept", "application/json, text/event-stream")
            .json(&ping)
    };
    let response = post("hth_wrong").send().await.expect("answers");
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let (status, _) = answer_of(post(&api.owner).header("Host", "evil.example:80")).await;
    assert_eq!(status, 421, "a foreign Host");
    let (status, body) = answer_of(post(&api.owner).header("Origin", "http://evil")).await;
    assert_eq!(status, 403, "a foreign Origin: {body}");
    // The same request from hearth's own origin, and one without any, are served.
    let own = api.process.url("").trim_end_matches('/').to_string();
    let (status, body) = answer_of(post(&api.owner).header("Origin", own)).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = answer_of(post(&api.owner)).await;
    assert_eq!(status, 200, "{body}");
    // A token in the URL is refused before anything else.
    let (status, _) = answer(
        api.client
            .post(api.process.url(&format!("/mcp?token={}", api.owner)))
            .json(&ping),
    )
    .await;
    assert_eq!(status, 401);
    api.process.stop().await;
}

async fn answer_of(request: reqwest::RequestBuilder) -> (u16, String) {
    let response = request.send().await.expect("answers");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// `hearth mcp serve` for the Python SDK, in the process's directory with its environment
/// (the SDK adds `HOME`, which the daemon's has not: without it both find the database in
/// `./data`).
pub(crate) fn over_stdio(api: &Api, steps: Value) -> Value {
    json!({
        "transport": "stdio",
        "command": "env",
        "args": ["-u", "HOME", crate::support::hearth_binary(), "mcp", "serve"],
        "cwd": api.process.dir.path(),
        "env": {"RUST_LOG": "info"},
        "steps": steps,
    })
}

#[tokio::test]
async fn a_task_added_over_stdio_beside_the_daemon_shows_up_in_its_chat_answers() {
    let mut api = Api::new("").await;
    api.process.start().await;
    let steps = json!([
        {"op": "list_tools"},
        {"op": "list_prompts"},
        {"op": "call", "name": "add_task", "args": {"title": "Call the plumber"}},
        {"op": "read", "uri": "hearth://tasks"},
    ]);
    let got = python(over_stdio(&api, steps)).await;
    assert!(got.get("error").is_none(), "{got}");
    let r = got["results"].as_array().expect("results");
    assert!(names(&r[0], "tools").contains(&"add_task".to_string()));
    assert_eq!(names(&r[1], "prompts"), ["general", "finance"]);
    assert_eq!(r[2]["isError"], false, "{}", r[2]);
    assert!(
        r[3]["contents"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Call the plumber")
    );

    // The daemon's agent lists the tasks in a chat turn and sees the one added over stdio.
    api.llm.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "l1",
        "list_tasks",
        "{}",
    )]));
    api.llm.push(Reply::text("You have: Call the plumber"));
    let (status, started) = answer(
        api.client
            .post(api.process.url("/api/v1/turns"))
            .bearer_auth(&api.owner)
            .header("Idempotency-Key", "k1")
            .json(&json!({"text": "what are my tasks?"})),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let requests = api.llm.wait_for_requests(2, Duration::from_secs(30)).await;
    let seen = last_tool_result(&requests[1]);
    assert!(seen.contains("Call the plumber"), "{seen}");

    // stdio calls name their client too.
    let usage = api.process.cli(&["usage"]);
    assert!(usage.contains("hearth-pytest (stdio)"), "{usage}");
    api.process.stop().await;
}

#[tokio::test]
async fn without_an_owner_or_with_an_unknown_user_stdio_says_so() {
    let mut api = Api::new("").await;
    api.process.start().await;
    let out = api
        .process
        .cli(&["mcp", "serve", "--user", "telegram:nobody"]);
    assert!(out.contains("no allowed identity"), "{out}");
    let out = api.process.cli(&["mcp", "serve", "--user", "nocolon"]);
    assert!(out.contains("expected CHANNEL:ID"), "{out}");
    api.process.stop().await;
}

#[tokio::test]
async fn rmcps_client_lists_and_calls_over_stdio_and_hearths_own_client_lists_over_http() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;

    let mut api = Api::new(ENABLED).await;
    api.process.start().await;
    let mut command = tokio::process::Command::new(crate::support::hearth_binary());
    command
        .args(["mcp", "serve"])
        .current_dir(api.process.dir.path())
        .env_clear()
        .env("RUST_LOG", "warn");
    let transport =
        rmcp::transport::TokioChildProcess::new(process_wrap::tokio::CommandWrap::from(command))
            .expect("hearth mcp serve starts");
    let client = ().serve(transport).await.expect("the handshake");
    let tools = client.list_all_tools().await.expect("tools/list");
    let listed: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(listed.contains(&"add_task"), "{listed:?}");
    let arguments = json!({"title": "Water the plants"});
    let Value::Object(arguments) = arguments else {
        unreachable!()
    };
    let result = client
        .call_tool(CallToolRequestParams::new("add_task").with_arguments(arguments))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(false), "{result:?}");
    if let Err(err) = client.cancel().await {
        panic!("the client stops: {err}");
    }

    // hearth's own MCP client (rmcp over reqwest) against its own /mcp, with a token.
    let config_path = api.process.dir.path().join("hearth.toml");
    let mut config = std::fs::read_to_string(&config_path).expect("config");
    config.push_str(&format!(
        "\n[[mcp_servers]]\nname = \"itself\"\nurl = \"{}\"\nbearer_token_env = \"SELF_TOKEN\"\n",
        api.process.url("/mcp")
    ));
    std::fs::write(&config_path, config).expect("config");
    let out = std::process::Command::new(crate::support::hearth_binary())
        .args(["mcp", "list"])
        .current_dir(api.process.dir.path())
        .env_clear()
        .env("SELF_TOKEN", &api.owner)
        .output()
        .expect("hearth mcp list runs");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{printed}");
    assert!(printed.contains("add_task"), "{printed}");
    assert!(printed.contains("delete_task"), "{printed}");
    api.process.stop().await;
}
