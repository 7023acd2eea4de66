//! One daemon per database: the lock `hearth run` holds for its whole life.
//!
//! Two daemons on one database would both poll the same Telegram bot, both deliver the same
//! outbox rows and each resume the other's turns; a message one of them dies on is then answered
//! by nobody. So a second daemon refuses to start. `hearth chat` runs beside the daemon (it only
//! handles the terminal's work), but two chats on one database would share one terminal
//! conversation, so chats take a lock of their own.
//!
//! - SQLite: an exclusive `flock` on a file next to the database (`hearth.db.lock`,
//!   `hearth.db.chat.lock`). The kernel releases it when the process ends, however it ends, so a
//!   daemon killed with SIGKILL never blocks the next start. The holder writes its pid into the
//!   file so the refusal can name it.
//! - PostgreSQL: `pg_try_advisory_lock` on a fixed key, held by a connection kept open (outside
//!   the pool) for the process's life; the server releases it when that connection ends. The
//!   connection's `application_name` carries the holder's pid for the same reason.

use std::io::{Read, Seek, Write};
use std::path::PathBuf;

use sqlx::{AnyConnection, Connection};

use super::{Backend, Store, StoreError};

/// Which process a lock is for; each kind admits one holder per database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// `hearth run`.
    Daemon,
    /// `hearth chat`.
    Chat,
}

