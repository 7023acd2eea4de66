//! The one builder for queries assembled from pieces (filters that are there or not, the
//! columns an update changes), and [`Page`], the search/tag/limit block of the list tools.
//!
//! Why not `sqlx::QueryBuilder`: under `sqlx::Any`, `AnyArguments` keeps the default
//! `format_placeholder`, which writes `?`, and PostgreSQL refuses `?`. This builder numbers
//! `$N` placeholders itself, which both backends accept. (`Any` also rules out the checked
//! `query!` macros; the queries are tested against both backends instead.)

use sqlx::any::{AnyArguments, AnyRow};
use sqlx::encode::Encode;
use sqlx::{Any, Arguments, FromRow, Type};

use super::{Store, StoreError, StoreResult};

/// A query built from pieces. Only fixed SQL is pushed; every value is bound to a `$N`.
#[derive(Default)]
pub struct Sql {
    sql: String,
    arguments: AnyArguments,
    /// The first value that could not be encoded; reported when the query runs.
    error: Option<String>,
}

impl Sql {
    pub fn new(sql: &str) -> Self {
        Self {
            sql: sql.to_string(),
            ..Self::default()
        }
    }

    /// `INSERT INTO table (columns) VALUES (`: then one [`Sql::value`] a column, in order, and
    /// the rest of the statement from its `)`.
    pub fn insert(table: &str, columns: &str) -> Self {
        Self::new(&format!("INSERT INTO {table} ({columns}) VALUES ("))
    }

    pub fn push(&mut self, sql: &str) -> &mut Self {
        self.sql.push_str(sql);
        self
    }

    /// Appends the next placeholder and binds `value` to it.
    pub fn bind<T>(&mut self, value: T) -> &mut Self
    where
        T: Encode<'static, Any> + Type<Any>,
    {
        if let Err(err) = self.arguments.add(value) {
            self.error.get_or_insert(err.to_string());
        }
        let n = self.arguments.len();
        self.sql.push_str(&format!("${n}"));
        self
    }

    /// Binds the next value of a parenthesised list, after a comma unless the list has just
    /// opened.
    pub fn value<T>(&mut self, value: T) -> &mut Self
    where
        T: Encode<'static, Any> + Type<Any>,
    {
        if !self.sql.ends_with('(') {
            self.sql.push_str(", ");
        }
        self.bind(value)
    }

    /// `AND (LOWER(a) LIKE … OR LOWER(b) LIKE …)`: `text` anywhere in any of `columns`,
    /// case-insensitive, its `%` and `_` taken literally.
    pub fn push_search(&mut self, columns: &[&str], text: &str) -> &mut Self {
        let pattern = like_pattern(text);
        self.push(" AND (");
        for (i, column) in columns.iter().enumerate() {
            if i > 0 {
                self.push(" OR ");
            }
            self.push(&format!("LOWER(COALESCE({column}, '')) LIKE "));
            self.bind(pattern.clone());
            self.push(" ESCAPE '\\'");
        }
        self.push(")")
    }

    /// `AND tags LIKE …`: the tag as a JSON string inside the stored array.
    pub fn push_tag(&mut self, tag: &str) -> &mut Self {
        let tag = tag.trim().trim_start_matches('#').to_lowercase();
        self.push(" AND tags LIKE ");
        self.bind(format!(
            "%{}%",
            escape_like(&serde_json::Value::from(tag).to_string())
        ));
        self.push(" ESCAPE '\\'")
    }

    /// The statement and its arguments, for a caller that runs it inside its own transaction.
    pub fn into_parts(self) -> StoreResult<(String, AnyArguments)> {
        self.arguments()
    }

    fn arguments(self) -> StoreResult<(String, AnyArguments)> {
        match self.error {
            Some(err) => Err(StoreError::Corrupt(format!(
                "a value cannot be bound: {err}"
            ))),
            None => Ok((self.sql, self.arguments)),
        }
    }

