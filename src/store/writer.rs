//! Where the store writes: on SQLite one connection, kept open and taken in turn; on
//! PostgreSQL a connection from the pool.
//!
//! SQLite takes one writer at a time. With writes spread over a pool, a writer that found the
//! file locked waited in SQLite's busy handler, which sleeps 1, 2, 5, 10… ms between tries
//! however soon the lock is free: under a burst that sleep bounded throughput with both cores
//! half idle. Here writers queue for the connection (a fair async mutex) and start the moment
//! it is free. The connection never goes back to a pool either, so no write pays the round trip
//! to the connection's thread that sqlx makes for every connection returned to one.
//!
//! Transactions on it are plain `BEGIN IMMEDIATE` / `COMMIT` statements. One that ends any
//! other way (dropped on an error or a cancelled task, or a failed COMMIT) marks the connection,
//! and the next writer rolls it back first, or opens a fresh connection when that fails.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use sqlx::any::{AnyArguments, AnyConnectOptions, AnyRow};
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, Connection, Executor};
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::StoreResult;

/// What every SQLite connection runs first. foreign_keys and busy_timeout are on by default in
/// sqlx's SQLite driver; set again so that no default of a future version changes them.
/// synchronous=NORMAL is safe in WAL mode against process crashes; after a power loss the
/// newest transactions may roll back, but platform cursors live in this same database and roll
/// back with them, so the platform simply redelivers.
pub(super) const SQLITE_PRAGMAS: &str =
    "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;";

/// The store's way to its writes; cheap to clone.
#[derive(Clone)]
pub(super) enum Writer {
    Sqlite(Arc<SqliteWriter>),
    Postgres(AnyPool),
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Sqlite(_) => "Writer::Sqlite",
            Self::Postgres(_) => "Writer::Postgres",
        })
    }
}

pub(super) struct SqliteWriter {
    options: AnyConnectOptions,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
pub(super) struct State {
    /// Opened on first use, and again after it was found broken.
    conn: Option<AnyConnection>,
    /// A transaction on `conn` ended without COMMIT or ROLLBACK.
    unfinished: bool,
    /// [`Writer::close`] ran: no connection is opened again, as a closed pool opens none.
    closed: bool,
}

impl Writer {
    pub(super) fn sqlite(options: AnyConnectOptions) -> Self {
        Self::Sqlite(Arc::new(SqliteWriter {
            options,
            state: Arc::default(),
        }))
    }

    /// A connection to write on, once it is this caller's turn.
    pub(super) async fn conn(&self) -> StoreResult<WriteConn> {
        Ok(WriteConn(match self {
            Self::Sqlite(writer) => Inner::Sqlite(writer.lock().await?),
            Self::Postgres(pool) => Inner::Pool(pool.acquire().await?),
        }))
    }

    /// Starts a transaction on the write connection; see [`super::Store::begin`].
    pub(super) async fn begin(&self) -> StoreResult<WriteTx> {
        match self {
            Self::Sqlite(writer) => {
                let mut state = writer.lock().await?;
                // Marked first: a caller dropped during BEGIN leaves it to be rolled back.
                state.unfinished = true;
                let begun = connection(&mut state).execute("BEGIN IMMEDIATE").await;
                state.unfinished = false;
                begun?;
                Ok(WriteTx(Tx::Sqlite {
                    state: Some(state),
                    open: true,
                }))
            }
            Self::Postgres(pool) => Ok(WriteTx(Tx::Postgres(Some(pool.begin().await?)))),
        }
    }

    /// Runs `sql` (`BEGIN IMMEDIATE; …; COMMIT`, from [`super::batch::Batch`]) on SQLite's
    /// write connection as one query. Marked unfinished first: a statement that fails stops the
    /// rest with the transaction still open, and a caller dropped on the way leaves it so too;
    /// it is rolled back at once, or by the next writer.
    pub(super) async fn sqlite_batch(
        &self,
        sql: String,
        arguments: AnyArguments,
    ) -> StoreResult<Vec<AnyRow>> {
        let Self::Sqlite(writer) = self else {
            unreachable!("a batch runs as one query on SQLite only");
        };
        let mut state = writer.lock().await?;
        state.unfinished = true;
        let result = sqlx::query_with(sqlx::AssertSqlSafe(sql), arguments)
            .fetch_all(connection(&mut state))
            .await;
        match result {
            Ok(rows) => {
                state.unfinished = false;
                Ok(rows)
            }
            Err(err) => {
                // Nothing of it may stay: roll back now, so that SQLite's write lock is free
                // for other processes. When there is nothing to roll back (BEGIN failed, or
                // COMMIT failed and SQLite rolled back itself) this fails, and the next writer
                // opens a fresh connection, as after any unfinished transaction.
                if connection(&mut state).execute("ROLLBACK").await.is_ok() {
                    state.unfinished = false;
                }
                Err(err.into())
            }
        }
    }

