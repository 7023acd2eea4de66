//! One device for life: the first start logs in with the password and saves the session (user,
//! device id, access token) next to the crypto store; every later start restores both. hearth
//! never logs out, because a logout deletes the device and its keys on the server.
//!
//! A session is only usable with the store it was created with (the store holds the device's
//! identity keys; a fresh store under an old device id makes the server refuse the new one-time
//! keys and peers see undecryptable messages). So when either half is missing, the store
//! belongs to another account or device, or the server no longer knows the token, both are
//! moved aside (renamed with the time, never deleted) and hearth logs in as a new device,
//! saying so in the log. A store that exists but cannot be read (most often because
//! `store_passphrase_env` was added, removed or changed) is never given up on: the channel
//! fails with one line saying what to do, and the keys stay where they are.

use std::path::{Path, PathBuf};
use std::time::Duration;

use matrix_sdk::Client;
use matrix_sdk::authentication::matrix::MatrixSession;
use matrix_sdk::encryption::{BackupDownloadStrategy, EncryptionSettings};

use crate::MatrixSettings;
use crate::error::MatrixError;

/// The device name users see in Element's session list.
pub(crate) const DEVICE_NAME: &str = "hearth";

/// The saved session and the store directory under the channel's data directory.
struct Paths {
    session: PathBuf,
    store: PathBuf,
}

fn paths(data_dir: &Path) -> Paths {
    Paths {
        session: data_dir.join("session.json"),
        store: data_dir.join("store"),
    }
}

/// Builds a client on the store in `store`.
async fn build(settings: &MatrixSettings, store: &Path) -> Result<Client, MatrixError> {
    // The process's shared TLS configuration (hearth_channel::http_client), with what
    // matrix-sdk would set on a client of its own: its user agent and its 30 s request timeout.
    let http = hearth_channel::http_client::builder()
        .user_agent("matrix-rust-sdk")
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| MatrixError::Store(format!("cannot set up the HTTP client: {e}")))?;
    Client::builder()
        .homeserver_url(&settings.homeserver)
        .http_client(http)
        .sqlite_store(
            store,
            settings
                .store_passphrase
                .as_ref()
                .map(hearth_channel::Secret::expose),
        )
        .with_encryption_settings(EncryptionSettings {
            // Cross-signing comes from the recovery key (which a person holds), not from keys
            // the bot would make up and nobody could verify.
            auto_enable_cross_signing: false,
            // Room keys the bot missed are fetched from the key backup when a message cannot be
            // decrypted (needs the recovery key).
            backup_download_strategy: BackupDownloadStrategy::AfterDecryptionFailure,
            auto_enable_backups: false,
        })
        .build()
        .await
        .map_err(|e| {
            MatrixError::Store(format!(
                "cannot open the Matrix store {}: {e}",
                store.display()
            ))
        })
}

/// The logged-in client: the saved session restored when there is a usable one, otherwise a
/// new login with the password.
pub(crate) async fn connect(settings: &MatrixSettings) -> Result<Client, MatrixError> {
    std::fs::create_dir_all(&settings.data_dir).map_err(|e| {
        MatrixError::Store(format!(
            "cannot create {}: {e}",
            settings.data_dir.display()
        ))
    })?;
    let paths = paths(&settings.data_dir);
    let saved = read_session(&paths.session);
    let has_store = paths.store.exists();
    match (saved, has_store) {
        (Some(session), true) => {
            let device = session.meta.device_id.to_string();
            let client = build(settings, &paths.store)
                .await
                .map_err(|e| unreadable(&settings.data_dir, &e))?;
            match restore(&client, session).await {
                Ok(()) => {
                    tracing::info!(device = %device, "matrix: restored the saved session");
                    return Ok(client);
                }
                Err(error) if error.is_unknown_token() => {
                    tracing::warn!(
                        device = %device,
                        "matrix: the homeserver no longer knows the saved session (logged out or deleted elsewhere); logging in as a new device"
                    );
                }
                Err(Restored::OtherAccount(message)) => {
                    tracing::warn!(
                        device = %device,
                        "matrix: the crypto store belongs to another account or device ({message}); logging in as a new device"
                    );
                }
                Err(Restored::Unreadable(error)) => {
                    return Err(unreadable(&settings.data_dir, &error));
                }
                Err(Restored::Failed(other)) => return Err(other),
            }
            drop(client);
        }
        (Some(session), false) => tracing::warn!(
            device = %session.meta.device_id,
            "matrix: the crypto store is missing; logging in as a new device (remove the old one in Element's session list)"
        ),
        (None, true) => tracing::warn!(
            "matrix: a crypto store without a saved session was found; starting over as a new device"
        ),
        (None, false) => tracing::info!("matrix: first start; logging in with the password"),
    }
    set_aside(&paths)?;
    login(settings, &paths).await
}

