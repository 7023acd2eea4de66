//! Commands on the database itself: `hearth migrate`, `hearth backup`, and the check that
//! commands reading stored data find a database to read.

use std::path::PathBuf;

use anyhow::Context;

use crate::config::Config;
use crate::store::Store;

use super::{Failure, load_config, usage};

pub(super) async fn backup(path: Option<PathBuf>, file: &std::path::Path) -> Result<(), Failure> {
    let config = load_config(path)?.config;
    if file.exists() {
        return Err(usage(anyhow::anyhow!(
            "{} exists already; choose a new file name",
            file.display()
        )));
    }
    existing_database(&config)?;
    let store = Store::connect(&config.daemon.database_url())
        .await
        .context("cannot open the database")?;
    // The copy holds every message, memory and key, like the database (0600): it is created
    // empty, readable by this user alone whatever the umask (also as root), before SQLite
    // fills it (`VACUUM INTO` writes into an empty file and keeps its mode).
    if let Err(err) = create_private(file) {
        store.close().await;
        return Err(anyhow::anyhow!("cannot create {}: {err}", file.display()).into());
    }
    let result = store
        .backup_to(file)
        .await
        .with_context(|| format!("backup to {} failed", file.display()));
    store.close().await;
    if result.is_err() {
        // Nothing half-written is left to be mistaken for a backup; the empty file was ours.
        if let Err(err) = std::fs::remove_file(file) {
            tracing::debug!(error = %err, "removing the failed backup's file failed");
        }
    }
    result?;
    println!(
        "wrote a consistent copy of the database to {}",
        file.display()
    );
    Ok(())
}

/// Creates `file` empty with mode 0600; an existing file is an error (never overwritten).
fn create_private(file: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)?;
    // The mode given at creation is masked by the umask, which can only take bits away; set it
    // once more so the copy is 0600 even if it was opened with fewer.
    created.set_permissions(std::fs::Permissions::from_mode(0o600))
}

pub(super) async fn migrate(path: Option<PathBuf>) -> Result<(), Failure> {
    let config = load_config(path)?.config;
    let url = config.daemon.database_url();
    let store = Store::connect(&url)
        .await
        .context("cannot open the database")?;
    let applied = store.migrate().await.context("migration failed")?;
    println!(
        "{applied} migration(s) applied; the database is at version {}",
        store.known_migrations()
    );
    store.close().await;
    Ok(())
}

/// Refuses to go on when the configured SQLite database does not exist: a command that reads
/// what the daemon stored would otherwise create an empty database (in the current directory,
/// with the default `./data`) and report nothing, or approve nothing, silently.
pub fn existing_database(config: &Config) -> Result<(), Failure> {
    let Some(path) = crate::store::missing_database(&config.daemon.database_url()) else {
        return Ok(());
    };
    Err(usage(anyhow::anyhow!(
        "no database at {}: hearth has not run with this configuration, or runs with another one \
         (a relative data_dir such as \"./data\" is read from the current directory). Give this \
         command the service's configuration, e.g. `sudo hearth --config /etc/hearth/hearth.toml pair list`",
        path.display()
    )))
}

/// Opens the database for `hearth pair` and `hearth token` (checking it exists unless
/// `may_create`: a first `pair link` or `token create` records an intention before the first
/// start) with the identities the daemon would have at its start: the owner and the allowlists
/// are known even before hearth first ran (`pair link` to an address in daemon.owner, a token
/// named in it, `owner = "http:laptop"`, is the owner's from the moment it is made). Also gives
/// the time it used, in milliseconds.
pub(super) async fn open_with_identities(
    config: &Config,
    may_create: bool,
) -> Result<(Store, i64), Failure> {
    if !may_create {
        existing_database(config)?;
    }
    let store = Store::open(&config.daemon.database_url())
        .await
        .context("cannot open the database")?;
    let now = chrono::Utc::now().timestamp_millis();
    let allowlists = crate::channels::allowlists(&config.channels);
    let owners = crate::store::configured_owners(&config.daemon);
    if let Err(err) = store
        .sync_configured_identities(&allowlists, &owners, now)
        .await
    {
        store.close().await;
        return Err(Failure::from(
            anyhow::Error::new(err).context("cannot record the configured identities"),
        ));
    }
    Ok((store, now))
}
