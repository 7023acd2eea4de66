//! The seam between a channel crate and the daemon's configuration file.
//!
//! Each channel crate owns its `[channels.<name>]` section: the type it deserializes into, the
//! checks `hearth check` runs on it, the shape of the platform's user and chat ids, and how the
//! channel is built from it. The daemon only finds the section, hands it over through
//! [`ChannelConfig`] and prefixes the keys of the problems it gets back with `channels.<name>.`.

use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::secret::{Secret, SecretSource};
use crate::{Channel, ChannelError};

/// A channel's `[channels.<name>]` section.
///
/// Implementations reject unknown keys (`#[serde(deny_unknown_fields)]`) so a typo is an error,
/// and keep secrets out of the section: it names them (`token_env`) and [`ChannelConfig::build`]
/// resolves them, so the section's `Debug` never shows one.
pub trait ChannelConfig:
    Serialize + DeserializeOwned + Clone + Debug + PartialEq + Send + Sync + 'static
{
    /// The channel's name: its section `[channels.<NAME>]`, its cargo feature, the `<NAME>:` of
    /// identities and schedule targets, and [`Channel::name`].
    const NAME: &'static str;

    /// Whether hearth can send to a chat of this channel unasked: a schedule's answer, an owner
    /// notice (a budget warning, a note about a failed schedule). A channel that shows a message
    /// only as the answer to an event it delivered (the HTTP API: a reply belongs to a client's
    /// turn) says no: a schedule target on it is refused, the daemon sends owner notices to the
    /// owner's identity on another channel, and `hearth check` warns when the owner has none.
    const SENDS_UNASKED: bool = true;

    /// Everything wrong with the section that parsing could not see (URLs, secrets that do not
    /// resolve, settings that need each other), each with its key relative to the section:
    /// `token_env`, `allowed_users[1]`. Secrets are looked up in `secrets`.
    fn check(&self, secrets: &dyn SecretSource) -> Vec<ConfigProblem>;

    /// Settings that are valid but leave the owner less protected than they may think (trusting
    /// an unauthenticated `From`, say), each with its key relative to the section and one line
    /// saying what it means. `hearth check` prints them and `hearth run` logs them at start.
    fn warnings(&self) -> Vec<ConfigProblem> {
        Vec::new()
    }

    /// The platform user ids allowed to talk to hearth through this channel, as the channel's
    /// [`crate::Sender`] ids spell them.
    fn allowed_users(&self) -> Vec<String>;

    /// Whether `id` (from `daemon.owner = "<NAME>:<id>"`) looks like a user id of this platform;
    /// the error is the reason, e.g. "`me` is not a telegram user id: expected a number".
    fn check_user_id(id: &str) -> Result<(), String>;

    /// Whether `id` (from a schedule's `target = "<NAME>:<id>"`) looks like a chat id of this
    /// platform. Any non-empty id by default.
    fn check_chat_id(id: &str) -> Result<(), String> {
        let _ = id; // any non-empty id is accepted unless the platform says otherwise
        Ok(())
    }

    /// The channel, with the secrets the section names resolved from `ctx.secrets`. No network
    /// traffic yet; a section that [`ChannelConfig::check`] accepts builds (its secrets set).
    fn build(&self, ctx: BuildContext<'_>) -> Result<Arc<dyn Channel>, ChannelError>;
}

/// What the daemon hands [`ChannelConfig::build`].
#[derive(Clone, Copy)]
pub struct BuildContext<'a> {
    /// Where the names of `*_env` keys are looked up.
    pub secrets: &'a dyn SecretSource,
    /// `<daemon.data_dir>/channels/<name>/`, the channel's own directory for files it keeps
    /// (a session, a downloaded key). Not created by the daemon: a channel that keeps nothing
    /// leaves no empty directory behind.
    pub data_dir: &'a std::path::Path,
}

impl std::fmt::Debug for BuildContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildContext")
            .field("data_dir", &self.data_dir)
            .finish_non_exhaustive()
    }
}

impl<'a> BuildContext<'a> {
    /// A context looking secrets up in `secrets`, with `data_dir` as the channel's directory.
    pub fn new(secrets: &'a dyn SecretSource, data_dir: &'a std::path::Path) -> Self {
        Self { secrets, data_dir }
    }

