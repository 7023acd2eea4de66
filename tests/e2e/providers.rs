//! Providers against the fake OpenAI and Anthropic servers: the JSON they send, streaming
//! assembly, and how retries and fallbacks react to each kind of failure.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth::clock::{ManualClock, SharedClock, SystemClock};
use hearth::config::{ProviderConfig, ProviderKind, Secret};
use hearth::provider::anthropic::AnthropicProvider;
use hearth::provider::openai::OpenAiProvider;
use hearth::provider::{
    ChatMessage, ChatRequest, ChatResponse, ContentPart, Provider, ProviderErrorKind, Providers,
    StreamEvent, ToolCall, ToolSpec,
};
use hearth_testkit::{FakeAnthropic, FakeOpenAi, Reply, ToolCallSpec};
use serde_json::json;
use tokio::sync::mpsc;

fn init() {
    // Both ring and aws-lc-rs are compiled in, so rustls needs one chosen; Err only means an
    // earlier test in this binary already installed it.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

fn config(name: &str, kind: ProviderKind, base_url: String) -> ProviderConfig {
    ProviderConfig {
        timeout_secs: 5,
        max_retries: 0,
        max_tokens: 256,
        vision: true,
        ..ProviderConfig::new(name, kind, &base_url, &format!("{name}-model"))
    }
}

fn manual_clock() -> Arc<ManualClock> {
    ManualClock::new(chrono::Utc::now())
}

/// A conversation with every kind of message: image, tool calls, tool results, then more text.
fn conversation(stream: bool) -> ChatRequest {
    ChatRequest {
        system: "You are hearth.".into(),
        messages: vec![
            ChatMessage::User {
                content: vec![
                    ContentPart::Text {
                        text: "What is in this picture? Add it to my list.".into(),
                    },
                    ContentPart::Image {
                        mime: "image/png".into(),
                        data_base64: "iVBORw0KGgo=".into(),
                    },
                ],
            },
            ChatMessage::Assistant {
                text: String::new(),
                tool_calls: vec![
                    ToolCall {
                        id: "call_a".into(),
                        name: "add_task".into(),
                        arguments: r#"{"title":"buy milk"}"#.into(),
                    },
                    ToolCall {
                        id: "call_b".into(),
                        name: "list_tasks".into(),
                        arguments: "not json".into(),
                    },
                ],
            },
            ChatMessage::Tool {
                call_id: "call_a".into(),
                name: "add_task".into(),
                content: "added".into(),
                is_error: false,
            },
            ChatMessage::Tool {
                call_id: "call_b".into(),
                name: "list_tasks".into(),
                content: "bad arguments".into(),
                is_error: true,
            },
            ChatMessage::user("Thanks!"),
        ],
        tools: vec![ToolSpec {
            name: "add_task".into(),
            description: "Adds a task".into(),
            parameters: json!({"type": "object", "properties": {"title": {"type": "string"}}}),
        }]
        .into(),
        temperature: Some(0.2),
        max_tokens: None,
        model: None,
        stream,
        tool_choice: None,
    }
}

fn collect_text(rx: &mut mpsc::UnboundedReceiver<StreamEvent>) -> (String, usize) {
    let mut text = String::new();
    let mut restarts = 0;
    while let Ok(event) = rx.try_recv() {
        match event {
            StreamEvent::Text(t) => text.push_str(&t),
            StreamEvent::Restart => {
                restarts += 1;
                text.clear();
            }
        }
    }
    (text, restarts)
}

/// A streamed completion of [`conversation`]: the answer, and the text and restarts the stream
/// showed.
async fn complete_streamed(client: &dyn Provider) -> (ChatResponse, (String, usize)) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let answer = client
        .complete(&conversation(true), Some(&tx))
        .await
        .expect("answer");
    (answer, collect_text(&mut rx))
}