    pub async fn fetch_all<R>(self, store: &Store) -> StoreResult<Vec<R>>
    where
        R: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        let (sql, arguments) = self.arguments()?;
        Ok(sqlx::query_as_with(sqlx::AssertSqlSafe(sql), arguments)
            .fetch_all(store.pool())
            .await?)
    }

    pub async fn fetch_optional<R>(self, store: &Store) -> StoreResult<Option<R>>
    where
        R: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        let (sql, arguments) = self.arguments()?;
        Ok(sqlx::query_as_with(sqlx::AssertSqlSafe(sql), arguments)
            .fetch_optional(store.pool())
            .await?)
    }

    /// Runs a writing statement with `RETURNING` (`INSERT … RETURNING id`, `DELETE …
    /// RETURNING title`) on its own, committed when this returns `Ok`.
    ///
    /// In autocommit mode SQLite hands back the RETURNING rows at the statement's first step
    /// and commits at its last. `fetch_optional` stops after the first row and drops the
    /// statement, and the commit's error (a full disk) is lost in the reset: a tool would tell
    /// the user "added" for a row that was never stored. `fetch_all` steps the statement to
    /// its end, so a failed commit is the call's error; PostgreSQL reports it before it is
    /// ready for the next query either way. One round trip to the database, where a
    /// transaction around it took three.
    pub async fn write_returning<R>(self, store: &Store) -> StoreResult<Option<R>>
    where
        R: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        let (sql, arguments) = self.arguments()?;
        let rows = sqlx::query_as_with(sqlx::AssertSqlSafe(sql), arguments)
            .fetch_all(&mut *store.write().await?)
            .await?;
        Ok(rows.into_iter().next())
    }

    /// Runs a writing statement inside the caller's transaction; the rows it changed.
    pub async fn execute_in(self, conn: &mut sqlx::AnyConnection) -> StoreResult<u64> {
        let (sql, arguments) = self.arguments()?;
        Ok(sqlx::query_with(sqlx::AssertSqlSafe(sql), arguments)
            .execute(conn)
            .await?
            .rows_affected())
    }

    /// Reads at most one row inside the caller's transaction.
    pub async fn fetch_optional_in<R>(
        self,
        conn: &mut sqlx::AnyConnection,
    ) -> StoreResult<Option<R>>
    where
        R: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        let (sql, arguments) = self.arguments()?;
        Ok(sqlx::query_as_with(sqlx::AssertSqlSafe(sql), arguments)
            .fetch_optional(conn)
            .await?)
    }

    /// Runs an `INSERT … RETURNING id` (see [`Sql::write_returning`]); the new row's id.
    pub async fn insert_id(self, store: &Store) -> StoreResult<i64> {
        let row: Option<(i64,)> = self.write_returning(store).await?;
        let (id,) = row.ok_or(sqlx::Error::RowNotFound)?;
        Ok(id)
    }
}

/// `UPDATE table SET a = $1, b = $2 … WHERE id = … AND user_id = …`: the columns an update
/// tool changes.
pub struct Changes {
    sql: Sql,
    count: usize,
}

impl Changes {
    pub fn new(table: &'static str) -> Self {
        Self {
            sql: Sql::new(&format!("UPDATE {table} SET ")),
            count: 0,
        }
    }

