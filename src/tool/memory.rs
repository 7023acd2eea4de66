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

mod search;

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use self::search::{described, search, search_words};
use super::time::format_local;
use super::typed::{Count, Limit, NonEmpty, inline_schema};
use super::{Risk, Tool, ToolContext, ToolError, TypedTool, typed};
use crate::store::memory::{Filter, Match, Memory, MemoryKind as Kind, NewMemory, Order};
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
const RECALL_LIMIT: Limit = Limit::new(10, 50);
const LIST_LIMIT: Limit = Limit::new(20, 50);

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        typed::<Remember>(),
        typed::<BatchRemember>(),
        typed::<Recall>(),
        typed::<Forget>(),
        typed::<ListMemories>(),
        typed::<BoostMemory>(),
        typed::<MemoryStats>(),
    ]
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

/// A memory as the model sees it.
fn memory_json(memory: &Memory, ctx: &ToolContext) -> Value {
    let mut value = json!({
        "id": memory.id,
        "content": memory.content,
        "type": memory.kind.as_str(),
        "importance": memory.importance,
        "tags": memory.tags,
        "saved": format_local(memory.created_at, ctx.timezone),
    });
    if memory.access_count > 0 {
        value["recalled"] = json!(memory.access_count);
    }
    value
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

/// A memory's content: one statement, trimmed, not blank, at most [`MAX_CONTENT`] characters.
#[derive(Clone, Debug)]
struct Content(String);

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let NonEmpty(content) = NonEmpty::deserialize(deserializer)?;
        let chars = content.chars().count();
        if chars > MAX_CONTENT {
            return Err(serde::de::Error::custom(format!(
                "is {chars} characters; keep a memory under {MAX_CONTENT}: one statement, split or summarised"
            )));
        }
        Ok(Self(content))
    }
}

inline_schema!(Content, {"type": "string", "maxLength": MAX_CONTENT});

/// How much a memory matters, 0 to 1, kept to two decimals.
#[derive(Clone, Copy, Debug)]
struct Importance(f64);

impl<'de> Deserialize<'de> for Importance {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = f64::deserialize(deserializer)?;
        if !(0.0..=1.0).contains(&value) {
            return Err(serde::de::Error::custom(format!(
                "must be between 0 and 1 (0.5 ordinary, 0.9 essential); got {value}"
            )));
        }
        Ok(Self(round2(value)))
    }
}

inline_schema!(Importance, {"type": "number", "minimum": 0, "maximum": 1});

/// A tag as stored: inner whitespace collapsed, lower case; `None` when blank.
fn tag(text: &str) -> Result<Option<String>, String> {
    let tag = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let tag = tag.to_lowercase();
    if tag.is_empty() {
        return Ok(None);
    }
    if tag.chars().count() > MAX_TAG_CHARS {
        return Err(format!(
            "tag {tag:?} is too long; keep tags under {MAX_TAG_CHARS} characters"
        ));
    }
    Ok(Some(tag))
}

/// A memory's tags ([`tag`] each), without duplicates, at most [`MAX_TAGS`]. A comma inside
/// one item makes two tags: commas separate tags in storage.
#[derive(Clone, Debug, Default)]
struct MemoryTags(Vec<String>);

impl<'de> Deserialize<'de> for MemoryTags {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut tags: Vec<String> = Vec::new();
        for item in Vec::<String>::deserialize(deserializer)? {
            for part in item.split(',') {
                if let Some(tag) = tag(part).map_err(serde::de::Error::custom)?
                    && !tags.contains(&tag)
                {
                    tags.push(tag);
                }
            }
        }
        if tags.len() > MAX_TAGS {
            return Err(serde::de::Error::custom(format!(
                "{} tags given; use at most {MAX_TAGS}",
                tags.len()
            )));
        }
        Ok(Self(tags))
    }
}

inline_schema!(MemoryTags, {"type": "array", "items": {"type": "string"}, "maxItems": MAX_TAGS});

/// Save something worth knowing about the user for later conversations: a fact, preference,
/// event or skill. Saving the same text again updates it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Remember {
    /// What to remember: one self-contained statement about the user, e.g. "Prefers oat milk in
    /// coffee"
    content: Content,
    /// fact (default), preference (likes, dislikes, how they want things), event (something that
    /// happened or will), skill (what they can do)
    #[serde(rename = "type")]
    kind: Option<Kind>,
    /// 0..1, default 0.5; 0.7 or more puts it in every conversation's profile, 0.9 for
    /// essentials
    importance: Option<Importance>,
    /// Short lowercase labels, e.g. ["food", "family"]
    #[serde(default)]
    tags: MemoryTags,
}

