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
//! [`CANDIDATES`](crate::store::memory::CANDIDATES) hits by text alone (`store::memory`); those are re-ranked
//! here.

use crate::store::memory::{Filter, Hit, Match, Memory};
use crate::store::{Store, StoreResult};

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

/// How a search matched, as the model is told.
pub fn described(mode: Match) -> &'static str {
    match mode {
        Match::All => "all words",
        Match::Any => "any word",
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

/// `0.25 + 0.75 * 0.5^(age / 30 days)`: 1 for a memory saved now, 0.625 after a month, never
/// below 0.25.
pub fn recency(last_seen_ms: i64, now_ms: i64) -> f64 {
    let age = now_ms.saturating_sub(last_seen_ms).max(0) as f64;
    0.25 + 0.75 * 0.5f64.powf(age / HALF_LIFE_MS)
}

pub fn score(relevance: f64, memory: &Memory, now_ms: i64) -> f64 {
    relevance.max(0.0) * (0.5 + memory.importance) * recency(memory.last_seen(), now_ms)
}

/// The user's memories matching `words`, best first, at most `limit`: the engine's best
/// [`CANDIDATES`](crate::store::memory::CANDIDATES) by text, ranked here by [`score`].
pub async fn search(
    store: &Store,
    user_id: i64,
    words: &[String],
    mode: Match,
    filter: &Filter,
    limit: usize,
    now_ms: i64,
) -> StoreResult<Vec<Memory>> {
    let hits = store.search_memories(user_id, words, mode, filter).await?;
    let mut scored: Vec<(f64, Memory)> = hits
        .into_iter()
        .map(|Hit { memory, relevance }| (score(relevance, &memory, now_ms), memory))
        .collect();
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
    fn recency_halves_towards_its_floor() {
        let month = HALF_LIFE_MS as i64;
        assert!((recency(0, 0) - 1.0).abs() < 1e-9);
        assert!((recency(0, month) - 0.625).abs() < 1e-9);
        assert!(recency(0, 100 * month) >= 0.25);
        // A timestamp in the future counts as now.
        assert!((recency(10, 0) - 1.0).abs() < 1e-9);
    }
}
