//! The `memories` table: what the assistant remembers about each user, as the `memory` tools
//! save, find, list, boost and forget it, and as the prompt context reads it. Full-text search is
//! SQLite FTS5 (`memories_fts`) or PostgreSQL's `to_tsvector('simple', …)`; the ranking of the
//! hits is the tool's (`tool::memory::search`).

use sqlx::AnyConnection;

use super::query::{Sql, delete_owned, escape_like};
use super::{Backend, Store, StoreResult, text_enum};

// A plain comment: the tools take it as an argument, and a doc comment would become the
// description of every field that uses it.
text_enum! {
    // What a memory is; `fact` when not said.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "lowercase")]
    pub enum MemoryKind {
        Fact = "fact",
        Preference = "preference",
        Event = "event",
        Skill = "skill",
    }
}

/// Columns of `memories` (aliased `m`) as [`Memory`] reads them.
const COLUMNS: &str = "m.id, m.content, m.kind, m.importance, m.tags, m.access_count, \
     m.last_accessed, m.created_at, m.updated_at";

/// How many hits, best by text relevance, a search hands on to be ranked.
pub const CANDIDATES: i64 = 200;

/// A stored memory.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct Memory {
    pub id: i64,
    pub content: String,
    pub kind: MemoryKind,
    pub importance: f64,
    #[sqlx(try_from = "String")]
    pub tags: StoredTags,
    pub access_count: i64,
    pub last_accessed: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Memory {
    /// When it was last saved or recalled: what recency is measured from, so a memory that keeps
    /// being useful stays fresh.
    pub fn last_seen(&self) -> i64 {
        self.created_at
            .max(self.updated_at)
            .max(self.last_accessed.unwrap_or(0))
    }
}

/// A memory's tags, stored as `,a,b,` so that `LIKE '%,a,%'` matches one tag exactly (`''`
/// when none).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct StoredTags(pub Vec<String>);

impl From<String> for StoredTags {
    fn from(stored: String) -> Self {
        Self(
            stored
                .split(',')
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect(),
        )
    }
}

impl StoredTags {
    pub fn encode(&self) -> String {
        if self.0.is_empty() {
            String::new()
        } else {
            format!(",{},", self.0.join(","))
        }
    }
}

/// The `LIKE` pattern (with `ESCAPE '\'`) that finds memories carrying `tag`.
pub fn tag_pattern(tag: &str) -> String {
    format!("%,{},%", escape_like(tag))
}

/// A memory to save, checked by the tool.
#[derive(Clone, Debug, PartialEq)]
pub struct NewMemory {
    pub content: String,
    /// `None` when not given: `fact` for a new memory, unchanged for a known one.
    pub kind: Option<MemoryKind>,
    pub importance: f64,
    pub tags: Vec<String>,
    /// Most tags a memory keeps when a repeat merges its tags into the stored ones.
    pub max_tags: usize,
}

async fn save(
    conn: &mut AnyConnection,
    user: i64,
    new: &NewMemory,
    now: i64,
) -> StoreResult<(Memory, bool)> {
    let existing: Option<Memory> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM memories m WHERE m.user_id = $1 AND lower(m.content) = lower($2) \
         ORDER BY m.id LIMIT 1"
    )))
    .bind(user)
    .bind(&new.content)
    .fetch_optional(&mut *conn)
    .await?;
    let (id, known): (i64, bool) = match existing {
        Some(old) => {
            let mut tags = old.tags.clone();
            for tag in &new.tags {
                if !tags.0.contains(tag) {
                    tags.0.push(tag.clone());
                }
            }
            tags.0.truncate(new.max_tags);
            let (id,): (i64,) = sqlx::query_as(
                "UPDATE memories SET kind = $1, importance = $2, tags = $3, updated_at = $4 \
                 WHERE id = $5 RETURNING id",
            )
            .bind(new.kind.unwrap_or(old.kind))
            .bind(old.importance.max(new.importance))
            .bind(tags.encode())
            .bind(now)
            .bind(old.id)
            .fetch_one(&mut *conn)
            .await?;
            (id, true)
        }
        None => {
            let (id,): (i64,) = sqlx::query_as(
                "INSERT INTO memories (user_id, content, kind, importance, tags, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING id",
            )
            .bind(user)
            .bind(&new.content)
            .bind(new.kind.unwrap_or(MemoryKind::Fact))
            .bind(new.importance)
            .bind(StoredTags(new.tags.clone()).encode())
            .bind(now)
            .fetch_one(&mut *conn)
            .await?;
            (id, false)
        }
    };
    let memory = fetch(&mut *conn, user, id)
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    Ok((memory, known))
}

async fn fetch(conn: &mut AnyConnection, user: i64, id: i64) -> StoreResult<Option<Memory>> {
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM memories m WHERE m.id = $1 AND m.user_id = $2"
    )))
    .bind(id)
    .bind(user)
    .fetch_optional(conn)
    .await?)
}

/// Narrowing a search or a list to one kind or one tag.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub kind: Option<MemoryKind>,
    pub tag: Option<String>,
}

