//! One stored memory: its row, its kinds, and how tags are kept.

use sqlx::Row;
use sqlx::any::{AnyArguments, AnyRow};
use sqlx::query::Query;

/// The kinds of memory, the first being the default.
pub const KINDS: &[&str] = &["fact", "preference", "event", "skill"];

/// Columns of `memories` (aliased `m`) in the order [`Memory::from_row`] reads them.
pub const COLUMNS: &str = "m.id, m.content, m.kind, m.importance, m.tags, m.access_count, \
     m.last_accessed, m.created_at, m.updated_at";

#[derive(Clone, Debug, PartialEq)]
pub struct Memory {
    pub id: i64,
    pub content: String,
    pub kind: String,
    pub importance: f64,
    pub tags: Vec<String>,
    pub access_count: i64,
    pub last_accessed: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Memory {
    pub fn from_row(row: &AnyRow) -> Result<Self, sqlx::Error> {
        Ok(Self {
            id: row.try_get("id")?,
            content: row.try_get("content")?,
            kind: row.try_get("kind")?,
            importance: row.try_get("importance")?,
            tags: decode_tags(&row.try_get::<String, _>("tags")?),
            access_count: row.try_get("access_count")?,
            last_accessed: row.try_get("last_accessed")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
        })
    }

    /// When it was last saved or recalled: what recency is measured from, so a memory that keeps
    /// being useful stays fresh.
    pub fn last_seen(&self) -> i64 {
        self.created_at
            .max(self.updated_at)
            .max(self.last_accessed.unwrap_or(0))
    }
}

/// Tags as stored: `,a,b,` so that `LIKE '%,a,%'` matches one tag exactly; `''` when none.
pub fn encode_tags(tags: &[String]) -> String {
    if tags.is_empty() {
        String::new()
    } else {
        format!(",{},", tags.join(","))
    }
}

pub fn decode_tags(stored: &str) -> Vec<String> {
    stored
        .split(',')
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// The `LIKE` pattern (with `ESCAPE '\'`) that finds memories carrying `tag`.
pub fn tag_pattern(tag: &str) -> String {
    let mut escaped = String::with_capacity(tag.len() + 4);
    for c in tag.chars() {
        if matches!(c, '\\' | '%' | '_') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    format!("%,{escaped},%")
}

/// A value bound to a query built at run time.
#[derive(Clone, Debug, PartialEq)]
pub enum Param {
    Int(i64),
    Text(String),
}

/// SQL assembled from fixed fragments, with every value kept as a bound parameter.
#[derive(Clone, Debug, Default)]
pub struct Sql {
    pub text: String,
    pub params: Vec<Param>,
}

impl Sql {
    pub fn new(text: &str) -> Self {
        Self {
            text: text.to_string(),
            params: Vec::new(),
        }
    }

    /// Appends `fragment`, replacing its `?` with the next `$N` bound to `param`.
    pub fn push(&mut self, fragment: &str, param: Param) -> &mut Self {
        self.params.push(param);
        let placeholder = format!("${}", self.params.len());
        self.text.push_str(&fragment.replacen('?', &placeholder, 1));
        self
    }

    pub fn push_str(&mut self, fragment: &str) -> &mut Self {
        self.text.push_str(fragment);
        self
    }

    /// The query with its parameters bound.
    pub fn query(&self) -> Query<'_, sqlx::Any, AnyArguments> {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(self.text.clone()));
        for param in &self.params {
            query = match param {
                Param::Int(v) => query.bind(*v),
                Param::Text(v) => query.bind(v.clone()),
            };
        }
        query
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_patterns_escape_wildcards() {
        let tags = vec!["home".to_string(), "50%_off".to_string()];
        assert_eq!(encode_tags(&tags), ",home,50%_off,");
        assert_eq!(decode_tags(&encode_tags(&tags)), tags);
        assert!(decode_tags("").is_empty());
        assert_eq!(tag_pattern("50%_off"), r"%,50\%\_off,%");
    }

    #[test]
    fn built_sql_numbers_its_placeholders() {
        let mut sql = Sql::new("SELECT 1 WHERE a = $1");
        sql.params.push(Param::Int(1));
        sql.push(" AND b = ?", Param::Text("x".into()))
            .push(" LIMIT ?", Param::Int(5));
        assert_eq!(sql.text, "SELECT 1 WHERE a = $1 AND b = $2 LIMIT $3");
    }
}
