//! The store's connections for reads: on SQLite a few connections this module keeps itself, on
//! PostgreSQL sqlx's pool (which the writes share).
//!
//! Why not sqlx's pool for SQLite: a connection given back to sqlx's pool goes back in a
//! spawned task that first pings it, a round trip to the connection's own thread. Every read
//! paid that ping, and a read that followed another before the ping was done found no idle
//! connection and opened a new one: a daemon that read one thing at a time at start had five
//! connections open (five threads, each with SQLite's schema and page cache, about 250 KB),
//! and opening each cost a start 2–4 ms. Here a connection goes back at once, when the
//! [`ReadConn`] is dropped, and the one used last is lent next.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use sqlx::Either;
use sqlx::any::{AnyConnectOptions, AnyQueryResult, AnyRow, AnyStatement, AnyTypeInfo};
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, Connection, Execute, Executor};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use super::writer::connect_sqlite;

/// SQLite connections for reads open at once, at the most: WAL lets them all read beside
/// the writer.
const SQLITE_READERS: u32 = 8;

/// A SQLite connection not used for this long is closed the next time a read comes by, so a
/// burst's connections do not stay for months (sqlx's pool closes idle ones after the same).
const SQLITE_IDLE_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// Where reads go: `.fetch_all(store.pool())`, or [`ReadPool::acquire`] for several on one
/// connection. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ReadPool(Pool);

#[derive(Clone, Debug)]
enum Pool {
    Sqlite(Arc<SqliteReaders>),
    Postgres(AnyPool),
}

#[derive(Debug)]
struct SqliteReaders {
    options: AnyConnectOptions,
    /// [`SQLITE_IDLE_TIMEOUT`]; shorter in tests.
    idle_timeout: Duration,
    /// One permit a connection lent out or being opened; closed by [`ReadPool::close`].
    permits: Arc<Semaphore>,
    /// Connections not lent out, the one given back last at the end.
    idle: Mutex<Vec<Idle>>,
    /// Woken when a connection goes back to `idle`.
    given_back: Notify,
    /// Held while a connection is being opened.
    opening: tokio::sync::Mutex<()>,
}

struct Idle {
    conn: AnyConnection,
    since: Instant,
}

impl std::fmt::Debug for Idle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idle").field("since", &self.since).finish()
    }
}

impl ReadPool {
    /// Reads on SQLite, starting with `first`, a connection just opened.
    pub(super) fn sqlite(options: AnyConnectOptions, first: AnyConnection) -> Self {
        Self::sqlite_closing_after(options, first, SQLITE_IDLE_TIMEOUT)
    }

    fn sqlite_closing_after(
        options: AnyConnectOptions,
        first: AnyConnection,
        idle_timeout: Duration,
    ) -> Self {
        Self(Pool::Sqlite(Arc::new(SqliteReaders {
            options,
            idle_timeout,
            permits: Arc::new(Semaphore::new(SQLITE_READERS as usize)),
            idle: Mutex::new(vec![Idle {
                conn: first,
                since: Instant::now(),
            }]),
            given_back: Notify::new(),
            opening: tokio::sync::Mutex::new(()),
        })))
    }

    pub(super) fn postgres(pool: AnyPool) -> Self {
        Self(Pool::Postgres(pool))
    }

    /// A connection of its own for the caller until it is dropped, used as `&mut *conn`.
    pub async fn acquire(&self) -> Result<ReadConn, sqlx::Error> {
        match &self.0 {
            Pool::Sqlite(readers) => readers.clone().acquire().await,
            Pool::Postgres(pool) => Ok(ReadConn(Conn::Pool(pool.acquire().await?))),
        }
    }

    /// A connection of the caller's own, outside the pool, closed when dropped (PostgreSQL's
    /// advisory locks live as long as theirs).
    pub(super) async fn detached(&self) -> Result<AnyConnection, sqlx::Error> {
        match &self.0 {
            Pool::Sqlite(readers) => connect_sqlite(&readers.options).await,
            Pool::Postgres(pool) => Ok(pool.acquire().await?.detach()),
        }
    }