impl Filter {
    /// Appends the `AND …` clauses for this filter to `sql`.
    fn apply(&self, sql: &mut Sql) {
        if let Some(kind) = self.kind {
            sql.push(" AND m.kind = ").bind(kind);
        }
        if let Some(tag) = &self.tag {
            sql.push(" AND m.tags LIKE ")
                .bind(tag_pattern(tag))
                .push(r" ESCAPE '\'");
        }
    }
}

/// Whether a hit must contain all the words or any of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Match {
    All,
    Any,
}

/// A hit of a full-text search: the memory and the engine's text relevance.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Hit {
    #[sqlx(flatten)]
    pub memory: Memory,
    pub relevance: f64,
}

/// Whether a word is searched as a prefix: short ones would match too much.
fn is_prefix(word: &str) -> bool {
    word.chars().count() >= 3
}

/// An FTS5 MATCH expression. Words hold only letters and digits, and each is double-quoted, so
/// FTS5 keywords (`OR`, `NOT`, `NEAR`) in them are plain words.
pub fn fts5_query(words: &[String], mode: Match) -> String {
    let joiner = match mode {
        Match::All => " AND ",
        Match::Any => " OR ",
    };
    words
        .iter()
        .map(|w| {
            if is_prefix(w) {
                format!("\"{w}\"*")
            } else {
                format!("\"{w}\"")
            }
        })
        .collect::<Vec<_>>()
        .join(joiner)
}

/// A PostgreSQL `to_tsquery` expression; each word single-quoted (they hold no quotes).
pub fn ts_query(words: &[String], mode: Match) -> String {
    let joiner = match mode {
        Match::All => " & ",
        Match::Any => " | ",
    };
    words
        .iter()
        .map(|w| {
            if is_prefix(w) {
                format!("'{w}':*")
            } else {
                format!("'{w}'")
            }
        })
        .collect::<Vec<_>>()
        .join(joiner)
}

/// In which order [`Store::list_memories`] gives memories.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    Newest,
    Importance,
}

/// How many memories of one kind a user has.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct KindTotals {
    pub kind: MemoryKind,
    pub n: i64,
    /// The sum of their importance.
    pub importance: f64,
    /// How often they were recalled, together.
    pub recalls: i64,
}

impl Store {
    /// Saves every one of `news` for `user`, all or none; a memory with the same content (ignoring
    /// case) is updated instead of added. Each stored memory, and whether it was already there.
    pub async fn save_memories(
        &self,
        user: i64,
        news: &[NewMemory],
        now: i64,
    ) -> StoreResult<Vec<(Memory, bool)>> {
        let mut tx = self.begin().await?;
        let mut saved = Vec::with_capacity(news.len());
        for new in news {
            saved.push(save(&mut tx, user, new, now).await?);
        }
        tx.commit().await?;
        Ok(saved)
    }

    /// Deletes the user's memory `id`; its content, or none when no such memory is the user's.
    pub async fn delete_memory(&self, user: i64, id: i64) -> StoreResult<Option<String>> {
        delete_owned(self, "memories", "content", id, user).await
    }

