//! The organiser tools (tasks, notes, bookmarks, contacts, calendar) driven through the runtime
//! by the fake LLM: what the model sees as results and what ends up in the database.

use chrono::TimeZone;
use hearth::clock::ManualClock;
use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::Value;

use crate::support::{self, Hearth};

const AGENTS: &str = r#"
[[agent]]
id = "general"
name = "General"
emoji = "🏠"
description = "Organiser"
system_prompt = "PROMPT:organiser"
tool_groups = ["tasks", "notes", "bookmarks", "contacts", "calendar"]
"#;

async fn organiser(clock: Option<std::sync::Arc<ManualClock>>, timezone: &str) -> Hearth {
    let mut h = Hearth::new().await.with_agents(AGENTS);
    if let Some(clock) = clock {
        h = h.with_clock(clock);
    }
    h.config.tools.autonomy = hearth::config::Autonomy::Full;
    h.config.daemon.timezone = timezone.parse().expect("a zone");
    h.start().await;
    h
}

fn call(id: &str, name: &str, args: &str) -> ToolCallSpec {
    ToolCallSpec::new(id, name, args)
}

/// The tool results of LLM request `index`, by call id, parsed as JSON where they are JSON.
fn results(h: &Hearth, index: usize) -> Vec<(String, Value)> {
    support::tool_results(&h.llm.requests()[index])
        .into_iter()
        .map(|(id, text)| {
            (
                id,
                serde_json::from_str(&text).unwrap_or(Value::String(text)),
            )
        })
        .collect()
}

/// The result of the call `id` among the tool results of LLM request `index`.
fn result(h: &Hearth, index: usize, id: &str) -> Value {
    results(h, index)
        .into_iter()
        .find(|(call, _)| call == id)
        .map(|(_, value)| value)
        .unwrap_or_else(|| panic!("no result for {id} in request {index}"))
}

async fn count(h: &Hearth, table: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
        .fetch_one(h.daemon().store().pool())
        .await
        .expect("count")
}

