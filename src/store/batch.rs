//! Writing statements committed together, in one round trip to SQLite.
//!
//! Every statement on SQLite is a round trip to the thread sqlx keeps for the connection, and
//! on a small machine the thread switches of those round trips, not SQLite's work, are most of
//! what a message costs (perf: the connection threads' time is mostly `finish_task_switch`). A
//! transaction of two statements is four round trips with its `BEGIN IMMEDIATE` and `COMMIT`.
//! A batch sends them as one multi-statement query, so it is one. Its statements cannot depend
//! on each other's results in Rust (a later one can still read what an earlier one wrote, in
//! SQL); where they must, use [`super::Store::begin`].
//!
//! PostgreSQL refuses several statements in one prepared query, so there the batch runs its
//! statements one by one in a transaction. Each statement numbers its parameters from `$1`, as
//! PostgreSQL wants; for SQLite they are renumbered into one list.

use sqlx::Arguments;
use sqlx::any::{AnyArguments, AnyRow};
use sqlx::{Any, Encode, FromRow, Type};

use super::{Backend, StoreError, StoreResult};

/// Statements to commit together; made by [`super::Store::batch`], run by
/// [`super::Store::write_batch`].
pub struct Batch {
    backend: Backend,
    /// SQLite: `BEGIN IMMEDIATE;`, then every statement with its parameters renumbered.
    sqlite_sql: String,
    sqlite_arguments: AnyArguments,
    /// PostgreSQL: each statement with its own parameters.
    statements: Vec<(String, AnyArguments)>,
    /// The statement pushed last: how many values were bound before it, and how many
    /// parameters it has. Each statement must bind exactly its own, or the values of every
    /// later one would shift on SQLite.
    current: Option<(usize, usize)>,
    /// The first mistake (a value that failed to encode, a statement bound wrong), reported
    /// when the batch runs.
    error: Option<StoreError>,
}

impl Batch {
    pub(super) fn new(backend: Backend) -> Self {
        Self {
            backend,
            sqlite_sql: "BEGIN IMMEDIATE;\n".to_string(),
            sqlite_arguments: AnyArguments::default(),
            statements: Vec::new(),
            current: None,
            error: None,
        }
    }

    /// Adds a statement; its parameters are `$1`, `$2`… in the order of the [`Batch::bind`]
    /// calls that follow it.
    pub fn push(&mut self, sql: &str) -> &mut Self {
        self.check_binds();
        let (sql, parameters) = match self.backend {
            Backend::Sqlite => renumber(sql, self.sqlite_arguments.len()),
            Backend::Postgres => renumber(sql, 0),
        };
        match self.backend {
            Backend::Sqlite => {
                self.sqlite_sql.push_str(&sql);
                self.sqlite_sql.push_str(";\n");
            }
            Backend::Postgres => self.statements.push((sql, AnyArguments::default())),
        }
        self.current = Some((self.bound(), parameters));
        self
    }

    /// Binds the next parameter of the statement pushed last.
    pub fn bind<'q, T>(&mut self, value: T) -> &mut Self
    where
        T: Encode<'q, Any> + Type<Any> + 'q,
    {
        let arguments = match (self.backend, self.statements.last_mut()) {
            _ if self.current.is_none() => {
                self.fail("a value bound before any statement");
                return self;
            }
            (Backend::Sqlite, _) => &mut self.sqlite_arguments,
            (Backend::Postgres, Some((_, arguments))) => arguments,
            (Backend::Postgres, None) => unreachable!("pushed, so there is a statement"),
        };
        if let Err(err) = arguments.add(value) {
            self.fail(&format!("a value cannot be encoded: {err}"));
        }
        self
    }

    /// Values bound so far: in all (SQLite), or to the last statement (PostgreSQL).
    fn bound(&self) -> usize {
        match self.backend {
            Backend::Sqlite => self.sqlite_arguments.len(),
            Backend::Postgres => self.statements.last().map_or(0, |(_, a)| a.len()),
        }
    }

