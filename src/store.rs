//! The database: SQLite by default, PostgreSQL for those who outgrow one machine.
//!
//! One code path serves both through sqlx's `Any` driver: queries use `$N` placeholders (both
//! backends accept them), integers are bound as `i64`, timestamps are Unix milliseconds, and
//! structured values are JSON text. The schema lives in `migrations/sqlite` and
//! `migrations/postgres`, embedded in the binary and applied forward-only.

mod agent;
mod channel_state;
mod confirmation;
mod conversation;
mod identity;
pub(crate) mod inbox;
mod outbox;
mod turn;

pub use confirmation::{
    AuditEntry, Confirmation, ConfirmationStatus, DENIED_FOR_WRONG_CODES, WrongCode,
};
pub use conversation::Conversation;
pub use identity::{Identity, IdentityStatus, PairingRequest};
pub use inbox::{InboxEntry, InboxStatus};
pub use outbox::{NewOutbox, OutboxItem, OutboxKind};
pub use turn::{
    StoredMessage, ToolCallRecord, ToolCallStatus, Turn, TurnEnd, TurnStatus, message_chars,
};

use std::path::Path;
use std::str::FromStr;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Executor};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("bad database URL {url:?}: {reason}")]
    Url { url: String, reason: String },
    #[error("stored value is corrupt: {0}")]
    Corrupt(String),
    #[error("cannot create the data directory {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
}

impl From<serde_json::Error> for StoreError {
    fn from(err: serde_json::Error) -> Self {
        StoreError::Corrupt(err.to_string())
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
    pool: AnyPool,
    backend: Backend,
}

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

impl Store {
    /// Connects to `url` (`sqlite://path`, `postgres://…`). A SQLite file and its directory are
    /// created when missing. Does not migrate; call [`Store::migrate`].
    pub async fn connect(url: &str) -> StoreResult<Self> {
        sqlx::any::install_default_drivers();
        let (backend, url) = normalise_url(url)?;
        let options = AnyConnectOptions::from_str(&url).map_err(|err| StoreError::Url {
            url: redact_url(&url),
            reason: err.to_string(),
        })?;
        let pool_options = match backend {
            Backend::Sqlite => AnyPoolOptions::new()
                .max_connections(8)
                .after_connect(|conn, _meta| {
                    Box::pin(async move {
                        // foreign_keys and busy_timeout are on by default in sqlx's SQLite driver.
                        // synchronous=NORMAL is safe in WAL mode against process crashes; after
                        // a power loss the newest transactions may roll back, but platform
                        // cursors live in this same database and roll back with them, so the
                        // platform simply redelivers.
                        conn.execute("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;")
                            .await?;
                        Ok(())
                    })
                }),
            Backend::Postgres => AnyPoolOptions::new().max_connections(16),
        };
        let pool = pool_options.connect_with(options).await?;
        if backend == Backend::Sqlite {
            // WAL lets readers run beside the one writer; it is a property of the file, so
            // setting it once per open is enough.
            sqlx::query("PRAGMA journal_mode = WAL")
                .execute(&pool)
                .await?;
        }
        Ok(Self { pool, backend })
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
        let before = self.applied_migrations().await.unwrap_or(0);
        migrator.run(&self.pool).await?;
        let after = self.applied_migrations().await?;
        Ok(after.saturating_sub(before))
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

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
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
        self.pool.close().await;
    }
}

/// Recognises the backend and, for SQLite, makes sure the file can be created.
fn normalise_url(url: &str) -> StoreResult<(Backend, String)> {
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
        if path != ":memory:"
            && let Some(parent) = Path::new(path)
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
        {
            std::fs::create_dir_all(parent).map_err(|source| StoreError::DataDir {
                path: parent.display().to_string(),
                source,
            })?;
        }
        let query = match query {
            Some(q) if q.contains("mode=") => q.to_string(),
            Some(q) => format!("{q}&mode=rwc"),
            None => "mode=rwc".to_string(),
        };
        return Ok((Backend::Sqlite, format!("sqlite://{path}?{query}")));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok((Backend::Postgres, url.to_string()));
    }
    Err(StoreError::Url {
        url: redact_url(url),
        reason: "expected sqlite://PATH or postgres://…".into(),
    })
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_get_create_mode_and_bad_urls_are_refused() {
        let (backend, url) = normalise_url("sqlite:///tmp/hearth-x/h.db").expect("ok");
        assert_eq!(backend, Backend::Sqlite);
        assert_eq!(url, "sqlite:///tmp/hearth-x/h.db?mode=rwc");
        assert!(normalise_url("mysql://x").is_err());
        assert!(normalise_url("sqlite://").is_err());
        let err = normalise_url("redis://user:hunter2@host/x").expect_err("refused");
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[tokio::test]
    async fn migrations_apply_once() {
        let (store, _dir) = test_support::temp_store().await;
        assert_eq!(store.migrate().await.expect("second run"), 0);
        assert!(store.known_migrations() >= 1);
    }
}
