//! The MCP approval wait, with the real `hearth run` binary, the fake Telegram Bot API as the
//! owner's approvals chat and the official MCP Python SDK (over streamable HTTP and over stdio
//! beside the daemon) or rmcp's client: a `delete_task` that waits for the owner's press,
//! approved (the task is gone) and denied (it stays), with progress while it waits; a call
//! that waits longer than `inline_wait_secs` answering a handle that survives a restart, which
//! only its caller may check and whose approved call runs once (and which the client's own
//! token cannot approve through the HTTP API); a client that goes away
//! (over HTTP and over stdio) withdrawing its prompt; and a request nobody answers expiring.

use std::time::Duration;

use hearth_testkit::telegram::{FakeMessage, FakeTelegram};
use serde_json::{Value, json};

use crate::http::Api;
use crate::mcp_server::{over_http, over_stdio, python, text};
use crate::support::poll;

const TOKEN: &str = "123456:telegram-token-xyz";
/// The owner's Telegram user and private chat: the approvals chat.
const OWNER: i64 = 42;
const WAIT: Duration = Duration::from_secs(30);

struct Setup {
    api: Api,
    tg: FakeTelegram,
}

/// A daemon whose owner is `telegram:42`, with the HTTP channel, `/mcp`, Telegram, approvals
/// routed to the owner's Telegram chat, `inline_wait_secs` and `env`; started.
async fn setup(inline_wait_secs: u64, env: &[(&'static str, &str)]) -> Setup {
    let tg = FakeTelegram::start(TOKEN).await;
    let mut all = vec![
        ("TG_TOKEN", TOKEN),
        ("HEARTH_DAEMON__APPROVALS_TO", "telegram:42"),
    ];
    all.extend_from_slice(env);
    let extra = format!(
        "\n[channels.telegram]\ntoken_env = \"TG_TOKEN\"\napi_url = \"{}\"\nallowed_users = [{OWNER}]\n\
         \n[mcp_server]\nenabled = true\ninline_wait_secs = {inline_wait_secs}\n",
        tg.api_url()
    );
    let mut api = Api::build(&format!("telegram:{OWNER}"), &all, &extra).await;
    api.process.start().await;
    Setup { api, tg }
}

/// `hearth mcp serve` for the Python SDK, with what its config needs from the environment.
fn stdio(api: &Api, steps: Value) -> Value {
    let mut plan = over_stdio(api, steps);
    plan["env"]["TG_TOKEN"] = TOKEN.into();
    plan["env"]["HEARTH_DAEMON__APPROVALS_TO"] = "telegram:42".into();
    plan
}

/// The `n`th approval prompt (from 1) in the owner's chat, once it is there.
async fn prompt(tg: &FakeTelegram, n: usize) -> FakeMessage {
    poll(WAIT, async || {
        tg.messages(OWNER)
            .into_iter()
            .filter(|m| m.text.contains("Approval needed"))
            .nth(n - 1)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "approval prompt {n} in the owner's chat: {:?}",
            tg.messages(OWNER)
        )
    })
}

/// Presses the owner's `label` button (`Approve`, `Deny`) on `prompt`.
fn press(tg: &FakeTelegram, prompt: &FakeMessage, label: &str) -> String {
    let data = prompt
        .buttons
        .iter()
        .flatten()
        .find(|(shown, _)| shown.contains(label))
        .map(|(_, data)| data.clone())
        .unwrap_or_else(|| panic!("a {label} button: {:?}", prompt.buttons));
    tg.press(OWNER, OWNER, prompt.id, &data)
}

/// The prompt `prompt` once edited to contain `outcome`.
async fn edited(tg: &FakeTelegram, prompt: &FakeMessage, outcome: &str) -> String {
    poll(WAIT, async || {
        tg.messages(OWNER)
            .into_iter()
            .find(|m| m.id == prompt.id && m.text.contains(outcome))
            .map(|m| m.text)
    })
    .await
    .unwrap_or_else(|| panic!("the prompt edited to {outcome:?}: {:?}", tg.messages(OWNER)))
}

fn results(got: &Value) -> &Vec<Value> {
    assert!(got.get("error").is_none(), "{got}");
    got["results"].as_array().expect("results")
}

/// One transport's approved and denied wait: tasks `first` and `second` are added, `first`'s
/// deletion is approved and `second`'s denied; `plan` makes the transport's plan.
async fn approved_and_denied(
    s: &Setup,
    plan: impl Fn(Value) -> Value,
    (first, second): (i64, i64),
    prompts: usize,
    client: &str,
) {
    let steps = json!([
        {"op": "call", "name": "add_task", "args": {"title": format!("Milk {first}")}},
        {"op": "call", "name": "add_task", "args": {"title": format!("Bread {second}")}},
        {"op": "call", "name": "delete_task", "args": {"task_id": first}, "progress": true},
    ]);
    let call = tokio::spawn(python(plan(steps)));
    let asked = prompt(&s.tg, prompts + 1).await;
    // The owner sees who asks, what and with which arguments, as a chat's routed prompt says.
    assert!(
        asked
            .text
            .contains(&format!("Approval needed for the MCP client “{client}”")),
        "{}",
        asked.text
    );
    assert!(
        asked.text.contains("wants to run delete_task"),
        "{}",
        asked.text
    );
    assert!(
        asked.text.contains(&format!("\"task_id\": {first}")),
        "{}",
        asked.text
    );
    press(&s.tg, &asked, "Approve");
    let got = call.await.expect("the client ran");
    let r = results(&got);
    assert_eq!(r[2]["isError"], false, "{}", r[2]);
    assert!(
        text(&r[2]).contains(&format!("Milk {first}")),
        "the deleted task: {}",
        r[2]
    );
    // It said it waited, while it waited.
    let notes = r[2]["progress"].as_array().expect("progress notes");
    assert!(
        notes
            .iter()
            .any(|n| n == "waiting for the owner's approval in telegram"),
        "{notes:?}"
    );
    edited(&s.tg, &asked, "Approved").await;

    let steps = json!([
        {"op": "call", "name": "delete_task", "args": {"task_id": second}, "progress": true},
        {"op": "read", "uri": "hearth://tasks"},
    ]);
    let call = tokio::spawn(python(plan(steps)));
    let asked = prompt(&s.tg, prompts + 2).await;
    press(&s.tg, &asked, "Deny");
    let got = call.await.expect("the client ran");
    let r = results(&got);
    assert_eq!(r[0]["isError"], true, "{}", r[0]);
    assert!(text(&r[0]).contains("denied by the owner"), "{}", r[0]);
    let tasks = r[1]["contents"][0]["text"].as_str().unwrap_or_default();
    assert!(
        tasks.contains(&format!("Bread {second}")),
        "still there: {tasks}"
    );
    assert!(
        !tasks.contains(&format!("Milk {first}")),
        "deleted: {tasks}"
    );
    edited(&s.tg, &asked, "Denied").await;
}

#[tokio::test]
async fn the_python_sdk_waits_for_the_owners_press_over_http_and_over_stdio() {
    let mut s = setup(50, &[]).await;
    let owner = s.api.owner.clone();
    let http = |steps| over_http(&s.api, &owner, steps);
    approved_and_denied(&s, http, (1, 2), 0, "hearth-pytest (token owner)").await;
    let local = |steps| stdio(&s.api, steps);
    approved_and_denied(&s, local, (3, 4), 2, "hearth-pytest (stdio)").await;
    s.api.process.stop().await;
}

/// The handle in a "waiting for the owner's approval" answer.
fn handle_of(result: &Value) -> String {
    let answer = text(result);
    assert!(
        answer.starts_with("waiting for the owner's approval"),
        "{result}"
    );
    answer
        .split("Handle: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("a handle: {answer}"))
        .to_string()
}

#[tokio::test]
async fn a_call_that_waits_too_long_answers_a_handle_that_survives_a_restart_and_runs_once() {
    let mut s = setup(1, &[]).await;
    let other = s
        .api
        .create_token(&["other", "--scope", "admin", "--same-user"]);
    let owner = s.api.owner.clone();
    // No progress asked, and a one-second inline wait: the handle.
    let steps = json!([
        {"op": "list_tools"},
        {"op": "call", "name": "add_task", "args": {"title": "Old receipts"}},
        {"op": "call", "name": "delete_task", "args": {"task_id": 1}},
        {"op": "call", "name": "check_approval", "args": {}},
    ]);
    let got = python(over_http(&s.api, &owner, steps)).await;
    let r = results(&got);
    let listed: Vec<&str> = r[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(listed.last(), Some(&"check_approval"), "{listed:?}");
    assert_eq!(r[2]["isError"], false, "{}", r[2]);
    let handle = handle_of(&r[2]);
    assert_eq!(r[3]["isError"], true);
    assert!(text(&r[3]).contains("needs {\"handle\""), "{}", r[3]);
    let asked = prompt(&s.tg, 1).await;

    // Pending across a restart of the daemon; another caller (another token of the same
    // owner) has no such approval.
    s.api.process.stop().await;
    s.api.process.start().await;
    let check = json!([{"op": "call", "name": "check_approval", "args": {"handle": handle}}]);
    let got = python(over_http(&s.api, &other, check.clone())).await;
    let r = results(&got);
    assert_eq!(r[0]["isError"], true, "{}", r[0]);
    assert!(text(&r[0]).contains("no such approval"), "{}", r[0]);
    let got = python(over_http(&s.api, &owner, check.clone())).await;
    let r = results(&got);
    assert_eq!(r[0]["isError"], false, "{}", r[0]);
    assert!(
        text(&r[0]).starts_with("still waiting for the owner's approval"),
        "{}",
        r[0]
    );

    // The client's own token decides nothing: the request is neither listed to it nor
    // decidable by its id (the prompt's button carries it) through the HTTP API.
    let id = asked.buttons[0][0]
        .1
        .split(':')
        .nth(1)
        .expect("an id")
        .to_string();
    let listed = s
        .api
        .client
        .get(s.api.process.url("/api/v1/confirmations"))
        .bearer_auth(&owner)
        .send()
        .await
        .expect("listed");
    let listed = listed.text().await.unwrap_or_default();
    assert!(!listed.contains(&id), "{listed}");
    let decided = s
        .api
        .client
        .post(s.api.process.url(&format!("/api/v1/confirmations/{id}")))
        .bearer_auth(&owner)
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .expect("answered");
    assert_eq!(decided.status(), 403);

    // Approved after the call ended: the first check runs it, the second gets the same answer.
    press(&s.tg, &asked, "Approve");
    edited(&s.tg, &asked, "Approved").await;
    let steps = json!([
        {"op": "call", "name": "check_approval", "args": {"handle": handle}},
        {"op": "call", "name": "check_approval", "args": {"handle": handle}},
        {"op": "read", "uri": "hearth://tasks"},
    ]);
    let got = python(over_http(&s.api, &owner, steps)).await;
    let r = results(&got);
    assert_eq!(r[0]["isError"], false, "{}", r[0]);
    assert!(
        text(&r[0]).contains("Old receipts"),
        "the deleted task: {}",
        r[0]
    );
    assert_eq!(r[1], r[0], "asked twice, run once");
    let tasks = r[2]["contents"][0]["text"].as_str().unwrap_or_default();
    assert!(!tasks.contains("Old receipts"), "{tasks}");
    s.api.process.stop().await;
}

#[tokio::test]
async fn a_client_that_goes_away_withdraws_its_prompt_and_a_late_press_does_nothing() {
    let mut s = setup(50, &[]).await;
    let owner = s.api.owner.clone();
    let got = python(over_http(
        &s.api,
        &owner,
        json!([{"op": "call", "name": "add_task", "args": {"title": "Keep me"}}]),
    ))
    .await;
    results(&got);
    // A raw streamable HTTP request, dropped once the owner has been asked.
    let call = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "delete_task", "arguments": {"task_id": 1}},
    });
    let response = s
        .api
        .client
        .post(s.api.process.url("/mcp"))
        .bearer_auth(&owner)
        .header("Accept", "application/json, text/event-stream")
        .json(&call)
        .send()
        .await
        .expect("the call is under way");
    assert_eq!(response.status(), 200);
    let asked = prompt(&s.tg, 1).await;
    drop(response);
    let shown = edited(&s.tg, &asked, "Withdrawn").await;
    assert!(shown.contains("the MCP client went away"), "{shown}");

    // Pressed later: already decided, and nothing runs.
    let late = press(&s.tg, &asked, "Approve");
    let answered = poll(WAIT, async || {
        s.tg.answered_callbacks().into_iter().find(|c| c.id == late)
    })
    .await
    .expect("the late press answered");
    assert_eq!(
        answered.text.as_deref(),
        Some("This request was already decided.")
    );
    let got = python(over_http(
        &s.api,
        &owner,
        json!([{"op": "read", "uri": "hearth://tasks"}]),
    ))
    .await;
    let r = results(&got);
    let tasks = r[0]["contents"][0]["text"].as_str().unwrap_or_default();
    assert!(tasks.contains("Keep me"), "{tasks}");
    s.api.process.stop().await;
}

