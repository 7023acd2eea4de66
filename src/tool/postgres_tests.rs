//! The typed families' SQL (`store::{task, note, bookmark, expense, goal, …}`, built by `store::query`)
//! on PostgreSQL: the unit tests of each family run on SQLite, this runs the same calls on a
//! throwaway PostgreSQL server (skipped with a note when PostgreSQL is not installed).

use serde_json::{Value, json};

use super::test_calls::{err, ok};
use super::{ToolContext, bookmark, calendar, contact, expense, goal, note, task};
use crate::store::Store;

/// A context over a fresh PostgreSQL database, and what must live as long as it.
async fn postgres_context() -> Option<(
    ToolContext,
    hearth_testkit::postgres::TestPostgres,
    tempfile::TempDir,
)> {
    let server = hearth_testkit::postgres::TestPostgres::start()?;
    let url = server.create_database("tools").expect("create database");
    let store = Store::open(&url).await.expect("open and migrate");
    let dir = tempfile::tempdir().expect("temp dir");
    let ctx = super::test_context_on(store, dir.path()).await;
    Some((ctx, server, dir))
}

fn id(value: &Value) -> i64 {
    value["id"].as_i64().expect("id")
}

#[tokio::test]
async fn organiser_tools_work_on_postgres() {
    let Some((ctx, _server, _dir)) = postgres_context().await else {
        return;
    };

    let tasks = task::tools;
    let added = ok(
        tasks(),
        &ctx,
        "add_task",
        json!({"title": "Pay 100% of rent", "due": "2099-01-01", "tags": ["home"], "priority": "high"}),
    )
    .await;
    ok(tasks(), &ctx, "add_task", json!({"title": "Later"})).await;
    let found = ok(
        tasks(),
        &ctx,
        "list_tasks",
        json!({"search": "0%", "tag": "home"}),
    )
    .await;
    assert_eq!(found["count"], 1, "{found}");
    let page = ok(tasks(), &ctx, "list_tasks", json!({"limit": 1})).await;
    assert_eq!(
        (page["count"].clone(), page["more"].clone()),
        (json!(1), json!(true))
    );
    let updated = ok(
        tasks(),
        &ctx,
        "update_task",
        json!({"task_id": id(&added), "due": "", "status": "in_progress"}),
    )
    .await;
    assert!(updated["task"].get("due").is_none(), "{updated}");
    let done = ok(
        tasks(),
        &ctx,
        "complete_task",
        json!({"task_id": id(&added)}),
    )
    .await;
    assert_eq!(done["task"]["status"], "done");
    assert_eq!(
        ok(tasks(), &ctx, "delete_task", json!({"task_id": id(&added)})).await["title"],
        "Pay 100% of rent"
    );
    assert_eq!(
        err(tasks(), &ctx, "delete_task", json!({"task_id": id(&added)})).await,
        format!("task {} not found", id(&added))
    );

    let notes = note::tools;
    let batch = ok(
        notes(),
        &ctx,
        "batch_add_notes",
        json!({"notes": [{"title": "Wifi", "content": "hunter2", "tags": ["Home"]}, {"title": "x"}]}),
    )
    .await;
    assert_eq!(
        (batch["added"].clone(), batch["failed"].clone()),
        (json!(1), json!(1))
    );
    let note_id = batch["results"][0]["id"].as_i64().expect("id");
    let found = ok(
        notes(),
        &ctx,
        "list_notes",
        json!({"search": "HUNTER", "tag": "home"}),
    )
    .await;
    assert_eq!(found["count"], 1, "{found}");
    let updated = ok(
        notes(),
        &ctx,
        "update_note",
        json!({"note_id": note_id, "content": "new"}),
    )
    .await;
    assert_eq!(updated["note"]["content"], "new");
    ok(notes(), &ctx, "delete_note", json!({"note_id": note_id})).await;

    let bookmarks = bookmark::tools;
    let saved = ok(
        bookmarks(),
        &ctx,
        "add_bookmark",
        json!({"url": "https://example.org/a_b", "tags": ["x"]}),
    )
    .await;
    let again = ok(
        bookmarks(),
        &ctx,
        "add_bookmark",
        json!({"url": "https://example.org/a_b"}),
    )
    .await;
    assert_eq!(again["bookmark"]["id"], saved["id"]);
    let found = ok(
        bookmarks(),
        &ctx,
        "list_bookmarks",
        json!({"search": "a_b"}),
    )
    .await;
    assert_eq!(found["count"], 1, "{found}");
    ok(
        bookmarks(),
        &ctx,
        "delete_bookmark",
        json!({"bookmark_id": id(&saved)}),
    )
    .await;

    let contacts = contact::tools;
    let ada = ok(
        contacts(),
        &ctx,
        "add_contact",
        json!({"name": "Ada", "email": "ada@example.org", "birthday": "1990-01-01"}),
    )
    .await;
    let found = ok(
        contacts(),
        &ctx,
        "list_contacts",
        json!({"search": "EXAMPLE"}),
    )
    .await;
    assert_eq!(found["count"], 1, "{found}");
    let updated = ok(
        contacts(),
        &ctx,
        "update_contact",
        json!({"contact_id": id(&ada), "email": ""}),
    )
    .await;
    assert!(updated["contact"].get("email").is_none(), "{updated}");
    let soon = ok(contacts(), &ctx, "upcoming_birthdays", json!({"days": 366})).await;
    assert_eq!(soon["birthdays"][0]["name"], "Ada", "{soon}");
    ok(
        contacts(),
        &ctx,
        "delete_contact",
        json!({"contact_id": id(&ada)}),
    )
    .await;

    let events = calendar::tools;
    let meeting = ok(
        events(),
        &ctx,
        "add_calendar_event",
        json!({"title": "Standup", "start": "2099-01-01 09:00", "duration_minutes": 15}),
    )
    .await;
    let listed = ok(
        events(),
        &ctx,
        "list_calendar_events",
        json!({"start": "2099-01-01", "end": "2099-01-01"}),
    )
    .await;
    assert_eq!(listed["count"], 1, "{listed}");
    let moved = ok(
        events(),
        &ctx,
        "update_calendar_event",
        json!({"event_id": id(&meeting), "start": "2099-01-01 10:00"}),
    )
    .await;
    assert_eq!(moved["event"]["end"], "2099-01-01 10:15");
    ok(
        events(),
        &ctx,
        "delete_calendar_event",
        json!({"event_id": id(&meeting)}),
    )
    .await;
}