/// The calls of an answer are `want`: the same ids, names and arguments in the same order.
fn assert_calls(got: &[ToolCall], want: &[ToolCallSpec]) {
    let got: Vec<_> = got.iter().map(|c| (&c.id, &c.name, &c.arguments)).collect();
    let want: Vec<_> = want
        .iter()
        .map(|c| (&c.id, &c.name, &c.arguments))
        .collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn openai_wire_format() {
    init();
    let server = FakeOpenAi::start().await;
    server.push(Reply::text("A cat. Added.").usage(40, 9));
    let mut cfg = config("local", ProviderKind::Openai, server.base_url());
    cfg.base_url.push('/'); // a trailing slash must not matter
    let client = OpenAiProvider::new(&cfg, Some(Secret::new("sk-test"))).expect("client");

    let answer = client
        .complete(&conversation(false), None)
        .await
        .expect("answer");
    assert_eq!(answer.text, "A cat. Added.");
    assert_eq!(
        (answer.usage.input_tokens, answer.usage.output_tokens),
        (40, 9)
    );
    assert_eq!(answer.stop_reason.as_deref(), Some("stop"));
    assert_eq!(
        (answer.provider.as_str(), answer.model.as_str()),
        ("local", "local-model")
    );

    let recorded = server.recorded();
    assert_eq!(recorded[0].header("authorization"), Some("Bearer sk-test"));
    let body = &recorded[0].body;
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "You are hearth."})
    );
    assert_eq!(
        messages[1]["content"][0],
        json!({"type": "text", "text": "What is in this picture? Add it to my list."})
    );
    assert_eq!(
        messages[1]["content"][1],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}})
    );
    assert_eq!(messages[2]["content"], serde_json::Value::Null);
    assert_eq!(
        messages[2]["tool_calls"][1],
        json!({"id": "call_b", "type": "function", "function": {"name": "list_tasks", "arguments": "not json"}})
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_a", "content": "added"})
    );
    assert_eq!(messages[4]["tool_call_id"], "call_b");
    assert_eq!(messages[5], json!({"role": "user", "content": "Thanks!"}));
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "add_task");
    assert_eq!(body["max_tokens"], 256);
    assert!(body.get("stream").is_none());

    // Without a key there is no Authorization header at all (local servers).
    let keyless = OpenAiProvider::new(&cfg, None).expect("client");
    keyless
        .complete(&conversation(false), None)
        .await
        .expect("answer");
    assert_eq!(server.recorded()[1].header("authorization"), None);
}

#[tokio::test]
async fn anthropic_wire_format() {
    init();
    let server = FakeAnthropic::start().await;
    server.require_api_key("sk-ant-test");
    server.push(
        Reply::call("toolu_1", "add_task", r#"{"title":"x"}"#)
            .with_text("Adding.")
            .usage(30, 8),
    );
    let cfg = config("claude", ProviderKind::Anthropic, server.base_url());
    let client = AnthropicProvider::new(&cfg, Some(Secret::new("sk-ant-test"))).expect("client");

    let answer = client
        .complete(&conversation(false), None)
        .await
        .expect("answer");
    assert_eq!(answer.text, "Adding.");
    assert_eq!(answer.tool_calls.len(), 1);
    assert_eq!(answer.tool_calls[0].id, "toolu_1");
    let args: serde_json::Value =
        serde_json::from_str(&answer.tool_calls[0].arguments).expect("json");
    assert_eq!(args, json!({"title": "x"}));
    assert_eq!(answer.stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        (answer.usage.input_tokens, answer.usage.output_tokens),
        (30, 8)
    );

    let recorded = server.recorded();
    assert_eq!(recorded[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(recorded[0].header("x-api-key"), Some("sk-ant-test"));
    let body = &recorded[0].body;
    assert_eq!(body["system"], "You are hearth.");
    assert_eq!(body["max_tokens"], 256);
    assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(
        messages.len(),
        3,
        "tool results and the next text merge into one user message"
    );
    assert_eq!(
        messages[0]["content"][1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}})
    );
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(
        messages[1]["content"][0]["input"],
        json!({"title": "buy milk"})
    );
    assert_eq!(
        messages[1]["content"][1]["input"],
        json!({}),
        "invalid arguments become {{}}"
    );
    assert_eq!(
        messages[2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "call_a", "content": "added", "is_error": false},
            {"type": "tool_result", "tool_use_id": "call_b", "content": "bad arguments", "is_error": true},
            {"type": "text", "text": "Thanks!"},
        ])
    );

    // A base URL ending in /v1 is accepted as well.
    let cfg_v1 = config(
        "claude",
        ProviderKind::Anthropic,
        format!("{}/v1", server.base_url()),
    );
    let client = AnthropicProvider::new(&cfg_v1, Some(Secret::new("sk-ant-test"))).expect("client");
    client
        .complete(&conversation(false), None)
        .await
        .expect("answer via /v1");
}