fn titles(list: &Value, key: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {list}"))
        .iter()
        .map(|item| item["title"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn tasks_added_listed_completed_and_deleted_through_the_runtime() {
    let mut h = organiser(None, "UTC").await;
    h.llm.push(Reply::tool_calls(vec![
        call(
            "c1",
            "add_task",
            r#"{"title":"Buy milk","priority":"high","due":"2099-05-01 09:00"}"#,
        ),
        call(
            "c2",
            "add_task",
            r#"{"title":"Call mum","due":"2099-04-30"}"#,
        ),
    ]));
    h.llm
        .push(Reply::tool_calls(vec![call("c3", "list_tasks", "{}")]));
    h.llm.push(Reply::text("You have two tasks."));
    let reply = h.say("add buy milk and call mum to my list").await;
    assert!(
        reply.text.ends_with("You have two tasks."),
        "{}",
        reply.text
    );

    let milk = result(&h, 1, "c1");
    let milk_id = milk["id"].as_i64().expect("the model gets the new id");
    assert_eq!(milk["task"]["due"], "2099-05-01 09:00");
    let listed = result(&h, 2, "c3");
    assert_eq!(
        titles(&listed, "tasks"),
        ["Call mum", "Buy milk"],
        "soonest due first"
    );
    let owner: i64 = sqlx::query_scalar("SELECT user_id FROM tasks WHERE id = $1")
        .bind(milk_id)
        .fetch_one(h.daemon().store().pool())
        .await
        .expect("stored row");
    assert!(owner > 0, "rows belong to the user who asked");

    h.llm.push(Reply::tool_calls(vec![
        call(
            "c4",
            "complete_task",
            &format!(r#"{{"task_id":{milk_id}}}"#),
        ),
        call("c5", "delete_task", r#"{"task_id":4242}"#),
    ]));
    h.llm.push(Reply::text("Done."));
    h.say("milk is bought").await;
    assert_eq!(result(&h, 4, "c4")["task"]["status"], "done");
    assert_eq!(
        result(&h, 4, "c5"),
        Value::from("Error: task 4242 not found")
    );
    let status: String = sqlx::query_scalar("SELECT status FROM tasks WHERE id = $1")
        .bind(milk_id)
        .fetch_one(h.daemon().store().pool())
        .await
        .expect("stored row");
    assert_eq!(status, "done");
    h.stop().await;
}

#[tokio::test]
async fn a_batch_with_one_bad_task_adds_the_others() {
    let mut h = organiser(None, "UTC").await;
    h.llm.push(Reply::tool_calls(vec![call(
        "c1",
        "batch_add_tasks",
        r#"{"tasks":[{"title":"Pack"},{"title":"Book taxi","due":"the day after never"},{"title":"Water plants","tags":["home"]}]}"#,
    )]));
    h.llm.push(Reply::text("Added two; one date was unclear."));
    h.say("todo: pack, book taxi, water plants").await;
    let batch = result(&h, 1, "c1");
    assert_eq!(
        (batch["added"].as_i64(), batch["failed"].as_i64()),
        (Some(2), Some(1))
    );
    let error = batch["results"][1]["error"]
        .as_str()
        .expect("an error for item 1");
    assert!(
        error.contains("YYYY-MM-DD"),
        "the error names the formats: {error}"
    );
    assert!(batch["results"][2]["id"].is_i64());
    assert_eq!(count(&h, "tasks").await, 2);
    h.stop().await;
}

#[tokio::test]
async fn notes_and_bookmarks_are_saved_and_found() {
    let mut h = organiser(None, "UTC").await;
    h.llm.push(Reply::tool_calls(vec![
        call(
            "n1",
            "add_note",
            r#"{"title":"Door code","content":"The garage code is 4711","tags":["home"]}"#,
        ),
        call(
            "b1",
            "add_bookmark",
            r#"{"url":"https://www.rust-lang.org/learn","title":"Learn Rust","tags":["rust"]}"#,
        ),
        call(
            "b2",
            "add_bookmark",
            r#"{"url":"ftp://files.example.org/x"}"#,
        ),
    ]));
    h.llm.push(Reply::tool_calls(vec![
        call("n2", "list_notes", r#"{"search":"garage"}"#),
        call("b3", "list_bookmarks", r#"{"tag":"rust"}"#),
    ]));
    h.llm.push(Reply::text("Saved."));
    h.say("note the garage code 4711 and bookmark the rust site")
        .await;

    assert!(result(&h, 1, "n1")["id"].is_i64());
    assert!(result(&h, 1, "b1")["id"].is_i64());
    let refused = result(&h, 1, "b2");
    assert!(
        refused
            .as_str()
            .is_some_and(|t| t.contains("only http:// and https://")),
        "{refused}"
    );
    let notes = result(&h, 2, "n2");
    assert_eq!(notes["notes"][0]["content"], "The garage code is 4711");
    let bookmarks = result(&h, 2, "b3");
    assert_eq!(titles(&bookmarks, "bookmarks"), ["Learn Rust"]);
    assert_eq!(count(&h, "bookmarks").await, 1);
    h.stop().await;
}

#[tokio::test]
async fn contacts_and_upcoming_birthdays_use_the_users_date() {
    // 23:30 UTC on 9 March is already 10 March in Berlin.
    let clock = ManualClock::new(
        chrono::Utc
            .with_ymd_and_hms(2026, 3, 9, 23, 30, 0)
            .single()
            .expect("time"),
    );
    let mut h = organiser(Some(clock), "Europe/Berlin").await;
    h.llm.push(Reply::tool_calls(vec![
        call(
            "c1",
            "add_contact",
            r#"{"name":"Grace Hopper","email":"grace@example.org","birthday":"1906-12-09"}"#,
        ),
        call(
            "c2",
            "add_contact",
            r#"{"name":"Alan Turing","birthday":"1912-03-10","notes":"Met at the chess club"}"#,
        ),
        call(
            "c3",
            "add_contact",
            r#"{"name":"Nobody","birthday":"March 3rd"}"#,
        ),
    ]));
    h.llm.push(Reply::tool_calls(vec![
        call("c4", "upcoming_birthdays", r#"{"days":30}"#),
        call("c5", "list_contacts", r#"{"search":"chess"}"#),
    ]));
    h.llm.push(Reply::text("Alan's birthday is today."));
    h.say("save these contacts and tell me whose birthday is coming")
        .await;

    let bad = result(&h, 1, "c3");
    assert!(
        bad.as_str().is_some_and(|t| t.contains("YYYY-MM-DD")),
        "{bad}"
    );
    let upcoming = result(&h, 2, "c4");
    assert_eq!(upcoming["today"], "2026-03-10");
    assert_eq!(upcoming["birthdays"].as_array().map(Vec::len), Some(1));
    assert_eq!(upcoming["birthdays"][0]["name"], "Alan Turing");
    assert_eq!(upcoming["birthdays"][0]["in_days"], 0);
    assert_eq!(upcoming["birthdays"][0]["turns"], 114);
    assert_eq!(result(&h, 2, "c5")["contacts"][0]["name"], "Alan Turing");
    assert_eq!(count(&h, "contacts").await, 2);
    h.stop().await;
}

#[tokio::test]
async fn todays_events_are_the_users_local_day_in_berlin() {
    // 10:00 in Berlin (CET, UTC+1) on Wednesday 18 November 2026.
    let clock = ManualClock::new(
        chrono::Utc
            .with_ymd_and_hms(2026, 11, 18, 9, 0, 0)
            .single()
            .expect("time"),
    );
    let mut h = organiser(Some(clock), "Europe/Berlin").await;
    // Local times: 23:50 the day before, 00:10 today, 23:50 today, 00:10 tomorrow. In UTC the
    // first is already "today" and the third still "today", which a UTC day would get wrong.
    h.llm.push(Reply::tool_calls(vec![
        call("e1", "add_calendar_event", r#"{"title":"Before midnight","start":"2026-11-17 23:50","duration_minutes":5}"#),
        call("e2", "add_calendar_event", r#"{"title":"Just after midnight","start":"2026-11-18 00:10","duration_minutes":5}"#),
        call("e3", "add_calendar_event", r#"{"title":"Late tonight","start":"2026-11-18 23:50","duration_minutes":5}"#),
        call("e4", "add_calendar_event", r#"{"title":"Tomorrow early","start":"2026-11-19T00:10:00+01:00","end":"2026-11-19T00:20:00+01:00"}"#),
        call("e5", "add_calendar_event", r#"{"title":"Backwards","start":"2026-11-18 12:00","end":"2026-11-18 11:00"}"#),
    ]));
    h.llm.push(Reply::tool_calls(vec![
        call("l1", "list_calendar_events", r#"{"range":"today"}"#),
        call("l2", "list_calendar_events", r#"{"range":"tomorrow"}"#),
    ]));
    h.llm.push(Reply::text("Two events today."));
    h.say("put these in my calendar and show me today").await;

    let backwards = result(&h, 1, "e5");
    assert!(
        backwards
            .as_str()
            .is_some_and(|t| t.contains("before it starts")),
        "{backwards}"
    );
    let today = result(&h, 2, "l1");
    assert_eq!(
        titles(&today, "events"),
        ["Just after midnight", "Late tonight"]
    );
    assert_eq!(today["from"], "2026-11-18 00:00");
    assert_eq!(today["events"][0]["start"], "2026-11-18 00:10");
    assert_eq!(titles(&result(&h, 2, "l2"), "events"), ["Tomorrow early"]);
    let stored: i64 = sqlx::query_scalar("SELECT start_at FROM calendar_events WHERE title = $1")
        .bind("Just after midnight")
        .fetch_one(h.daemon().store().pool())
        .await
        .expect("stored row");
    assert_eq!(
        stored,
        chrono::Utc
            .with_ymd_and_hms(2026, 11, 17, 23, 10, 0)
            .single()
            .expect("time")
            .timestamp_millis(),
        "stored as the UTC instant"
    );
    assert_eq!(count(&h, "calendar_events").await, 4);
    h.stop().await;
}
