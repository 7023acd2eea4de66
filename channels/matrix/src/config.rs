//! The Matrix channel's configuration: the `[channels.matrix]` section of hearth's config file
//! ([`MatrixConfig`]), which `hearth check` checks and `hearth run` builds the channel from, and
//! the [`MatrixSettings`] the channel runs on once the secrets are resolved.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hearth_channel::{
    BuildContext, Channel, ChannelConfig, ChannelError, ConfigProblem, Secret, SecretSource,
    check_secret, check_url_at,
};
use serde::{Deserialize, Serialize};

use crate::{CHANNEL_NAME, MatrixChannel};

/// `[channels.matrix]`: a Matrix account hearth logs in as. Holds the names of its secrets,
/// never their values, so its derived `Debug` shows nothing secret.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixConfig {
    /// The homeserver's client API URL, e.g. `https://matrix.example.org`.
    pub homeserver: String,
    /// The bot account, `@hearth:example.org`.
    pub user: String,
    /// The variable (or credential) holding the account's password. Required at every start:
    /// starts restore the saved session, and log in with the password again when there is none
    /// or the homeserver revoked it.
    pub password_env: String,
    /// Matrix ids allowed to talk to hearth and to invite it into rooms.
    #[serde(default)]
    pub allowed_users: Vec<String>,
    /// The variable holding the account's recovery key (Element: Settings → Encryption). With
    /// it, hearth imports the cross-signing keys and signs its own device, so Element shows it
    /// as verified, and room keys are read from the key backup.
    #[serde(default)]
    pub recovery_key_env: Option<String>,
    /// The variable holding the passphrase the local crypto store is encrypted with. Without
    /// it the store is kept unencrypted on disk (readable by whoever can read the data dir).
    #[serde(default)]
    pub store_passphrase_env: Option<String>,
    /// Obey a message only when the device it came from is cross-signed by its owner (the
    /// person verified that session in Element); other messages, and unencrypted ones, count as
    /// from an unverified sender, whom the daemon treats as a stranger. For when a stolen
    /// password or a hostile homeserver could add a device to an allowed account.
    #[serde(default)]
    pub require_verified_devices: bool,
}

impl MatrixConfig {
    /// A section for `user` on `homeserver` with the password in `password_env`.
    pub fn new(
        homeserver: impl Into<String>,
        user: impl Into<String>,
        password_env: impl Into<String>,
    ) -> Self {
        Self {
            homeserver: homeserver.into(),
            user: user.into(),
            password_env: password_env.into(),
            allowed_users: Vec::new(),
            recovery_key_env: None,
            store_passphrase_env: None,
            require_verified_devices: false,
        }
    }

    /// The settings the channel runs on, with the secrets resolved.
    pub fn settings(&self, ctx: BuildContext<'_>) -> Result<MatrixSettings, ChannelError> {
        check_user(&self.user).map_err(|m| ChannelError::config(format!("user: {m}")))?;
        let password = ctx.secret("password_env", &self.password_env)?;
        let mut settings = MatrixSettings::new(
            &self.homeserver,
            &self.user,
            password.expose(),
            ctx.data_dir.to_path_buf(),
        );
        settings.allowed_users = self.allowed_users.clone();
        settings.require_verified_devices = self.require_verified_devices;
        if let Some(name) = &self.recovery_key_env {
            settings.recovery_key = Some(ctx.secret("recovery_key_env", name)?);
        }
        if let Some(name) = &self.store_passphrase_env {
            settings.store_passphrase = Some(ctx.secret("store_passphrase_env", name)?);
        }
        Ok(settings)
    }
}

impl ChannelConfig for MatrixConfig {
    const NAME: &'static str = CHANNEL_NAME;

    fn check(&self, secrets: &dyn SecretSource) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        problems.extend(check_url_at(
            "homeserver",
            &self.homeserver,
            &["http", "https"],
        ));
        if let Err(message) = check_user(&self.user) {
            problems.push(ConfigProblem::new("user", message));
        }
        problems.extend(check_secret("password_env", &self.password_env, secrets));
        for (i, user) in self.allowed_users.iter().enumerate() {
            if let Err(message) = check_user(user) {
                problems.push(ConfigProblem::new(format!("allowed_users[{i}]"), message));
            }
        }
        if let Some(name) = &self.recovery_key_env {
            problems.extend(check_secret("recovery_key_env", name, secrets));
        }
        if let Some(name) = &self.store_passphrase_env {
            problems.extend(check_secret("store_passphrase_env", name, secrets));
        }
        problems
    }

    fn allowed_users(&self) -> Vec<String> {
        self.allowed_users.clone()
    }

    fn check_user_id(id: &str) -> Result<(), String> {
        check_user(id)
    }

    /// A room id, or a user id: a message to `@user:server` goes to the direct-message room
    /// with that user, found or created by the channel.
    fn check_chat_id(id: &str) -> Result<(), String> {
        if id.starts_with('@') {
            return check_user(id);
        }
        let valid = id
            .strip_prefix('!')
            .and_then(|rest| rest.split_once(':'))
            .is_some_and(|(local, server)| !local.is_empty() && !server.is_empty());
        if valid {
            Ok(())
        } else {
            Err(format!(
                "`{id}` is not a {CHANNEL_NAME} room id (`!room:server`, in Element under Room settings → Advanced) or user id (`@user:server`)"
            ))
        }
    }

    fn build(&self, ctx: BuildContext<'_>) -> Result<Arc<dyn Channel>, ChannelError> {
        Ok(Arc::new(MatrixChannel::new(self.settings(ctx)?)?))
    }
}