#[tokio::test]
async fn openai_streams_text_and_usage() {
    init();
    let server = FakeOpenAi::start().await;
    let text = "Grüße aus der Küche — 😀 done";
    server.push(Reply::text(text).usage(21, 13).chunk_bytes(5));
    let client = OpenAiProvider::new(
        &config("local", ProviderKind::Openai, server.base_url()),
        None,
    )
    .expect("client");
    let (answer, shown) = complete_streamed(&client).await;
    assert_eq!(answer.text, text);
    assert_eq!(shown, (text.to_string(), 0));
    assert_eq!(
        (answer.usage.input_tokens, answer.usage.output_tokens),
        (21, 13)
    );
    let body = server.last_request().expect("request");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
}

fn two_calls() -> Vec<ToolCallSpec> {
    vec![
        ToolCallSpec::new(
            "call_1",
            "add_task",
            r#"{"title":"buy milk and bread","due":"2025-01-01T09:00:00"}"#,
        ),
        ToolCallSpec::new(
            "call_2",
            "search_notes",
            r#"{"query":"Rezept für Käsekuchen","limit":5}"#,
        ),
    ]
}

#[tokio::test]
async fn openai_streamed_tool_calls_are_assembled() {
    init();
    let server = FakeOpenAi::start().await;
    server.push(Reply::tool_calls(two_calls()).with_text("Let me do that."));
    let client = OpenAiProvider::new(
        &config("local", ProviderKind::Openai, server.base_url()),
        None,
    )
    .expect("client");
    let (answer, shown) = complete_streamed(&client).await;
    assert_eq!(answer.text, "Let me do that.");
    assert_eq!(shown.0, "Let me do that.");
    assert_eq!(answer.stop_reason.as_deref(), Some("tool_calls"));
    assert_calls(&answer.tool_calls, &two_calls());
}

#[tokio::test]
async fn anthropic_streams_text_tools_and_usage() {
    init();
    let server = FakeAnthropic::start().await;
    server.push(
        Reply::tool_calls(two_calls())
            .with_text("Sure — doing it.")
            .usage(50, 22)
            .chunk_bytes(7),
    );
    server.push(Reply::text("Just text.").usage(5, 3));
    let client = AnthropicProvider::new(
        &config("claude", ProviderKind::Anthropic, server.base_url()),
        None,
    )
    .expect("client");
    let (answer, shown) = complete_streamed(&client).await;
    assert_eq!(answer.text, "Sure — doing it.");
    assert_eq!(shown.0, "Sure — doing it.");
    assert_eq!(answer.stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        (answer.usage.input_tokens, answer.usage.output_tokens),
        (50, 22)
    );
    assert_calls(&answer.tool_calls, &two_calls());
    assert_eq!(server.last_request().expect("request")["stream"], true);

    let (answer, _) = complete_streamed(&client).await;
    assert_eq!(
        (answer.text.as_str(), answer.stop_reason.as_deref()),
        ("Just text.", Some("end_turn"))
    );
    assert_eq!(
        (answer.usage.input_tokens, answer.usage.output_tokens),
        (5, 3)
    );
}

#[tokio::test]
async fn retries_a_500_then_succeeds() {
    init();
    let server = FakeOpenAi::start().await;
    server.push(Reply::error(500, "boom"));
    server.push(Reply::text("second time lucky"));
    let mut cfg = config("local", ProviderKind::Openai, server.base_url());
    cfg.max_retries = 2;
    let clock = manual_clock();
    let providers = Providers::from_parts(vec![(cfg, None)], clock.clone()).expect("providers");
    let chain = providers.chain("default", None).expect("chain");
    let answer = chain
        .complete(&conversation(false), None)
        .await
        .expect("answer");
    assert_eq!(answer.text, "second time lucky");
    assert_eq!(server.request_count(), 2);
    assert_eq!(clock.sleeps().len(), 1);
    assert!(clock.sleeps()[0] <= Duration::from_millis(500));
}

/// A primary OpenAI-compatible provider falling back to an Anthropic one.
async fn primary_and_fallback(clock: SharedClock) -> (FakeOpenAi, FakeAnthropic, Providers) {
    let primary = FakeOpenAi::start().await;
    let secondary = FakeAnthropic::start().await;
    let mut first = config("primary", ProviderKind::Openai, primary.base_url());
    first.fallbacks = vec!["backup".into()];
    first.timeout_secs = 1;
    let second = config("backup", ProviderKind::Anthropic, secondary.base_url());
    secondary.set_responder(|_| Reply::text("from backup"));
    let providers =
        Providers::from_parts(vec![(first, None), (second, None)], clock).expect("providers");
    (primary, secondary, providers)
}