    /// Records a mistake if the statement pushed last did not bind as many values as it has
    /// parameters.
    fn check_binds(&mut self) {
        if let Some((before, parameters)) = self.current {
            let bound = self.bound() - before;
            if bound != parameters {
                self.fail(&format!(
                    "a statement with {parameters} parameters was given {bound} values"
                ));
            }
        }
    }

    fn fail(&mut self, why: &str) {
        if self.error.is_none() {
            self.error = Some(sqlx::Error::Protocol(format!("batch: {why}")).into());
        }
    }

    /// The rows the statements return (`RETURNING`), in order; `Ok` once all are committed.
    pub(super) async fn run(mut self, writer: &super::writer::Writer) -> StoreResult<Vec<AnyRow>> {
        self.check_binds();
        if let Some(err) = self.error {
            return Err(err);
        }
        match self.backend {
            Backend::Sqlite => {
                let mut sql = self.sqlite_sql;
                sql.push_str("COMMIT");
                writer.sqlite_batch(sql, self.sqlite_arguments).await
            }
            Backend::Postgres => {
                let mut tx = writer.begin().await?;
                let mut rows = Vec::new();
                for (sql, arguments) in self.statements {
                    rows.extend(
                        sqlx::query_with(sqlx::AssertSqlSafe(sql), arguments)
                            .fetch_all(&mut *tx)
                            .await?,
                    );
                }
                tx.commit().await?;
                Ok(rows)
            }
        }
    }
}

/// The ids a batch's `RETURNING id` statements returned, in order.
pub(super) fn returned_ids(rows: &[AnyRow]) -> StoreResult<Vec<i64>> {
    rows.iter()
        .map(|row| Ok(<(i64,) as FromRow<AnyRow>>::from_row(row)?.0))
        .collect()
}

/// `sql` with every parameter `$N` outside a quoted string or identifier as `$(N + offset)`,
/// and the highest `N`: how many parameters it has.
fn renumber(sql: &str, offset: usize) -> (String, usize) {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut highest = 0;
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '$') if chars.peek().is_some_and(char::is_ascii_digit) => {
                let mut digits = String::new();
                while let Some(d) = chars.next_if(char::is_ascii_digit) {
                    digits.push(d);
                }
                let n: usize = digits.parse().expect("ascii digits");
                highest = highest.max(n);
                out.push('$');
                out.push_str(&(n + offset).to_string());
                continue;
            }
            (None, _) => {}
        }
        out.push(c);
    }
    (out, highest)
}

#[cfg(test)]
mod tests {
    use crate::store::test_support::postgres_store;

    use super::super::Store;
    use super::super::test_support::temp_store;
    use super::*;

    async fn names(store: &Store) -> Vec<String> {
        sqlx::query_scalar("SELECT display_name FROM users ORDER BY id")
            .fetch_all(store.pool())
            .await
            .expect("names")
    }

    /// Two users in one batch, the second found by the first's name: what each statement
    /// wrote is there for the next, the rows come back in order, and all is committed.
    async fn batch_commits_together(store: &Store) {
        let mut batch = store.batch();
        batch
            .push("INSERT INTO users (display_name, is_owner, created_at) VALUES ($1, 0, $2) RETURNING id")
            .bind("ann")
            .bind(1_i64);
        batch
            .push(
                "INSERT INTO users (display_name, is_owner, created_at)
                 SELECT $1 || '-after-' || display_name, 0, $2 FROM users WHERE display_name = $3
                 RETURNING id, display_name",
            )
            .bind("bob")
            .bind(2_i64)
            .bind("ann");
        let rows = store.write_batch(batch).await.expect("batch");
        assert_eq!(rows.len(), 2);
        #[derive(sqlx::FromRow)]
        struct Named {
            display_name: String,
        }
        let second = Named::from_row(&rows[1]).expect("name");
        assert_eq!(second.display_name, "bob-after-ann");
        assert_eq!(names(store).await, vec!["ann", "bob-after-ann"]);

        // A statement that fails leaves none of the batch behind…
        let mut batch = store.batch();
        batch
            .push("INSERT INTO users (display_name, is_owner, created_at) VALUES ($1, 0, 3)")
            .bind("carl");
        batch
            .push("INSERT INTO no_such_table (x) VALUES ($1)")
            .bind(1_i64);
        let Err(err) = store.write_batch(batch).await else {
            panic!("a batch with a failing statement fails");
        };
        assert!(err.to_string().contains("no_such_table"), "{err}");
        assert_eq!(names(store).await, vec!["ann", "bob-after-ann"]);

        // …and the store writes on.
        let mut batch = store.batch();
        batch
            .push("INSERT INTO users (display_name, is_owner, created_at) VALUES ($1, 0, 4)")
            .bind("dora");
        store.write_batch(batch).await.expect("after a failure");
        assert_eq!(names(store).await, vec!["ann", "bob-after-ann", "dora"]);
    }

