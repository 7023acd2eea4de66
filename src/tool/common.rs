//! Helpers the catalogue's database-backed families share: the acting user, database and
//! not-found errors, id/text/tag arguments, LIKE patterns, and small builders for filtered
//! queries and partial updates that keep every value a bound parameter.

use serde_json::{Value, json};

use sqlx::any::AnyRow;

use super::{Args, ToolContext, ToolError};

/// The user a call acts for; tools that keep per-user data cannot run without one.
pub fn user_id(ctx: &ToolContext) -> Result<i64, ToolError> {
    ctx.user_id.ok_or_else(|| {
        ToolError::Failed("this tool keeps per-user data and the caller is not a known user".into())
    })
}

pub fn db(err: sqlx::Error) -> ToolError {
    ToolError::Failed(format!("database error: {err}"))
}

/// `"task 42 not found"`. Another user's rows are "not found" as well.
pub fn not_found(kind: &str, id: i64) -> ToolError {
    ToolError::Failed(format!("{kind} {id} not found"))
}

/// A required id parameter (also accepted as a numeric string).
pub fn id_arg(arguments: &Value, name: &str) -> Result<i64, ToolError> {
    Args::new(arguments).i64(name)
}

/// An optional text field, trimmed; blank counts as absent.
pub fn opt_text(arguments: &Value, name: &str) -> Option<String> {
    Args::new(arguments)
        .opt_str(name)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Turns a time-parsing message into an error that names the parameter.
pub fn bad_date(param: &'static str) -> impl Fn(String) -> ToolError {
    move |msg| ToolError::InvalidArguments(format!("`{param}`: {msg}"))
}

/// Tags as given (array or comma-separated), trimmed, lower-case, without duplicates.
pub fn tags_arg(arguments: &Value, name: &str) -> Vec<String> {
    let mut tags: Vec<String> = Vec::new();
    for tag in Args::new(arguments).strings(name) {
        let tag = tag.trim().trim_start_matches('#').to_lowercase();
        if !tag.is_empty() && !tags.contains(&tag) {
            tags.push(tag);
        }
    }
    tags
}

pub fn tags_json(tags: &[String]) -> String {
    Value::from(tags.to_vec()).to_string()
}

/// The stored tags text as a JSON value (an empty array if it is not a JSON array).
pub fn tags_value(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Array(_)) => value,
        _ => json!([]),
    }
}

/// `%text%` for a case-insensitive `LOWER(col) LIKE $n ESCAPE '\'` match.
pub fn like_pattern(text: &str) -> String {
    format!("%{}%", escape_like(&text.trim().to_lowercase()))
}

fn escape_like(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// A value bound to a placeholder.
#[derive(Clone, Debug)]
pub enum Bind {
    Int(i64),
    Text(String),
    OptInt(Option<i64>),
    OptText(Option<String>),
}

/// A query built from pieces, with `$N` placeholders numbered as values are bound. Only fixed
/// SQL is pushed; everything from the model is bound.
pub struct Sql {
    sql: String,
    binds: Vec<Bind>,
}

impl Sql {
    pub fn new(sql: &str) -> Self {
        Self {
            sql: sql.to_string(),
            binds: Vec::new(),
        }
    }

    pub fn push(&mut self, sql: &str) {
        self.sql.push_str(sql);
    }

    /// Appends the next placeholder and remembers its value.
    pub fn bind(&mut self, value: Bind) {
        self.binds.push(value);
        self.sql.push_str(&format!("${}", self.binds.len()));
    }

    /// `AND tags LIKE …`: the tag as a JSON string inside the stored array.
    pub fn push_tag_filter(&mut self, tag: &str) {
        let tag = tag.trim().trim_start_matches('#').to_lowercase();
        self.push(" AND tags LIKE ");
        self.bind(Bind::Text(format!(
            "%{}%",
            escape_like(&Value::from(tag).to_string())
        )));
        self.push(" ESCAPE '\\'");
    }

    fn query(&self) -> sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments> {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(self.sql.clone()));
        for value in &self.binds {
            query = match value.clone() {
                Bind::Int(v) => query.bind(v),
                Bind::Text(v) => query.bind(v),
                Bind::OptInt(v) => query.bind(v),
                Bind::OptText(v) => query.bind(v),
            };
        }
        query
    }

    pub async fn fetch_all(&self, ctx: &ToolContext) -> Result<Vec<AnyRow>, ToolError> {
        self.query().fetch_all(ctx.store.pool()).await.map_err(db)
    }

    /// Runs a writing statement with `RETURNING` in its own transaction (see [`write_tx`]).
    pub async fn write_returning(&self, ctx: &ToolContext) -> Result<Option<AnyRow>, ToolError> {
        let mut tx = write_tx(ctx).await?;
        let row = self.query().fetch_optional(&mut *tx).await.map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(row)
    }

    pub async fn fetch_optional(&self, ctx: &ToolContext) -> Result<Option<AnyRow>, ToolError> {
        self.query()
            .fetch_optional(ctx.store.pool())
            .await
            .map_err(db)
    }
}

/// The columns an update tool changes.
#[derive(Default)]
pub struct Changes {
    sets: Vec<(&'static str, Bind)>,
}

impl Changes {
    pub fn set(&mut self, column: &'static str, value: Bind) {
        self.sets.push((column, value));
    }

    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// Runs `UPDATE table SET … WHERE id AND user_id`; false when no such row is the user's.
    pub async fn apply(
        self,
        ctx: &ToolContext,
        table: &'static str,
        id: i64,
        user: i64,
    ) -> Result<bool, ToolError> {
        let mut query = Sql::new(&format!("UPDATE {table} SET "));
        for (i, (column, value)) in self.sets.into_iter().enumerate() {
            if i > 0 {
                query.push(", ");
            }
            query.push(column);
            query.push(" = ");
            query.bind(value);
        }
        query.push(" WHERE id = ");
        query.bind(Bind::Int(id));
        query.push(" AND user_id = ");
        query.bind(Bind::Int(user));
        query.push(" RETURNING id");
        Ok(query.write_returning(ctx).await?.is_some())
    }
}

/// A transaction for one write whose result a tool reports (`INSERT … RETURNING id`, `DELETE …
/// RETURNING title`). In autocommit mode SQLite hands back the RETURNING row before the
/// statement's implicit commit, and sqlx reports that row even when the commit then fails (a full
/// disk): the tool would tell the user "added" for a row that was never stored. With a
/// transaction the commit is its own step and its error reaches the model.
pub async fn write_tx(
    ctx: &ToolContext,
) -> Result<sqlx::Transaction<'static, sqlx::Any>, ToolError> {
    ctx.store
        .begin()
        .await
        .map_err(|err| ToolError::Failed(err.to_string()))
}

/// Deletes one of the user's rows with `sql` (`DELETE … WHERE id = $1 AND user_id = $2
/// RETURNING <label>`) and answers `{"deleted": id, "<label>": …}`; another user's row, like a
/// missing one, is "<kind> <id> not found".
pub async fn delete_owned(
    ctx: &ToolContext,
    user: i64,
    sql: &'static str,
    id: i64,
    kind: &str,
    label: &str,
) -> Result<Value, ToolError> {
    use sqlx::Row;
    let mut tx = write_tx(ctx).await?;
    let row = sqlx::query(sql)
        .bind(id)
        .bind(user)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?
        .ok_or_else(|| not_found(kind, id))?;
    tx.commit().await.map_err(db)?;
    let value: String = row.try_get(label).map_err(db)?;
    Ok(json!({"deleted": id, label: value}))
}