#[tokio::test]
async fn falls_back_on_500_and_429() {
    init();
    let (primary, secondary, providers) = primary_and_fallback(manual_clock()).await;
    assert_eq!(providers.names(), ["primary", "backup"]);
    let chain = providers
        .chain("primary", Some("big-model"))
        .expect("chain");
    primary.push(Reply::error(500, "internal"));
    primary.push(Reply::error(429, "slow down"));
    for _ in 0..2 {
        let answer = chain
            .complete(&conversation(false), None)
            .await
            .expect("answer");
        assert_eq!(answer.text, "from backup");
        assert_eq!(answer.provider, "backup");
    }
    assert_eq!(primary.requests()[0]["model"], "big-model");
    assert_eq!(
        secondary.requests()[0]["model"],
        "backup-model",
        "fallbacks use their own model"
    );
    assert_eq!(secondary.request_count(), 2);
}

#[tokio::test]
async fn client_errors_do_not_fall_back() {
    init();
    let (primary, secondary, providers) = primary_and_fallback(manual_clock()).await;
    let chain = providers.chain("primary", None).expect("chain");
    for status in [400, 401, 403, 404] {
        primary.push(Reply::error(status, format!("refused with {status}")));
        let err = chain
            .complete(&conversation(false), None)
            .await
            .expect_err("no fallback");
        assert_eq!(err.kind, ProviderErrorKind::Client { status });
        assert_eq!(err.provider, "primary");
        assert!(
            err.to_string().contains(&format!("refused with {status}")),
            "{err}"
        );
    }
    assert_eq!(secondary.request_count(), 0);
}

#[tokio::test]
async fn retry_after_is_honoured_on_the_clock() {
    init();
    let server = FakeOpenAi::start().await;
    server.push(Reply::error(429, "rate limited").retry_after(7));
    server.push(Reply::text("after waiting"));
    let mut cfg = config("local", ProviderKind::Openai, server.base_url());
    cfg.max_retries = 3;
    let clock = manual_clock();
    let providers = Providers::from_parts(vec![(cfg, None)], clock.clone()).expect("providers");
    let started = Instant::now();
    let answer = providers
        .chain("local", None)
        .expect("chain")
        .complete(&conversation(false), None)
        .await
        .expect("answer");
    assert_eq!(answer.text, "after waiting");
    assert_eq!(clock.sleeps(), vec![Duration::from_secs(7)]);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "waited on the manual clock only"
    );
}

#[tokio::test]
async fn timeout_is_reported_and_falls_back() {
    init();
    let (primary, _secondary, providers) = primary_and_fallback(manual_clock()).await;
    primary.push(Reply::text("too late").delay(Duration::from_secs(3)));
    let answer = providers
        .chain("primary", None)
        .expect("chain")
        .complete(&conversation(false), None)
        .await
        .expect("answer");
    assert_eq!(answer.provider, "backup");

    primary.push(Reply::text("too late").delay(Duration::from_secs(3)));
    let mut cfg = config("primary", ProviderKind::Openai, primary.base_url());
    cfg.timeout_secs = 1;
    let client = OpenAiProvider::new(&cfg, None).expect("client");
    let err = client
        .complete(&conversation(false), None)
        .await
        .expect_err("timeout");
    assert_eq!(err.kind, ProviderErrorKind::Timeout);
}

#[tokio::test]
async fn malformed_answers_are_protocol_errors_without_fallback() {
    init();
    let (primary, secondary, providers) = primary_and_fallback(manual_clock()).await;
    let chain = providers.chain("primary", None).expect("chain");
    primary.push(Reply::raw(200, "application/json", "{\"choices\": [ {oops"));
    let err = chain
        .complete(&conversation(false), None)
        .await
        .expect_err("protocol");
    assert_eq!(err.kind, ProviderErrorKind::Protocol);
    primary.push(Reply::raw(200, "text/event-stream", "data: {not json}\n\n"));
    let err = chain
        .complete(&conversation(true), None)
        .await
        .expect_err("protocol");
    assert_eq!(err.kind, ProviderErrorKind::Protocol);
    assert_eq!(secondary.request_count(), 0);

    let anthropic = AnthropicProvider::new(
        &config("c", ProviderKind::Anthropic, secondary.base_url()),
        None,
    )
    .expect("client");
    secondary.push(Reply::raw(200, "application/json", "[1, 2"));
    let err = anthropic
        .complete(&conversation(false), None)
        .await
        .expect_err("protocol");
    assert_eq!(err.kind, ProviderErrorKind::Protocol);
}

