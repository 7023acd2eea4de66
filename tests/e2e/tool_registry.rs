//! The registry through the runtime: the search -> help -> use discovery flow, JSON-Schema
//! errors returned with help, list limits, rate limits, permissions, batches and the audit.

use hearth::tool::{Risk, ToolInfo, ToolRegistry};
use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::support::{Hearth, TestTool, tool_results};

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    let things = json!({
        "type": "object",
        "properties": {"limit": {"type": "integer", "description": "how many"}, "status": {"type": "string", "enum": ["open", "done"]}},
        "additionalProperties": false
    });
    let note = json!({
        "type": "object",
        "properties": {"text": {"type": "string", "description": "what to write"}},
        "required": ["text"],
        "additionalProperties": false
    });
    let tools = [
        ToolInfo::new("list_things", "tasks", "List the user's things", things)
            .limit("limit", 20, 50)
            .tags(["inventory"]),
        ToolInfo::new("write_note", "notes", "Write a note", note.clone()).risk(Risk::Write),
        ToolInfo::new("burn_note", "notes", "Destroy a note", note).risk(Risk::Destructive),
    ];
    for info in tools {
        // Echoes the arguments it was called with, so tests see what the registry passed on.
        let name = info.name.clone();
        let echo = TestTool::answering(info, move |args| {
            Ok(json!({"tool": name, "args": args}).to_string())
        });
        registry.register(echo).expect("register");
    }
    registry
}

fn agents(mode: &str) -> String {
    format!(
        "[[agent]]\nid = \"general\"\nname = \"General\"\nsystem_prompt = \"PROMPT\"\ntool_groups = [\"tasks\", \"notes\"]\ntool_mode = \"{mode}\"\n"
    )
}

fn results(request: &Value) -> Vec<String> {
    tool_results(request)
        .into_iter()
        .map(|(_, content)| content)
        .collect()
}

fn call(id: &str, name: &str, args: Value) -> ToolCallSpec {
    ToolCallSpec::new(id, name, args.to_string())
}

