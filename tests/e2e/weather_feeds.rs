//! The morning briefing end to end: `hearth run` with the shipped briefing agent, a schedule run
//! now (`hearth schedule run`), a fake Open-Meteo and feeds served from fixtures. The fake model
//! calls `get_weather` and `read_feeds` and writes its message from what they returned; the
//! Telegram message opens with the weather and lists the new feed items, and the next briefing
//! lists only what is new since.

use hearth::agent::SHIPPED_AGENTS;
use hearth_testkit::Reply;
use hearth_testkit::ToolCallSpec;
use hearth_testkit::feeds::{FakeFeeds, JSON_FEED, RSS};
use hearth_testkit::weather::FakeOpenMeteo;
use serde_json::{Value, json};

use crate::support::{TASK_TOOLS, general_agent, tool_results};
use crate::telegram::{OWNER, TgHearth};

/// The shipped `briefing` agent, as data/agents.toml has it.
pub(crate) fn shipped_briefing() -> String {
    let start = SHIPPED_AGENTS
        .find("[[agent]]\nid = \"briefing\"")
        .expect("the briefing agent is shipped");
    let rest = &SHIPPED_AGENTS[start..];
    let end = rest[1..].find("[[agent]]").map_or(rest.len(), |i| i + 1);
    rest[..end].to_string()
}

/// The tool results of this turn: those after the last user message (the conversation also
/// holds the earlier briefings').
fn this_turns_results(request: &Value) -> Vec<String> {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let start = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .unwrap_or(0);
    let turn = json!({"messages": messages[start..]});
    tool_results(&turn).into_iter().map(|(_, c)| c).collect()
}

/// What a model would write from the tool results it got: the weather first, then one line
/// per feed item.
fn briefing_from(request: &Value) -> Reply {
    let mut weather = String::from("(no weather)");
    let mut items = Vec::new();
    for content in this_turns_results(request) {
        let Ok(result) = serde_json::from_str::<Value>(&content) else {
            continue;
        };
        if let Some(now) = result.get("now") {
            weather = format!(
                "{}: {}, {} (today {} to {}); {}",
                result["place"].as_str().unwrap_or(""),
                now["conditions"].as_str().unwrap_or(""),
                now["temperature"].as_str().unwrap_or(""),
                result["today"]["low"].as_str().unwrap_or(""),
                result["today"]["high"].as_str().unwrap_or(""),
                result["rain_ahead"].as_str().unwrap_or(""),
            );
        }
        for item in result["items"].as_array().into_iter().flatten() {
            let title = item["item"]["text"]
                .as_str()
                .unwrap_or("")
                .lines()
                .next()
                .unwrap_or("");
            items.push(format!(
                "- {}: {title}",
                item["feed"].as_str().unwrap_or("")
            ));
        }
    }
    let feeds = if items.is_empty() {
        "Nothing new in your feeds.".to_string()
    } else {
        format!("New in your feeds:\n{}", items.join("\n"))
    };
    Reply::text(format!("{weather}\n\n{feeds}"))
}

fn briefing_calls() -> Reply {
    Reply::tool_calls(vec![
        ToolCallSpec::new("w1", "get_weather", "{}"),
        ToolCallSpec::new("f1", "read_feeds", r#"{"since": "last briefing"}"#),
    ])
}

#[tokio::test]
async fn a_scheduled_briefing_opens_with_the_weather_and_lists_new_feed_items() {
    let meteo = FakeOpenMeteo::start().await;
    let feeds = FakeFeeds::start().await;
    feeds.set("rust", RSS, "application/rss+xml");
    feeds.set("town", JSON_FEED, "application/feed+json");
    let extra = format!(
        r#"
[weather]
location = "Paris"
base_url = "{meteo}"
geocoding_url = "{meteo}"

[[feeds]]
name = "Rust blog"
url = "{rust}"

[[feeds]]
name = "Town news"
url = "{town}"

[[schedules]]
name = "morning-briefing"
cron = "0 30 7 * * *"
timezone = "UTC"
agent = "briefing"
prompt = "Give me my briefing."
target = "telegram:{OWNER}"
"#,
        meteo = meteo.url(),
        rust = feeds.url("rust"),
        town = feeds.url("town"),
    );
    let mut h = TgHearth::new(&extra).await;
    h.write_agents(&format!(
        "{}\n{}",
        general_agent(TASK_TOOLS),
        shipped_briefing()
    ));
    h.start().await;

    h.llm.push(briefing_calls());
    h.llm.set_responder(briefing_from);
    h.cli(&["schedule", "run", "morning-briefing"]);
    let sent = h.wait(OWNER, 1).await;
    // Telegram shows the model's "- " list as bullets.
    let text = &sent[0].text;
    let body = text
        .strip_prefix("⏰ morning-briefing\n\n")
        .unwrap_or_else(|| panic!("a schedule's reply: {text}\n{}", h.logs()));
    assert_eq!(
        body,
        "Paris, Île-de-France, FR: overcast, 5.3 °C (today 2.0 °C to 8.0 °C); rain likely from 15:00 (70%)\n\n\
         New in your feeds:\n\
         • Town news: Christmas market opens on Saturday\n\
         • Town news: Roadworks on the ring road\n\
         • Rust blog: Announcing Rust 1.95.0\n\
         • Rust blog: This Week in Rust 600",
        "{}",
        h.logs()
    );
    let first = h.llm.requests();
    assert!(
        first[0]["messages"][0]["content"]
            .as_str()
            .unwrap_or("")
            .contains("the weather (get_weather)"),
        "the shipped briefing prompt asks for the weather first"
    );
    assert_eq!(meteo.searches().len(), 1);

    // The next briefing: one new item in the Rust feed, nothing else new.
    feeds.set(
        "rust",
        RSS.replace(
            "<item>",
            "<item><title>Rust 1.95.1</title><guid>rust-1.95.1</guid>\
             <pubDate>Sun, 29 Nov 2026 07:00:00 +0000</pubDate></item><item>",
        ),
        "application/rss+xml",
    );
    h.llm.push(briefing_calls());
    h.cli(&["schedule", "run", "morning-briefing"]);
    let sent = h.wait(OWNER, 2).await;
    let second = &sent[1].text;
    assert!(
        second.ends_with("New in your feeds:\n• Rust blog: Rust 1.95.1"),
        "{second}\n{}",
        h.logs()
    );
    assert_eq!(meteo.searches().len(), 1, "the place was geocoded once");
    assert_eq!(
        meteo.forecasts().len(),
        1,
        "the second briefing within 15 minutes used the cached forecast"
    );
    let town: Vec<_> = feeds
        .requests()
        .into_iter()
        .filter(|r| r.path == "town")
        .map(|r| r.status)
        .collect();
    assert_eq!(town, [200, 304], "the unchanged feed answered 304");
    h.stop().await;
}