    /// The secret named by a `*_env` key, as a `Config` error naming the key when it is missing.
    pub fn secret(&self, key: &str, name: &str) -> Result<Secret, ChannelError> {
        Secret::resolve_from(name, self.secrets)
            .map_err(|reason| ChannelError::config(format!("{key}: {reason}")))
    }
}

/// The directory a channel named `name` gets under the daemon's data directory.
pub fn channel_data_dir(data_dir: &std::path::Path, name: &str) -> PathBuf {
    data_dir.join("channels").join(name)
}

/// One problem in a channel's section, for `hearth check`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The key relative to the section (`webhook_url`, `allowed_users[0]`); empty for the whole
    /// section.
    pub key: String,
    /// What is wrong, for a person to read.
    pub message: String,
}

impl ConfigProblem {
    /// A problem at `key` (relative to the section).
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// The problem with a `*_env` key whose secret `name` cannot be found, if there is one. The
/// wording is the one every `*_env` key of the configuration is reported with.
pub fn check_secret(key: &str, name: &str, secrets: &dyn SecretSource) -> Option<ConfigProblem> {
    if name.trim().is_empty() {
        return Some(ConfigProblem::new(
            key,
            "must name an environment variable or credential",
        ));
    }
    Secret::resolve_from(name, secrets)
        .err()
        .map(|message| ConfigProblem::new(key, message))
}

/// The problem with the URL `text` at `key`, if it is not an absolute URL with a host and one
/// of `schemes` (see [`check_url`]).
pub fn check_url_at(key: &str, text: &str, schemes: &[&str]) -> Option<ConfigProblem> {
    check_url(text, schemes)
        .err()
        .map(|message| ConfigProblem::new(key, message))
}

/// Checks that `text` is an absolute URL with a host and one of `schemes` (`["http", "https"]`).
pub fn check_url(text: &str, schemes: &[&str]) -> Result<(), String> {
    let expected = schemes
        .iter()
        .map(|s| format!("{s}://"))
        .collect::<Vec<_>>()
        .join(", ");
    let parsed = url::Url::parse(text).map_err(|err| {
        format!("`{text}` is not a valid URL ({err}): expected one starting with {expected}")
    })?;
    if !schemes.contains(&parsed.scheme()) {
        return Err(format!(
            "`{text}` has the scheme `{}`: expected one of {expected}",
            parsed.scheme()
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("`{text}` has no host"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn secret_problems_name_the_variable_or_the_blank_key() {
        let env: HashMap<String, String> = [("SET".to_string(), "x".to_string())].into();
        assert_eq!(check_secret("token_env", "SET", &env), None);
        let missing = check_secret("token_env", "UNSET", &env).expect("a problem");
        assert_eq!(missing.key, "token_env");
        assert!(missing.message.contains("UNSET is not set"), "{missing:?}");
        let blank = check_secret("token_env", " ", &env).expect("a problem");
        assert!(blank.message.contains("must name an environment variable"));
    }

    #[test]
    fn urls_need_a_listed_scheme_and_a_host() {
        assert_eq!(
            check_url("https://example.org/x", &["http", "https"]),
            Ok(())
        );
        let scheme = check_url("ws://x", &["http", "https"]).expect_err("ws");
        assert!(scheme.contains("scheme `ws`"), "{scheme}");
        let bare = check_url("api.telegram.org", &["https"]).expect_err("no scheme");
        assert!(bare.contains("is not a valid URL"), "{bare}");
        let hostless = check_url("imap:///inbox", &["imap"]).expect_err("no host");
        assert!(hostless.contains("has no host"), "{hostless}");
    }

    #[test]
    fn build_context_secret_errors_name_the_key_not_the_value() {
        let env: HashMap<String, String> = [("TOKEN".to_string(), "s3cret".to_string())].into();
        let dir = std::path::Path::new("/nonexistent");
        let ctx = BuildContext::new(&env, dir);
        assert_eq!(
            ctx.secret("token_env", "TOKEN").expect("set").expose(),
            "s3cret"
        );
        let err = ctx.secret("token_env", "NOPE").expect_err("unset");
        assert_eq!(err.kind, crate::ErrorKind::Config);
        assert!(err.message.starts_with("token_env: "), "{err}");
        assert!(!format!("{ctx:?}").contains("s3cret"));
    }
}
