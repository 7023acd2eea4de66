//! The utilities, web and files tool groups through the running daemon: the fake LLM asks for a
//! tool, the runtime runs it, and the next request carries the result the model would read.

use axum::Router;
use axum::response::Html;
use axum::routing::get;
use chrono::TimeZone;
use hearth::clock::ManualClock;
use hearth::config::Autonomy;
use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::Value;

use crate::support::{self, Hearth};

const AGENTS: &str = r#"
[[agent]]
id = "helper"
name = "Helper"
emoji = "🧰"
description = "Computes, fetches and files"
system_prompt = "PROMPT:helper"
tool_groups = ["utilities", "web", "files"]
"#;

async fn hearth() -> Hearth {
    let mut h = Hearth::new().await.with_agents(AGENTS);
    h.config.tools.autonomy = Autonomy::Full;
    h
}

/// The tool results in the LLM request number `index`, as (tool_call_id, content).
fn tool_results(h: &Hearth, index: usize) -> Vec<(String, String)> {
    support::tool_results(&h.llm.requests()[index])
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[tokio::test]
async fn calculate_answers_through_the_runtime() {
    let mut h = hearth().await;
    h.start().await;
    h.llm.push(Reply::tool_calls(vec![
        ToolCallSpec::new("c1", "calculate", r#"{"expression": "(2 + 3) * 4^2 / 8"}"#),
        ToolCallSpec::new("c2", "calculate", r#"{"expression": "1 / (3 - 3)"}"#),
    ]));
    h.llm.push(Reply::text("It is 10."));
    let reply = h.say("what is (2+3)*4^2/8?").await;
    assert!(reply.text.ends_with("It is 10."), "{}", reply.text);

    let results = tool_results(&h, 1);
    assert_eq!(results.len(), 2, "{results:?}");
    let ok = &results.iter().find(|(id, _)| id == "c1").expect("c1").1;
    assert_eq!(json(ok)["result"], 10);
    let err = &results.iter().find(|(id, _)| id == "c2").expect("c2").1;
    assert!(err.contains("division by zero"), "{err}");
    h.stop().await;
}

#[tokio::test]
async fn date_tools_use_the_users_timezone() {
    // 06:30 UTC on 2026-03-08 is 01:30 in New York, half an hour before clocks spring forward.
    let now = chrono::Utc
        .with_ymd_and_hms(2026, 3, 8, 6, 30, 0)
        .single()
        .expect("valid");
    let mut h = hearth().await.with_clock(ManualClock::new(now));
    h.config.daemon.timezone = chrono_tz::America::New_York;
    h.start().await;
    h.llm.push(Reply::tool_calls(vec![
        ToolCallSpec::new("c1", "get_current_datetime", "{}"),
        ToolCallSpec::new("c2", "date_add", r#"{"amount": 1, "unit": "days"}"#),
        ToolCallSpec::new(
            "c3",
            "date_difference",
            r#"{"start": "today", "end": "2026-12-25"}"#,
        ),
    ]));
    h.llm.push(Reply::text("Noted."));
    h.say("what's the date tomorrow, and how long until Christmas?")
        .await;

    let results = tool_results(&h, 1);
    let result = |id: &str| json(&results.iter().find(|(i, _)| i == id).expect(id).1);
    let current = result("c1");
    assert_eq!(current["date"], "2026-03-08");
    assert_eq!(current["time"], "01:30:00");
    assert_eq!(current["timezone"], "America/New_York");
    let tomorrow = result("c2");
    assert_eq!(
        tomorrow["result"], "2026-03-09T01:30:00-04:00",
        "same wall time, now in daylight time"
    );
    assert_eq!(tomorrow["weekday"], "Monday");
    let until = result("c3");
    assert_eq!(until["days"], 292);
    assert_eq!(until["calendar"]["months"], 9);
    assert_eq!(until["calendar"]["days"], 17);
    h.stop().await;
}

#[tokio::test]
async fn fetch_web_page_reads_a_local_server_and_refuses_internal_ones() {
    let app = Router::new().route(
        "/article",
        get(|| async {
            Html(
                "<html><head><title>Local news</title><script>track()</script></head>\
                 <body><nav>Menu</nav><h1>Headline</h1><p>The kettle is on.</p></body></html>",
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        // Lives as long as the test's runtime.
        let _ = axum::serve(listener, app).await;
    });

    let mut h = hearth().await;
    h.config.tools.allowed_private_hosts = vec!["127.0.0.1".into()];
    h.start().await;
    let page = format!(r#"{{"url": "http://{addr}/article"}}"#);
    h.llm.push(Reply::tool_calls(vec![
        ToolCallSpec::new("c1", "fetch_web_page", &page),
        ToolCallSpec::new(
            "c2",
            "fetch_web_page",
            r#"{"url": "http://169.254.169.254/latest/meta-data/"}"#,
        ),
    ]));
    h.llm.push(Reply::text("The kettle is on."));
    h.say("what does the local news say?").await;

    let results = tool_results(&h, 1);
    let fetched = json(&results.iter().find(|(id, _)| id == "c1").expect("c1").1);
    assert_eq!(fetched["status"], 200);
    assert_eq!(fetched["title"], "Local news");
    assert_eq!(fetched["text"], "Headline\n\nThe kettle is on.");
    let refused = &results.iter().find(|(id, _)| id == "c2").expect("c2").1;
    assert!(
        refused.contains("refused: 169.254.169.254 is a link-local address"),
        "{refused}"
    );
    h.stop().await;
}

#[tokio::test]
async fn web_search_asks_the_owners_searxng_on_loopback_and_the_model_reads_the_results() {
    use hearth::config::{SearchBackend, WebSearchConfig};
    use hearth_testkit::search::{FakeSearch, SearchResult};

    let search = FakeSearch::start().await;
    search.set_results(vec![
        SearchResult::new(
            "Kettle review",
            "https://example.org/kettles",
            "The best kettles of the year",
        ),
        SearchResult::new("Router", "http://192.168.0.1/", "admin login"),
    ]);
    let mut h = hearth().await;
    // Nothing private is allowed to the model's URLs; the instance is reached because the owner
    // configured it.
    h.config.tools.web_search = Some(WebSearchConfig {
        backend: SearchBackend::Searxng,
        base_url: Some(search.base_url()),
        api_key_env: None,
        max_results: 5,
    });
    h.start().await;
    h.llm.push(Reply::call(
        "c1",
        "web_search",
        r#"{"query": "best kettle"}"#,
    ));
    h.llm.push(Reply::text("The review says …"));
    h.say("find a kettle review").await;

    let found = json(&tool_results(&h, 1)[0].1);
    assert_eq!(found["results"][0]["url"], "https://example.org/kettles");
    assert_eq!(found["results"].as_array().map(Vec::len), Some(1));
    assert_eq!(found["omitted_internal"], 1);
    assert_eq!(search.requests()[0].query["q"], "best kettle");
    h.stop().await;
}

#[tokio::test]
async fn a_file_written_in_one_round_is_read_in_the_next() {
    let workspace = tempfile::tempdir().expect("workspace");
    let mut h = hearth().await;
    h.config.tools.workspace_dir = workspace.path().join("files");
    h.start().await;
    h.llm.push(Reply::call(
        "c1",
        "write_file",
        r#"{"path": "lists/shopping.md", "content": "- milk\n- bread\n"}"#,
    ));
    h.llm.push(Reply::tool_calls(vec![
        ToolCallSpec::new("c2", "read_file", r#"{"path": "lists/shopping.md"}"#),
        ToolCallSpec::new("c3", "read_file", r#"{"path": "../../etc/passwd"}"#),
    ]));
    h.llm.push(Reply::text("Saved your shopping list."));
    h.say("save my shopping list: milk, bread").await;

    let written = json(&tool_results(&h, 1)[0].1);
    assert_eq!(written["path"], "lists/shopping.md");
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("files/lists/shopping.md")).expect("on disk"),
        "- milk\n- bread\n"
    );
    let results = tool_results(&h, 2);
    let read = json(&results.iter().find(|(id, _)| id == "c2").expect("c2").1);
    assert_eq!(read["content"], "- milk\n- bread\n");
    let escape = &results.iter().find(|(id, _)| id == "c3").expect("c3").1;
    assert!(escape.contains("outside the workspace"), "{escape}");
    h.stop().await;
}