impl Remember {
    fn memory(self) -> NewMemory {
        NewMemory {
            content: self.content.0,
            kind: self.kind,
            importance: self.importance.map_or(DEFAULT_IMPORTANCE, |i| i.0),
            tags: self.tags.0,
            max_tags: MAX_TAGS,
        }
    }
}

/// Saves `news`, all or none, and answers with each as saved.
async fn save(ctx: &ToolContext, news: &[NewMemory]) -> Result<Vec<Value>, ToolError> {
    let saved = ctx
        .store
        .save_memories(user(ctx)?, news, ctx.clock.now_ms())
        .await?;
    Ok(saved
        .iter()
        .map(|(memory, known)| saved_json(memory, *known, ctx))
        .collect())
}

impl TypedTool for Remember {
    const NAME: &'static str = "remember";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "memorise, memorize, save, note, profile, learn";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let mut saved = save(ctx, &[self.memory()]).await?;
        Ok(saved.pop().unwrap_or_default())
    }
}

// One memory of a batch: `remember`'s arguments (a plain comment: a doc comment would become a
// description of the items, which the schema has never had).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Item {
    /// One self-contained statement, e.g. "Prefers oat milk in coffee"
    content: Content,
    /// fact (default), preference (likes, dislikes, how they want things), event (something that
    /// happened or will), skill (what they can do)
    #[serde(rename = "type")]
    kind: Option<Kind>,
    /// 0..1, default 0.5; 0.7 or more puts it in every conversation's profile, 0.9 for
    /// essentials
    importance: Option<Importance>,
    /// Short lowercase labels, e.g. ["food", "family"]
    #[serde(default)]
    tags: MemoryTags,
}

/// Save several memories at once (all or none), e.g. after the user tells you about themselves.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BatchRemember {
    /// The memories to save
    #[schemars(length(min = 1, max = MAX_BATCH))]
    memories: Vec<Item>,
}

impl TypedTool for BatchRemember {
    const NAME: &'static str = "batch_remember";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "memorise, memorize, save, many, bulk, profile";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let count = self.memories.len();
        if !(1..=MAX_BATCH).contains(&count) {
            return Err(ToolError::InvalidArguments(format!(
                "`memories`: {count} given; save 1 to {MAX_BATCH} per call"
            )));
        }
        // Every item was read before anything is saved, so one bad item loses nothing.
        let news: Vec<NewMemory> = self
            .memories
            .into_iter()
            .map(|item| {
                Remember {
                    content: item.content,
                    kind: item.kind,
                    importance: item.importance,
                    tags: item.tags,
                }
                .memory()
            })
            .collect();
        let saved = save(ctx, &news).await?;
        Ok(json!({"count": saved.len(), "memories": saved}))
    }
}

/// The `type` and `tag` filters of recall and list_memories.
fn filter(kind: Option<Kind>, tag_filter: Option<String>) -> Result<Filter, ToolError> {
    let tag = match tag_filter {
        Some(text) => {
            tag(&text).map_err(|msg| ToolError::InvalidArguments(format!("`tag`: {msg}")))?
        }
        None => None,
    };
    Ok(Filter { kind, tag })
}

/// Search the user's memories by words, best matches first (relevance, importance and
/// recency). Memories containing all the words are preferred; if none do, any word matches.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Recall {
    /// Plain words to look for, e.g. "coffee milk"; punctuation and operators are ignored
    query: NonEmpty,
    /// Only memories of this type
    #[serde(rename = "type")]
    kind: Option<Kind>,
    /// Only memories with this tag
    tag: Option<String>,
    /// Most results, default 10
    limit: Option<Count>,
}

impl TypedTool for Recall {
    const NAME: &'static str = "recall";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "search, find, remember, know, profile, lookup";
    const LIMIT: Option<Limit> = Some(RECALL_LIMIT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user_id = user(ctx)?;
        let query = self.query.0;
        let words = search_words(&query);
        if words.is_empty() {
            return Err(ToolError::InvalidArguments(format!(
                "the query {query:?} has no words to search for; use plain words like \"coffee order\""
            )));
        }
        let filter = filter(self.kind, self.tag)?;
        let limit = usize::try_from(RECALL_LIMIT.of(self.limit)).unwrap_or(usize::MAX);
        let now = ctx.clock.now_ms();
        let db = &ctx.store;
        let mut mode = Match::All;
        let mut found = search(db, user_id, &words, mode, &filter, limit, now).await?;
        if found.is_empty() && words.len() > 1 {
            mode = Match::Any;
            found = search(db, user_id, &words, mode, &filter, limit, now).await?;
        }
        let ids: Vec<i64> = found.iter().map(|m| m.id).collect();
        db.touch_memories(user_id, &ids, now).await?;
        let memories: Vec<Value> = found.iter().map(|m| memory_json(m, ctx)).collect();
        let mut result = json!({
            "query_words": words,
            "matched": described(mode),
            "count": memories.len(),
            "memories": memories,
        });
        if found.is_empty() {
            result["hint"] = json!("nothing matches; try other words, or list_memories");
        }
        Ok(result)
    }
}