/// Why a saved session could not be restored.
enum Restored {
    /// The store holds another account or device than the session: start over.
    OtherAccount(String),
    /// The store could not be read: a person must decide.
    Unreadable(MatrixError),
    /// Anything else (the homeserver, the network), including an unknown token.
    Failed(MatrixError),
}

impl Restored {
    fn is_unknown_token(&self) -> bool {
        matches!(self, Self::Failed(error) if error.is_unknown_token())
    }
}

/// Restores `session` and checks with the server that its token still works.
async fn restore(client: &Client, session: MatrixSession) -> Result<(), Restored> {
    use matrix_sdk::encryption::CryptoStoreError;
    client.restore_session(session).await.map_err(|e| match e {
        matrix_sdk::Error::CryptoStoreError(ref inner)
            if matches!(**inner, CryptoStoreError::MismatchedAccount { .. }) =>
        {
            Restored::OtherAccount(e.to_string())
        }
        matrix_sdk::Error::CryptoStoreError(_)
        | matrix_sdk::Error::BadCryptoStoreState
        | matrix_sdk::Error::StateStore(_) => {
            Restored::Unreadable(MatrixError::Store(e.to_string()))
        }
        other => Restored::Failed(MatrixError::sdk("restoring the saved session", other)),
    })?;
    client
        .whoami()
        .await
        .map_err(|e| Restored::Failed(MatrixError::sdk("checking the saved session", e)))?;
    Ok(())
}

/// The one line the channel fails with when its store exists but cannot be read.
fn unreadable(data_dir: &Path, error: &MatrixError) -> MatrixError {
    MatrixError::Store(format!(
        "the Matrix store in {} cannot be read ({error}): if store_passphrase_env was added, removed or changed, restore the previous setting; to start over as a new device instead, move that directory aside",
        data_dir.display()
    ))
}

async fn login(settings: &MatrixSettings, paths: &Paths) -> Result<Client, MatrixError> {
    let client = build(settings, &paths.store).await?;
    let response = client
        .matrix_auth()
        .login_username(&settings.user, settings.password.expose())
        .initial_device_display_name(DEVICE_NAME)
        .send()
        .await
        .map_err(|e| {
            let error = MatrixError::sdk("logging in", e);
            // A refused password is 403 M_FORBIDDEN: only a person can fix it.
            if error.status() == Some(403) {
                MatrixError::Auth(format!(
                    "the homeserver refused the password of {}: check password_env",
                    settings.user
                ))
            } else {
                error
            }
        })?;
    tracing::info!(device = %response.device_id, "matrix: logged in as a new device");
    let session = client
        .matrix_auth()
        .session()
        .ok_or_else(|| MatrixError::Protocol("logged in, but the SDK has no session".into()))?;
    write_session(&paths.session, &session)?;
    Ok(client)
}

fn read_session(path: &Path) -> Option<MatrixSession> {
    let text = std::fs::read_to_string(path).ok()?;
    match serde_json::from_str(&text) {
        Ok(session) => Some(session),
        Err(e) => {
            tracing::warn!(path = %path.display(), "matrix: the saved session is unreadable ({e})");
            None
        }
    }
}

/// Writes the session (it holds the access token) readable by the owner only, atomically, so
/// a crash never leaves half a file.
fn write_session(path: &Path, session: &MatrixSession) -> Result<(), MatrixError> {
    let text = serde_json::to_string(session)
        .map_err(|e| MatrixError::Store(format!("cannot encode the session: {e}")))?;
    let tmp = path.with_extension("json.tmp");
    let failed = |e: std::io::Error| {
        MatrixError::Store(format!(
            "cannot save the session to {}: {e}",
            path.display()
        ))
    };
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(failed)?;
        file.write_all(text.as_bytes()).map_err(failed)?;
        file.sync_all().map_err(failed)?;
    }
    std::fs::rename(&tmp, path).map_err(failed)
}

/// Moves a session and store that cannot be used together any more out of the way, renamed
/// with the time (`store.set-aside-<unix seconds>`), so nothing a person might still need (old
/// room keys) is deleted.
fn set_aside(paths: &Paths) -> Result<(), MatrixError> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for path in [&paths.session, &paths.store] {
        let mut aside = path.clone().into_os_string();
        aside.push(format!(".set-aside-{stamp}"));
        match std::fs::rename(path, &aside) {
            Ok(()) => tracing::warn!(
                from = %path.display(),
                to = %PathBuf::from(&aside).display(),
                "matrix: moved aside"
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(MatrixError::Store(format!(
                    "cannot move {} aside: {e}",
                    path.display()
                )));
            }
        }
    }
    Ok(())
}

/// The saved session (user, device, access token), if there is one.
pub(crate) fn saved_session(data_dir: &Path) -> Option<MatrixSession> {
    read_session(&paths(data_dir).session)
}

/// The device id of the saved session, if there is one (for logs and tests).
pub fn saved_device_id(data_dir: &Path) -> Option<String> {
    read_session(&paths(data_dir).session).map(|s| s.meta.device_id.to_string())
}