    /// Waits for the reads under way, then closes every connection; reads after this fail
    /// with [`sqlx::Error::PoolClosed`].
    pub(super) async fn close(&self) {
        match &self.0 {
            Pool::Sqlite(readers) => readers.close().await,
            Pool::Postgres(pool) => pool.close().await,
        }
    }
}

impl SqliteReaders {
    async fn acquire(self: Arc<Self>) -> Result<ReadConn, sqlx::Error> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| sqlx::Error::PoolClosed)?;
        let conn = loop {
            // Enabled before the idle list is looked at, so a connection given back in
            // between is not missed.
            let given_back = self.given_back.notified();
            tokio::pin!(given_back);
            given_back.as_mut().enable();
            if let Some(conn) = self.take_idle() {
                break conn;
            }
            // One connection is opened at a time. Opening one takes milliseconds (a thread,
            // the file, the schema) and a read well under one, so a reader that finds another
            // opening waits for whichever comes first: a connection given back, or its turn
            // to open one. At start, when the daemon's tasks all read at once, that was four
            // connections opened side by side for reads that one could serve in turn.
            let opening = tokio::select! {
                () = &mut given_back => continue,
                opening = self.opening.lock() => opening,
            };
            if let Some(conn) = self.take_idle() {
                break conn;
            }
            let busy = SQLITE_READERS as usize - self.permits.available_permits();
            tracing::debug!(busy, "opening another SQLite connection for reads");
            let conn = connect_sqlite(&self.options).await?;
            drop(opening);
            break conn;
        };
        Ok(ReadConn(Conn::Sqlite {
            conn: Some(conn),
            readers: self,
            _permit: permit,
        }))
    }

    /// The connection given back last, after closing those unused for `idle_timeout` (the
    /// oldest are first; dropping one ends its thread, which closes the database handle).
    fn take_idle(&self) -> Option<AnyConnection> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let stale = idle
            .iter()
            .take_while(|i| i.since.elapsed() >= self.idle_timeout)
            .count();
        idle.drain(..stale);
        idle.pop().map(|i| i.conn)
    }

    async fn close(&self) {
        // Every permit: the reads under way have given their connections back.
        if let Ok(all) = self.permits.acquire_many(SQLITE_READERS).await {
            self.permits.close();
            drop(all);
        }
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()));
        for Idle { conn, .. } in idle {
            let _ = conn.close().await;
        }
    }

    /// Takes a connection back; one that sqlx counts inside a transaction (store code begins
    /// them on the writer, never here) is closed instead, as is every one after
    /// [`ReadPool::close`].
    fn give_back(&self, conn: AnyConnection) {
        if self.permits.is_closed() || conn.is_in_transaction() {
            return;
        }
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Idle {
                conn,
                since: Instant::now(),
            });
        self.given_back.notify_one();
    }
}

/// A connection for reads from [`ReadPool::acquire`]; given back when dropped.
pub struct ReadConn(Conn);

enum Conn {
    Sqlite {
        /// Taken by `drop` to give it back.
        conn: Option<AnyConnection>,
        readers: Arc<SqliteReaders>,
        /// Released after the connection is back (fields drop after `Drop::drop`), so the
        /// next reader finds it idle instead of opening another.
        _permit: OwnedSemaphorePermit,
    },
    Pool(PoolConnection<Any>),
}

impl Drop for ReadConn {
    fn drop(&mut self) {
        if let Conn::Sqlite { conn, readers, .. } = &mut self.0
            && let Some(conn) = conn.take()
        {
            readers.give_back(conn);
        }
    }
}

impl Deref for ReadConn {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        match &self.0 {
            Conn::Sqlite { conn, .. } => conn.as_ref().expect("held until dropped"),
            Conn::Pool(conn) => conn,
        }
    }
}