#[tokio::test]
async fn search_then_help_then_use_with_the_meta_tools() {
    let mut h = Hearth::new()
        .await
        .with_agents(&agents("meta"))
        .with_tools(registry);
    h.start().await;
    h.llm.push(Reply::tool_calls(vec![call(
        "c1",
        "search_tools",
        json!({"query": "inventory"}),
    )]));
    h.llm.push(Reply::tool_calls(vec![call(
        "c2",
        "get_tool_help",
        json!({"tool_name": "list_things"}),
    )]));
    h.llm.push(Reply::tool_calls(vec![call(
        "c3",
        "use_tool",
        json!({"tool_name": "list_things", "arguments": {"limit": 500}}),
    )]));
    h.llm.push(Reply::text("You have things."));
    assert_eq!(h.say("what do I have?").await.text, "You have things.");

    let requests = h.llm.requests();
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(
        offered,
        vec![
            "search_tools",
            "get_tool_help",
            "use_tool",
            "batch_use_tool"
        ]
    );
    assert!(
        requests[0]["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("search_tools"),
        "the prompt explains the workflow"
    );
    let found = &results(&requests[1])[0];
    assert!(
        found.contains("list_things") && !found.contains("write_note"),
        "{found}"
    );
    let help = &results(&requests[2])[1];
    assert!(
        help.contains("Parameters:")
            && help.contains("limit (integer, optional)")
            && help.contains("capped at 50"),
        "{help}"
    );
    let used = &results(&requests[3])[2];
    assert!(
        used.contains("\"limit\":50"),
        "the limit was capped: {used}"
    );

    h.llm.push(Reply::tool_calls(vec![call(
        "c4",
        "search_tools",
        json!({"query": "all", "category": "notes"}),
    )]));
    h.llm.push(Reply::text("ok"));
    h.say("list note tools").await;
    let all = results(&h.llm.last_request().expect("request"))
        .pop()
        .unwrap_or_default();
    assert!(
        all.contains("write_note") && all.contains("burn_note") && !all.contains("list_things"),
        "{all}"
    );
    h.stop().await;
}

#[tokio::test]
async fn schema_violations_go_back_to_the_model_with_help_and_defaults_fill_limits() {
    let mut h = Hearth::new()
        .await
        .with_agents(&agents("direct"))
        .with_tools(registry);
    h.start().await;
    h.llm.push(Reply::tool_calls(vec![
        call("c1", "list_things", json!({"status": "lost"})),
        call("c2", "write_note", json!({"text": 5, "extra": true})),
        call("c3", "list_things", json!({})),
    ]));
    h.llm.push(Reply::text("fixed"));
    h.say("go").await;
    let results = results(&h.llm.last_request().expect("request"));
    let by_id = |needle: &str| {
        results
            .iter()
            .find(|r| r.contains(needle))
            .cloned()
            .unwrap_or_default()
    };
    let bad_enum = by_id("/status");
    assert!(
        bad_enum.contains("Invalid arguments for `list_things`")
            && bad_enum.contains("Parameters:"),
        "{bad_enum}"
    );
    let bad_note = by_id("Invalid arguments for `write_note`");
    assert!(
        bad_note.contains("/text") && bad_note.contains("extra"),
        "{bad_note}"
    );
    assert!(by_id("\"args\"").contains("\"limit\":20"), "{results:?}");
    let audit = h.daemon().store().recent_audit(10).await.expect("audit");
    assert_eq!(
        audit
            .iter()
            .filter(|(_, outcome)| outcome == "invalid")
            .count(),
        2,
        "{audit:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn rate_limits_and_permissions_refuse_calls_with_a_reason() {
    let mut h = Hearth::new()
        .await
        .with_agents(&agents("direct"))
        .with_tools(registry);
    h.config.tools.per_user_tool_calls_per_minute = 2;
    h.start().await;
    let calls = (1..=3)
        .map(|i| call(&format!("c{i}"), "list_things", json!({})))
        .collect();
    h.llm.push(Reply::tool_calls(calls));
    h.llm.push(Reply::text("ok"));
    h.say("go").await;
    let results = results(&h.llm.last_request().expect("request"));
    assert_eq!(
        results.iter().filter(|r| r.contains("Rate limit")).count(),
        1,
        "{results:?}"
    );

    // A user with read permission cannot write.
    sqlx::query("UPDATE users SET permission = 'read'")
        .execute(h.daemon().store().pool())
        .await
        .expect("update");
    h.llm.push(Reply::tool_calls(vec![call(
        "c9",
        "write_note",
        json!({"text": "hi"}),
    )]));
    h.llm.push(Reply::text("sorry"));
    h.say("write a note").await;
    let refused = results_last(&h);
    assert!(refused.contains("may not use `write_note`"), "{refused}");
    h.stop().await;
}

fn results_last(h: &Hearth) -> String {
    results(&h.llm.last_request().expect("request"))
        .pop()
        .unwrap_or_default()
}

#[tokio::test]
async fn batch_use_tool_runs_each_operation_independently() {
    let mut h = Hearth::new()
        .await
        .with_agents(&agents("meta"))
        .with_tools(registry);
    h.start().await;
    let operations = json!({"operations": [
        {"tool_name": "write_note", "arguments": {"text": "a"}},
        {"tool_name": "write_note", "arguments": {"nope": 1}},
        {"tool_name": "burn_note", "arguments": {"text": "a"}},
        {"tool_name": "missing_tool"}
    ]});
    h.llm.push(Reply::tool_calls(vec![call(
        "c1",
        "batch_use_tool",
        operations,
    )]));
    h.llm.push(Reply::text("partly done"));
    h.say("do all of it").await;
    let result: Value = serde_json::from_str(&results_last(&h)).expect("batch result is JSON");
    let items = result["results"].as_array().expect("results");
    assert_eq!(items.len(), 4);
    assert_eq!(items[0]["ok"], true);
    assert!(
        items[1]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("Invalid arguments"),
        "{}",
        items[1]
    );
    assert!(
        items[2]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("needs the user's approval"),
        "{}",
        items[2]
    );
    assert!(
        items[3]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("Unknown tool"),
        "{}",
        items[3]
    );
    h.stop().await;
}

#[tokio::test]
async fn a_get_needs_only_read_permission_but_a_post_needs_execute() {
    let mut h = Hearth::new().await.with_agents(
        "[[agent]]\nid = \"general\"\nname = \"General\"\nsystem_prompt = \"PROMPT\"\ntools = [\"http_request\"]\n",
    );
    h.config.tools.autonomy = hearth::config::Autonomy::Full;
    h.start().await;
    sqlx::query("UPDATE users SET permission = 'write'")
        .execute(h.daemon().store().pool())
        .await
        .expect("update");
    // 192.0.2.1 is a documentation address: refused by the SSRF rules before any connection,
    // which is enough to tell that the call itself was allowed to run.
    h.llm.push(Reply::tool_calls(vec![
        call(
            "c1",
            "http_request",
            json!({"method": "GET", "url": "http://192.0.2.1/"}),
        ),
        call(
            "c2",
            "http_request",
            json!({"method": "POST", "url": "http://192.0.2.1/", "body": "x"}),
        ),
    ]));
    h.llm.push(Reply::text("ok"));
    h.say("fetch and post").await;
    let results = results(&h.llm.last_request().expect("request"));
    assert!(
        results.iter().any(|r| !r.contains("may not use")),
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .any(|r| r.contains("may not use `http_request` like this") && r.contains("Execute")),
        "{results:?}"
    );
    h.stop().await;
}