    /// A statement bound with too few values would shift every later statement's values on
    /// SQLite (a missing one is NULL there): the batch is refused whole, saying why.
    #[tokio::test]
    async fn a_batch_bound_wrong_is_refused_and_stores_nothing() {
        let (store, _dir) = temp_store().await;
        let mut batch = store.batch();
        batch
            .push("INSERT INTO users (display_name, is_owner, created_at) VALUES ($1, 0, $2)")
            .bind("ann");
        batch
            .push("INSERT INTO users (display_name, is_owner, created_at) VALUES ($1, 0, 1)")
            .bind("bob");
        let Err(err) = store.write_batch(batch).await else {
            panic!("refused");
        };
        assert!(
            err.to_string()
                .contains("a statement with 2 parameters was given 1 values"),
            "{err}"
        );
        let mut batch = store.batch();
        batch.bind(1_i64);
        let Err(err) = store.write_batch(batch).await else {
            panic!("refused");
        };
        assert!(
            err.to_string().contains("bound before any statement"),
            "{err}"
        );
        assert!(names(&store).await.is_empty());
        store.close().await;
    }

    #[tokio::test]
    async fn a_batch_commits_all_its_statements_or_none_on_sqlite() {
        let (store, dir) = temp_store().await;
        batch_commits_together(&store).await;
        // A failed batch must not keep SQLite's write lock from another process.
        let url = format!("sqlite://{}", dir.path().join("test.db").display());
        let other = Store::connect(&url).await.expect("another process");
        let mut batch = other.batch();
        batch
            .push("INSERT INTO users (display_name, is_owner, created_at) VALUES ($1, 0, 5)")
            .bind("eve");
        let mut failing = store.batch();
        failing.push("INSERT INTO no_such_table (x) VALUES (1)");
        assert!(store.write_batch(failing).await.is_err());
        other
            .write_batch(batch)
            .await
            .expect("the write lock is free");
        other.close().await;
        assert_eq!(names(&store).await.last().map(String::as_str), Some("eve"));
    }

    #[tokio::test]
    async fn a_batch_commits_all_its_statements_or_none_on_postgres() {
        let Some((store, _server)) = postgres_store("batch").await else {
            return;
        };
        batch_commits_together(&store).await;
        store.close().await;
    }

    #[test]
    fn parameters_are_renumbered_outside_quotes_only() {
        assert_eq!(
            renumber("a = $1 AND b = $2", 0),
            ("a = $1 AND b = $2".to_string(), 2)
        );
        assert_eq!(
            renumber("a = $1 AND b = $12 AND c = '$1' AND \"$2\" = $3", 4),
            (
                "a = $5 AND b = $16 AND c = '$1' AND \"$2\" = $7".to_string(),
                12
            )
        );
        assert_eq!(
            renumber("json_extract(x, '$.a') = $1, 'it''s $2'", 1),
            ("json_extract(x, '$.a') = $2, 'it''s $2'".to_string(), 1)
        );
        assert_eq!(
            renumber("$ and $x stay", 3),
            ("$ and $x stay".to_string(), 0)
        );
    }
}