    /// Closes SQLite's write connection (waiting for the writer before); PostgreSQL's pool is
    /// the store's and closed with it.
    pub(super) async fn close(&self) {
        if let Self::Sqlite(writer) = self {
            let mut state = writer.state.lock().await;
            state.closed = true;
            if let Some(conn) = state.conn.take() {
                let _ = conn.close().await;
            }
        }
    }
}

impl SqliteWriter {
    async fn lock(&self) -> StoreResult<OwnedMutexGuard<State>> {
        let mut state = self.state.clone().lock_owned().await;
        if state.closed {
            return Err(sqlx::Error::PoolClosed.into());
        }
        if state.unfinished {
            state.unfinished = false;
            let rolled_back = match state.conn.as_mut() {
                Some(conn) => conn.execute("ROLLBACK").await.is_ok(),
                None => true,
            };
            // SQLite may have rolled back itself (a COMMIT that failed on a full disk), and
            // then ROLLBACK fails too: a fresh connection is in a known state either way.
            if !rolled_back && let Some(conn) = state.conn.take() {
                tracing::debug!("reopening the write connection after an unfinished transaction");
                let _ = conn.close().await;
            }
        }
        if state.conn.is_none() {
            state.conn = Some(connect_sqlite(&self.options).await?);
        }
        Ok(state)
    }
}

/// Opens a SQLite connection as the store's every connection is opened: with
/// [`SQLITE_PRAGMAS`].
pub(super) async fn connect_sqlite(
    options: &AnyConnectOptions,
) -> Result<AnyConnection, sqlx::Error> {
    let mut conn = AnyConnection::connect_with(options).await?;
    conn.execute(SQLITE_PRAGMAS).await?;
    Ok(conn)
}

/// The transaction's hold on the write connection, there until `drop` takes it.
fn guard(state: &mut Option<OwnedMutexGuard<State>>) -> &mut State {
    state
        .as_mut()
        .expect("held until the transaction is dropped")
}

fn connection(state: &mut State) -> &mut AnyConnection {
    state
        .conn
        .as_mut()
        .expect("SqliteWriter::lock opens the connection")
}

/// A connection to write on, from [`super::Store::write`]: used as `&mut *conn`.
pub struct WriteConn(Inner);

enum Inner {
    Sqlite(OwnedMutexGuard<State>),
    Pool(PoolConnection<Any>),
}

impl Deref for WriteConn {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        match &self.0 {
            Inner::Sqlite(state) => state.conn.as_ref().expect("opened when locked"),
            Inner::Pool(conn) => conn,
        }
    }
}

impl DerefMut for WriteConn {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        match &mut self.0 {
            Inner::Sqlite(state) => connection(state),
            Inner::Pool(conn) => conn,
        }
    }
}

/// A write transaction from [`super::Store::begin`], used as `&mut *tx`: rolled back unless
/// [`WriteTx::commit`] succeeds.
pub struct WriteTx(Tx);

enum Tx {
    Sqlite {
        /// Taken by `drop` to roll back an open transaction.
        state: Option<OwnedMutexGuard<State>>,
        /// Begun and not yet committed or rolled back.
        open: bool,
    },
    /// `None` once committed or rolled back; sqlx rolls back one dropped before.
    Postgres(Option<sqlx::Transaction<'static, Any>>),
}

impl WriteTx {
    pub async fn commit(mut self) -> StoreResult<()> {
        self.end("COMMIT").await
    }

    pub async fn rollback(mut self) -> StoreResult<()> {
        self.end("ROLLBACK").await
    }