#[tokio::test]
async fn a_request_nobody_answers_expires_and_does_not_run() {
    let mut s = setup(50, &[("HEARTH_TOOLS__CONFIRMATION_TIMEOUT_SECS", "2")]).await;
    let owner = s.api.owner.clone();
    let steps = json!([
        {"op": "call", "name": "add_task", "args": {"title": "Tax papers"}},
        {"op": "call", "name": "delete_task", "args": {"task_id": 1}, "progress": true},
        {"op": "read", "uri": "hearth://tasks"},
    ]);
    let got = python(over_http(&s.api, &owner, steps)).await;
    let r = results(&got);
    assert_eq!(r[1]["isError"], true, "{}", r[1]);
    assert!(text(&r[1]).starts_with("expired"), "{}", r[1]);
    let tasks = r[2]["contents"][0]["text"].as_str().unwrap_or_default();
    assert!(tasks.contains("Tax papers"), "{tasks}");
    let asked = prompt(&s.tg, 1).await;
    edited(&s.tg, &asked, "Expired").await;
    s.api.process.stop().await;
}

/// rmcp's client of `hearth mcp serve` in the process's directory.
async fn rmcp_client(api: &Api) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    use rmcp::ServiceExt;
    let mut command = tokio::process::Command::new(crate::support::hearth_binary());
    command
        .args(["mcp", "serve"])
        .current_dir(api.process.dir.path())
        .env_clear()
        .env("RUST_LOG", "warn")
        .env("TG_TOKEN", TOKEN)
        .env("HEARTH_DAEMON__APPROVALS_TO", "telegram:42");
    let transport =
        rmcp::transport::TokioChildProcess::new(process_wrap::tokio::CommandWrap::from(command))
            .expect("hearth mcp serve starts");
    ().serve(transport).await.expect("the handshake")
}

