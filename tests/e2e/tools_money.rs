//! The expenses and goals tools through the runtime: the fake LLM calls them, and the tests
//! check what the model was told and what was stored.

use chrono::TimeZone;
use hearth::clock::ManualClock;
use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::{Value, json};
use sqlx::Row;

use crate::support::Hearth;

const AGENTS: &str = r#"
[[agent]]
id = "money"
name = "Money"
emoji = "💰"
description = "Spending and goals"
system_prompt = "PROMPT:money"
tool_groups = ["expenses", "goals"]
"#;

/// A daemon in Berlin whose clock reads 2026-03-31 23:30 UTC: already April 1st locally.
async fn hearth() -> Hearth {
    let now = chrono::Utc
        .with_ymd_and_hms(2026, 3, 31, 23, 30, 0)
        .single()
        .expect("valid");
    let mut h = Hearth::new()
        .await
        .with_agents(AGENTS)
        .with_clock(ManualClock::new(now));
    h.config.tools.autonomy = hearth::config::Autonomy::Full;
    h.config.daemon.timezone = chrono_tz::Europe::Berlin;
    h.start().await;
    h
}

fn call(id: &str, name: &str, args: Value) -> ToolCallSpec {
    ToolCallSpec::new(id, name, args.to_string())
}

/// The result the model was given for tool call `id`, read as JSON, from the latest request.
fn result(h: &Hearth, id: &str) -> Value {
    let requests = h.llm.requests();
    let last = requests.last().expect("a request");
    let message = last["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .unwrap_or_else(|| panic!("no result for {id} in {last}"));
    let content = message["content"].as_str().expect("text content");
    serde_json::from_str(content).unwrap_or_else(|_| panic!("{id} result is not JSON: {content}"))
}

#[tokio::test]
async fn expenses_are_added_summarised_and_exported() {
    let mut h = hearth().await;
    h.llm.push(Reply::tool_calls(vec![call(
        "c1",
        "add_expense",
        json!({"amount": 12.5, "category": "food", "description": "Lunch, with \"Bob\"", "merchant": "Cafe Uno"}),
    )]));
    h.llm.push(Reply::tool_calls(vec![call(
        "c2",
        "batch_add_expenses",
        json!({"expenses": [
            {"amount": 40, "category": "transport", "date": "2026-03-14", "description": "Train"},
            {"amount": 5, "category": "gadgets", "date": "2026-03-15"},
            {"amount": 7.25, "category": "food", "date": "2026-03-20", "merchant": "Aldi", "tags": ["weekly"]}
        ]}),
    )]));
    h.llm.push(Reply::text("Recorded."));
    h.say("I spent 12.50 on lunch, plus my receipts from March")
        .await;

    let added = result(&h, "c1");
    assert_eq!(
        added["recorded"], "12.50 EUR food on 2026-04-01",
        "today is the user's today"
    );
    let batch = result(&h, "c2");
    assert_eq!(
        (batch["added"].as_i64(), batch["failed"].as_i64()),
        (Some(2), Some(1))
    );
    assert_eq!(batch["results"][0]["id"], 2);
    let error = batch["results"][1]["error"].as_str().expect("error");
    assert!(
        error.contains("`category`: unknown variant `gadgets`")
            && error.contains("`subscription`, `housing`, `other`"),
        "{error}"
    );
    assert_eq!(batch["results"][2]["id"], 3);

    let pool = h.daemon().store().pool().clone();
    let rows = sqlx::query("SELECT amount_cents, category, spent_on FROM expenses ORDER BY id")
        .fetch_all(&pool)
        .await
        .expect("rows");
    let stored: Vec<(i64, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r.try_get("amount_cents").expect("amount"),
                r.try_get("category").expect("category"),
                r.try_get("spent_on").expect("date"),
            )
        })
        .collect();
    assert_eq!(
        stored,
        [
            (1250, "food".to_string(), "2026-04-01".to_string()),
            (4000, "transport".to_string(), "2026-03-14".to_string()),
            (725, "food".to_string(), "2026-03-20".to_string()),
        ]
    );

    h.llm.push(Reply::tool_calls(vec![
        call(
            "s1",
            "expense_summary",
            json!({"date_from": "2026-03-01", "date_to": "2026-04-30"}),
        ),
        call("e1", "export_expenses", json!({"format": "csv"})),
        call("l1", "list_expenses", json!({"category": "food"})),
    ]));
    h.llm.push(Reply::text("Here you go."));
    h.say("How much did I spend by category and month? Export it as CSV.")
        .await;

    let summary = result(&h, "s1");
    let eur = &summary["currencies"][0];
    assert_eq!(eur["currency"], "EUR");
    assert_eq!(eur["total"], "59.75");
    assert_eq!(
        eur["by_category"],
        json!([
            {"category": "transport", "total": "40.00", "count": 1},
            {"category": "food", "total": "19.75", "count": 2},
        ])
    );
    assert_eq!(
        eur["by_month"],
        json!([
            {"month": "2026-03", "total": "47.25", "count": 2},
            {"month": "2026-04", "total": "12.50", "count": 1},
        ])
    );
    let export = result(&h, "e1");
    assert_eq!(export["count"], 3);
    assert_eq!(
        export["content"],
        "id,date,amount,currency,category,description,merchant,tags\n\
         2,2026-03-14,40.00,EUR,transport,Train,,\n\
         3,2026-03-20,7.25,EUR,food,,Aldi,weekly\n\
         1,2026-04-01,12.50,EUR,food,\"Lunch, with \"\"Bob\"\"\",Cafe Uno,\n"
    );
    let food = result(&h, "l1");
    assert_eq!(food["count"], 2);
    assert_eq!(food["expenses"][0]["id"], 1, "newest first");
    h.stop().await;
}