    /// Sets the importance of the user's memory `id` to `importance(current)`, in one transaction.
    /// The memory as it was, and the new importance; none when no such memory is the user's.
    pub async fn reweigh_memory(
        &self,
        user: i64,
        id: i64,
        importance: impl FnOnce(f64) -> f64,
        now: i64,
    ) -> StoreResult<Option<(Memory, f64)>> {
        let mut tx = self.begin().await?;
        let Some(before) = fetch(&mut tx, user, id).await? else {
            return Ok(None);
        };
        let after = importance(before.importance);
        sqlx::query(
            "UPDATE memories SET importance = $1, updated_at = $2 WHERE id = $3 AND user_id = $4",
        )
        .bind(after)
        .bind(now)
        .bind(id)
        .bind(user)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some((before, after)))
    }

    /// The user's [`CANDIDATES`] memories best matching `words` by text alone. Words hold only
    /// letters and digits (the tool's `search_words`).
    pub async fn search_memories(
        &self,
        user: i64,
        words: &[String],
        mode: Match,
        filter: &Filter,
    ) -> StoreResult<Vec<Hit>> {
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = match self.backend() {
            Backend::Sqlite => {
                // Content counts double a tag hit.
                let mut sql = Sql::new(&format!(
                    "SELECT {COLUMNS}, -bm25(memories_fts, 1.0, 0.5) AS relevance \
                     FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid \
                     WHERE memories_fts MATCH "
                ));
                sql.bind(fts5_query(words, mode));
                sql
            }
            Backend::Postgres => {
                // The tsvector expression is the one indexed in migrations/postgres/0004_memory.sql.
                let mut sql = Sql::new(&format!(
                    "SELECT {COLUMNS}, \
                     ts_rank(to_tsvector('simple', m.content || ' ' || m.tags), q)::float8 AS relevance \
                     FROM memories m, to_tsquery('simple', "
                ));
                sql.bind(ts_query(words, mode))
                    .push(") q WHERE to_tsvector('simple', m.content || ' ' || m.tags) @@ q");
                sql
            }
        };
        sql.push(" AND m.user_id = ").bind(user);
        filter.apply(&mut sql);
        sql.push(" ORDER BY relevance DESC, m.id DESC LIMIT ")
            .bind(CANDIDATES);
        sql.fetch_all(self).await
    }

    /// Counts a recall of the memories `ids`: one more access each, last accessed now.
    pub async fn touch_memories(&self, user: i64, ids: &[i64], now: i64) -> StoreResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut sql =
            Sql::new("UPDATE memories SET access_count = access_count + 1, last_accessed = ");
        sql.bind(now).push(" WHERE user_id = ").bind(user);
        sql.push(" AND id IN (");
        for id in ids {
            sql.value(*id);
        }
        sql.push(")");
        let mut conn = self.write().await?;
        sql.execute_in(&mut conn).await?;
        Ok(())
    }

    /// The user's memories matching `filter`, at most `limit` in `order`, and how many match.
    pub async fn list_memories(
        &self,
        user: i64,
        filter: &Filter,
        order: Order,
        limit: i64,
    ) -> StoreResult<(i64, Vec<Memory>)> {
        let mut count = Sql::new("SELECT COUNT(*) FROM memories m WHERE m.user_id = ");
        count.bind(user);
        filter.apply(&mut count);
        let (total,): (i64,) = count
            .fetch_optional(self)
            .await?
            .ok_or(sqlx::Error::RowNotFound)?;
        let mut list = Sql::new(&format!(
            "SELECT {COLUMNS} FROM memories m WHERE m.user_id = "
        ));
        list.bind(user);
        filter.apply(&mut list);
        list.push(match order {
            Order::Newest => " ORDER BY m.created_at DESC, m.id DESC",
            Order::Importance => " ORDER BY m.importance DESC, m.created_at DESC, m.id DESC",
        });
        list.push(" LIMIT ").bind(limit);
        Ok((total, list.fetch_all(self).await?))
    }

    /// The user's memories counted by kind.
    pub async fn memory_totals(&self, user: i64) -> StoreResult<Vec<KindTotals>> {
        Ok(sqlx::query_as(
            // PostgreSQL sums BIGINT as NUMERIC, which the Any driver cannot read: cast back.
            "SELECT kind, COUNT(*) AS n, SUM(importance) AS importance, \
             CAST(SUM(access_count) AS BIGINT) AS recalls \
             FROM memories WHERE user_id = $1 GROUP BY kind",
        )
        .bind(user)
        .fetch_all(self.pool())
        .await?)
    }

    /// The user's oldest and newest memories (by when they were saved); none when there are none.
    pub async fn oldest_and_newest_memories(
        &self,
        user: i64,
    ) -> StoreResult<Option<(Memory, Memory)>> {
        let mut ends = Vec::with_capacity(2);
        for order in ["ASC", "DESC"] {
            let memory: Option<Memory> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {COLUMNS} FROM memories m WHERE m.user_id = $1 \
                 ORDER BY m.created_at {order}, m.id {order} LIMIT 1"
            )))
            .bind(user)
            .fetch_optional(self.pool())
            .await?;
            ends.push(memory);
        }
        Ok(match (ends.remove(0), ends.remove(0)) {
            (Some(oldest), Some(newest)) => Some((oldest, newest)),
            _ => None,
        })
    }

    /// The user's profile: preferences and facts of at least `importance`, most important first, at
    /// most `limit`.
    pub async fn memory_profile(
        &self,
        user: i64,
        importance: f64,
        limit: i64,
    ) -> StoreResult<Vec<Memory>> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM memories m WHERE m.user_id = $1 AND m.importance >= $2 \
             AND m.kind IN ('preference', 'fact') \
             ORDER BY m.importance DESC, m.updated_at DESC, m.id DESC LIMIT $3"
        )))
        .bind(user)
        .bind(importance)
        .bind(limit)
        .fetch_all(self.pool())
        .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_patterns_escape_wildcards() {
        let tags = StoredTags(vec!["home".to_string(), "50%_off".to_string()]);
        assert_eq!(tags.encode(), ",home,50%_off,");
        assert_eq!(StoredTags::from(tags.encode()), tags);
        assert!(StoredTags::from(String::new()).0.is_empty());
        assert_eq!(StoredTags::default().encode(), "");
        assert_eq!(tag_pattern("50%_off"), r"%,50\%\_off,%");
    }

    #[test]
    fn engine_queries_quote_every_word() {
        let words = vec!["near".to_string(), "not".to_string(), "ox".to_string()];
        assert_eq!(
            fts5_query(&words, Match::All),
            r#""near"* AND "not"* AND "ox""#
        );
        assert_eq!(
            fts5_query(&words, Match::Any),
            r#""near"* OR "not"* OR "ox""#
        );
        assert_eq!(ts_query(&words, Match::Any), "'near':* | 'not':* | 'ox'");
    }
}