#[tokio::test]
async fn expenses_and_goals_work_on_postgres() {
    let Some((ctx, _server, _dir)) = postgres_context().await else {
        return;
    };

    let spend = expense::tools;
    for (amount, category, date, description) in [
        (12.5, "food", "2026-01-15", "Lunch, 100% good"),
        (40.0, "transport", "2026-01-20", "Train"),
        (7.25, "food", "2026-02-03", "Groceries"),
    ] {
        ok(
            spend(),
            &ctx,
            "add_expense",
            json!({"amount": amount, "category": category, "date": date, "description": description}),
        )
        .await;
    }
    let found = ok(
        spend(),
        &ctx,
        "list_expenses",
        json!({"search": "100%", "min_amount": 10, "date_to": "2026-01-31", "limit": 5}),
    )
    .await;
    assert_eq!(found["count"], 1, "{found}");
    let summary = ok(spend(), &ctx, "expense_summary", json!({"currency": "EUR"})).await;
    assert_eq!(summary["currencies"][0]["total"], "59.75", "{summary}");
    assert_eq!(
        summary["currencies"][0]["by_month"][1],
        json!({"month": "2026-02", "total": "7.25", "count": 1})
    );
    let csv = ok(
        spend(),
        &ctx,
        "export_expenses",
        json!({"format": "csv", "category": "transport"}),
    )
    .await;
    assert_eq!(csv["count"], 1, "{csv}");
    let deleted = ok(spend(), &ctx, "delete_expense", json!({"expense_id": 2})).await;
    assert_eq!(deleted["deleted"]["description"], "Train");

    let goals = goal::tools;
    let parent = id(&ok(
        goals(),
        &ctx,
        "create_goal",
        json!({"title": "Run a marathon"}),
    )
    .await["created"]);
    let child = ok(
        goals(),
        &ctx,
        "create_goal",
        json!({"title": "10 km", "target_date": "2099-05-01", "parent_goal_id": parent}),
    )
    .await;
    let child = id(&child["created"]);
    let listed = ok(
        goals(),
        &ctx,
        "list_goals",
        json!({"parent_goal_id": parent, "limit": 5}),
    )
    .await;
    assert_eq!(listed["count"], 1, "{listed}");
    let cleared = ok(
        goals(),
        &ctx,
        "update_goal",
        json!({"goal_id": child, "target_date": null, "status": "active"}),
    )
    .await;
    assert!(cleared["updated"].get("target_date").is_none(), "{cleared}");
    ok(
        goals(),
        &ctx,
        "decompose_goal",
        json!({"goal_id": child, "steps": ["Buy shoes", "Run 5 km"]}),
    )
    .await;
    let next = ok(goals(), &ctx, "get_next_actions", json!({})).await;
    assert_eq!(next["next_actions"][0]["step"], "Buy shoes", "{next}");
    let step = next["next_actions"][0]["step_id"]
        .as_i64()
        .expect("step id");
    let refused = err(
        goals(),
        &ctx,
        "complete_goal_step",
        json!({"step_id": step, "complete_goal": true}),
    )
    .await;
    assert!(refused.contains("other open step"), "{refused}");
    let done = ok(
        goals(),
        &ctx,
        "complete_goal_step",
        json!({"step_id": step}),
    )
    .await;
    assert_eq!(done["steps_done"], 1, "{done}");
    let details = ok(
        goals(),
        &ctx,
        "get_goal_details",
        json!({"goal_id": parent}),
    )
    .await;
    assert_eq!(details["sub_goals"][0]["progress"], 50, "{details}");
    let stats = ok(goals(), &ctx, "goal_stats", json!({})).await;
    assert_eq!(
        stats["steps"],
        json!({"done": 1, "total": 2, "open_in_active_goals": 1})
    );
}