/// Delete one memory for good, e.g. when it is wrong or the user asks you to forget it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Forget {
    /// The memory's id, from recall or list_memories
    memory_id: i64,
}

impl TypedTool for Forget {
    const NAME: &'static str = "forget";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Destructive;
    const TAGS: &'static str = "delete, remove, erase, memory";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let id = self.memory_id;
        let content = ctx
            .store
            .delete_memory(user(ctx)?, id)
            .await?
            .ok_or_else(|| not_found(id))?;
        Ok(json!({"forgotten": id, "content": content}))
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Sort {
    #[default]
    Newest,
    Importance,
}

/// List the user's memories, newest or most important first, optionally of one type or tag.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListMemories {
    /// Only memories of this type
    #[serde(rename = "type")]
    kind: Option<Kind>,
    /// Only memories with this tag
    tag: Option<String>,
    /// newest (default) or importance (most important first)
    sort: Option<Sort>,
    /// Most results, default 20
    limit: Option<Count>,
}

impl TypedTool for ListMemories {
    const NAME: &'static str = "list_memories";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "show, all, profile, browse";
    const LIMIT: Option<Limit> = Some(LIST_LIMIT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user_id = user(ctx)?;
        let filter = filter(self.kind, self.tag)?;
        let order = match self.sort.unwrap_or_default() {
            Sort::Newest => Order::Newest,
            Sort::Importance => Order::Importance,
        };
        let limit = LIST_LIMIT.of(self.limit);
        let (total, listed) = ctx
            .store
            .list_memories(user_id, &filter, order, limit)
            .await?;
        let memories: Vec<Value> = listed.iter().map(|m| memory_json(m, ctx)).collect();
        Ok(json!({"count": memories.len(), "total": total, "memories": memories}))
    }
}

/// Raise a memory's importance (capped at 1), e.g. when it keeps coming up; a negative amount
/// lowers it (not below 0).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BoostMemory {
    /// The memory's id
    memory_id: i64,
    /// How much to add to its importance, default 0.1
    #[schemars(range(min = -1, max = 1))]
    amount: Option<f64>,
}

impl TypedTool for BoostMemory {
    const NAME: &'static str = "boost_memory";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "importance, important, priority, reinforce";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (id, amount) = (self.memory_id, self.amount.unwrap_or(0.1));
        if !(-1.0..=1.0).contains(&amount) {
            return Err(ToolError::InvalidArguments(format!(
                "`amount` must be between -1 and 1; got {amount}"
            )));
        }
        let reweigh = |before: f64| round2((before + amount).clamp(0.0, 1.0));
        let (before, importance) = ctx
            .store
            .reweigh_memory(user(ctx)?, id, reweigh, ctx.clock.now_ms())
            .await?
            .ok_or_else(|| not_found(id))?;
        Ok(json!({
            "id": id,
            "content": before.content,
            "importance_before": before.importance,
            "importance": importance,
        }))
    }
}

/// Summarise the user's memories: how many of each type, average importance, the oldest and
/// newest.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MemoryStats {}

impl TypedTool for MemoryStats {
    const NAME: &'static str = "memory_stats";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "count, summary, statistics, overview";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user_id = user(ctx)?;
        let mut by_type = serde_json::Map::new();
        for kind in Kind::ALL {
            by_type.insert(kind.to_string(), json!(0));
        }
        let (mut total, mut importance_sum, mut recalls) = (0i64, 0.0f64, 0i64);
        for kind in ctx.store.memory_totals(user_id).await? {
            importance_sum += kind.importance;
            recalls += kind.recalls;
            total += kind.n;
            by_type.insert(kind.kind.to_string(), json!(kind.n));
        }
        let mut result = json!({
            "total": total,
            "by_type": by_type,
            "recalls": recalls,
        });
        if total > 0 {
            let average = importance_sum / total as f64;
            result["average_importance"] = json!(round2(average));
        }
        if let Some((oldest, newest)) = ctx.store.oldest_and_newest_memories(user_id).await? {
            for (key, memory) in [("oldest", oldest), ("newest", newest)] {
                result[key] = json!({
                    "id": memory.id,
                    "content": memory.content,
                    "saved": format_local(memory.created_at, ctx.timezone),
                });
            }
        }
        Ok(result)
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
    let profile = store
        .memory_profile(user_id, PROFILE_IMPORTANCE, PROFILE_MAX)
        .await?;

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
        Some(date) if memory.kind == Kind::Event => format!("event, {date}"),
        _ => memory.kind.to_string(),
    };
    format!("- [{label}] {content} (#{})\n", memory.id)
}

#[cfg(test)]
mod tests;