impl DerefMut for ReadConn {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        match &mut self.0 {
            Conn::Sqlite { conn, .. } => conn.as_mut().expect("held until dropped"),
            Conn::Pool(conn) => conn,
        }
    }
}

/// `&ReadPool` runs a query as `&AnyPool` does: on a connection taken for that one query.
/// Unlike the pool's, its rows are read to the end before the first is handed on (the
/// connection cannot be kept alongside a stream that borrows it); hearth's queries read
/// bounded pages, and `fetch_all` and `fetch_one` read them all anyway.
impl<'p> Executor<'p> for &'_ ReadPool {
    type Database = Any;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Any>,
    {
        let pool = self.clone();
        stream::once(async move {
            let mut conn = pool.acquire().await?;
            let results: Vec<_> = conn.fetch_many(query).collect().await;
            Ok::<_, sqlx::Error>(stream::iter(results))
        })
        .try_flatten()
        .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Any>,
    {
        let pool = self.clone();
        Box::pin(async move { pool.acquire().await?.fetch_optional(query).await })
    }

    fn prepare_with<'e>(
        self,
        sql: sqlx::SqlStr,
        parameters: &'e [AnyTypeInfo],
    ) -> BoxFuture<'e, Result<AnyStatement, sqlx::Error>>
    where
        'p: 'e,
    {
        let pool = self.clone();
        Box::pin(async move { pool.acquire().await?.prepare_with(sql, parameters).await })
    }

    fn describe<'e>(
        self,
        sql: sqlx::SqlStr,
    ) -> BoxFuture<'e, Result<sqlx::Describe<Any>, sqlx::Error>> {
        let pool = self.clone();
        Box::pin(async move { pool.acquire().await?.describe(sql).await })
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;
    use std::time::Duration;

    use super::*;

    /// A read pool on a new file of its own, its connections unused for `idle_timeout` closed.
    async fn pool(idle_timeout: Duration) -> (ReadPool, tempfile::TempDir) {
        sqlx::any::install_default_drivers();
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("r.db").display());
        let options = AnyConnectOptions::from_str(&url).expect("options");
        let mut first = connect_sqlite(&options).await.expect("connect");
        first
            .execute("PRAGMA journal_mode = WAL")
            .await
            .expect("wal");
        let pool = ReadPool::sqlite_closing_after(options, first, idle_timeout);
        (pool, dir)
    }

    fn idle(pool: &ReadPool) -> usize {
        match &pool.0 {
            Pool::Sqlite(readers) => readers.idle.lock().expect("lock").len(),
            Pool::Postgres(_) => unreachable!("SQLite"),
        }
    }

    async fn one(pool: &ReadPool) -> i64 {
        sqlx::query_scalar("SELECT 1")
            .fetch_one(pool)
            .await
            .expect("read")
    }

    /// Counts to `n` the slow way, for a read that takes a while.
    const SLOW: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < $1) \
                        SELECT COUNT(*) FROM c";

    #[tokio::test]
    async fn reads_one_at_a_time_share_one_connection() {
        let (pool, _dir) = pool(SQLITE_IDLE_TIMEOUT).await;
        for _ in 0..20 {
            assert_eq!(one(&pool).await, 1);
            let rows: Vec<i64> = sqlx::query_scalar("SELECT 2 UNION ALL SELECT 3")
                .fetch_all(&pool)
                .await
                .expect("rows");
            assert_eq!(rows, [2, 3]);
        }
        assert_eq!(idle(&pool), 1, "no second connection was opened");
    }

    #[tokio::test]
    async fn reads_at_once_open_at_most_eight_connections() {
        let (pool, _dir) = pool(SQLITE_IDLE_TIMEOUT).await;
        let reads = (0..30).map(|i| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let n: i64 = sqlx::query_scalar(SLOW)
                    .bind(20_000 + i)
                    .fetch_one(&pool)
                    .await
                    .expect("read");
                assert_eq!(n, 20_000 + i);
            })
        });
        for read in futures::future::join_all(reads).await {
            read.expect("task");
        }
        let open = idle(&pool);
        assert!((2..=8).contains(&open), "{open} connections");
    }

    /// As at start, when the daemon's tasks all read at once: quick reads wait for the
    /// connection in use rather than each opening one of their own.
    #[tokio::test]
    async fn quick_reads_at_once_open_one_connection_at_a_time() {
        let (pool, _dir) = pool(SQLITE_IDLE_TIMEOUT).await;
        let reads = (0..6).map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { one(&pool).await })
        });
        for read in futures::future::join_all(reads).await {
            assert_eq!(read.expect("task"), 1);
        }
        // Each opening its own made six; one at a time, reads given back meanwhile serve the
        // others. How many that saves depends on how fast the machine answers: an idle one
        // opens two or three, a loaded one (a release build beside the tests) up to four or
        // five, so the check is only that they did not each open their own.
        let open = idle(&pool);
        assert!(open < 6, "{open} connections for six quick reads");
    }

    #[tokio::test]
    async fn a_read_given_up_midway_leaves_a_connection_that_answers_the_next() {
        let (pool, _dir) = pool(SQLITE_IDLE_TIMEOUT).await;
        let given_up = tokio::time::timeout(
            Duration::from_millis(5),
            sqlx::query_scalar::<_, i64>(SLOW)
                .bind(3_000_000)
                .fetch_one(&pool),
        )
        .await;
        assert!(given_up.is_err(), "the slow read was still running");
        // The same connection, once the dropped read is done on it: its own answer, not the
        // abandoned one's.
        assert_eq!(one(&pool).await, 1);
        assert_eq!(idle(&pool), 1);
    }

    #[tokio::test]
    async fn a_connection_left_in_a_transaction_is_closed_not_lent() {
        let (pool, _dir) = pool(SQLITE_IDLE_TIMEOUT).await;
        {
            let mut conn = pool.acquire().await.expect("acquire");
            let mut tx = conn.begin().await.expect("begin");
            tx.execute("SELECT 1").await.expect("read inside");
            // Neither committed nor rolled back, as after a panic in the middle.
            std::mem::forget(tx);
        }
        assert_eq!(idle(&pool), 0, "closed on its way back");
        let mut conn = pool.acquire().await.expect("a new one");
        assert!(!conn.is_in_transaction());
        assert_eq!(
            sqlx::query_scalar::<_, i64>("SELECT 1")
                .fetch_one(&mut *conn)
                .await
                .expect("read"),
            1
        );
    }

    #[tokio::test]
    async fn connections_unused_for_long_are_closed_at_the_next_read() {
        let (pool, _dir) = pool(Duration::from_millis(100)).await;
        {
            let _held = futures::future::try_join_all((0..3).map(|_| pool.acquire()))
                .await
                .expect("three at once");
        }
        assert_eq!(idle(&pool), 3);
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(one(&pool).await, 1);
        assert_eq!(idle(&pool), 1, "the two older ones were closed");
    }

    #[tokio::test]
    async fn close_waits_for_reads_under_way_and_refuses_new_ones() {
        let (pool, _dir) = pool(SQLITE_IDLE_TIMEOUT).await;
        let held = pool.acquire().await.expect("acquire");
        let closing = tokio::spawn({
            let pool = pool.clone();
            async move { pool.close().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!closing.is_finished(), "waits for the read under way");
        drop(held);
        closing.await.expect("closed");
        assert_eq!(idle(&pool), 0);
        let refused = sqlx::query("SELECT 1").execute(&pool).await;
        assert!(
            matches!(refused, Err(sqlx::Error::PoolClosed)),
            "{refused:?}"
        );
    }
}
