//! Full-text recall: turning what the model (or the user) wrote into a safe query, running it on
//! SQLite FTS5 or PostgreSQL full-text search, and ranking the hits.
//!
//! Queries are never passed through as FTS syntax. They are cut into words (runs of letters and
//! digits; everything else, quotes and operators included, separates words), and each word
//! becomes a quoted term, a prefix term when it has three letters or more (`"coffee"*`), so
//! `"foo" OR bar*` searches for the words foo, or and bar. A handful of English filler words are
//! left out unless the query has nothing else.
//!
//! `recall` asks for memories containing ALL the words first and, only when none do, for ANY of
//! them: precise when it can be, never empty-handed when one word would have matched. The prompt
//! context asks for ANY word at once, to stay at one query per turn.
//!
//! Ranking: `score = relevance * (0.5 + importance) * recency`, where relevance is the engine's
//! text score (FTS5 `bm25`, PostgreSQL `ts_rank`) and `recency = 0.25 + 0.75 * 0.5^(age / 30 d)`,
//! age counted from when the memory was last saved or recalled. The floor of 0.25 keeps an old,
//! important fact (a birthday) findable a year later. The engine returns its best
//! [`CANDIDATES`] hits by text alone; those are re-ranked here.

use super::record::{COLUMNS, Memory, Param, Sql, tag_pattern};
use crate::store::{Backend, Store};

/// How many hits, best by text relevance, are re-ranked by importance and recency.
pub const CANDIDATES: i64 = 200;
/// Recency halves every 30 days.
pub const HALF_LIFE_MS: f64 = 30.0 * 24.0 * 3600.0 * 1000.0;
/// At most this many words of a query are searched.
const MAX_WORDS: usize = 16;

/// Words that match nearly everything; dropped from a query that has other words.
const FILLER: &[&str] = &[
    "a", "about", "an", "and", "any", "are", "as", "at", "be", "can", "could", "did", "do", "does",
    "for", "from", "have", "how", "i", "in", "is", "it", "me", "my", "of", "on", "or", "please",
    "s", "t", "that", "the", "this", "to", "was", "we", "what", "when", "where", "which", "who",
    "with", "would", "you", "your",
];

/// Whether a hit must contain all the words or any of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Match {
    All,
    Any,
}

impl Match {
    pub fn as_str(self) -> &'static str {
        match self {
            Match::All => "all words",
            Match::Any => "any word",
        }
    }
}

/// The searchable words of `query`, lowercased, deduplicated, filler dropped where possible.
/// Empty when the query is only punctuation and spaces.
pub fn search_words(query: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word = word.to_lowercase();
        if !words.contains(&word) {
            words.push(word);
        }
    }
    let meaningful: Vec<String> = words
        .iter()
        .filter(|w| !FILLER.contains(&w.as_str()))
        .cloned()
        .collect();
    let mut words = if meaningful.is_empty() {
        words
    } else {
        meaningful
    };
    words.truncate(MAX_WORDS);
    words
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

/// `0.25 + 0.75 * 0.5^(age / 30 days)`: 1 for a memory saved now, 0.625 after a month, never
/// below 0.25.
pub fn recency(last_seen_ms: i64, now_ms: i64) -> f64 {
    let age = now_ms.saturating_sub(last_seen_ms).max(0) as f64;
    0.25 + 0.75 * 0.5f64.powf(age / HALF_LIFE_MS)
}

pub fn score(relevance: f64, memory: &Memory, now_ms: i64) -> f64 {
    relevance.max(0.0) * (0.5 + memory.importance) * recency(memory.last_seen(), now_ms)
}

/// Narrowing a search or a list to one kind or one tag.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub kind: Option<String>,
    pub tag: Option<String>,
}

impl Filter {
    /// Appends the `AND …` clauses for this filter to `sql`.
    pub fn apply(&self, sql: &mut Sql) {
        if let Some(kind) = &self.kind {
            sql.push(" AND m.kind = ?", Param::Text(kind.clone()));
        }
        if let Some(tag) = &self.tag {
            sql.push(
                r" AND m.tags LIKE ? ESCAPE '\'",
                Param::Text(tag_pattern(tag)),
            );
        }
    }
}

/// The user's memories matching `words`, best first, at most `limit`.
pub async fn search(
    store: &Store,
    user_id: i64,
    words: &[String],
    mode: Match,
    filter: &Filter,
    limit: usize,
    now_ms: i64,
) -> Result<Vec<Memory>, sqlx::Error> {
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let mut sql = match store.backend() {
        Backend::Sqlite => {
            // Content counts double a tag hit.
            let mut sql = Sql::new(&format!(
                "SELECT {COLUMNS}, -bm25(memories_fts, 1.0, 0.5) AS relevance \
                 FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid \
                 WHERE memories_fts MATCH $1"
            ));
            sql.params.push(Param::Text(fts5_query(words, mode)));
            sql
        }
        Backend::Postgres => {
            // The tsvector expression is the one indexed in migrations/postgres/0004_memory.sql.
            let mut sql = Sql::new(&format!(
                "SELECT {COLUMNS}, \
                 ts_rank(to_tsvector('simple', m.content || ' ' || m.tags), q)::float8 AS relevance \
                 FROM memories m, to_tsquery('simple', $1) q \
                 WHERE to_tsvector('simple', m.content || ' ' || m.tags) @@ q"
            ));
            sql.params.push(Param::Text(ts_query(words, mode)));
            sql
        }
    };
    sql.push(" AND m.user_id = ?", Param::Int(user_id));
    filter.apply(&mut sql);
    sql.push(
        " ORDER BY relevance DESC, m.id DESC LIMIT ?",
        Param::Int(CANDIDATES),
    );
    let rows = sql.query().fetch_all(store.pool()).await?;
    let mut scored = Vec::with_capacity(rows.len());
    for row in &rows {
        let memory = Memory::from_row(row)?;
        let relevance: f64 = sqlx::Row::try_get(row, "relevance")?;
        scored.push((score(relevance, &memory, now_ms), memory));
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.id.cmp(&a.1.id)));
    Ok(scored.into_iter().take(limit).map(|(_, m)| m).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_cut_into_plain_words() {
        assert_eq!(search_words(r#""foo" OR bar*"#), vec!["foo", "bar"]);
        assert_eq!(search_words("What is my dog's name?"), vec!["dog", "name"]);
        // Only filler: kept, so the search still has something to look for.
        assert_eq!(search_words("what is it"), vec!["what", "is", "it"]);
        assert!(search_words(r#"*"()-:^ ,."#).is_empty());
        assert_eq!(search_words("Café CAFÉ café"), vec!["café"]);
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

    #[test]
    fn recency_halves_towards_its_floor() {
        let month = HALF_LIFE_MS as i64;
        assert!((recency(0, 0) - 1.0).abs() < 1e-9);
        assert!((recency(0, month) - 0.625).abs() < 1e-9);
        assert!(recency(0, 100 * month) >= 0.25);
        // A timestamp in the future counts as now.
        assert!((recency(10, 0) - 1.0).abs() < 1e-9);
    }
}