/// A schedule's fields go in and come back out on PostgreSQL as they do on SQLite: inserted,
/// then saved with every setting changed.
#[tokio::test]
async fn schedules_are_stored_and_saved_on_postgres() {
    use crate::config::OnConfirmation;
    use crate::store::schedule::Schedule;

    let Some((ctx, _server, _dir)) = postgres_context().await else {
        return;
    };
    let mut schedule = Schedule {
        cron: Some("0 7 * * *".into()),
        next_fire_at: Some(5_000),
        ..Schedule::new(
            "briefing".into(),
            "Europe/Berlin".into(),
            "general".into(),
            "Brief me.".into(),
            ("telegram".into(), hearth_channel::ChatRef::new("42")),
            1_000,
        )
    };
    schedule.id = ctx
        .store
        .insert_schedule(&schedule, 1_000)
        .await
        .expect("insert");
    let stored = ctx.store.schedule_by_id(schedule.id).await.expect("read");
    assert_eq!(stored.as_ref(), Some(&schedule));

    schedule.name = "evening".into();
    schedule.cron = Some("0 19 * * *".into());
    schedule.on_confirmation = OnConfirmation::Allow;
    schedule.allow_tools = vec!["list_tasks".into()];
    schedule.catch_up_minutes = 5;
    schedule.enabled = false;
    schedule.next_fire_at = None;
    schedule.updated_at = 2_000;
    assert!(
        ctx.store
            .save_schedule(&schedule, 2_000)
            .await
            .expect("save")
    );
    let saved = ctx.store.schedule_by_id(schedule.id).await.expect("read");
    assert_eq!(saved.as_ref(), Some(&schedule));
}

/// The feed and weather tables (`store::feed`, `store::weather`) on PostgreSQL.
#[tokio::test]
async fn feed_and_weather_stores_work_on_postgres() {
    let Some((ctx, _server, _dir)) = postgres_context().await else {
        return;
    };
    crate::store::feed::exercise(&ctx.store).await;
    let place = crate::store::weather::WeatherPlace {
        name: "Paris".into(),
        admin1: Some("Île-de-France".into()),
        country: Some("FR".into()),
        latitude: 48.85341,
        longitude: 2.3488,
        timezone: Some("Europe/Paris".into()),
    };
    ctx.store
        .save_weather_place("Paris", &place, 1)
        .await
        .expect("saved");
    ctx.store
        .save_weather_place("paris", &place, 2)
        .await
        .expect("saved again");
    assert_eq!(
        ctx.store.weather_place(" PARIS").await.expect("read"),
        Some(place)
    );
}