    async fn end(&mut self, statement: &'static str) -> StoreResult<()> {
        match &mut self.0 {
            Tx::Sqlite { state, open } => {
                // On failure `open` stays set, and `drop` rolls back what is left.
                connection(guard(state)).execute(statement).await?;
                *open = false;
            }
            Tx::Postgres(tx) => {
                if let Some(tx) = tx.take() {
                    match statement {
                        "COMMIT" => tx.commit().await?,
                        _ => tx.rollback().await?,
                    }
                }
            }
        }
        Ok(())
    }
}

impl Drop for WriteTx {
    /// Rolls back a transaction that was neither committed nor rolled back (an early return,
    /// an error, a cancelled task) at once, keeping the connection until then: it holds
    /// SQLite's write lock, which other processes wait for. Where that cannot run (no runtime
    /// any more), the next writer rolls it back.
    fn drop(&mut self) {
        let Tx::Sqlite { state, open: true } = &mut self.0 else {
            return;
        };
        let Some(mut state) = state.take() else {
            return;
        };
        state.unfinished = true;
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Some(conn) = state.conn.as_mut()
                    && conn.execute("ROLLBACK").await.is_ok()
                {
                    state.unfinished = false;
                }
            });
        }
    }
}

impl Deref for WriteTx {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        match &self.0 {
            Tx::Sqlite { state, .. } => state
                .as_ref()
                .and_then(|state| state.conn.as_ref())
                .expect("opened when locked"),
            Tx::Postgres(tx) => tx.as_deref().expect("used before its end"),
        }
    }
}

impl DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        match &mut self.0 {
            Tx::Sqlite { state, .. } => connection(guard(state)),
            Tx::Postgres(tx) => tx.as_deref_mut().expect("used before its end"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Store;
    use super::super::test_support::temp_store;

    async fn users(store: &Store) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM users")
            .fetch_one(store.pool())
            .await
            .expect("count")
    }

    async fn add_user(conn: &mut sqlx::AnyConnection) {
        sqlx::query("INSERT INTO users (is_owner, created_at) VALUES (0, 1)")
            .execute(conn)
            .await
            .expect("insert");
    }

    /// Another process waits for SQLite's write lock; a transaction dropped without a commit
    /// must give it back at once, not at this process's next write.
    async fn another_process_writes_at_once(store: &Store, dir: &tempfile::TempDir) {
        let url = format!("sqlite://{}", dir.path().join("test.db").display());
        let other = Store::connect(&url).await.expect("another process");
        // A lock still held would fail this after SQLite's 5 s busy timeout.
        let mut tx = other.begin().await.expect("the write lock is free");
        add_user(&mut tx).await;
        tx.commit().await.expect("commit");
        other.close().await;
        assert_eq!(users(store).await, 1, "only the other process's row");
    }

    #[tokio::test]
    async fn a_transaction_dropped_without_commit_is_rolled_back_at_once() {
        let (store, dir) = temp_store().await;
        {
            let mut tx = store.begin().await.expect("begin");
            add_user(&mut tx).await;
        }
        another_process_writes_at_once(&store, &dir).await;
        // And this process writes on.
        let mut tx = store.begin().await.expect("begin again");
        add_user(&mut tx).await;
        tx.commit().await.expect("commit");
        assert_eq!(users(&store).await, 2);
    }

    #[tokio::test]
    async fn a_closed_store_writes_nothing() {
        let (store, _dir) = temp_store().await;
        add_user(&mut store.write().await.expect("open")).await;
        store.close().await;
        assert!(store.write().await.is_err());
        assert!(store.begin().await.is_err());
    }

    #[tokio::test]
    async fn a_task_cancelled_inside_a_transaction_leaves_nothing_behind() {
        let (store, dir) = temp_store().await;
        let (begun, wait) = tokio::sync::oneshot::channel();
        let task = tokio::spawn({
            let store = store.clone();
            async move {
                let mut tx = store.begin().await.expect("begin");
                add_user(&mut tx).await;
                let _ = begun.send(());
                std::future::pending::<()>().await;
                tx.commit().await.expect("never");
            }
        });
        wait.await.expect("begun");
        task.abort();
        assert!(task.await.expect_err("aborted").is_cancelled());
        another_process_writes_at_once(&store, &dir).await;
        // And this process writes on, outside a transaction too.
        add_user(&mut store.write().await.expect("the write connection")).await;
        assert_eq!(users(&store).await, 2);
    }
}
