//! The database: SQLite by default, PostgreSQL for those who outgrow one machine.
//!
//! One code path serves both through sqlx's `Any` driver: queries use `$N` placeholders (both
//! backends accept them), integers are bound as `i64`, timestamps are Unix milliseconds, and
//! structured values are JSON text. The schema lives in `migrations/sqlite` and
//! `migrations/postgres`, embedded in the binary and applied forward-only.

mod agent;
pub mod background;
mod batch;
pub mod bookmark;
pub mod calendar;
pub mod calendar_cache;
mod channel_state;
mod confirmation;
pub mod contact;
mod conversation;
pub mod expense;
pub mod feed;
pub mod goal;
pub mod http;
mod identity;
pub(crate) mod inbox;
mod lock;
pub mod mcp_approval;
pub mod memory;
pub mod note;
mod outbox;
pub mod plan;
pub mod query;
mod read_pool;
pub mod schedule;
mod session;
mod summary;
pub mod task;
mod text_enum;
mod turn;
mod usage;
pub mod user;
pub mod weather;
mod web;
mod writer;

pub use agent::AgentVersion;
pub use batch::Batch;
pub use confirmation::{
    AuditEntry, Confirmation, ConfirmationStatus, DENIED_FOR_WRONG_CODES, WrongCode,
};
pub use conversation::Conversation;
pub use identity::{
    Identity, IdentityStatus, LinkError, LinkOutcome, Merge, PairingRequest, PairingStatus,
    UnlinkOutcome, UserSummary, configured_owners,
};
pub use inbox::{InboxEntry, InboxStatus};
pub use lock::{LockError, LockKind, ProcessLock};
pub use outbox::{NewOutbox, OutboxItem, OutboxKind, OutboxPart, PartStatus};
pub use read_pool::{ReadConn, ReadPool};
pub use session::Abandoned;
pub use summary::{CoveredCall, HistoryKey, Summary};
pub use text_enum::UnknownState;
pub(crate) use text_enum::text_enum;
pub use turn::{
    StoredMessage, ToolCallRecord, ToolCallStatus, Turn, TurnEnd, TurnOutcomes, TurnStatus,
    message_chars, unfinished_turns,
};
pub use usage::{CalibrationRow, ModelCall, Payer, UsageBy, UsageRow};
pub use web::{
    ConversationRow, PendingConfirmation, RunCost, SearchHit, ToolCallRow, TranscriptRow,
};
pub use writer::{WriteConn, WriteTx};

use std::path::Path;
use std::str::FromStr;

use sqlx::Executor;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};

/// A store failure. The driver's error is part of the message and deliberately not its
/// `source`: logs that print the cause chain would otherwise show it twice.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(sqlx::migrate::MigrateError),
    #[error("bad database URL {url:?}: {reason}")]
    Url { url: String, reason: String },
    #[error("stored value is corrupt: {0}")]
    Corrupt(String),
    #[error("cannot create the data directory {path}: {error}")]
    DataDir { path: String, error: std::io::Error },
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        StoreError::Database(err)
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(err: sqlx::migrate::MigrateError) -> Self {
        StoreError::Migrate(err)
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(err: serde_json::Error) -> Self {
        StoreError::Corrupt(err.to_string())
    }
}