/// `@localpart:server`, as the spec's user id grammar allows (lower-case localpart).
fn check_user(user: &str) -> Result<(), String> {
    let valid = user
        .strip_prefix('@')
        .and_then(|rest| rest.split_once(':'))
        .is_some_and(|(local, server)| {
            !local.is_empty()
                && !server.is_empty()
                && local
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._=-/+".contains(c))
        });
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{user}` is not a {CHANNEL_NAME} user id: expected `@user:server`"
        ))
    }
}

/// What the channel runs on.
#[derive(Clone, Debug)]
pub struct MatrixSettings {
    /// The homeserver's client API URL.
    pub homeserver: String,
    /// The bot's user id.
    pub user: String,
    /// The password for the first login.
    pub password: Secret,
    /// Users who may invite hearth into rooms.
    pub allowed_users: Vec<String>,
    /// The recovery key for cross-signing and key backup, if any.
    pub recovery_key: Option<Secret>,
    /// The passphrase of the local store, if any.
    pub store_passphrase: Option<Secret>,
    /// Whether a sender's device must be cross-signed by its owner to be obeyed.
    pub require_verified_devices: bool,
    /// Where the session and the crypto store live (`<data_dir>/channels/matrix/`).
    pub data_dir: PathBuf,
    /// How long one `/sync` long poll is held open by the server.
    pub sync_timeout: Duration,
    /// Events per room asked for in one sync; more arrive as a limited timeline and are
    /// fetched with `/messages`.
    pub timeline_limit: u32,
    /// Minimum time between two edits of a streamed reply.
    pub edit_interval: Duration,
}

impl MatrixSettings {
    /// Settings with the defaults for everything but the account.
    pub fn new(
        homeserver: impl Into<String>,
        user: impl Into<String>,
        password: impl Into<String>,
        data_dir: PathBuf,
    ) -> Self {
        Self {
            homeserver: homeserver.into(),
            user: user.into(),
            password: Secret::new(password),
            allowed_users: Vec::new(),
            recovery_key: None,
            store_passphrase: None,
            require_verified_devices: false,
            data_dir,
            sync_timeout: Duration::from_secs(30),
            timeline_limit: 50,
            edit_interval: Duration::from_millis(1500),
        }
    }
}

#[cfg(test)]
mod tests {
    use hearth_channel::testkit::env;

    use super::*;

    fn section(text: &str) -> MatrixConfig {
        toml::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    // Moved from the daemon's placeholder checks; keys are now relative to the section.
    #[test]
    fn bad_ids_urls_and_missing_secrets_are_named() {
        let text = "homeserver = \"matrix.example.org\"\nuser = \"hearth\"\npassword_env = \"MX\"\nallowed_users = [\"@me:example.org\", \"me\"]\nrecovery_key_env = \"RK\"\nstore_passphrase_env = \"\"\n";
        let problems = section(text).check(&env(&[]));
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "homeserver",
                "user",
                "password_env",
                "allowed_users[1]",
                "recovery_key_env",
                "store_passphrase_env"
            ],
            "{problems:#?}"
        );
        assert!(problems[0].message.contains("is not a valid URL"));
        assert!(problems[1].message.contains("expected `@user:server`"));
        assert!(problems[2].message.contains("MX is not set"));
        assert!(problems[4].message.contains("RK is not set"));
        assert!(
            problems[5]
                .message
                .contains("must name an environment variable")
        );
    }

    #[test]
    fn a_good_section_has_no_problems_and_builds_without_network() {
        let text = "homeserver = \"https://matrix.example.org\"\nuser = \"@hearth:example.org\"\npassword_env = \"MX\"\nallowed_users = [\"@me:example.org\"]\nstore_passphrase_env = \"SP\"\nrequire_verified_devices = true\n";
        let vars = env(&[("MX", "pw"), ("SP", "store-secret")]);
        let config = section(text);
        assert_eq!(config.check(&vars), []);
        assert_eq!(config.allowed_users(), ["@me:example.org"]);
        let dir = tempfile::tempdir().expect("a temp dir");
        let settings = config
            .settings(BuildContext::new(&vars, dir.path()))
            .expect("settings");
        assert_eq!(settings.password.expose(), "pw");
        assert_eq!(
            settings.store_passphrase.as_ref().map(Secret::expose),
            Some("store-secret")
        );
        assert!(settings.require_verified_devices);
        let shown = format!("{settings:?}");
        assert!(
            !shown.contains("pw\"") && !shown.contains("store-secret"),
            "{shown}"
        );
        let channel = config
            .build(BuildContext::new(&vars, dir.path()))
            .expect("channel");
        assert_eq!(channel.name(), "matrix");
        let err = config
            .build(BuildContext::new(&env(&[("MX", "pw")]), dir.path()))
            .err()
            .expect("the passphrase is missing");
        assert!(err.message.starts_with("store_passphrase_env: "), "{err}");
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = toml::from_str::<MatrixConfig>(
            "homeserver = \"https://m.org\"\nuser = \"@a:m.org\"\npasword_env = \"X\"\n",
        )
        .expect_err("typo");
        assert!(
            err.message().contains("unknown field `pasword_env`"),
            "{err}"
        );
    }

    #[test]
    fn user_and_room_ids() {
        assert_eq!(MatrixConfig::check_user_id("@me:example.org"), Ok(()));
        assert!(MatrixConfig::check_user_id("me").is_err());
        assert!(MatrixConfig::check_user_id("@Me:example.org").is_err());
        assert_eq!(MatrixConfig::check_chat_id("!abc:example.org"), Ok(()));
        // A user id names the direct-message room with that user.
        assert_eq!(MatrixConfig::check_chat_id("@me:example.org"), Ok(()));
        assert!(MatrixConfig::check_chat_id("@Me:example.org").is_err());
        let err = MatrixConfig::check_chat_id("#room:example.org").expect_err("an alias");
        assert!(err.contains("Room settings → Advanced"), "{err}");
    }
}
