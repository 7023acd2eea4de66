//! Unit tests of the memory tools against a fresh SQLite database.

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeZone;
use serde_json::{Value, json};

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::tool::test_context;

const DAY: Duration = Duration::from_secs(24 * 3600);

fn tool(name: &str) -> Arc<dyn Tool> {
    tools()
        .into_iter()
        .find(|t| t.info().name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

async fn call(ctx: &ToolContext, name: &str, args: Value) -> Result<Value, ToolError> {
    let text = tool(name).call(ctx, args).await?;
    Ok(serde_json::from_str(&text).expect("tools answer JSON"))
}

async fn ok(ctx: &ToolContext, name: &str, args: Value) -> Value {
    call(ctx, name, args)
        .await
        .unwrap_or_else(|err| panic!("{name} failed: {err}"))
}

async fn invalid(ctx: &ToolContext, name: &str, args: Value) -> String {
    match call(ctx, name, args).await {
        Err(ToolError::InvalidArguments(msg)) => msg,
        other => panic!("{name}: expected invalid arguments, got {other:?}"),
    }
}

async fn failed(ctx: &ToolContext, name: &str, args: Value) -> String {
    match call(ctx, name, args).await {
        Err(ToolError::Failed(msg)) => msg,
        other => panic!("{name}: expected a failure, got {other:?}"),
    }
}

async fn remember(ctx: &ToolContext, content: &str, kind: &str, importance: f64) -> i64 {
    let saved = ok(
        ctx,
        "remember",
        json!({"content": content, "type": kind, "importance": importance}),
    )
    .await;
    saved["id"].as_i64().expect("id")
}

async fn count(ctx: &ToolContext) -> i64 {
    crate::tool::test_calls::rows(ctx, "memories").await
}

fn ids(result: &Value) -> Vec<i64> {
    result["memories"]
        .as_array()
        .expect("memories")
        .iter()
        .map(|m| m["id"].as_i64().expect("id"))
        .collect()
}

/// A context whose clock stands still at 2026-03-01 12:00 UTC.
async fn manual_context() -> (ToolContext, tempfile::TempDir, Arc<ManualClock>) {
    let (mut ctx, dir) = test_context().await;
    let clock = ManualClock::new(
        chrono::Utc
            .with_ymd_and_hms(2026, 3, 1, 12, 0, 0)
            .single()
            .expect("valid"),
    );
    ctx.clock = clock.clone();
    (ctx, dir, clock)
}

/// Another user of the same database.
async fn other_user(ctx: &ToolContext) -> ToolContext {
    let identity = ctx
        .store
        .allow_identity("test", "u2", None, "config", false, 0)
        .await
        .expect("user");
    let mut other = ctx.clone();
    other.user_id = Some(identity.user_id);
    other
}

#[test]
fn the_family_has_seven_tools_with_fitting_risks() {
    let tools = tools();
    let names: Vec<&str> = tools.iter().map(|t| t.info().name.as_str()).collect();
    assert_eq!(
        names,
        [
            "remember",
            "batch_remember",
            "recall",
            "forget",
            "list_memories",
            "boost_memory",
            "memory_stats"
        ]
    );
    for tool in &tools {
        let info = tool.info();
        assert_eq!(info.group, "memory");
        assert!(crate::tool::valid_tool_name(&info.name));
        assert_eq!(info.parameters["type"], "object", "{}", info.name);
        assert_eq!(info.parameters["additionalProperties"], false);
        let expected = match info.name.as_str() {
            "forget" => Risk::Destructive,
            "remember" | "batch_remember" | "boost_memory" => Risk::Write,
            _ => Risk::Safe,
        };
        assert_eq!(info.risk, expected, "{}", info.name);
    }
    assert!(tool("forget").info().requires_confirmation());
}

#[tokio::test]
async fn remember_saves_with_defaults_and_updates_a_repeat() {
    let (ctx, _dir, _clock) = manual_context().await;
    let saved = ok(
        &ctx,
        "remember",
        json!({"content": "  Prefers oat milk in coffee ", "tags": ["Food", "drinks, morning"]}),
    )
    .await;
    assert_eq!(saved["status"], "saved");
    assert_eq!(saved["content"], "Prefers oat milk in coffee");
    assert_eq!(saved["type"], "fact");
    assert_eq!(saved["importance"], 0.5);
    assert_eq!(saved["tags"], json!(["food", "drinks", "morning"]));
    assert_eq!(saved["saved"], "2026-03-01 12:00");

    let again = ok(
        &ctx,
        "remember",
        json!({"content": "prefers OAT milk in coffee", "type": "preference", "importance": 0.8, "tags": ["coffee"]}),
    )
    .await;
    assert_eq!(again["status"], "already known; updated");
    assert_eq!(again["id"], saved["id"]);
    assert_eq!(again["type"], "preference");
    assert_eq!(again["importance"], 0.8);
    assert_eq!(
        again["tags"],
        json!(["food", "drinks", "morning", "coffee"])
    );
    assert_eq!(count(&ctx).await, 1);
    // A lower importance the second time does not demote it.
    let third = ok(
        &ctx,
        "remember",
        json!({"content": "Prefers oat milk in coffee", "importance": 0.2}),
    )
    .await;
    assert_eq!(third["importance"], 0.8);
    assert_eq!(third["type"], "preference", "kept when not given");
}

#[tokio::test]
async fn remember_refuses_bad_input_and_saves_nothing() {
    let (ctx, _dir) = test_context().await;
    let msg = invalid(&ctx, "remember", json!({"content": "   "})).await;
    assert!(
        msg.contains("`content`: must be a non-empty string"),
        "{msg}"
    );
    let msg = invalid(&ctx, "remember", json!({"content": "x", "importance": 1.5})).await;
    assert!(msg.contains("between 0 and 1"), "{msg}");
    let msg = invalid(
        &ctx,
        "remember",
        json!({"content": "x", "importance": -0.1}),
    )
    .await;
    assert!(msg.contains("between 0 and 1"), "{msg}");
    let msg = invalid(
        &ctx,
        "remember",
        json!({"content": "x", "importance": "high"}),
    )
    .await;
    assert!(
        msg.contains("`importance`: invalid type: string \"high\""),
        "{msg}"
    );
    let msg = invalid(&ctx, "remember", json!({"content": "x", "type": "opinion"})).await;
    assert!(msg.contains("`type`: unknown variant `opinion`"), "{msg}");
    let long = "a".repeat(MAX_CONTENT + 1);
    let msg = invalid(&ctx, "remember", json!({"content": long})).await;
    assert!(msg.contains("keep a memory under 2000"), "{msg}");
    let tags: Vec<String> = (0..11).map(|i| format!("t{i}")).collect();
    let msg = invalid(&ctx, "remember", json!({"content": "x", "tags": tags})).await;
    assert!(msg.contains("at most 10"), "{msg}");
    assert_eq!(count(&ctx).await, 0);

    let mut anonymous = ctx.clone();
    anonymous.user_id = None;
    let msg = failed(&anonymous, "remember", json!({"content": "x"})).await;
    assert!(msg.contains("known user"), "{msg}");
}

#[tokio::test]
async fn batch_remember_saves_all_or_nothing() {
    let (ctx, _dir) = test_context().await;
    let saved = ok(
        &ctx,
        "batch_remember",
        json!({"memories": [
            {"content": "Has a dog called Rex", "importance": 0.8},
            {"content": "Speaks Portuguese", "type": "skill", "tags": ["language"]},
            {"content": "Has a dog called Rex"}
        ]}),
    )
    .await;
    assert_eq!(saved["count"], 3);
    assert_eq!(saved["memories"][1]["type"], "skill");
    assert_eq!(saved["memories"][2]["status"], "already known; updated");
    assert_eq!(saved["memories"][2]["importance"], 0.8);
    assert_eq!(count(&ctx).await, 2);

    let msg = invalid(
        &ctx,
        "batch_remember",
        json!({"memories": [{"content": "Likes tea"}, {"content": "Bad", "importance": 3}]}),
    )
    .await;
    assert!(
        msg.starts_with("`memories[1].importance`: must be between 0 and 1"),
        "{msg}"
    );
    let msg = invalid(&ctx, "batch_remember", json!({"memories": []})).await;
    assert!(msg.contains("0 given; save 1 to 20"), "{msg}");
    let msg = invalid(&ctx, "batch_remember", json!({"memories": ["just text"]})).await;
    assert!(
        msg.contains("`memories[0]`: invalid type: string \"just text\", expected struct"),
        "{msg}"
    );
    let many: Vec<Value> = (0..21)
        .map(|i| json!({"content": format!("m{i}")}))
        .collect();
    let msg = invalid(&ctx, "batch_remember", json!({"memories": many})).await;
    assert!(msg.contains("21 given; save 1 to 20"), "{msg}");
    assert_eq!(count(&ctx).await, 2);
}

#[tokio::test]
async fn recall_finds_words_through_fts5_and_counts_the_recall() {
    let (ctx, _dir, clock) = manual_context().await;
    let coffee = remember(&ctx, "Prefers oat milk in coffee", "preference", 0.6).await;
    let tea = remember(&ctx, "Drinks green tea in the afternoon", "preference", 0.5).await;
    let dog = remember(&ctx, "Has a dog called Rex", "fact", 0.5).await;

    // Words of three letters or more match as prefixes, in any case, with or without accents.
    let found = ok(&ctx, "recall", json!({"query": "COFF"})).await;
    assert_eq!(ids(&found), vec![coffee]);
    let found = ok(&ctx, "recall", json!({"query": "Coffée"})).await;
    assert_eq!(ids(&found), vec![coffee]);
    assert_eq!(found["matched"], "all words");

    // All words first; none has both "coffee" and "dog", so any word.
    let found = ok(&ctx, "recall", json!({"query": "coffee dog"})).await;
    assert_eq!(found["matched"], "any word");
    let mut got = ids(&found);
    got.sort_unstable();
    assert_eq!(got, vec![coffee, dog]);

    let found = ok(&ctx, "recall", json!({"query": "nothing like this"})).await;
    assert_eq!(found["count"], 0);
    assert!(found["hint"].as_str().is_some());

    // Each hit is counted; a miss is not.
    clock.advance(DAY);
    ok(&ctx, "recall", json!({"query": "tea"})).await;
    let (n, last): (i64, Option<i64>) =
        sqlx::query_as("SELECT access_count, last_accessed FROM memories WHERE id = $1")
            .bind(tea)
            .fetch_one(ctx.store.pool())
            .await
            .expect("row");
    assert_eq!((n, last), (1, Some(clock.now_ms())));
    let untouched: i64 = sqlx::query_scalar("SELECT access_count FROM memories WHERE id = $1")
        .bind(dog)
        .fetch_one(ctx.store.pool())
        .await
        .expect("row");
    assert_eq!(untouched, 1, "found once, by \"coffee dog\"");
    let listed = ok(&ctx, "list_memories", json!({})).await;
    assert!(listed["memories"].to_string().contains("\"recalled\":1"));
}

#[tokio::test]
async fn recall_filters_by_type_and_tag_and_caps_the_limit() {
    let (ctx, _dir) = test_context().await;
    for i in 0..60 {
        let kind = if i % 2 == 0 { "fact" } else { "event" };
        let tags = if i % 3 == 0 {
            json!(["garden"])
        } else {
            json!([])
        };
        ok(
            &ctx,
            "remember",
            json!({"content": format!("plant number {i} in the garden"), "type": kind, "tags": tags}),
        )
        .await;
    }
    let found = ok(&ctx, "recall", json!({"query": "plant"})).await;
    assert_eq!(found["count"], 10, "default limit");
    let found = ok(&ctx, "recall", json!({"query": "plant", "limit": 500})).await;
    assert_eq!(found["count"], 50, "capped");
    let found = ok(
        &ctx,
        "recall",
        json!({"query": "plant", "type": "event", "limit": 50}),
    )
    .await;
    assert_eq!(found["count"], 30);
    assert!(
        found["memories"]
            .as_array()
            .expect("list")
            .iter()
            .all(|m| m["type"] == "event")
    );
    let found = ok(
        &ctx,
        "recall",
        json!({"query": "plant", "type": "fact", "tag": "Garden", "limit": 50}),
    )
    .await;
    assert_eq!(found["count"], 10, "even and divisible by 3");
    let msg = invalid(&ctx, "recall", json!({"query": "plant", "type": "opinion"})).await;
    assert!(msg.contains("`type`: unknown variant `opinion`"), "{msg}");
}

#[tokio::test]
async fn recall_treats_fts_syntax_as_plain_words() {
    let (ctx, _dir) = test_context().await;
    let foo = remember(&ctx, "foo fighters concert in May", "event", 0.5).await;
    let bar = remember(&ctx, "the bar on the corner has good wine", "fact", 0.5).await;
    for query in [
        r#""foo" OR bar*"#,
        "foo AND NOT bar",
        "NEAR(foo bar)",
        "content:foo",
        "^foo -bar +wine",
        "foo\" bar'",
        "(((foo",
        "{foo bar}",
        "foo; DROP TABLE memories; --",
    ] {
        let found = call(&ctx, "recall", json!({"query": query}))
            .await
            .unwrap_or_else(|err| panic!("{query:?} failed: {err}"));
        let got = ids(&found);
        assert!(got.contains(&foo), "{query:?} finds foo: {found}");
        if query.contains("bar") {
            assert!(got.contains(&bar), "{query:?} finds bar: {found}");
        }
    }
    // "OR" and "NOT" are searched as words, not operators.
    let found = ok(&ctx, "recall", json!({"query": r#""foo" OR bar*"#})).await;
    assert_eq!(found["query_words"], json!(["foo", "bar"]));

    for query in [r#"*"()-:^ ,."#, "???", "\"\""] {
        let msg = invalid(&ctx, "recall", json!({"query": query})).await;
        assert!(msg.contains("no words to search for"), "{query:?}: {msg}");
    }
    let msg = invalid(&ctx, "recall", json!({})).await;
    assert!(msg.contains("missing field `query`"), "{msg}");
    assert_eq!(count(&ctx).await, 2, "still there");
}

#[tokio::test]
async fn an_important_recent_memory_outranks_an_unimportant_old_one() {
    let (ctx, _dir, clock) = manual_context().await;
    // Same text match; the important one is saved first so that id order would favour the other.
    let important = remember(&ctx, "Anniversary dinner at Luigi's", "event", 0.9).await;
    let old = remember(&ctx, "Anniversary dinner at Mario's", "event", 0.2).await;
    let ninety_days_ago = clock.now_ms() - 90 * 24 * 3600 * 1000;
    sqlx::query("UPDATE memories SET created_at = $1, updated_at = $1 WHERE id = $2")
        .bind(ninety_days_ago)
        .bind(old)
        .execute(ctx.store.pool())
        .await
        .expect("age it");
    let found = ok(&ctx, "recall", json!({"query": "anniversary dinner"})).await;
    assert_eq!(ids(&found), vec![important, old]);

    // Importance alone decides between two memories of the same age and text.
    let (ctx, _dir, _clock) = manual_context().await;
    let low = remember(&ctx, "Allergic to peanuts", "fact", 0.1).await;
    let high = remember(&ctx, "Allergic to peanuts, badly", "fact", 1.0).await;
    let found = ok(&ctx, "recall", json!({"query": "peanuts"})).await;
    assert_eq!(ids(&found), vec![high, low]);
    // And recency alone: the same memory a year on still ranks, just lower.
    clock_years_apart(&ctx).await;
}

/// Two equally important memories with the same words: the newer one comes first.
async fn clock_years_apart(ctx: &ToolContext) {
    let newer = remember(ctx, "Runs a marathon every spring", "skill", 0.5).await;
    let older = remember(ctx, "Runs a marathon every autumn", "skill", 0.5).await;
    sqlx::query("UPDATE memories SET created_at = 0, updated_at = 0 WHERE id = $1")
        .bind(older)
        .execute(ctx.store.pool())
        .await
        .expect("age it");
    let found = ok(ctx, "recall", json!({"query": "marathon"})).await;
    assert_eq!(ids(&found), vec![newer, older]);
}

#[tokio::test]
async fn forget_deletes_only_the_users_own_memory() {
    let (ctx, _dir) = test_context().await;
    let keep = remember(&ctx, "Lives in Porto", "fact", 0.5).await;
    let gone = remember(&ctx, "Works at Acme", "fact", 0.5).await;
    let result = ok(&ctx, "forget", json!({"memory_id": gone})).await;
    assert_eq!(
        result,
        json!({"forgotten": gone, "content": "Works at Acme"})
    );
    let found = ok(&ctx, "recall", json!({"query": "acme"})).await;
    assert_eq!(found["count"], 0, "gone from the full-text index too");

    let msg = failed(&ctx, "forget", json!({"memory_id": gone})).await;
    assert!(msg.contains(&format!("memory {gone} not found")), "{msg}");
    let other = other_user(&ctx).await;
    let msg = failed(&other, "forget", json!({"memory_id": keep})).await;
    assert!(msg.contains("not found"), "{msg}");
    let msg = invalid(&ctx, "forget", json!({"memory_id": "first"})).await;
    assert!(msg.contains("`memory_id`: invalid type"), "{msg}");
    assert_eq!(count(&ctx).await, 1);
    // Nor can another user find it.
    let found = ok(&other, "recall", json!({"query": "porto"})).await;
    assert_eq!(found["count"], 0);
}

#[tokio::test]
async fn list_memories_sorts_filters_and_limits_without_counting_recalls() {
    let (ctx, _dir, clock) = manual_context().await;
    let a = remember(&ctx, "First", "fact", 0.3).await;
    clock.advance(DAY);
    let b = remember(&ctx, "Second", "preference", 0.9).await;
    clock.advance(DAY);
    let c = ok(
        &ctx,
        "remember",
        json!({"content": "Third", "type": "fact", "importance": 0.6, "tags": ["home"]}),
    )
    .await["id"]
        .as_i64()
        .expect("id");

    let listed = ok(&ctx, "list_memories", json!({})).await;
    assert_eq!(ids(&listed), vec![c, b, a]);
    assert_eq!(listed["total"], 3);
    let listed = ok(&ctx, "list_memories", json!({"sort": "importance"})).await;
    assert_eq!(ids(&listed), vec![b, c, a]);
    let listed = ok(&ctx, "list_memories", json!({"type": "fact", "limit": 1})).await;
    assert_eq!(ids(&listed), vec![c]);
    assert_eq!(
        (listed["count"].clone(), listed["total"].clone()),
        (json!(1), json!(2))
    );
    let listed = ok(&ctx, "list_memories", json!({"tag": "home"})).await;
    assert_eq!(ids(&listed), vec![c]);
    let listed = ok(&ctx, "list_memories", json!({"tag": "ho%"})).await;
    assert_eq!(listed["total"], 0, "LIKE wildcards in a tag are literal");
    let msg = invalid(&ctx, "list_memories", json!({"sort": "oldest"})).await;
    assert!(msg.contains("`sort`: unknown variant `oldest`"), "{msg}");

    let accessed: i64 = sqlx::query_scalar("SELECT SUM(access_count) FROM memories")
        .fetch_one(ctx.store.pool())
        .await
        .expect("sum");
    assert_eq!(accessed, 0);
    let other = other_user(&ctx).await;
    assert_eq!(ok(&other, "list_memories", json!({})).await["total"], 0);
}

#[tokio::test]
async fn boost_memory_raises_caps_and_lowers() {
    let (ctx, _dir) = test_context().await;
    let id = remember(&ctx, "Birthday is 4 May", "fact", 0.5).await;
    let boosted = ok(&ctx, "boost_memory", json!({"memory_id": id})).await;
    assert_eq!(boosted["importance_before"], 0.5);
    assert_eq!(boosted["importance"], 0.6);
    let boosted = ok(
        &ctx,
        "boost_memory",
        json!({"memory_id": id, "amount": 0.7}),
    )
    .await;
    assert_eq!(boosted["importance"], 1.0, "capped at 1");
    let lowered = ok(
        &ctx,
        "boost_memory",
        json!({"memory_id": id, "amount": -0.25}),
    )
    .await;
    assert_eq!(lowered["importance"], 0.75);
    let lowered = ok(&ctx, "boost_memory", json!({"memory_id": id, "amount": -1})).await;
    assert_eq!(lowered["importance"], 0.0, "not below 0");

    let msg = invalid(&ctx, "boost_memory", json!({"memory_id": id, "amount": 2})).await;
    assert!(msg.contains("between -1 and 1"), "{msg}");
    let msg = failed(&ctx, "boost_memory", json!({"memory_id": id + 100})).await;
    assert!(msg.contains("not found"), "{msg}");
    let other = other_user(&ctx).await;
    let msg = failed(&other, "boost_memory", json!({"memory_id": id})).await;
    assert!(msg.contains("not found"), "{msg}");
}

#[tokio::test]
async fn memory_stats_counts_by_type() {
    let (ctx, _dir, clock) = manual_context().await;
    let empty = ok(&ctx, "memory_stats", json!({})).await;
    assert_eq!(empty["total"], 0);
    assert_eq!(
        empty["by_type"],
        json!({"fact": 0, "preference": 0, "event": 0, "skill": 0})
    );
    assert!(empty.get("oldest").is_none());

    remember(&ctx, "Lives in Porto", "fact", 0.4).await;
    clock.advance(DAY);
    remember(&ctx, "Likes jazz", "preference", 0.8).await;
    clock.advance(DAY);
    let newest = remember(&ctx, "Went to Lisbon", "event", 0.6).await;
    ok(&ctx, "recall", json!({"query": "jazz"})).await;
    let stats = ok(&ctx, "memory_stats", json!({})).await;
    assert_eq!(stats["total"], 3);
    assert_eq!(
        stats["by_type"],
        json!({"fact": 1, "preference": 1, "event": 1, "skill": 0})
    );
    assert_eq!(stats["average_importance"], 0.6);
    assert_eq!(stats["recalls"], 1);
    assert_eq!(stats["oldest"]["content"], "Lives in Porto");
    assert_eq!(stats["oldest"]["saved"], "2026-03-01 12:00");
    assert_eq!(stats["newest"]["id"], newest);
}

#[tokio::test]
async fn prompt_context_shows_the_profile_and_relevant_memories() {
    let (ctx, _dir, clock) = manual_context().await;
    let store = &ctx.store;
    let user_id = ctx.user_id.expect("user");
    assert_eq!(
        prompt_context(store, user_id, "hello", clock.now_ms())
            .await
            .expect("context"),
        None
    );

    let name = remember(&ctx, "Name is Ana", "fact", 0.9).await;
    let milk = remember(&ctx, "Prefers oat milk\nin coffee", "preference", 0.7).await;
    let trip = remember(&ctx, "Flew to Lisbon for a conference", "event", 0.9).await;
    let low = remember(&ctx, "Once had a coffee with Bob", "fact", 0.2).await;
    remember(&ctx, "Likes jazz", "preference", 0.5).await;

    let text = prompt_context(
        store,
        user_id,
        "Any coffee plans? Or Lisbon?",
        clock.now_ms(),
    )
    .await
    .expect("context")
    .expect("something to say");
    let expected = format!(
        "What you know about the user:\n\
         - [fact] Name is Ana (#{name})\n\
         - [preference] Prefers oat milk in coffee (#{milk})\n\
         \n\
         Memories that may be relevant to this message:\n"
    );
    assert!(text.starts_with(&expected), "{text}");
    assert!(
        text.contains(&format!(
            "- [event, 2026-03-01] Flew to Lisbon for a conference (#{trip})"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("Once had a coffee with Bob (#{low})")),
        "{text}"
    );
    assert!(
        !text.contains("jazz"),
        "not relevant, not in the profile: {text}"
    );
    assert_eq!(text.matches("oat milk").count(), 1, "no repeats: {text}");

    // Punctuation only: just the profile; and no recall was counted.
    let text = prompt_context(store, user_id, "?!", clock.now_ms())
        .await
        .expect("context")
        .expect("profile");
    assert!(!text.contains("relevant"), "{text}");
    let accessed: i64 = sqlx::query_scalar("SELECT SUM(access_count) FROM memories")
        .fetch_one(store.pool())
        .await
        .expect("sum");
    assert_eq!(accessed, 0);

    // Another user's memories never show.
    let other = other_user(&ctx).await;
    let other_id = other.user_id.expect("user");
    assert_eq!(
        prompt_context(store, other_id, "coffee Lisbon", clock.now_ms())
            .await
            .expect("context"),
        None
    );
}

#[tokio::test]
async fn prompt_context_keeps_to_its_limits() {
    let (ctx, _dir, clock) = manual_context().await;
    for i in 0..15 {
        remember(&ctx, &format!("Important fact {i} about cats"), "fact", 0.8).await;
    }
    for i in 0..10 {
        remember(&ctx, &format!("Minor note {i} about cats"), "event", 0.1).await;
    }
    let long = format!("The longest fact about cats {}", "x".repeat(400));
    remember(&ctx, &long, "fact", 1.0).await;
    let text = prompt_context(
        &ctx.store,
        ctx.user_id.expect("user"),
        "cats",
        clock.now_ms(),
    )
    .await
    .expect("context")
    .expect("text");
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(lines.len(), 15, "10 profile + 5 relevant: {text}");
    assert!(
        lines[0].contains("The longest fact about cats xxx"),
        "{text}"
    );
    assert!(lines[0].contains("x… (#"), "shortened: {text}");
    assert!(
        lines
            .iter()
            .all(|l| l.chars().count() <= PROMPT_LINE_CHARS + 20),
        "{text}"
    );
    assert!(!text.contains("Minor note"), "{text}");
}

/// The same SQL on PostgreSQL: on the server `HEARTH_TEST_POSTGRES_URL` names (one the test may
/// create databases on), else on a throwaway server started for this test.
#[tokio::test]
async fn the_tools_work_on_postgres_too() {
    // A server named by the environment, else one of our own (skipped if PostgreSQL is absent).
    let own_server;
    let admin_url = match std::env::var("HEARTH_TEST_POSTGRES_URL") {
        Ok(url) => url,
        Err(_) => {
            own_server = hearth_testkit::postgres::TestPostgres::start();
            match &own_server {
                Some(server) => server.url(),
                None => return,
            }
        }
    };
    sqlx::any::install_default_drivers();
    let admin = sqlx::AnyPool::connect(&admin_url).await.expect("connect");
    let name = format!(
        "hearth_memory_{}_{}",
        std::process::id(),
        chrono::Utc::now().timestamp_micros()
    );
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin)
        .await
        .expect("create database");
    let base = admin_url
        .rsplit_once('/')
        .map_or(admin_url.as_str(), |(base, _)| base);
    let store = Store::open(&format!("{base}/{name}"))
        .await
        .expect("open and migrate");

    let (sqlite_ctx, _dir, clock) = manual_context().await;
    let user = store
        .allow_identity("test", "u1", None, "config", true, 0)
        .await
        .expect("user");
    let mut ctx = sqlite_ctx.clone();
    ctx.store = store.clone();
    ctx.user_id = Some(user.user_id);

    let important = remember(&ctx, "Anniversary dinner at Luigi's", "event", 0.9).await;
    let old = remember(&ctx, "Anniversary dinner at Mario's", "event", 0.2).await;
    sqlx::query("UPDATE memories SET created_at = $1, updated_at = $1 WHERE id = $2")
        .bind(clock.now_ms() - 90 * 24 * 3600 * 1000)
        .bind(old)
        .execute(store.pool())
        .await
        .expect("age it");
    let found = ok(&ctx, "recall", json!({"query": "ANNIVERSARY dinners"})).await;
    assert_eq!(found["matched"], "any word", "{found}");
    let found = ok(&ctx, "recall", json!({"query": "anniv dinner"})).await;
    assert_eq!(
        (ids(&found), found["matched"].clone()),
        (vec![important, old], json!("all words"))
    );
    let found = ok(
        &ctx,
        "recall",
        json!({"query": r#""luigi" OR bar* & !x | y:*"#}),
    )
    .await;
    assert_eq!(ids(&found), vec![important]);
    let msg = invalid(&ctx, "recall", json!({"query": "&|!:*"})).await;
    assert!(msg.contains("no words"), "{msg}");

    let saved = ok(
        &ctx,
        "batch_remember",
        json!({"memories": [
            {"content": "Likes jazz", "type": "preference", "importance": 0.8, "tags": ["music"]},
            {"content": "likes JAZZ", "importance": 0.3, "tags": ["evenings"]}
        ]}),
    )
    .await;
    let jazz = saved["memories"][0]["id"].as_i64().expect("id");
    assert_eq!(saved["memories"][1]["id"], jazz);
    assert_eq!(saved["memories"][1]["tags"], json!(["music", "evenings"]));
    let found = ok(
        &ctx,
        "recall",
        json!({"query": "evenings", "tag": "music", "type": "preference"}),
    )
    .await;
    assert_eq!(ids(&found), vec![jazz], "found by tag text");
    let listed = ok(
        &ctx,
        "list_memories",
        json!({"sort": "importance", "tag": "music"}),
    )
    .await;
    assert_eq!(ids(&listed), vec![jazz]);
    let listed = ok(&ctx, "list_memories", json!({"limit": 2})).await;
    assert_eq!(
        (listed["count"].clone(), listed["total"].clone()),
        (json!(2), json!(3))
    );
    let boosted = ok(
        &ctx,
        "boost_memory",
        json!({"memory_id": jazz, "amount": 0.5}),
    )
    .await;
    assert_eq!(boosted["importance"], 1.0);
    let stats = ok(&ctx, "memory_stats", json!({})).await;
    assert_eq!(stats["total"], 3);
    assert_eq!(stats["by_type"]["event"], 2);
    assert_eq!(stats["recalls"], 6, "2 + 2 + 1 + 1 hits: {stats}");
    assert_eq!(stats["oldest"]["id"], old);

    let text = prompt_context(&store, user.user_id, "dinner plans", clock.now_ms())
        .await
        .expect("context")
        .expect("text");
    assert!(
        text.contains(&format!("- [preference] Likes jazz (#{jazz})")),
        "{text}"
    );
    assert!(text.contains("Luigi's"), "{text}");

    assert_eq!(
        ok(&ctx, "forget", json!({"memory_id": old})).await["forgotten"],
        old
    );
    let msg = failed(&ctx, "forget", json!({"memory_id": old})).await;
    assert!(msg.contains("not found"), "{msg}");
    let found = ok(&ctx, "recall", json!({"query": "mario"})).await;
    assert_eq!(found["count"], 0);

    store.close().await;
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE {name}")))
        .execute(&admin)
        .await
        .expect("drop database");
}