#[tokio::test]
async fn a_cut_stream_is_a_network_error_and_is_retried() {
    init();
    let server = FakeAnthropic::start().await;
    let cfg = config("claude", ProviderKind::Anthropic, server.base_url());
    let client = AnthropicProvider::new(&cfg, None).expect("client");
    server.push(Reply::text("this will be cut off").cut_after(4));
    let err = client
        .complete(&conversation(true), None)
        .await
        .expect_err("cut");
    assert_eq!(err.kind, ProviderErrorKind::Network);

    let mut cfg = cfg;
    cfg.max_retries = 1;
    let providers = Providers::from_parts(vec![(cfg, None)], manual_clock()).expect("providers");
    server.push(Reply::text("first try, cut").cut_after(5));
    server.push(Reply::text("complete answer"));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let answer = providers
        .chain("claude", None)
        .expect("chain")
        .complete(&conversation(true), Some(&tx))
        .await
        .expect("answer");
    assert_eq!(answer.text, "complete answer");
    let (streamed, restarts) = collect_text(&mut rx);
    assert_eq!((streamed.as_str(), restarts), ("complete answer", 1));

    // The same for OpenAI's format.
    let openai = FakeOpenAi::start().await;
    openai.push(Reply::text("cut here please").cut_after(3));
    let client = OpenAiProvider::new(
        &config("local", ProviderKind::Openai, openai.base_url()),
        None,
    )
    .expect("client");
    let err = client
        .complete(&conversation(true), None)
        .await
        .expect_err("cut");
    assert_eq!(err.kind, ProviderErrorKind::Network);
}

#[tokio::test]
async fn overloaded_mid_stream_falls_back() {
    init();
    let primary = FakeAnthropic::start().await;
    let backup = FakeOpenAi::start().await;
    primary.push(Reply::text("never finished").stream_error("overloaded_error", "Overloaded"));
    backup.push(Reply::text("backup answer"));
    let mut first = config("claude", ProviderKind::Anthropic, primary.base_url());
    first.fallbacks = vec!["local".into()];
    let second = config("local", ProviderKind::Openai, backup.base_url());
    let providers =
        Providers::from_parts(vec![(first, None), (second, None)], Arc::new(SystemClock))
            .expect("providers");
    let answer = providers
        .chain("default", None)
        .expect("chain")
        .complete(&conversation(true), None)
        .await
        .expect("answer");
    assert_eq!(
        (answer.text.as_str(), answer.provider.as_str()),
        ("backup answer", "local")
    );
}

#[tokio::test]
async fn errors_never_show_the_api_key() {
    init();
    let key = "sk-super-secret-key-123";
    let openai = FakeOpenAi::start().await;
    openai.require_api_key("the-right-key");
    let client = OpenAiProvider::new(
        &config("local", ProviderKind::Openai, openai.base_url()),
        Some(Secret::new(key)),
    )
    .expect("client");
    let err = client
        .complete(&conversation(false), None)
        .await
        .expect_err("401");
    assert_eq!(err.kind, ProviderErrorKind::Client { status: 401 });
    // The fake echoes the key it got; the error must not.
    assert!(err.to_string().contains("Incorrect API key"), "{err}");
    assert!(!err.to_string().contains(key), "{err}");
    assert!(!format!("{err:?}").contains(key), "{err:?}");

    let anthropic = FakeAnthropic::start().await;
    anthropic.require_api_key("the-right-key");
    let client = AnthropicProvider::new(
        &config("claude", ProviderKind::Anthropic, anthropic.base_url()),
        Some(Secret::new(key)),
    )
    .expect("client");
    let err = client
        .complete(&conversation(false), None)
        .await
        .expect_err("401");
    assert_eq!(err.kind, ProviderErrorKind::Client { status: 401 });
    assert!(!format!("{err} {err:?}").contains(key));

    // Network errors name no URL (which could carry a key) either.
    let mut cfg = config(
        "gone",
        ProviderKind::Openai,
        format!("http://127.0.0.1:1/v1?key={key}"),
    );
    cfg.timeout_secs = 2;
    let client = OpenAiProvider::new(&cfg, Some(Secret::new(key))).expect("client");
    let err = client
        .complete(&conversation(false), None)
        .await
        .expect_err("refused");
    assert_eq!(err.kind, ProviderErrorKind::Network);
    assert!(!format!("{err} {err:?}").contains(key), "{err}");
}
