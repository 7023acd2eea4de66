//! The `memory` tools: what the assistant remembers about each user, across conversations.
//!
//! A memory is one short statement with a kind (`fact`, `preference`, `event`, `skill`), an
//! importance between 0 and 1, and optional tags. `recall` finds memories by full-text search
//! ranked by relevance, importance and recency (see [`search`] for the query rules and the
//! formula), and counts each recall so memories in use stay fresh. [`prompt_context`] gives the
//! runtime a short profile plus the memories relevant to the current message for the system
//! prompt.
//!
//! Saving the same content twice (ignoring case and surrounding space) updates the existing
//! memory instead of adding a copy: its importance becomes the higher of the two, the tags merge,
//! and the kind changes when one is given.

mod record;
mod search;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use sqlx::Row;

use self::record::{COLUMNS, KINDS, Memory, Param, Sql, encode_tags};
use self::search::{Filter, Match, search, search_words};
use super::common::write_tx;
use super::time::format_local;
use super::{Args, Risk, Tool, ToolContext, ToolError, ToolInfo, list_limit};
use crate::store::{Store, StoreError};

const GROUP: &str = "memory";
/// Longest content a memory may have, in characters: memories are single statements.
pub const MAX_CONTENT: usize = 2000;
const MAX_TAGS: usize = 10;
const MAX_TAG_CHARS: usize = 40;
const MAX_BATCH: usize = 20;
const DEFAULT_IMPORTANCE: f64 = 0.5;
/// Profile entries in the prompt: preferences and facts at least this important.
pub const PROFILE_IMPORTANCE: f64 = 0.7;
const PROFILE_MAX: i64 = 10;
const RELEVANT_MAX: usize = 5;
/// Longest line a memory gets in the prompt context, in characters.
const PROMPT_LINE_CHARS: usize = 200;

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(Remember::new()),
        Arc::new(BatchRemember::new()),
        Arc::new(Recall::new()),
        Arc::new(Forget::new()),
        Arc::new(ListMemories::new()),
        Arc::new(BoostMemory::new()),
        Arc::new(MemoryStats::new()),
    ]
}

fn db(err: sqlx::Error) -> ToolError {
    ToolError::Failed(format!("database error: {err}"))
}

fn user(ctx: &ToolContext) -> Result<i64, ToolError> {
    ctx.user_id.ok_or_else(|| {
        ToolError::Failed("memory needs a known user, and this conversation has none".into())
    })
}

fn not_found(id: i64) -> ToolError {
    ToolError::Failed(format!(
        "memory {id} not found; use recall or list_memories to find its id"
    ))
}

/// Two decimals are all the precision importance needs, and keep 0.1 steps exact.
fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn kind_schema(what: &str) -> Value {
    json!({"type": "string", "enum": KINDS, "description": what})
}

fn memory_fields_schema() -> Value {
    json!({
        "content": {"type": "string", "description": "One self-contained statement, e.g. \"Prefers oat milk in coffee\"", "maxLength": MAX_CONTENT},
        "type": kind_schema("fact (default), preference (likes, dislikes, how they want things), event (something that happened or will), skill (what they can do)"),
        "importance": {"type": "number", "minimum": 0, "maximum": 1, "description": "0..1, default 0.5; 0.7 or more puts it in every conversation's profile, 0.9 for essentials"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_TAGS, "description": "Short lowercase labels, e.g. [\"food\", \"family\"]"}
    })
}

/// A memory as the model sees it.
fn memory_json(memory: &Memory, ctx: &ToolContext) -> Value {
    let mut value = json!({
        "id": memory.id,
        "content": memory.content,
        "type": memory.kind,
        "importance": memory.importance,
        "tags": memory.tags,
        "saved": format_local(memory.created_at, ctx.timezone),
    });
    if memory.access_count > 0 {
        value["recalled"] = json!(memory.access_count);
    }
    value
}

