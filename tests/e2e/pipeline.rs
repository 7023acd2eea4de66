//! The durable pipeline end to end: the tool loop, providers failing over, restarts in the
//! middle of a turn, redelivery, outbox retries, cancellation.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::TimeZone;
use hearth::clock::ManualClock;
use hearth::config::ProviderKind;
use hearth::tool::{ToolError, ToolInfo, ToolRegistry};
use hearth_channel::{Capabilities, ChannelError, MemoryChannel};
use hearth_testkit::{FakeAnthropic, FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::support::{CHAT, Hearth, TestTool, USER, WAIT, eventually, provider, tool_results};

/// Side effects a test can count: `record` appends its argument, `slow` starts and never ends.
#[derive(Default)]
struct Effects {
    recorded: std::sync::Mutex<Vec<String>>,
    slow_started: AtomicUsize,
}

fn tools(effects: &Arc<Effects>) -> impl Fn() -> ToolRegistry + Send + Sync + 'static {
    let effects = effects.clone();
    move || {
        let mut registry = ToolRegistry::with_builtin();
        let schema = json!({"type": "object", "properties": {"what": {"type": "string"}}});
        let record = ToolInfo::new("record", "test", "Record something", schema.clone());
        let slow = ToolInfo::new("slow", "test", "Takes forever", schema);
        let recorder = effects.clone();
        let record = TestTool::answering(record, move |args| {
            let what = args["what"]
                .as_str()
                .ok_or_else(|| ToolError::InvalidArguments("`what` is required".into()))?;
            let mut recorded = recorder.recorded.lock().expect("lock");
            recorded.push(what.to_string());
            Ok(format!("recorded {what} (#{})", recorded.len()))
        });
        let starter = effects.clone();
        let slow = TestTool::hanging(slow, move |_| {
            starter.slow_started.fetch_add(1, Ordering::SeqCst);
            Ok("finally".into())
        });
        registry.register(record).expect("register");
        registry.register(slow).expect("register");
        registry
    }
}

fn call(id: &str, name: &str, args: &str) -> ToolCallSpec {
    ToolCallSpec::new(id, name, args)
}

fn recorded(effects: &Effects) -> Vec<String> {
    effects.recorded.lock().expect("lock").clone()
}

