//! Every model call counts (README "Long conversations and cost"): streamed completions that
//! the client stops mid-way, as Open WebUI's Stop button does by closing the connection, are
//! recorded with estimated tokens, move the daily cap until it is reached, and show in
//! `hearth usage` as cut short.

use std::time::Duration;

use futures::StreamExt;
use hearth_testkit::Reply;
use serde_json::{Value, json};

use crate::http::Api;

const WAIT: Duration = Duration::from_secs(30);

/// The text of the content deltas of a streamed answer's body so far.
fn streamed_text(body: &str) -> String {
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .filter_map(|chunk| {
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// Opens a streamed completion in its own conversation and reads it until the model's first
/// words or the budget's line; the text so far and the open stream.
async fn start_stream(
    chat: &Api,
    conversation: &str,
) -> (
    String,
    impl futures::Stream<Item = reqwest::Result<Vec<u8>>>,
) {
    let response = chat
        .client
        .post(chat.process.url("/v1/chat/completions"))
        .bearer_auth(&chat.owner)
        .header("X-Hearth-Conversation", conversation)
        .json(&json!({
            "model": "hearth",
            "stream": true,
            "messages": [{ "role": "user", "content": "count slowly" }],
        }))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 200);
    let mut stream = Box::pin(response.bytes_stream().map(|r| r.map(|b| b.to_vec())));
    let mut body = String::new();
    let read = async {
        loop {
            let text = streamed_text(&body);
            if text.contains("On") || text.contains("budget") {
                return text;
            }
            match stream.next().await {
                Some(Ok(bytes)) => body.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return streamed_text(&body),
            }
        }
    };
    let text = tokio::time::timeout(WAIT, read)
        .await
        .expect("the answer starts in time");
    (text, stream)
}

/// The `total` line of `hearth usage --by model`, split in columns.
fn usage_total(chat: &Api) -> Vec<String> {
    let usage = chat.process.cli(&["usage", "--by", "model"]);
    usage
        .lines()
        .find(|l| l.starts_with("total"))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Stops a stream after its first words, as Open WebUI's Stop does, and waits until the cut
/// call is recorded: the `stopped`th of them.
async fn stop_one(chat: &Api, conversation: &str, stopped: usize) {
    let (text, stream) = start_stream(chat, conversation).await;
    assert!(text.contains("On"), "{conversation}: {text}");
    drop(stream);
    chat.process
        .wait_for(WAIT, "the stopped call to be recorded", async || {
            let total = usage_total(chat);
            (total.get(2).map(String::as_str) == Some(stopped.to_string().as_str())).then_some(())
        })
        .await;
}

#[tokio::test]
async fn twelve_streams_stopped_mid_way_are_recorded_and_reach_the_daily_cap() {
    let mut chat = Api::new("").await;
    chat.process.start().await;
    // A slow model, visibly writing: the client stops it after its first words.
    chat.llm.set_responder(|_: &Value| {
        Reply::text("One, two, three, four, five, six, seven, eight, nine, ten, eleven, twelve.")
            .pace(Duration::from_millis(150))
    });

    // What one stopped answer costs (its prompt, estimated, at $1 per million tokens) …
    stop_one(&chat, "stop-1", 1).await;
    let cost: f64 = usage_total(&chat)
        .last()
        .and_then(|c| c.trim_start_matches('$').parse().ok())
        .expect("a cost");
    assert!(cost > 0.0, "a stopped answer costs its prompt");
    // … makes today's cap: eleven and a half of them.
    let cap = format!("{:.6}", cost * 11.5);
    let (status, set) = crate::http::answer(
        chat.client
            .post(chat.process.url("/v1/chat/completions"))
            .bearer_auth(&chat.owner)
            .json(&json!({
                "model": "hearth",
                "messages": [{ "role": "user", "content": format!("/budget {cap}") }],
            })),
    )
    .await;
    assert_eq!(status, 200, "{set}");
    assert!(set.to_string().contains("Today's cap is now"), "{set}");

    for stopped in 2..=12 {
        stop_one(&chat, &format!("stop-{stopped}"), stopped).await;
    }
    // The cap is reached: the next question is answered with the budget's line, no model call.
    let (text, stream) = start_stream(&chat, "stop-13").await;
    drop(stream);
    assert!(
        text.contains("budget") && text.contains("is reached"),
        "{text}"
    );
    assert_eq!(chat.llm.request_count(), 12, "no model call after the cap");

    // `hearth usage` lists the twelve, every one cut short.
    let usage = chat.process.cli(&["usage", "--by", "model"]);
    assert!(usage.contains("cut short"), "{usage}");
    assert!(usage.contains("fake/fake-model"), "{usage}");
    let total = usage_total(&chat);
    assert_eq!(
        (total[1].as_str(), total[2].as_str()),
        ("12", "12"),
        "{usage}"
    );
    chat.process.stop().await;
}