/// A memory to save, checked.
#[derive(Clone, Debug, PartialEq)]
struct NewMemory {
    content: String,
    /// `None` when not given: `fact` for a new memory, unchanged for a known one.
    kind: Option<String>,
    importance: f64,
    tags: Vec<String>,
}

/// An optional number that, when given, must be one: "high" is an error, not the default.
fn opt_number(args: &Args<'_>, name: &str) -> Result<Option<f64>, ToolError> {
    match args.0.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => match args.opt_f64(name) {
            Some(x) if x.is_finite() => Ok(Some(x)),
            _ => Err(ToolError::InvalidArguments(format!(
                "`{name}` must be a number"
            ))),
        },
    }
}

fn parse_kind(value: Option<&str>) -> Result<Option<String>, ToolError> {
    match value.map(|k| k.trim().to_lowercase()) {
        None => Ok(None),
        Some(k) if k.is_empty() => Ok(None),
        Some(k) if KINDS.contains(&k.as_str()) => Ok(Some(k)),
        Some(k) => Err(ToolError::InvalidArguments(format!(
            "unknown memory type {k:?}; use one of {}",
            KINDS.join(", ")
        ))),
    }
}

fn parse_tag(tag: &str) -> Result<Option<String>, ToolError> {
    let tag = tag.split_whitespace().collect::<Vec<_>>().join(" ");
    let tag = tag.to_lowercase();
    if tag.is_empty() {
        return Ok(None);
    }
    if tag.chars().count() > MAX_TAG_CHARS {
        return Err(ToolError::InvalidArguments(format!(
            "tag {tag:?} is too long; keep tags under {MAX_TAG_CHARS} characters"
        )));
    }
    Ok(Some(tag))
}

fn parse_tags(args: &Args<'_>) -> Result<Vec<String>, ToolError> {
    let mut tags: Vec<String> = Vec::new();
    // A comma inside one array item is two tags: commas separate tags in storage.
    for item in args.strings("tags") {
        for part in item.split(',') {
            if let Some(tag) = parse_tag(part)?
                && !tags.contains(&tag)
            {
                tags.push(tag);
            }
        }
    }
    if tags.len() > MAX_TAGS {
        return Err(ToolError::InvalidArguments(format!(
            "{} tags given; use at most {MAX_TAGS}",
            tags.len()
        )));
    }
    Ok(tags)
}

fn parse_new(value: &Value) -> Result<NewMemory, ToolError> {
    if !value.is_object() {
        return Err(ToolError::InvalidArguments(
            "each memory must be an object with `content`".into(),
        ));
    }
    let args = Args::new(value);
    let content = args.str("content")?.trim().to_string();
    let chars = content.chars().count();
    if chars > MAX_CONTENT {
        return Err(ToolError::InvalidArguments(format!(
            "content is {chars} characters; keep a memory under {MAX_CONTENT}: one statement, split or summarised"
        )));
    }
    let kind = parse_kind(args.opt_str("type"))?;
    let importance = opt_number(&args, "importance")?.unwrap_or(DEFAULT_IMPORTANCE);
    if !(0.0..=1.0).contains(&importance) {
        return Err(ToolError::InvalidArguments(format!(
            "importance must be between 0 and 1 (0.5 ordinary, 0.9 essential); got {importance}"
        )));
    }
    Ok(NewMemory {
        content,
        kind,
        importance: round2(importance),
        tags: parse_tags(&args)?,
    })
}