impl StoreError {
    /// Whether the database cannot take writes right now for a reason outside hearth that
    /// passes by itself or by the operator's hand: a full disk, a read-only file or file
    /// system, an I/O error, a lock held too long, a lost or exhausted server. Work that hit
    /// such an error is kept and tried again later rather than set aside.
    pub fn is_unavailable(&self) -> bool {
        let StoreError::Database(err) = self else {
            return false;
        };
        match err {
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => true,
            sqlx::Error::Database(db) => {
                if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                    // SQLite's code is the extended result code; the primary one is its low byte.
                    let primary = db
                        .code()
                        .and_then(|c| c.parse::<i64>().ok())
                        .map(|c| c & 0xff);
                    // BUSY, LOCKED, READONLY, IOERR, FULL, CANTOPEN.
                    return matches!(primary, Some(5 | 6 | 8 | 10 | 13 | 14));
                }
                // PostgreSQL SQLSTATEs: insufficient resources (53: disk full, out of memory,
                // too many connections), connection exceptions (08), the server shutting down
                // (57P01-57P03), a read-only transaction (25006, a hot standby).
                db.code().is_some_and(|code| {
                    code.starts_with("53")
                        || code.starts_with("08")
                        || matches!(&*code, "57P01" | "57P02" | "57P03" | "25006")
                })
            }
            _ => false,
        }
    }

    /// The error in a few words for `/healthz` and status lines: the database's own message
    /// ("database or disk is full") without the driver's wrapping.
    pub fn reason(&self) -> String {
        match self {
            StoreError::Database(sqlx::Error::Database(db)) => db.message().to_owned(),
            StoreError::Database(err) => err.to_string(),
            other => other.to_string(),
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A handle to the database; cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    /// Where reads go (see `store/read_pool.rs`).
    pool: ReadPool,
    /// Where transactions and single writes go: on SQLite one connection taken in turn (see
    /// `store/writer.rs`), on PostgreSQL `pool`.
    writer: writer::Writer,
    backend: Backend,
    /// The SQLite file (none for PostgreSQL and in-memory databases): its lock file sits beside it.
    sqlite_path: Option<std::path::PathBuf>,
    /// The database as messages name it: the SQLite path or the URL without its password.
    location: String,
    /// This open created the SQLite file from [`SQLITE_FRESH_DATABASE`]: its migration
    /// records are dated when [`Store::migrate`] runs.
    created_from_image: bool,
    /// Sent when this process changed what waits for the owner (a confirmation asked or
    /// decided, a pairing request made or settled), so the page's live inbox looks at once
    /// instead of on its next poll. Changes made by another process are seen by that poll.
    waiting_signal: std::sync::Arc<tokio::sync::watch::Sender<()>>,
}

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// The schema that `migrations/sqlite` makes, as SQLite holds it after replaying them, in the
/// order it was made: what a new SQLite database is created from. The test
/// `the_fresh_schema_file_is_the_migrations_replayed` holds it equal to them; after adding a
/// migration, `HEARTH_WRITE_SCHEMA=1 cargo test --lib fresh_schema` writes it anew.
const SQLITE_FRESH_SCHEMA: &str = include_str!("../migrations/sqlite_fresh_schema.sql");

/// A new SQLite database file, gzipped: [`SQLITE_FRESH_SCHEMA`] with every migration recorded
/// (dated [`IMAGE_INSTALLED_ON`]), in WAL mode. A new data directory gets a copy of it, which
/// SQLite opens without running a statement of the schema: making the same objects by SQL took
/// 5–8 ms of the first start (each `CREATE` is parsed, then parsed again into the schema), a
/// quarter of the time to the first answer. The in-memory databases of the tests, and an empty
/// file (an older hearth made one first), get the schema by SQL. The same test holds it equal
/// to the migrations and writes it anew.
const SQLITE_FRESH_DATABASE: &[u8] = include_bytes!("../migrations/sqlite_fresh.db.gz");

/// The `installed_on` of the migration records in [`SQLITE_FRESH_DATABASE`]; the first open
/// dates them.
const IMAGE_INSTALLED_ON: &str = "1970-01-01 00:00:00";

impl Store {
    /// Connects to `url` (`sqlite://path`, `postgres://…`). A SQLite file and its directory are
    /// created when missing. Does not migrate; call [`Store::migrate`].
    pub async fn connect(url: &str) -> StoreResult<Self> {
        sqlx::any::install_default_drivers();
        let (backend, url, created_from_image) = normalise_url(url)?;
        let sqlite_path = sqlite_file(&url);
        let location = match &sqlite_path {
            Some(path) => path.display().to_string(),
            None => redact_url(&url),
        };
        let options = AnyConnectOptions::from_str(&url).map_err(|err| StoreError::Url {
            url: redact_url(&url),
            reason: err.to_string(),
        })?;
        let (pool, writer) = match backend {
            Backend::Sqlite => {
                // WAL lets readers run beside the one writer. It is a property of the file:
                // set once per open, before any reader or the writer has opened it.
                let mut conn = writer::connect_sqlite(&options).await?;
                conn.execute("PRAGMA journal_mode = WAL").await?;
                // An in-memory database lives as long as a connection to it, so this one is
                // the readers' first rather than closed.
                let pool = ReadPool::sqlite(options.clone(), conn);
                (pool, writer::Writer::sqlite(options))
            }
            Backend::Postgres => {
                let pool = AnyPoolOptions::new()
                    .max_connections(16)
                    .connect_with(options)
                    .await?;
                (
                    ReadPool::postgres(pool.clone()),
                    writer::Writer::Postgres(pool),
                )
            }
        };
        Ok(Self {
            pool,
            writer,
            backend,
            sqlite_path,
            location,
            created_from_image,
            waiting_signal: std::sync::Arc::new(tokio::sync::watch::Sender::new(())),
        })
    }

    /// Changes when this process changed what waits for the owner (see `waiting_signal`).
    pub fn waiting_changes(&self) -> tokio::sync::watch::Receiver<()> {
        self.waiting_signal.subscribe()
    }

    /// Tells the live inbox that what waits for the owner changed; called once the change is
    /// committed, so a page that looks then sees it.
    pub(crate) fn waiting_changed(&self) {
        self.waiting_signal.send_replace(());
    }

    /// Connects and applies pending migrations: what `hearth run` and `hearth chat` do at start.
    pub async fn open(url: &str) -> StoreResult<Self> {
        let store = Self::connect(url).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Applies the embedded migrations that are not applied yet; returns how many ran.
    pub async fn migrate(&self) -> StoreResult<usize> {
        let migrator = self.migrator();
        let mut before = self.applied_migrations().await.unwrap_or(0);
        if self.created_from_image {
            // The copy's records are of migrations applied now, by the first migrate.
            let dated = sqlx::query(
                "UPDATE _sqlx_migrations SET installed_on = CURRENT_TIMESTAMP WHERE installed_on = $1",
            )
            .bind(IMAGE_INSTALLED_ON)
            .execute(&mut *self.write().await?)
            .await?;
            before = before.saturating_sub(usize::try_from(dated.rows_affected()).unwrap_or(0));
        } else if self.backend == Backend::Sqlite {
            self.create_fresh_sqlite_schema(migrator).await?;
        }
        // Applies what is pending, and checks every applied migration against the binary's.
        // sqlx's migrator wants a connection of its own and runs its own transactions: one of
        // the readers' serves (SQLite's file lock keeps its writes in turn with the writer's,
        // and at start nothing else writes yet).
        migrator.run(&mut *self.pool.acquire().await?).await?;
        let after = self.applied_migrations().await?;
        Ok(after.saturating_sub(before))
    }

    /// A new SQLite database gets its whole schema in one transaction, from
    /// [`SQLITE_FRESH_SCHEMA`], with every migration recorded in `_sqlx_migrations` as sqlx
    /// records them, so that [`sqlx::migrate::Migrator::run`] then finds nothing to do and
    /// checks them as usual. Replaying the migrations took 11 ms of a fresh start's 35 (sqlx
    /// alone, one transaction and a second commit per migration, took 20–25): most of it in the
    /// `ALTER TABLE`s, each of which makes SQLite parse the whole schema again. A database
    /// that has the table already is left to sqlx.
    async fn create_fresh_sqlite_schema(
        &self,
        migrator: &sqlx::migrate::Migrator,
    ) -> StoreResult<()> {
        if migrator
            .iter()
            .any(|m| m.no_tx || !m.migration_type.is_up_migration())
        {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        // Checked under the write lock: two processes opening one new file create it once.
        let exists: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
        )
        .fetch_one(&mut *tx)
        .await?;
        if exists > 0 {
            return tx.rollback().await;
        }
        // sqlx-sqlite's own table, column for column.
        tx.execute(
            "CREATE TABLE _sqlx_migrations (
                version BIGINT PRIMARY KEY,
                description TEXT NOT NULL,
                installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
                success BOOLEAN NOT NULL,
                checksum BLOB NOT NULL,
                execution_time BIGINT NOT NULL
            )",
        )
        .await?;
        tx.execute(SQLITE_FRESH_SCHEMA).await?;
        for migration in migrator.iter() {
            // The time sqlx would have recorded is not known: none was spent on one alone.
            sqlx::query(
                "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
                 VALUES ($1, $2, TRUE, $3, 0)",
            )
            .bind(migration.version)
            .bind(migration.description.as_ref())
            .bind(migration.checksum.as_ref())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The number of migrations shipped in this binary for this backend.
    pub fn known_migrations(&self) -> usize {
        self.migrator().iter().count()
    }

    async fn applied_migrations(&self) -> StoreResult<usize> {
        let count: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success = TRUE")
                .fetch_one(&self.pool)
                .await?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    fn migrator(&self) -> &'static sqlx::migrate::Migrator {
        match self.backend {
            Backend::Sqlite => &SQLITE_MIGRATIONS,
            Backend::Postgres => &POSTGRES_MIGRATIONS,
        }
    }

    /// The database as messages name it: the SQLite file, or the URL without its password.
    pub fn location(&self) -> &str {
        &self.location
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Where reads go: `.fetch_all(store.pool())`.
    pub fn pool(&self) -> &ReadPool {
        &self.pool
    }

    /// A connection for a write outside [`Store::begin`], once it is this caller's turn (on
    /// SQLite every write of the process goes through one connection): `.execute(&mut *store
    /// .write().await?)`. Reads go to [`Store::pool`].
    pub async fn write(&self) -> StoreResult<WriteConn> {
        self.writer.conn().await
    }

    /// Starts a transaction, the one way the store and the tools open one, on the write
    /// connection (see [`Store::write`]). On SQLite it takes the write lock at once (`BEGIN
    /// IMMEDIATE`), which another process (`hearth chat`, a CLI command) may hold for up to
    /// `busy_timeout`. A plain (deferred) transaction that reads first and writes later instead
    /// fails at once with SQLITE_BUSY_SNAPSHOT when another connection wrote in between, and
    /// no timeout helps: under load that failed whole inbox entries, whose retry then answered
    /// a button press twice or found its confirmation already decided and showed no outcome.
    pub async fn begin(&self) -> StoreResult<WriteTx> {
        self.writer.begin().await
    }

    /// An empty [`Batch`] of statements for [`Store::write_batch`].
    pub fn batch(&self) -> Batch {
        Batch::new(self.backend)
    }

    /// Commits the batch's statements together (on SQLite in one round trip); the rows they
    /// return, in order. An error means none of them took effect.
    pub async fn write_batch(&self, batch: Batch) -> StoreResult<Vec<sqlx::any::AnyRow>> {
        batch.run(&self.writer).await
    }

    /// Writes a consistent copy of a SQLite database to `path` while others keep using it
    /// (`VACUUM INTO`). PostgreSQL has its own tools (`pg_dump`).
    pub async fn backup_to(&self, path: &Path) -> StoreResult<()> {
        if self.backend != Backend::Sqlite {
            return Err(StoreError::Url {
                url: "postgres".into(),
                reason: "hearth backup copies SQLite databases; use pg_dump for PostgreSQL".into(),
            });
        }
        let target = path
            .to_str()
            .ok_or_else(|| StoreError::Corrupt("the backup path is not valid UTF-8".into()))?;
        sqlx::query("VACUUM INTO $1")
            .bind(target)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Waits for running queries and closes every connection.
    pub async fn close(&self) {
        self.writer.close().await;
        self.pool.close().await;
    }
}

/// Creates `path` and its missing parents readable by this user alone (0700), whatever the
/// umask: they hold every message, memory and key. Directories that exist keep their mode.
pub fn create_private_dir(path: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)
}

/// Creates the database file, readable by this user alone (0600), when there is none yet: a
/// copy of [`SQLITE_FRESH_DATABASE`]; returns whether it did. A file that exists keeps its
/// content and mode. SQLite gives its `-wal` and `-shm` files the mode of the database.
///
/// The copy is written under another name and linked into place, so a second process opening
/// the path meanwhile finds no file or the whole database, never part of one, and a file it
/// made first is kept (a link never replaces). Where links cannot be made, an empty file is
/// created instead and [`Store::migrate`] makes the schema by SQL.
fn create_database_file(path: &Path) -> std::io::Result<bool> {
    use std::io::ErrorKind;
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(false);
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let copy = path.with_file_name(format!(".{name}.new-{}", std::process::id()));
    // Left by a start of this process id that died while writing it.
    let _ = std::fs::remove_file(&copy);
    // Without a copy (a full disk, no hard links here, something in the way of its name): an
    // empty private file, and the schema by SQL, whose failure on a full disk names the cause.
    if write_fresh_database(&copy).is_err() {
        let _ = std::fs::remove_file(&copy);
        return create_private_file(path).map(|()| false);
    }
    let linked = std::fs::hard_link(&copy, path);
    let _ = std::fs::remove_file(&copy);
    match linked {
        Ok(()) => Ok(true),
        // Another process made the database first: it is kept.
        Err(err) if err.kind() == ErrorKind::AlreadyExists => Ok(false),
        Err(_) => create_private_file(path).map(|()| false),
    }
}

/// Writes [`SQLITE_FRESH_DATABASE`], unpacked, to a new file at `path` (0600).
fn write_fresh_database(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    // Unpacked first and written in one call: a copy through a buffer was 55 writes.
    let mut unpacked = Vec::with_capacity(512 * 1024);
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(SQLITE_FRESH_DATABASE),
        &mut unpacked,
    )?;
    std::io::Write::write_all(&mut file, &unpacked)?;
    // On the disk before it is linked into place: a crash must not leave a database file
    // whose blocks were never written.
    file.sync_all()
}

/// Creates an empty database file readable by this user alone (0600) when there is none yet.
/// A file that exists keeps its mode.
fn create_private_file(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(err),
    }
}

/// Recognises the backend and, for SQLite, creates a missing file; says whether it was made
/// from [`SQLITE_FRESH_DATABASE`].
fn normalise_url(url: &str) -> StoreResult<(Backend, String, bool)> {
    if let Some(rest) = url.strip_prefix("sqlite:") {
        let rest = rest.trim_start_matches("//");
        let (path, query) = match rest.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (rest, None),
        };
        if path.is_empty() {
            return Err(StoreError::Url {
                url: url.into(),
                reason: "no database file given".into(),
            });
        }
        let mut created = false;
        if path != ":memory:"
            && let Some(parent) = Path::new(path)
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
        {
            create_private_dir(parent).map_err(|error| StoreError::DataDir {
                path: parent.display().to_string(),
                error,
            })?;
            // Only where SQLite would create the file itself (not for a read-only open).
            let creates = query.is_none_or(|q| !q.contains("mode=") || q.contains("mode=rwc"));
            if creates {
                created =
                    create_database_file(Path::new(path)).map_err(|error| StoreError::DataDir {
                        path: path.to_string(),
                        error,
                    })?;
            }
        }
        let query = match query {
            Some(q) if q.contains("mode=") => q.to_string(),
            Some(q) => format!("{q}&mode=rwc"),
            None => "mode=rwc".to_string(),
        };
        return Ok((Backend::Sqlite, format!("sqlite://{path}?{query}"), created));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok((Backend::Postgres, url.to_string(), false));
    }
    Err(StoreError::Url {
        url: redact_url(url),
        reason: "expected sqlite://PATH or postgres://…".into(),
    })
}

/// The SQLite file `url` names when it does not exist (yet), as an absolute path; `None` when
/// it exists, or the database is not a SQLite file. Commands that read what the daemon stored
/// refuse such a database rather than create an empty one.
pub fn missing_database(url: &str) -> Option<std::path::PathBuf> {
    let (_, normalised) = normalise_url_only(url)?;
    let path = sqlite_file(&normalised)?;
    if path.exists() {
        return None;
    }
    Some(std::path::absolute(&path).unwrap_or(path))
}

/// [`normalise_url`] without creating anything.
fn normalise_url_only(url: &str) -> Option<(Backend, String)> {
    let rest = url.strip_prefix("sqlite:")?.trim_start_matches("//");
    Some((Backend::Sqlite, format!("sqlite://{rest}")))
}

/// The file of a normalised `sqlite://PATH?…` URL; `None` for an in-memory database or another
/// backend.
fn sqlite_file(url: &str) -> Option<std::path::PathBuf> {
    let rest = url.strip_prefix("sqlite://")?;
    let path = rest.split_once('?').map_or(rest, |(path, _)| path);
    let memory = path == ":memory:" || url.contains("mode=memory");
    (!path.is_empty() && !memory).then(|| std::path::PathBuf::from(path))
}

/// `$first, $first+1, …`: the placeholders of an `IN (…)` list of `count` values.
pub(crate) fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Removes a password from a URL before it goes into an error message.
fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            // set_password only fails for URLs that cannot have one, which this one has.
            let _ = parsed.set_password(Some("redacted"));
            parsed.to_string()
        }
        _ => url.to_string(),
    }
}