    pub fn set<T>(&mut self, column: &'static str, value: T) -> &mut Self
    where
        T: Encode<'static, Any> + Type<Any>,
    {
        if self.count > 0 {
            self.sql.push(", ");
        }
        self.count += 1;
        self.sql.push(column).push(" = ").bind(value);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Runs the update on the user's row `id`; false when no such row is the user's.
    pub async fn apply(mut self, store: &Store, id: i64, user: i64) -> StoreResult<bool> {
        self.sql.push(" WHERE id = ").bind(id);
        self.sql.push(" AND user_id = ").bind(user);
        self.sql.push(" RETURNING id");
        let row: Option<(i64,)> = self.sql.write_returning(store).await?;
        Ok(row.is_some())
    }
}

/// The user's row `id` of `table` (its `columns`); none when it does not exist or is another
/// user's.
pub async fn get_owned<R>(
    store: &Store,
    (table, columns): (&'static str, &'static str),
    id: i64,
    user: i64,
) -> StoreResult<Option<R>>
where
    R: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
{
    let mut sql = Sql::new(&format!("SELECT {columns} FROM {table} WHERE id = "));
    sql.bind(id).push(" AND user_id = ").bind(user);
    sql.fetch_optional(store).await
}

/// Deletes the user's row `id` from `table` and returns its `label` column (a title, an
/// address); none when no such row is the user's.
pub async fn delete_owned(
    store: &Store,
    table: &'static str,
    label: &'static str,
    id: i64,
    user: i64,
) -> StoreResult<Option<String>> {
    let mut sql = Sql::new(&format!("DELETE FROM {table} WHERE id = "));
    sql.bind(id).push(" AND user_id = ").bind(user);
    sql.push(&format!(" RETURNING {label}"));
    let row: Option<(String,)> = sql.write_returning(store).await?;
    Ok(row.map(|(label,)| label))
}

/// What the list tools of the organiser families share: words to find, a tag and how many.
#[derive(Clone, Debug, Default)]
pub struct Page {
    /// Words to find (case-insensitive) in the family's searchable columns.
    pub search: Option<String>,
    /// Only rows with this tag.
    pub tag: Option<String>,
    /// At most this many rows; one more is read to tell whether there are more.
    pub limit: i64,
}

/// One page of rows, and whether more were left out.
#[derive(Debug)]
pub struct Listed<R> {
    pub rows: Vec<R>,
    pub more: bool,
}

impl Page {
    /// Adds the search over `columns` and the tag filter to `sql` (a `SELECT … WHERE …`).
    pub fn filter(&self, sql: &mut Sql, columns: &[&str]) {
        if let Some(search) = &self.search {
            sql.push_search(columns, search);
        }
        if let Some(tag) = &self.tag {
            sql.push_tag(tag);
        }
    }

    /// Orders by `order_by`, reads one row more than the limit and tells whether there were
    /// more.
    pub async fn fetch<R>(
        &self,
        mut sql: Sql,
        order_by: &str,
        store: &Store,
    ) -> StoreResult<Listed<R>>
    where
        R: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        let limit = self.limit.max(1);
        sql.push(&format!(" ORDER BY {order_by} LIMIT "))
            .bind(limit + 1);
        let mut rows: Vec<R> = sql.fetch_all(store).await?;
        let more = rows.len() as i64 > limit;
        rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        Ok(Listed { rows, more })
    }
}

/// `%text%` for a case-insensitive `LOWER(col) LIKE $n ESCAPE '\'` match.
pub fn like_pattern(text: &str) -> String {
    format!("%{}%", escape_like(&text.trim().to_lowercase()))
}

/// `text` with `%`, `_` and `\\` taken literally in a `LIKE … ESCAPE '\\'` pattern.
pub(super) fn escape_like(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns_match_wildcards_literally() {
        assert_eq!(like_pattern(" 50%_Off\\ "), "%50\\%\\_off\\\\%");
        assert_eq!(like_pattern("plain"), "%plain%");
    }

    /// An INSERT gets one numbered placeholder a value, with commas between them only, and a
    /// second list in the same statement starts without a comma too.
    #[test]
    fn an_insert_numbers_its_values_and_puts_commas_between_them() {
        let mut sql = Sql::insert("notes", "user_id, title, tags");
        sql.value(7_i64).value("groceries").value("[]");
        sql.push(") RETURNING id");
        assert_eq!(
            sql.sql,
            "INSERT INTO notes (user_id, title, tags) VALUES ($1, $2, $3) RETURNING id"
        );
        sql.push(" AND id IN (").value(1_i64).value(2_i64).push(")");
        assert!(sql.sql.ends_with(" AND id IN ($4, $5)"), "{}", sql.sql);
        assert_eq!(sql.arguments.len(), 5);
    }
}