/// Saves `new` for `user_id`, or updates the memory with the same content. Returns the stored
/// memory and whether it was already there.
async fn save(
    conn: &mut sqlx::AnyConnection,
    user_id: i64,
    new: &NewMemory,
    now: i64,
) -> Result<(Memory, bool), sqlx::Error> {
    let existing = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM memories m WHERE m.user_id = $1 AND lower(m.content) = lower($2) \
         ORDER BY m.id LIMIT 1"
    )))
    .bind(user_id)
    .bind(&new.content)
    .fetch_optional(&mut *conn)
    .await?;
    let (id, known) = match existing {
        Some(row) => {
            let old = Memory::from_row(&row)?;
            let mut tags = old.tags.clone();
            for tag in &new.tags {
                if !tags.contains(tag) {
                    tags.push(tag.clone());
                }
            }
            tags.truncate(MAX_TAGS);
            let id: i64 = sqlx::query(
                "UPDATE memories SET kind = $1, importance = $2, tags = $3, updated_at = $4 \
                 WHERE id = $5 RETURNING id",
            )
            .bind(new.kind.as_deref().unwrap_or(&old.kind))
            .bind(old.importance.max(new.importance))
            .bind(encode_tags(&tags))
            .bind(now)
            .bind(old.id)
            .fetch_one(&mut *conn)
            .await?
            .try_get("id")?;
            (id, true)
        }
        None => {
            let id: i64 = sqlx::query(
                "INSERT INTO memories (user_id, content, kind, importance, tags, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING id",
            )
            .bind(user_id)
            .bind(&new.content)
            .bind(new.kind.as_deref().unwrap_or(KINDS[0]))
            .bind(new.importance)
            .bind(encode_tags(&new.tags))
            .bind(now)
            .fetch_one(&mut *conn)
            .await?
            .try_get("id")?;
            (id, false)
        }
    };
    let memory = fetch(&mut *conn, user_id, id)
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    Ok((memory, known))
}

async fn fetch(
    conn: &mut sqlx::AnyConnection,
    user_id: i64,
    id: i64,
) -> Result<Option<Memory>, sqlx::Error> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM memories m WHERE m.id = $1 AND m.user_id = $2"
    )))
    .bind(id)
    .bind(user_id)
    .fetch_optional(conn)
    .await?
    .map(|row| Memory::from_row(&row))
    .transpose()
}

fn saved_json(memory: &Memory, known: bool, ctx: &ToolContext) -> Value {
    let mut value = memory_json(memory, ctx);
    value["status"] = json!(if known {
        "already known; updated"
    } else {
        "saved"
    });
    value
}

/// `remember`: saves one memory.
struct Remember(ToolInfo);