fn call(name: &str, arguments: Value) -> rmcp::model::CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        unreachable!("an object")
    };
    rmcp::model::CallToolRequestParams::new(name.to_string()).with_arguments(arguments)
}

#[tokio::test]
async fn rmcps_client_waits_for_an_approval_over_stdio() {
    let mut s = setup(50, &[]).await;
    let client = rmcp_client(&s.api).await;
    let added = client
        .call_tool(call("add_task", json!({"title": "Water the plants"})))
        .await
        .expect("tools/call");
    assert_eq!(added.is_error, Some(false), "{added:?}");
    let delete = call("delete_task", json!({"task_id": 1}));
    let (deleted, ()) = tokio::join!(client.call_tool(delete), async {
        let asked = prompt(&s.tg, 1).await;
        press(&s.tg, &asked, "Approve");
    });
    let deleted = deleted.expect("tools/call");
    assert_eq!(deleted.is_error, Some(false), "{deleted:?}");
    let shown = format!("{:?}", deleted.content);
    assert!(shown.contains("Water the plants"), "{shown}");
    if let Err(err) = client.cancel().await {
        panic!("the client stops: {err}");
    }
    s.api.process.stop().await;
}

#[tokio::test]
async fn a_stdio_client_that_goes_away_withdraws_its_prompt() {
    let mut s = setup(50, &[]).await;
    let client = rmcp_client(&s.api).await;
    let added = client
        .call_tool(call("add_task", json!({"title": "Keep me"})))
        .await
        .expect("tools/call");
    assert_eq!(added.is_error, Some(false), "{added:?}");
    let peer = client.peer().clone();
    let waiting = tokio::spawn(async move {
        peer.call_tool(call("delete_task", json!({"task_id": 1})))
            .await
    });
    let asked = prompt(&s.tg, 1).await;
    // The client leaves as rmcp's does: stdin closed, then SIGTERM a few seconds later.
    if let Err(err) = client.cancel().await {
        panic!("the client stops: {err}");
    }
    let shown = edited(&s.tg, &asked, "Withdrawn").await;
    assert!(shown.contains("the MCP client went away"), "{shown}");
    waiting.abort();
    s.api.process.stop().await;
}