impl LockKind {
    fn file_suffix(self) -> &'static str {
        match self {
            Self::Daemon => "lock",
            Self::Chat => "chat.lock",
        }
    }

    /// PostgreSQL advisory lock keys: "hearth" in ASCII, then the kind.
    fn advisory_key(self) -> i64 {
        match self {
            Self::Daemon => 0x6865_6172_7468_0001,
            Self::Chat => 0x6865_6172_7468_0002,
        }
    }

    fn who(self) -> &'static str {
        match self {
            Self::Daemon => "another hearth is already running",
            Self::Chat => "another hearth chat is already running",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Someone else holds the lock: the one line the user sees.
    #[error("{who} on this database ({database}{})", holder.as_deref().map(|h| format!(", {h}")).unwrap_or_default())]
    Held {
        who: &'static str,
        database: String,
        /// `pid 1234`, when the holder could be found out.
        holder: Option<String>,
    },
    #[error("cannot lock the database ({path}): {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot take the database lock: {0}")]
    Database(#[from] StoreError),
}

/// Held until dropped (or the process ends).
#[derive(Debug)]
pub struct ProcessLock {
    held: Held,
}

#[derive(Debug)]
enum Held {
    /// An in-memory SQLite database belongs to this process alone.
    Nothing,
    /// The locked file; the lock goes with the descriptor.
    File(std::fs::File),
    /// The connection holding the advisory lock.
    Postgres(AnyConnection),
}

impl ProcessLock {
    /// Gives the lock back now (dropping it does the same, without waiting for PostgreSQL).
    pub async fn release(self) {
        match self.held {
            Held::Nothing => {}
            Held::File(file) => {
                // Closing the file releases the lock too; unlocking first just says it.
                if let Err(err) = file.unlock() {
                    tracing::debug!(error = %err, "unlocking the lock file failed");
                }
            }
            Held::Postgres(conn) => {
                // Closing the connection ends the session, which releases the advisory lock; if
                // the close fails the server notices the dropped socket and releases it anyway.
                if let Err(err) = conn.close().await {
                    tracing::debug!(error = %err, "closing the lock connection failed");
                }
            }
        }
    }
}

impl Store {
    /// Takes the `kind` lock of this database, or says who holds it.
    pub async fn lock(&self, kind: LockKind) -> Result<ProcessLock, LockError> {
        match self.backend {
            Backend::Sqlite => match &self.sqlite_path {
                Some(path) => lock_file(path, kind),
                None => Ok(ProcessLock {
                    held: Held::Nothing,
                }),
            },
            Backend::Postgres => self.lock_postgres(kind).await,
        }
    }

    async fn lock_postgres(&self, kind: LockKind) -> Result<ProcessLock, LockError> {
        let mut conn = self.pool.detached().await.map_err(StoreError::from)?;
        let name = format!("hearth pid {}", std::process::id());
        // `SET` takes no bind parameters; set_config does the same with one.
        sqlx::query("SELECT set_config('application_name', $1, false)")
            .bind(&name)
            .execute(&mut conn)
            .await
            .map_err(StoreError::from)?;
        let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(kind.advisory_key())
            .fetch_one(&mut conn)
            .await
            .map_err(StoreError::from)?;
        if taken {
            return Ok(ProcessLock {
                held: Held::Postgres(conn),
            });
        }
        // The holder's session names its pid; the lock's key is split into two 32-bit halves.
        let key = kind.advisory_key();
        let holder: Option<String> = sqlx::query_scalar(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
             WHERE l.locktype = 'advisory' AND l.granted
               AND l.classid::bigint = $1 AND l.objid::bigint = $2 AND l.objsubid = 1
             LIMIT 1",
        )
        .bind(key >> 32)
        .bind(key & 0xffff_ffff)
        .fetch_optional(&mut conn)
        .await
        .unwrap_or_default();
        if let Err(err) = conn.close().await {
            tracing::debug!(error = %err, "closing the lock connection failed");
        }
        Err(LockError::Held {
            who: kind.who(),
            database: self.location.clone(),
            holder: holder
                .and_then(|name| name.strip_prefix("hearth ").map(str::to_string))
                .filter(|h| h.starts_with("pid ")),
        })
    }
}

fn lock_file(database: &std::path::Path, kind: LockKind) -> Result<ProcessLock, LockError> {
    let mut name = database.as_os_str().to_owned();
    name.push(".");
    name.push(kind.file_suffix());
    let path = PathBuf::from(name);
    let file_error = |source| LockError::File {
        path: path.display().to_string(),
        source,
    };
    // Not truncated on open: until the lock is ours the file holds the holder's pid.
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&path).map_err(file_error)?;
    match file.try_lock() {
        Ok(()) => {
            // The pid is a courtesy for the refusal message; the lock works without it.
            let written = file
                .set_len(0)
                .and_then(|()| file.rewind())
                .and_then(|()| writeln!(file, "{}", std::process::id()))
                .and_then(|()| file.flush());
            if let Err(err) = written {
                tracing::debug!(error = %err, "writing the pid into the lock file failed");
            }
            Ok(ProcessLock {
                held: Held::File(file),
            })
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            // An unreadable pid only shortens the message.
            let _ = file.read_to_string(&mut text);
            let holder = text
                .trim()
                .parse::<u32>()
                .ok()
                .map(|pid| format!("pid {pid}"));
            Err(LockError::Held {
                who: kind.who(),
                database: database.display().to_string(),
                holder,
            })
        }
        Err(std::fs::TryLockError::Error(err)) => Err(file_error(err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_lock_of_the_same_kind_is_refused_with_the_holders_pid() {
        let (store, dir) = crate::store::test_support::temp_store().await;
        let first = store.lock(LockKind::Daemon).await.expect("first lock");
        let err = store
            .lock(LockKind::Daemon)
            .await
            .expect_err("second daemon lock");
        let text = err.to_string();
        assert!(
            text.starts_with("another hearth is already running on this database ("),
            "{text}"
        );
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        assert!(text.contains("test.db"), "{text}");

        // A chat beside the daemon is fine; a second chat is not.
        let chat = store.lock(LockKind::Chat).await.expect("chat lock");
        let err = store.lock(LockKind::Chat).await.expect_err("second chat");
        assert!(
            err.to_string()
                .starts_with("another hearth chat is already running"),
            "{err}"
        );

        // Released with the holder: the next one gets it.
        first.release().await;
        chat.release().await;
        let again = store.lock(LockKind::Daemon).await.expect("free again");
        drop(again);
        assert!(dir.path().join("test.db.lock").exists());
    }
}