impl Remember {
    fn new() -> Self {
        let mut properties = memory_fields_schema();
        properties["content"]["description"] = json!(
            "What to remember: one self-contained statement about the user, e.g. \"Prefers oat milk in coffee\""
        );
        Self(
            ToolInfo::new(
                "remember",
                GROUP,
                "Save something worth knowing about the user for later conversations: a fact, preference, event or skill. Saving the same text again updates it.",
                json!({
                    "type": "object",
                    "properties": properties,
                    "required": ["content"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Write)
            .tags(&["memorise", "memorize", "save", "note", "profile", "learn"]),
        )
    }
}

#[async_trait]
impl Tool for Remember {
    fn info(&self) -> &ToolInfo {
        &self.0
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let user_id = user(ctx)?;
        let new = parse_new(&args)?;
        // Its own transaction: see `common::write_tx`.
        let mut tx = write_tx(ctx).await?;
        let (memory, known) = save(&mut tx, user_id, &new, ctx.clock.now_ms())
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(saved_json(&memory, known, ctx).to_string())
    }
}

/// `batch_remember`: saves several memories at once, all or none.
struct BatchRemember(ToolInfo);

impl BatchRemember {
    fn new() -> Self {
        Self(
            ToolInfo::new(
                "batch_remember",
                GROUP,
                "Save several memories at once (all or none), e.g. after the user tells you about themselves.",
                json!({
                    "type": "object",
                    "properties": {
                        "memories": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": MAX_BATCH,
                            "description": "The memories to save",
                            "items": {
                                "type": "object",
                                "properties": memory_fields_schema(),
                                "required": ["content"],
                                "additionalProperties": false
                            }
                        }
                    },
                    "required": ["memories"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Write)
            .tags(&["memorise", "memorize", "save", "many", "bulk", "profile"]),
        )
    }
}

#[async_trait]
impl Tool for BatchRemember {
    fn info(&self) -> &ToolInfo {
        &self.0
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let user_id = user(ctx)?;
        let items = Args::new(&args).array("memories")?;
        if items.is_empty() {
            return Err(ToolError::InvalidArguments(
                "`memories` is empty; give at least one".into(),
            ));
        }
        if items.len() > MAX_BATCH {
            return Err(ToolError::InvalidArguments(format!(
                "{} memories given; save at most {MAX_BATCH} per call",
                items.len()
            )));
        }
        // Check everything before saving anything, so one bad item loses nothing.
        let mut news = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let new = parse_new(item).map_err(|err| match err {
                ToolError::InvalidArguments(msg) => {
                    ToolError::InvalidArguments(format!("memories[{i}]: {msg}; nothing was saved"))
                }
                other => other,
            })?;
            news.push(new);
        }
        let now = ctx.clock.now_ms();
        let mut tx = write_tx(ctx).await?;
        let mut saved = Vec::with_capacity(news.len());
        for new in &news {
            let (memory, known) = save(&mut tx, user_id, new, now).await.map_err(db)?;
            saved.push(saved_json(&memory, known, ctx));
        }
        tx.commit().await.map_err(db)?;
        Ok(json!({"count": saved.len(), "memories": saved}).to_string())
    }
}

/// Reads the optional `type` and `tag` filters.
fn parse_filter(args: &Args<'_>) -> Result<Filter, ToolError> {
    Ok(Filter {
        kind: parse_kind(args.opt_str("type"))?,
        tag: match args.opt_str("tag") {
            Some(tag) => parse_tag(tag)?,
            None => None,
        },
    })
}

/// `recall`: full-text search over the user's memories.
struct Recall(ToolInfo);

impl Recall {
    fn new() -> Self {
        Self(
            ToolInfo::new(
                "recall",
                GROUP,
                "Search the user's memories by words, best matches first (relevance, importance and recency). Memories containing all the words are preferred; if none do, any word matches.",
                json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "Plain words to look for, e.g. \"coffee milk\"; punctuation and operators are ignored"},
                        "type": kind_schema("Only memories of this type"),
                        "tag": {"type": "string", "description": "Only memories with this tag"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Most results, default 10"}
                    },
                    "required": ["query"],
                    "additionalProperties": false
                }),
            )
            .limit("limit", 10, 50)
            .tags(&["search", "find", "remember", "know", "profile", "lookup"]),
        )
    }
}

#[async_trait]
impl Tool for Recall {
    fn info(&self) -> &ToolInfo {
        &self.0
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let user_id = user(ctx)?;
        let a = Args::new(&args);
        let query = a.str("query")?;
        let words = search_words(query);
        if words.is_empty() {
            return Err(ToolError::InvalidArguments(format!(
                "the query {query:?} has no words to search for; use plain words like \"coffee order\""
            )));
        }
        let filter = parse_filter(&a)?;
        let limit = usize::try_from(list_limit(self.info(), &args)).unwrap_or(usize::MAX);
        let now = ctx.clock.now_ms();
        let store = &ctx.store;
        let mut mode = Match::All;
        let mut found = search(store, user_id, &words, mode, &filter, limit, now)
            .await
            .map_err(db)?;
        if found.is_empty() && words.len() > 1 {
            mode = Match::Any;
            found = search(store, user_id, &words, mode, &filter, limit, now)
                .await
                .map_err(db)?;
        }
        if !found.is_empty() {
            touch(store, user_id, &found, now).await.map_err(db)?;
        }
        let memories: Vec<Value> = found.iter().map(|m| memory_json(m, ctx)).collect();
        let mut result = json!({
            "query_words": words,
            "matched": mode.as_str(),
            "count": memories.len(),
            "memories": memories,
        });
        if found.is_empty() {
            result["hint"] = json!("nothing matches; try other words, or list_memories");
        }
        Ok(result.to_string())
    }
}

/// Counts a recall of `found`: one more access each, last accessed now.
async fn touch(store: &Store, user_id: i64, found: &[Memory], now: i64) -> Result<(), sqlx::Error> {
    let mut sql = Sql::new(
        "UPDATE memories SET access_count = access_count + 1, last_accessed = $1 \
         WHERE user_id = $2 AND id IN (",
    );
    sql.params = vec![Param::Int(now), Param::Int(user_id)];
    for (i, memory) in found.iter().enumerate() {
        sql.push(if i == 0 { "?" } else { ", ?" }, Param::Int(memory.id));
    }
    sql.push_str(")");
    sql.query().execute(store.pool()).await?;
    Ok(())
}

/// `forget`: deletes one memory.
struct Forget(ToolInfo);

impl Forget {
    fn new() -> Self {
        Self(
            ToolInfo::new(
                "forget",
                GROUP,
                "Delete one memory for good, e.g. when it is wrong or the user asks you to forget it.",
                json!({
                    "type": "object",
                    "properties": {
                        "memory_id": {"type": "integer", "description": "The memory's id, from recall or list_memories"}
                    },
                    "required": ["memory_id"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Destructive)
            .tags(&["delete", "remove", "erase", "memory"]),
        )
    }
}

#[async_trait]
impl Tool for Forget {
    fn info(&self) -> &ToolInfo {
        &self.0
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let user_id = user(ctx)?;
        let id = Args::new(&args).i64("memory_id")?;
        let mut tx = write_tx(ctx).await?;
        let row =
            sqlx::query("DELETE FROM memories WHERE id = $1 AND user_id = $2 RETURNING content")
                .bind(id)
                .bind(user_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db)?
                .ok_or_else(|| not_found(id))?;
        tx.commit().await.map_err(db)?;
        let content: String = row.try_get("content").map_err(db)?;
        Ok(json!({"forgotten": id, "content": content}).to_string())
    }
}

/// `list_memories`: the user's memories, newest or most important first.
struct ListMemories(ToolInfo);

impl ListMemories {
    fn new() -> Self {
        Self(
            ToolInfo::new(
                "list_memories",
                GROUP,
                "List the user's memories, newest or most important first, optionally of one type or tag.",
                json!({
                    "type": "object",
                    "properties": {
                        "type": kind_schema("Only memories of this type"),
                        "tag": {"type": "string", "description": "Only memories with this tag"},
                        "sort": {"type": "string", "enum": ["newest", "importance"], "description": "newest (default) or importance (most important first)"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Most results, default 20"}
                    },
                    "additionalProperties": false
                }),
            )
            .limit("limit", 20, 50)
            .tags(&["show", "all", "profile", "browse"]),
        )
    }
}

#[async_trait]
impl Tool for ListMemories {
    fn info(&self) -> &ToolInfo {
        &self.0
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let user_id = user(ctx)?;
        let a = Args::new(&args);
        let filter = parse_filter(&a)?;
        let order = match a.opt_str("sort").map(str::trim) {
            None | Some("") | Some("newest") => "m.created_at DESC, m.id DESC",
            Some("importance") => "m.importance DESC, m.created_at DESC, m.id DESC",
            Some(other) => {
                return Err(ToolError::InvalidArguments(format!(
                    "unknown sort {other:?}; use newest or importance"
                )));
            }
        };
        let limit = list_limit(self.info(), &args);

        let mut count = Sql::new("SELECT COUNT(*) AS n FROM memories m WHERE m.user_id = $1");
        count.params.push(Param::Int(user_id));
        filter.apply(&mut count);
        let total: i64 = count
            .query()
            .fetch_one(ctx.store.pool())
            .await
            .and_then(|row| row.try_get("n"))
            .map_err(db)?;

        let mut list = Sql::new(&format!(
            "SELECT {COLUMNS} FROM memories m WHERE m.user_id = $1"
        ));
        list.params.push(Param::Int(user_id));
        filter.apply(&mut list);
        list.push_str(&format!(" ORDER BY {order}"));
        list.push(" LIMIT ?", Param::Int(limit));
        let rows = list.query().fetch_all(ctx.store.pool()).await.map_err(db)?;
        let memories = rows
            .iter()
            .map(|row| Memory::from_row(row).map(|m| memory_json(&m, ctx)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(db)?;
        Ok(json!({"count": memories.len(), "total": total, "memories": memories}).to_string())
    }
}

/// `boost_memory`: makes a memory more (or less) important.
struct BoostMemory(ToolInfo);

impl BoostMemory {
    fn new() -> Self {
        Self(
            ToolInfo::new(
                "boost_memory",
                GROUP,
                "Raise a memory's importance (capped at 1), e.g. when it keeps coming up; a negative amount lowers it (not below 0).",
                json!({
                    "type": "object",
                    "properties": {
                        "memory_id": {"type": "integer", "description": "The memory's id"},
                        "amount": {"type": "number", "minimum": -1, "maximum": 1, "description": "How much to add to its importance, default 0.1"}
                    },
                    "required": ["memory_id"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Write)
            .tags(&["importance", "important", "priority", "reinforce"]),
        )
    }
}

#[async_trait]
impl Tool for BoostMemory {
    fn info(&self) -> &ToolInfo {
        &self.0
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let user_id = user(ctx)?;
        let a = Args::new(&args);
        let id = a.i64("memory_id")?;
        let amount = opt_number(&a, "amount")?.unwrap_or(0.1);
        if !(-1.0..=1.0).contains(&amount) {
            return Err(ToolError::InvalidArguments(format!(
                "amount must be between -1 and 1; got {amount}"
            )));
        }
        let mut tx = write_tx(ctx).await?;
        let before = fetch(&mut tx, user_id, id)
            .await
            .map_err(db)?
            .ok_or_else(|| not_found(id))?;
        let importance = round2((before.importance + amount).clamp(0.0, 1.0));
        sqlx::query(
            "UPDATE memories SET importance = $1, updated_at = $2 WHERE id = $3 AND user_id = $4",
        )
        .bind(importance)
        .bind(ctx.clock.now_ms())
        .bind(id)
        .bind(user_id)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(json!({
            "id": id,
            "content": before.content,
            "importance_before": before.importance,
            "importance": importance,
        })
        .to_string())
    }
}

/// `memory_stats`: how much is remembered, by type.
struct MemoryStats(ToolInfo);

impl MemoryStats {
    fn new() -> Self {
        Self(
            ToolInfo::new(
                "memory_stats",
                GROUP,
                "Summarise the user's memories: how many of each type, average importance, the oldest and newest.",
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
            )
            .tags(&["count", "summary", "statistics", "overview"]),
        )
    }
}

#[async_trait]
impl Tool for MemoryStats {
    fn info(&self) -> &ToolInfo {
        &self.0
    }

    async fn call(&self, ctx: &ToolContext, _args: Value) -> Result<String, ToolError> {
        let user_id = user(ctx)?;
        let pool = ctx.store.pool();
        let rows = sqlx::query(
            // PostgreSQL sums BIGINT as NUMERIC, which the Any driver cannot read: cast back.
            "SELECT kind, COUNT(*) AS n, SUM(importance) AS importance, \
             CAST(SUM(access_count) AS BIGINT) AS recalls \
             FROM memories WHERE user_id = $1 GROUP BY kind",
        )
        .bind(user_id)
        .fetch_all(pool)
        .await
        .map_err(db)?;
        let mut by_type = serde_json::Map::new();
        for kind in KINDS {
            by_type.insert(kind.to_string(), json!(0));
        }
        let (mut total, mut importance_sum, mut recalls) = (0i64, 0.0f64, 0i64);
        for row in &rows {
            let kind: String = row.try_get("kind").map_err(db)?;
            let n: i64 = row.try_get("n").map_err(db)?;
            importance_sum += row.try_get::<f64, _>("importance").map_err(db)?;
            recalls += row.try_get::<i64, _>("recalls").map_err(db)?;
            total += n;
            by_type.insert(kind, json!(n));
        }
        let mut result = json!({
            "total": total,
            "by_type": by_type,
            "recalls": recalls,
        });
        if total > 0 {
            let average = importance_sum / total as f64;
            result["average_importance"] = json!(round2(average));
            for (key, order) in [("oldest", "ASC"), ("newest", "DESC")] {
                let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {COLUMNS} FROM memories m WHERE m.user_id = $1 \
                     ORDER BY m.created_at {order}, m.id {order} LIMIT 1"
                )))
                .bind(user_id)
                .fetch_one(pool)
                .await
                .map_err(db)?;
                let memory = Memory::from_row(&row).map_err(db)?;
                result[key] = json!({
                    "id": memory.id,
                    "content": memory.content,
                    "saved": format_local(memory.created_at, ctx.timezone),
                });
            }
        }
        Ok(result.to_string())
    }
}

/// The memory section of the system prompt for `user_id`'s turn: their profile (preferences and
/// facts of importance >= 0.7, most important first, at most 10) and up to 5 other memories
/// matching `query` (the user's message), one line each. `None` when there is nothing to say.
///
/// Runs on every turn, so it is two indexed queries and does not count as a recall.
pub async fn prompt_context(
    store: &Store,
    user_id: i64,
    query: &str,
    now_ms: i64,
) -> Result<Option<String>, StoreError> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM memories m WHERE m.user_id = $1 AND m.importance >= $2 \
         AND m.kind IN ('preference', 'fact') \
         ORDER BY m.importance DESC, m.updated_at DESC, m.id DESC LIMIT $3"
    )))
    .bind(user_id)
    .bind(PROFILE_IMPORTANCE)
    .bind(PROFILE_MAX)
    .fetch_all(store.pool())
    .await?;
    let profile = rows
        .iter()
        .map(Memory::from_row)
        .collect::<Result<Vec<_>, _>>()?;

    let words = search_words(query);
    // Enough to fill the section after leaving out what the profile already shows.
    let wanted = RELEVANT_MAX + profile.len();
    let relevant: Vec<Memory> = search(
        store,
        user_id,
        &words,
        Match::Any,
        &Filter::default(),
        wanted,
        now_ms,
    )
    .await?
    .into_iter()
    .filter(|m| !profile.iter().any(|p| p.id == m.id))
    .take(RELEVANT_MAX)
    .collect();

    if profile.is_empty() && relevant.is_empty() {
        return Ok(None);
    }
    let mut text = String::new();
    if !profile.is_empty() {
        text.push_str("What you know about the user:\n");
        for memory in &profile {
            text.push_str(&prompt_line(memory));
        }
    }
    if !relevant.is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str("Memories that may be relevant to this message:\n");
        for memory in &relevant {
            text.push_str(&prompt_line(memory));
        }
    }
    Ok(Some(text.trim_end().to_string()))
}

/// `- [kind] content (#id)`, on one line, shortened to [`PROMPT_LINE_CHARS`]; events carry the
/// date they were saved (UTC).
fn prompt_line(memory: &Memory) -> String {
    let mut content = memory
        .content
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if content.chars().count() > PROMPT_LINE_CHARS {
        content = content
            .chars()
            .take(PROMPT_LINE_CHARS - 1)
            .collect::<String>()
            + "…";
    }
    let date = chrono::DateTime::from_timestamp_millis(memory.created_at)
        .map(|t| t.format("%Y-%m-%d").to_string());
    let label = match date {
        Some(date) if memory.kind == "event" => format!("event, {date}"),
        _ => memory.kind.clone(),
    };
    format!("- [{label}] {content} (#{})\n", memory.id)
}

#[cfg(test)]
mod tests;