/// Converts a row count or id from the database to the `i64` every integer column uses.
pub(crate) fn to_i64(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::Store;

    /// A fresh, migrated SQLite database in a temporary directory.
    pub async fn temp_store() -> (Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("test.db").display());
        let store = Store::open(&url).await.expect("open store");
        (store, dir)
    }

    /// Two tests of one check of the store's SQL, `async fn(Store)`: `$sqlite` on a fresh
    /// SQLite store and `$postgres` on a throwaway PostgreSQL, skipped when that is not
    /// installed.
    macro_rules! on_both_backends {
        ($sqlite:ident, $postgres:ident, $check:ident) => {
            #[tokio::test]
            async fn $sqlite() {
                let (store, _dir) = $crate::store::test_support::temp_store().await;
                $check(store).await;
            }

            #[tokio::test]
            async fn $postgres() {
                let server = $crate::store::test_support::postgres_store("hearth").await;
                let Some((store, _server)) = server else {
                    return;
                };
                $check(store).await;
            }
        };
    }
    pub(crate) use on_both_backends;

    /// A fresh, migrated database `name` on a throwaway PostgreSQL server, and the server,
    /// which must live as long as it; `None` (the test skips) when PostgreSQL is not installed.
    pub async fn postgres_store(
        name: &str,
    ) -> Option<(Store, hearth_testkit::postgres::TestPostgres)> {
        let server = hearth_testkit::postgres::TestPostgres::start()?;
        let url = server.create_database(name).expect("create database");
        let store = Store::open(&url).await.expect("open and migrate");
        Some((store, server))
    }

    /// Message `m{n}` ("hi") from `user` in chat `chat` of channel `test`, stored in the inbox,
    /// and the chat's conversation: what a turn starts from.
    pub async fn stored_message(store: &Store, n: i64, chat: &str) -> (i64, super::Conversation) {
        use hearth_channel::{ChatRef, Inbound, Sender};
        let event = Inbound::message(
            format!("m{n}"),
            ChatRef::new(chat),
            Sender::new("user"),
            "hi",
        );
        let inbox = store
            .insert_inbox("test", &event, n)
            .await
            .expect("inbox")
            .expect("new");
        let conversation = store
            .conversation("test", &event.chat, n)
            .await
            .expect("conversation");
        (inbox, conversation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_get_create_mode_and_bad_urls_are_refused() {
        let (backend, url, _) = normalise_url("sqlite:///tmp/hearth-x/h.db").expect("ok");
        assert_eq!(backend, Backend::Sqlite);
        assert_eq!(url, "sqlite:///tmp/hearth-x/h.db?mode=rwc");
        assert!(normalise_url("mysql://x").is_err());
        assert!(normalise_url("sqlite://").is_err());
        let err = normalise_url("redis://user:hunter2@host/x").expect_err("refused");
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    /// The defect: when a COMMIT fails on a full disk SQLite rolls the transaction back by
    /// itself, sqlx's own rollback then fails and sqlx keeps counting the transaction as open.
    /// The connection's next transaction became a SAVEPOINT, its rollback (`ROLLBACK TO`)
    /// left a real transaction open, and everything "committed" on that connection afterwards
    /// stayed invisible to everyone else and was lost, while it held the write lock.
    #[tokio::test]
    async fn a_failed_commit_leaves_no_connection_stuck_in_a_transaction() {
        use hearth_channel::{ChatRef, Inbound, Sender};
        let message = |id: &str, size: usize| {
            Inbound::message(
                id,
                ChatRef::new("chat"),
                Sender::new("user"),
                "y".repeat(size),
            )
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let disk = match hearth_testkit::tmpfs::Tmpfs::mount(dir.path(), 2 * 1024 * 1024) {
            Ok(disk) => disk,
            Err(why) => return eprintln!("skipped: {why}"),
        };
        let url = format!("sqlite://{}", disk.path().join("hearth.db").display());
        let store = Store::open(&url).await.expect("open");
        store
            .insert_inbox("t", &message("0", 1), 1)
            .await
            .expect("insert with space");
        // Several commits fail on the write connection, one after another.
        disk.fill().expect("fill the disk");
        for n in 0..4 {
            let err = store
                .insert_inbox("t", &message(&format!("full-{n}"), 3000), 2)
                .await
                .expect_err("the commit fails");
            assert!(err.is_unavailable(), "{err}");
        }
        disk.free().expect("free the disk");

        // Then, several times over: a transaction that ends in a rollback (the entry is not
        // pending), then a write; none finds the connection stuck in a failed transaction.
        for n in 0..4 {
            let none = store
                .reply_and_finish_inbox(999, &[], 3)
                .await
                .expect("nothing to finish");
            assert!(none.is_empty());
            let stored = store
                .insert_inbox("t", &message(&format!("after-{n}"), 10), 4)
                .await
                .expect("writes work again");
            assert!(stored.is_some());
        }

        // Another process (here: another pool) sees the writes, and can write itself.
        let other = Store::connect(&url).await.expect("second pool");
        assert_eq!(other.inbox_depth().await.expect("depth"), 5);
        other
            .insert_inbox("t", &message("other", 10), 5)
            .await
            .expect("not locked out");
        other.close().await;
        assert_eq!(store.inbox_depth().await.expect("depth"), 6);
        store.close().await;
    }

    /// A transaction that reads before it writes (finishing an inbox entry checks that it is
    /// still pending) while other connections write all the time, as they do in a busy daemon:
    /// every one commits. Opened as a plain deferred transaction, some failed at once with
    /// SQLITE_BUSY_SNAPSHOT ("database is locked"), which no busy timeout waits out.
    #[tokio::test]
    async fn transactions_that_read_first_wait_for_other_writers_instead_of_failing() {
        use hearth_channel::{ChatRef, Inbound, Sender};
        let message =
            |id: String| Inbound::message(id, ChatRef::new("chat"), Sender::new("user"), "hello");
        let (store, _dir) = test_support::temp_store().await;
        let mut ids = Vec::new();
        for n in 0..200 {
            let id = store
                .insert_inbox("t", &message(format!("first-{n}")), 1)
                .await
                .expect("insert")
                .expect("new");
            ids.push(id);
        }
        let writers: Vec<_> = (0..3)
            .map(|w| {
                let store = store.clone();
                tokio::spawn(async move {
                    for n in 0..150 {
                        store
                            .insert_inbox("t", &message(format!("w{w}-{n}")), 2)
                            .await
                            .expect("a concurrent insert");
                    }
                })
            })
            .collect();
        let mut failures = Vec::new();
        for id in ids {
            if let Err(err) = store.reply_and_finish_inbox(id, &[], 3).await {
                failures.push(err.to_string());
            }
        }
        for writer in writers {
            writer.await.expect("writer");
        }
        assert!(
            failures.is_empty(),
            "{} failed: {:?}",
            failures.len(),
            failures.first()
        );
        assert_eq!(store.inbox_depth().await.expect("depth"), 450);
    }

    /// SQLite is built with its query planner stability guarantee (`.cargo/config.toml`):
    /// otherwise every cached read with `LIMIT $n` is parsed and planned again at each use.
    #[tokio::test]
    async fn sqlite_plans_do_not_depend_on_bound_values() {
        let (store, _dir) = test_support::temp_store().await;
        let built_in: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pragma_compile_options WHERE compile_options = 'ENABLE_QPSG'",
        )
        .fetch_one(store.pool())
        .await
        .expect("compile options");
        assert_eq!(
            built_in, 1,
            "SQLite without SQLITE_ENABLE_QPSG: build hearth from its directory, where \
             .cargo/config.toml sets LIBSQLITE3_FLAGS"
        );
    }

    #[tokio::test]
    async fn migrations_apply_once() {
        let (store, _dir) = test_support::temp_store().await;
        assert_eq!(store.migrate().await.expect("second run"), 0);
        assert!(store.known_migrations() >= 1);
    }

    /// A database at `path` made by sqlx's migrator, migration by migration.
    async fn replayed_by_sqlx(path: &Path) -> Store {
        // An empty file, so that no copy is made.
        std::fs::write(path, b"").expect("an empty file");
        let store = Store::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("connect");
        SQLITE_MIGRATIONS
            .run(&mut *store.pool().acquire().await.expect("a connection"))
            .await
            .expect("sqlx migrates");
        store
    }

    /// The schema, the migration records and the file's settings of a new database, made from
    /// the copy (a new file) and by SQL (an empty file, as an older hearth left it), against
    /// what sqlx's migrator makes of the same migrations one by one.
    #[tokio::test]
    async fn a_fresh_database_is_what_sqlx_makes() {
        type Made = (
            Vec<(String, String)>,
            Vec<(i64, String, Vec<u8>)>,
            Vec<(String, String)>,
        );
        async fn made(store: &Store) -> Made {
            let schema = sqlx::query_as(
                "SELECT name, COALESCE(sql, '') FROM sqlite_master WHERE name <> '_sqlx_migrations' ORDER BY name",
            )
            .fetch_all(store.pool())
            .await
            .expect("schema");
            let records = sqlx::query_as(
                "SELECT version, description, checksum FROM _sqlx_migrations WHERE success = TRUE ORDER BY version",
            )
            .fetch_all(store.pool())
            .await
            .expect("records");
            let mut settings = Vec::new();
            for pragma in [
                "page_size",
                "auto_vacuum",
                "encoding",
                "user_version",
                "application_id",
                "journal_mode",
            ] {
                let value: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "SELECT CAST({pragma} AS TEXT) FROM pragma_{pragma}"
                )))
                .fetch_one(store.pool())
                .await
                .expect("pragma");
                settings.push((pragma.to_string(), value));
            }
            (schema, records, settings)
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let path = |name: &str| dir.path().join(name);
        let url = |name: &str| format!("sqlite://{}", path(name).display());

        let copied = Store::connect(&url("copied.db")).await.expect("connect");
        assert!(copied.created_from_image);
        assert_eq!(
            copied.migrate().await.expect("migrate"),
            copied.known_migrations()
        );
        std::fs::write(path("by-sql.db"), b"").expect("an empty file");
        let by_sql = Store::connect(&url("by-sql.db")).await.expect("connect");
        assert!(!by_sql.created_from_image);
        assert_eq!(
            by_sql.migrate().await.expect("migrate"),
            by_sql.known_migrations()
        );
        let by_sqlx = replayed_by_sqlx(&dir.path().join("sqlx.db")).await;

        let expected = made(&by_sqlx).await;
        assert_eq!(made(&copied).await, expected, "made from the copy");
        assert_eq!(made(&by_sql).await, expected, "made by SQL");
        assert_eq!(expected.1.len(), copied.known_migrations());
        assert!(expected.0.iter().any(|(name, _)| name == "inbox"));
        // The copy's records are dated by this open, not by the day the copy was made.
        let undated: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE installed_on = $1")
                .bind(IMAGE_INSTALLED_ON)
                .fetch_one(copied.pool())
                .await
                .expect("count");
        assert_eq!(undated, 0);
        // Nothing is left beside the database but SQLite's own files.
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|name| name.contains("copied"))
            .collect();
        names.sort();
        assert_eq!(names, ["copied.db", "copied.db-shm", "copied.db-wal"]);
        // A second open leaves it to sqlx, which finds every migration applied and unchanged.
        for name in ["copied.db", "by-sql.db"] {
            let reopened = Store::open(&url(name)).await.expect("reopen");
            assert!(!reopened.created_from_image);
            assert_eq!(reopened.migrate().await.expect("again"), 0);
        }
    }

    /// The files a new database is made from are what the migrations make: the schema
    /// statement for statement, and the copy object for object. With `HEARTH_WRITE_SCHEMA=1`
    /// the test writes both anew instead.
    #[tokio::test]
    async fn the_fresh_schema_files_are_the_migrations_replayed() {
        use sqlx::Connection;
        let dir = tempfile::tempdir().expect("temp dir");
        let url = |name: &str| format!("sqlite://{}", dir.path().join(name).display());
        let by_sqlx = replayed_by_sqlx(&dir.path().join("sqlx.db")).await;
        // What SQLite made itself (the FTS index's shadow tables, AUTOINCREMENT's counter
        // table, implicit indexes) is made again by the statements that made it.
        let statements: Vec<String> = sqlx::query_scalar(
            "SELECT m.sql FROM sqlite_master m
             WHERE m.sql IS NOT NULL AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
               AND m.name <> '_sqlx_migrations'
               AND NOT EXISTS (SELECT 1 FROM pragma_table_list t WHERE t.name = m.name AND t.type = 'shadow')
             ORDER BY m.rowid",
        )
        .fetch_all(by_sqlx.pool())
        .await
        .expect("schema");
        let expected = format!(
            "-- Made by the test `the_fresh_schema_files_are_the_migrations_replayed` (src/store.rs)\n\
             -- from migrations/sqlite: what a new SQLite database is created from. Do not edit;\n\
             -- after adding a migration, run `HEARTH_WRITE_SCHEMA=1 cargo test --lib fresh_schema`.\n\n{};\n",
            statements.join(";\n\n")
        );

        // The copy: the same database, dated and timed alike whenever it is made, in WAL mode.
        sqlx::query("UPDATE _sqlx_migrations SET installed_on = $1, execution_time = 0")
            .bind(IMAGE_INSTALLED_ON)
            .execute(&mut *by_sqlx.write().await.expect("writer"))
            .await
            .expect("dating");
        by_sqlx
            .backup_to(&dir.path().join("made.db"))
            .await
            .expect("VACUUM INTO");
        let mut conn = sqlx::AnyConnection::connect(&url("made.db"))
            .await
            .expect("open");
        conn.execute("PRAGMA journal_mode = WAL")
            .await
            .expect("WAL");
        conn.close().await.expect("close");
        let made = std::fs::read(dir.path().join("made.db")).expect("the copy");

        if std::env::var_os("HEARTH_WRITE_SCHEMA").is_some() {
            let migrations = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");
            std::fs::write(format!("{migrations}/sqlite_fresh_schema.sql"), &expected)
                .expect("writing the schema file");
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            std::io::Write::write_all(&mut gz, &made).expect("gzip");
            std::fs::write(
                format!("{migrations}/sqlite_fresh.db.gz"),
                gz.finish().expect("gzip"),
            )
            .expect("writing the copy");
            return;
        }
        let fix = "run `HEARTH_WRITE_SCHEMA=1 cargo test --lib fresh_schema` and commit the files";
        assert!(
            SQLITE_FRESH_SCHEMA == expected,
            "migrations/sqlite_fresh_schema.sql is not what the migrations make: {fix}"
        );
        let mut carried = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(SQLITE_FRESH_DATABASE),
            &mut carried,
        )
        .expect("the carried copy unpacks");
        std::fs::write(dir.path().join("carried.db"), &carried).expect("write");
        type Objects = (
            Vec<(String, String, String, Option<String>)>,
            Vec<(i64, String, i64, Vec<u8>, String, i64)>,
            String,
        );
        let objects = async |name: &str| -> Objects {
            let mut conn = sqlx::AnyConnection::connect(&url(name))
                .await
                .expect("open");
            let rows = sqlx::query_as(
                "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid",
            )
            .fetch_all(&mut conn)
            .await
            .expect("objects");
            let records = sqlx::query_as(
                "SELECT version, description, CAST(success AS INTEGER), checksum, CAST(installed_on AS TEXT), execution_time
                 FROM _sqlx_migrations ORDER BY version",
            )
            .fetch_all(&mut conn)
            .await
            .expect("records");
            let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
                .fetch_one(&mut conn)
                .await
                .expect("mode");
            conn.close().await.expect("close");
            (rows, records, mode)
        };
        assert!(
            objects("carried.db").await == objects("made.db").await,
            "migrations/sqlite_fresh.db.gz is not what the migrations make: {fix}"
        );
    }

    /// Where the copy cannot be written beside the path (here a directory stands in its way),
    /// the database is made by SQL instead, as complete, and the obstacle is left alone.
    #[tokio::test]
    async fn a_copy_that_cannot_be_written_falls_back_to_the_schema_by_sql() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("hearth.db");
        let obstacle = dir
            .path()
            .join(format!(".hearth.db.new-{}", std::process::id()));
        std::fs::create_dir(&obstacle).expect("the obstacle");
        let store = Store::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("connect");
        assert!(!store.created_from_image);
        assert_eq!(
            store.migrate().await.expect("migrate"),
            store.known_migrations()
        );
        assert_eq!(store.inbox_depth().await.expect("a table of the schema"), 0);
        assert!(obstacle.is_dir());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("file").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    /// Two processes that open one new file at once: one creates the schema, the other finds it.
    #[tokio::test]
    async fn two_stores_creating_one_new_file_create_it_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("hearth.db").display());
        let (a, b) = tokio::join!(Store::open(&url), Store::open(&url));
        let (a, b) = (a.expect("first"), b.expect("second"));
        let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations")
            .fetch_one(b.pool())
            .await
            .expect("count");
        assert_eq!(applied, i64::try_from(a.known_migrations()).expect("fits"));
    }
}