#[tokio::test]
async fn the_tool_loop_runs_two_rounds_including_parallel_calls() {
    let effects = Arc::new(Effects::default());
    let mut h = Hearth::new().await.with_tools(tools(&effects));
    h.start().await;
    h.llm.push(Reply::tool_calls(vec![call(
        "c1",
        "record",
        r#"{"what":"coffee"}"#,
    )]));
    h.llm.push(Reply::tool_calls(vec![
        call("c2", "record", r#"{"what":"tea"}"#),
        call("c3", "record", r#"{"what":"cake"}"#),
    ]));
    h.llm.push(Reply::text("All three recorded."));
    let reply = h.say("I spent money on coffee, tea and cake").await;
    assert_eq!(reply.text, "💰 Finance\n\nAll three recorded.");

    let requests = h.llm.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        tool_results(&requests[1]),
        vec![("c1".into(), "recorded coffee (#1)".into())]
    );
    let third = tool_results(&requests[2]);
    assert_eq!(third.len(), 3, "{third:?}");
    let mut items = recorded(&effects);
    items.sort();
    assert_eq!(items, vec!["cake", "coffee", "tea"]);
    // Tools are offered with their schema.
    assert_eq!(requests[0]["tools"][0]["function"]["name"], "record");

    let turn = h
        .daemon()
        .store()
        .turn_for_inbox(1)
        .await
        .expect("db")
        .expect("turn");
    assert_eq!((turn.llm_calls, turn.tool_calls), (3, 3));
    assert!(turn.input_tokens > 0, "usage is stored per turn");
    h.stop().await;
}

#[tokio::test]
async fn streamed_tool_call_deltas_are_assembled_and_previews_are_replaced() {
    let effects = Arc::new(Effects::default());
    let mut h = Hearth::new().await.with_tools(tools(&effects));
    h.channel = Arc::new(
        MemoryChannel::new("memory").with_capabilities(Capabilities {
            edits: true,
            preview: Some(Duration::ZERO),
            ..Capabilities::default()
        }),
    );
    h.config.runtime.stream = true;
    h.start().await;
    h.llm.push(
        Reply::tool_calls(vec![
            call(
                "c1",
                "record",
                r#"{"what":"a rather long value that arrives in several pieces"}"#,
            ),
            call("c2", "record", r#"{"what":"second"}"#),
        ])
        .streamed(true),
    );
    h.llm
        .push(Reply::text("Recorded both of them for you.").streamed(true));
    let reply = h.say("budget update please").await;
    assert!(h.llm.requests()[0]["stream"] == true);
    let mut items = recorded(&effects);
    items.sort();
    assert_eq!(
        items,
        vec![
            "a rather long value that arrives in several pieces",
            "second"
        ]
    );
    assert!(
        reply.text.ends_with("Recorded both of them for you."),
        "{}",
        reply.text
    );
    assert_eq!(
        h.channel.sent().len(),
        1,
        "the preview was replaced, not followed by a second message"
    );
    h.stop().await;
}

#[tokio::test]
async fn malformed_tool_calls_are_answered_to_the_model_without_a_crash() {
    let effects = Arc::new(Effects::default());
    let mut h = Hearth::new().await.with_tools(tools(&effects));
    h.start().await;
    h.llm.push(Reply::tool_calls(vec![
        call("c1", "record", r#"{"what": "unterminated"#),
        call("c2", "no_such_tool", "{}"),
        call("c3", "record", "[1,2]"),
        call("c4", "record", r#"{"nothing": 1}"#),
    ]));
    h.llm.push(Reply::text("Sorry, I fixed it."));
    let reply = h.say("I paid something").await;
    assert!(reply.text.ends_with("Sorry, I fixed it."));
    // Results arrive in the order the calls finished; look them up by call id.
    let results: std::collections::HashMap<String, String> =
        tool_results(&h.llm.requests()[1]).into_iter().collect();
    assert_eq!(results.len(), 4);
    assert!(
        results["c1"].contains("not valid JSON"),
        "{}",
        results["c1"]
    );
    assert!(
        results["c2"].contains("Unknown tool `no_such_tool`"),
        "{}",
        results["c2"]
    );
    assert!(
        results["c3"].contains("must be a JSON object"),
        "{}",
        results["c3"]
    );
    assert!(
        results["c4"].contains("`what` is required"),
        "{}",
        results["c4"]
    );
    assert!(recorded(&effects).is_empty());
    h.stop().await;
}

#[tokio::test]
async fn providers_fall_back_on_500_and_429_but_not_on_401() {
    let backup = FakeOpenAi::start().await;
    let mut h = Hearth::new().await;
    h.config.providers[0].fallbacks = vec!["backup".into()];
    h.config
        .providers
        .push(provider("backup", &backup.base_url()));
    h.start().await;

    h.llm.push(Reply::error(500, "internal error"));
    backup.push(Reply::text("from backup after 500"));
    assert_eq!(h.say("hi").await.text, "from backup after 500");

    h.llm.push(Reply::error(429, "slow down"));
    backup.push(Reply::text("from backup after 429"));
    assert_eq!(h.say("hi again").await.text, "from backup after 429");

    h.llm.push(Reply::error(401, "invalid api key"));
    let reply = h.say("and again").await;
    assert!(
        reply.text.contains("refused the credentials"),
        "{}",
        reply.text
    );
    assert_eq!(
        backup.request_count(),
        2,
        "a 401 does not move to the fallback"
    );
    h.stop().await;
}

#[tokio::test]
async fn retry_after_is_honoured_on_the_test_clock() {
    let clock = ManualClock::new(chrono::Utc.with_ymd_and_hms(2026, 11, 21, 9, 0, 0).unwrap());
    let mut h = Hearth::new().await.with_clock(clock.clone());
    h.config.providers[0].max_retries = 2;
    h.start().await;
    h.llm.push(Reply::error(429, "rate limited").retry_after(7));
    h.llm.push(Reply::text("after waiting"));
    let started = std::time::Instant::now();
    assert_eq!(h.say("hello").await.text, "after waiting");
    assert!(
        clock.sleeps().contains(&Duration::from_secs(7)),
        "{:?}",
        clock.sleeps()
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the wait ran on the test clock"
    );
    h.stop().await;
}

#[tokio::test]
async fn anthropic_provider_answers_through_the_daemon() {
    let anthropic = FakeAnthropic::start().await;
    let mut h = Hearth::new().await;
    h.config.providers[0].kind = ProviderKind::Anthropic;
    h.config.providers[0].base_url = anthropic.base_url();
    h.start().await;
    anthropic.push(Reply::text("Hello from Claude."));
    assert_eq!(h.say("hello").await.text, "Hello from Claude.");
    let request = anthropic.last_request().expect("request");
    assert_eq!(
        request["system"]
            .as_str()
            .map(|s| s.starts_with("PROMPT:general")),
        Some(true)
    );
    assert_eq!(request["messages"][0]["role"], "user");
    h.stop().await;
}

#[tokio::test]
async fn a_redelivered_event_is_answered_once() {
    let mut h = Hearth::new().await;
    h.start().await;
    let id = h.channel.push_text(CHAT, USER, "hello");
    h.channel.wait_for_sent(1, WAIT).await;
    assert!(h.channel.redeliver(&id));
    h.channel.push_text(CHAT, USER, "second");
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(h.channel.sent().len(), 2, "{sent:?}");
    assert_eq!(h.llm.request_count(), 2);
    h.stop().await;
}

#[tokio::test]
async fn a_restart_after_a_finished_tool_neither_reruns_it_nor_answers_twice() {
    let effects = Arc::new(Effects::default());
    let mut h = Hearth::new().await.with_tools(tools(&effects));
    h.start().await;
    h.llm.push(Reply::tool_calls(vec![call(
        "c1",
        "record",
        r#"{"what":"rent"}"#,
    )]));
    // The model takes its time with the second answer; the daemon goes down meanwhile.
    h.llm
        .push(Reply::text("too late").delay(Duration::from_secs(30)));
    h.channel.push_text(CHAT, USER, "I paid the rent");
    h.llm.wait_for_requests(2, WAIT).await;
    assert_eq!(recorded(&effects), vec!["rent"]);
    h.stop().await;
    assert!(h.channel.sent().is_empty());

    h.llm.push(Reply::text("Rent recorded."));
    h.start().await;
    let sent = h.channel.wait_for_sent(1, WAIT).await;
    assert_eq!(
        sent[0].text, "Rent recorded.",
        "resumed turns do not repeat the agent note"
    );
    assert_eq!(
        recorded(&effects),
        vec!["rent"],
        "the finished tool did not run again"
    );
    let third = h.llm.requests()[2].clone();
    assert_eq!(
        tool_results(&third),
        vec![("c1".into(), "recorded rent (#1)".into())]
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.channel.sent().len(), 1, "exactly one reply");
    h.stop().await;
}

#[tokio::test]
async fn a_tool_running_at_shutdown_is_reported_interrupted_and_never_rerun() {
    let effects = Arc::new(Effects::default());
    let mut h = Hearth::new().await.with_tools(tools(&effects));
    h.start().await;
    h.llm
        .push(Reply::tool_calls(vec![call("c1", "slow", "{}")]));
    h.channel.push_text(CHAT, USER, "/agent tasks");
    h.channel.wait_for_sent(1, WAIT).await;
    h.channel.push_text(CHAT, USER, "do the slow thing");
    eventually("the slow tool to start", async || {
        effects.slow_started.load(Ordering::SeqCst) == 1
    })
    .await;
    h.stop().await;

    h.llm.push(Reply::text("It was interrupted; please check."));
    h.start().await;
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "It was interrupted; please check.");
    assert_eq!(
        effects.slow_started.load(Ordering::SeqCst),
        1,
        "never run twice"
    );
    let results = tool_results(&h.llm.requests()[1]);
    assert!(
        results[0].1.contains("interrupted") && results[0].1.contains("NOT run again"),
        "{results:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn cancel_stops_a_running_turn_with_one_message() {
    let effects = Arc::new(Effects::default());
    let mut h = Hearth::new().await.with_tools(tools(&effects));
    h.start().await;
    h.say("/agent tasks").await;
    h.llm
        .push(Reply::tool_calls(vec![call("c1", "slow", "{}")]));
    h.channel.push_text(CHAT, USER, "do the slow thing");
    eventually("the slow tool to start", async || {
        effects.slow_started.load(Ordering::SeqCst) == 1
    })
    .await;
    h.channel.push_text(CHAT, USER, "/cancel");
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "⏹ Cancelled.");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        h.channel.sent().len(),
        2,
        "the /cancel itself adds no second message"
    );

    // The conversation goes on normally, with a well-formed history.
    h.llm.push(Reply::text("Ready."));
    assert_eq!(h.say("next").await.text, "Ready.");
    let results = tool_results(&h.llm.last_request().expect("request"));
    assert!(results[0].1.contains("Cancelled"), "{results:?}");
    h.stop().await;
}

#[tokio::test]
async fn delivery_retries_rate_limits_and_keeps_order() {
    let mut h = Hearth::new().await;
    h.start().await;
    h.channel.fail_next_sends(vec![
        ChannelError::rate_limited(Duration::from_millis(300)),
        ChannelError::transient("connection reset"),
    ]);
    h.llm.push(Reply::text("one"));
    h.llm.push(Reply::text("two"));
    h.channel.push_text(CHAT, USER, "first");
    h.llm.wait_for_requests(1, WAIT).await;
    h.channel.push_text(CHAT, USER, "second");
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(
        sent.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
        vec!["one", "two"]
    );
    assert_eq!(
        h.channel.send_attempts().len(),
        4,
        "two failed attempts, then both delivered"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_rejected_reply_is_given_up_without_blocking_the_chat() {
    let mut h = Hearth::new().await;
    h.start().await;
    h.channel
        .fail_next_sends(vec![ChannelError::rejected("bot was blocked")]);
    h.channel.push_text(CHAT, USER, "first");
    h.llm.wait_for_requests(1, WAIT).await;
    assert_eq!(h.say("second").await.text, "ok");
    assert_eq!(h.channel.sent().len(), 1);
    h.stop().await;
}

#[tokio::test]
async fn health_and_metrics_answer() {
    let mut h = Hearth::new().await;
    h.start().await;
    h.say("hello").await;
    let addr = h.daemon().http_addr().expect("http listening");
    let health: Value = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(health["status"], "ok");
    assert_eq!(health["channels"]["memory"]["state"], "connected");
    let metrics = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .expect("get")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("hearth_messages_in_total{channel=\"memory\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("hearth_messages_out_total{channel=\"memory\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("hearth_turn_latency_seconds_count"),
        "{metrics}"
    );
    h.stop().await;
}

fn photo_message(id: &str) -> hearth_channel::Inbound {
    hearth_channel::Inbound {
        platform_id: id.into(),
        chat: hearth_channel::ChatRef::new(CHAT),
        sender: hearth_channel::Sender::new(USER),
        kind: hearth_channel::InboundKind::Message {
            text: "what is this?".into(),
            attachments: vec![hearth_channel::Attachment {
                kind: hearth_channel::AttachmentKind::Image,
                mime: "image/png".into(),
                name: Some("photo.png".into()),
                data_base64: Some("iVBORw0KGgo=".into()),
                text: None,
                source: None,
                size: None,
            }],
            message_id: Some("m1".into()),
            reply_to: None,
        },
        reply_context: None,
        agent: None,
    }
}

#[tokio::test]
async fn images_reach_vision_models_and_others_get_a_note() {
    let mut h = Hearth::new().await;
    h.start().await;
    h.channel.push(photo_message("p1"));
    h.channel.wait_for_sent(1, WAIT).await;
    let content = h.llm.requests()[0]["messages"][1]["content"].clone();
    assert!(
        content.to_string().contains("cannot see images"),
        "{content}"
    );
    assert!(!content.to_string().contains("iVBORw0KGgo="));
    h.stop().await;

    h.config.providers[0].vision = true;
    h.start().await;
    h.channel.push(photo_message("p2"));
    h.channel.wait_for_sent(2, WAIT).await;
    let messages = h.llm.requests()[1]["messages"].clone();
    assert!(
        messages
            .to_string()
            .contains("data:image/png;base64,iVBORw0KGgo="),
        "{messages}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_graceful_stop_lets_a_running_turn_finish_and_deliver() {
    let mut h = Hearth::new().await;
    h.config.daemon.shutdown_grace_secs = 10;
    h.start().await;
    h.llm
        .push(Reply::text("made it").delay(Duration::from_millis(500)));
    h.channel.push_text(CHAT, USER, "hello");
    h.llm.wait_for_requests(1, WAIT).await;
    h.stop().await;
    let sent = h.channel.sent();
    assert_eq!(
        sent.len(),
        1,
        "the reply went out before the daemon stopped"
    );
    assert_eq!(sent[0].text, "made it");
}

fn voice_message(id: &str) -> hearth_channel::Inbound {
    hearth_channel::Inbound {
        platform_id: id.into(),
        chat: hearth_channel::ChatRef::new(CHAT),
        sender: hearth_channel::Sender::new(USER),
        kind: hearth_channel::InboundKind::Message {
            text: String::new(),
            attachments: vec![hearth_channel::Attachment {
                kind: hearth_channel::AttachmentKind::Voice,
                mime: "audio/ogg".into(),
                name: None,
                data_base64: Some("T2dnUwACAAAA".into()),
                text: None,
                source: None,
                size: None,
            }],
            message_id: None,
            reply_to: None,
        },
        reply_context: None,
        agent: None,
    }
}

#[tokio::test]
async fn voice_messages_are_transcribed_when_set_up_and_explained_when_not() {
    let mut h = Hearth::new().await;
    h.start().await;
    h.channel.push(voice_message("v1"));
    let sent = h.channel.wait_for_sent(1, WAIT).await;
    assert!(
        sent[0].text.contains("Voice messages are not set up"),
        "{}",
        sent[0].text
    );
    assert_eq!(h.llm.request_count(), 0);
    h.stop().await;

    // A local OpenAI-compatible transcription endpoint.
    let app = axum::Router::new().route(
        "/v1/audio/transcriptions",
        axum::routing::post(|body: axum::body::Bytes| async move {
            let form = String::from_utf8_lossy(&body).to_string();
            assert!(
                form.contains("name=\"model\"") && form.contains("whisper-1"),
                "{form}"
            );
            axum::Json(json!({
                "text": "I spent 4 euros on bread",
                "usage": {"type": "duration", "seconds": 90}
            }))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    h.config.transcription = Some(hearth::config::TranscriptionConfig {
        base_url: format!("http://{addr}/v1"),
        api_key_env: None,
        model: "whisper-1".into(),
        timeout_secs: 10,
        price_per_minute: 0.006,
        price_input_per_mtok: 0.0,
        price_output_per_mtok: 0.0,
    });
    h.start().await;
    h.llm.push(Reply::text("Noted the bread."));
    h.channel.push(voice_message("v2"));
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(
        sent[1].text, "💰 Finance\n\nNoted the bread.",
        "the transcript was routed like text"
    );
    assert_eq!(last_user_text(&h), "I spent 4 euros on bread");
    // The transcription is on record with what it cost: 1.5 minutes × $0.006.
    let (provider, model, channel, cost): (String, String, String, i64) = sqlx::query_as(
        "SELECT provider, model, channel, cost_nusd FROM model_calls
         WHERE purpose = 'transcription' AND user_id IS NOT NULL",
    )
    .fetch_one(h.daemon().store().pool())
    .await
    .expect("the transcription's cost record");
    assert_eq!(
        (provider.as_str(), model.as_str(), channel.as_str(), cost),
        ("transcription", "whisper-1", "memory", 9_000_000)
    );
    h.stop().await;
    server.abort();
}

fn last_user_text(h: &Hearth) -> String {
    let request = h.llm.last_request().expect("request");
    let user = request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .cloned();
    user.map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}