#[tokio::test]
async fn a_goal_is_decomposed_followed_and_completed() {
    let mut h = hearth().await;
    h.llm.push(Reply::tool_calls(vec![call(
        "g1",
        "create_goal",
        json!({"title": "Trip to Japan", "target_date": "2026-09-01"}),
    )]));
    h.llm.push(Reply::tool_calls(vec![call(
        "g2",
        "decompose_goal",
        json!({"goal_id": 1, "steps": ["Renew passport", "Book flights", "Book hotels"]}),
    )]));
    h.llm.push(Reply::tool_calls(vec![call(
        "g3",
        "get_next_actions",
        json!({}),
    )]));
    h.llm.push(Reply::text("Planned."));
    h.say("Help me plan my trip to Japan").await;

    assert_eq!(result(&h, "g1")["created"]["id"], 1);
    let steps = result(&h, "g2");
    assert_eq!(
        steps["added"][2],
        json!({"id": 3, "position": 3, "title": "Book hotels"})
    );
    let next = result(&h, "g3");
    assert_eq!(next["next_actions"][0]["step"], "Renew passport");
    assert_eq!(next["next_actions"][0]["step_number"], "1 of 3");

    h.llm.push(Reply::tool_calls(vec![call(
        "d1",
        "complete_goal_step",
        json!({"step_id": 1}),
    )]));
    h.llm.push(Reply::tool_calls(vec![call(
        "d2",
        "get_next_actions",
        json!({}),
    )]));
    h.llm.push(Reply::text("Nice."));
    h.say("The passport is renewed").await;
    assert_eq!(result(&h, "d1")["progress"], 33);
    assert_eq!(result(&h, "d2")["next_actions"][0]["step"], "Book flights");

    h.llm.push(Reply::tool_calls(vec![call(
        "f1",
        "complete_goal_step",
        json!({"step_id": 2}),
    )]));
    h.llm.push(Reply::tool_calls(vec![call(
        "f2",
        "complete_goal_step",
        json!({"step_id": 3, "complete_goal": true}),
    )]));
    h.llm.push(Reply::tool_calls(vec![
        call("f3", "get_goal_details", json!({"goal_id": 1})),
        call("f4", "goal_stats", json!({})),
    ]));
    h.llm.push(Reply::text("Goal reached!"));
    h.say("Flights and hotels are booked, the plan is done")
        .await;
    let last = result(&h, "f2");
    assert_eq!(last["goal_status"], "completed");
    assert_eq!(last["progress"], 100);
    let details = result(&h, "f3");
    assert_eq!(details["status"], "completed");
    assert_eq!(
        details["completed"], "2026-04-01 01:30",
        "shown in Berlin time"
    );
    assert!(
        details["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .all(|s| s["done"] == true)
    );
    let stats = result(&h, "f4");
    assert_eq!(stats["goals"]["completed"], 1);
    assert_eq!(stats["steps"]["done"], 3);

    let status: String = sqlx::query_scalar("SELECT status FROM goals WHERE id = 1")
        .fetch_one(h.daemon().store().pool())
        .await
        .expect("goal");
    assert_eq!(status, "completed");
    h.stop().await;
}
