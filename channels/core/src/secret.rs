//! Secrets named in the config by `*_env` keys, read from the environment or from systemd's
//! `$CREDENTIALS_DIRECTORY`, and never printed. Here rather than in the daemon so that each
//! channel crate resolves the secrets its own section names.

use std::collections::HashMap;
use std::path::Path;

/// Where the names given by `*_env` keys are looked up: the process environment when hearth
/// runs, a given map when `hearth check` or a test validates against another environment.
pub trait SecretSource: Send + Sync {
    /// The value of the variable `name`, if it is set.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment (and `$CREDENTIALS_DIRECTORY` as it names).
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessEnv;

impl SecretSource for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl SecretSource for HashMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

/// A secret value. Its `Debug` and `Display` are redacted so it cannot leak into logs or errors.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// A secret from a value already in hand (tests, a value read elsewhere).
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that sends it (an HTTP header, a login).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Reads the secret named `name`: the environment variable `name`, else the file
    /// `$CREDENTIALS_DIRECTORY/name` (systemd `LoadCredential=name:/path`), trailing newline removed.
    pub fn resolve(name: &str) -> Result<Self, String> {
        Self::resolve_with(name, |key| std::env::var(key).ok())
    }

    /// [`Secret::resolve`] against `source` instead of the process environment.
    pub fn resolve_from(name: &str, source: &dyn SecretSource) -> Result<Self, String> {
        Self::resolve_with(name, |key| source.var(key))
    }

    /// [`Secret::resolve`] with the environment given as a lookup function, for tests and for
    /// validating a config against an environment that is not the process's own.
    pub fn resolve_with(name: &str, env: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        if !looks_like_a_name(name) {
            // Most likely the secret itself, pasted where its variable's name belongs: never
            // echo it (this message reaches the terminal and the journal).
            return Err(NOT_A_NAME.to_string());
        }
        if let Some(value) = env(name).filter(|v| !v.is_empty()) {
            return Ok(Self(value));
        }
        if let Some(dir) = env("CREDENTIALS_DIRECTORY").filter(|d| !d.is_empty()) {
            let path = Path::new(&dir).join(name);
            match std::fs::read_to_string(&path) {
                Ok(content) => {
                    let value = content.trim_end_matches(['\n', '\r']).to_string();
                    if !value.is_empty() {
                        return Ok(Self(value));
                    }
                    return Err(format!("credential file {} is empty", path.display()));
                }
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => {
                    return Err(format!(
                        "cannot read credential file {}: {err}",
                        path.display()
                    ));
                }
            }
        }
        Err(format!(
            "environment variable {name} is not set (nor is a credential file {name} in $CREDENTIALS_DIRECTORY)"
        ))
    }
}

/// What a `*_env` key that holds no variable name is told, without its value.
pub const NOT_A_NAME: &str = "a `*_env` key names the environment variable (or systemd credential) that holds the secret, and this value is no such name; was the secret itself pasted here? It is not shown. Put the secret in a variable, e.g. `export HEARTH_TELEGRAM_TOKEN=…`, and write that variable's name here";

/// Whether `name` can name an environment variable or a credential file: letters, digits,
/// `_`, `.` and `-`, not starting with `-`, and short. Tokens and API keys are longer (OpenAI
/// 51 characters and up, Discord about 70) or carry other characters (Telegram's `:`).
fn looks_like_a_name(name: &str) -> bool {
    const LONGEST: usize = 48;
    !name.is_empty()
        && name.len() <= LONGEST
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_are_redacted() {
        let secret = Secret::new("sk-very-secret");
        assert!(!format!("{secret:?}").contains("very"));
        assert!(!format!("{secret}").contains("very"));
    }

    /// The defect: `token_env = "123456:ABC…"` was answered "environment variable 123456:ABC…
    /// is not set", printing the pasted token into the terminal and the journal.
    #[test]
    fn a_pasted_secret_is_never_echoed() {
        let none = |_: &str| None;
        for pasted in [
            "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
            "sk-proj-Q2xhdWRlIGlzIG5vdCBhIHJlYWwga2V5IGZvciB0ZXN0cw",
            "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
            "hunter2 with spaces",
        ] {
            let err = Secret::resolve_with(pasted, none).expect_err("not a name");
            assert!(!err.contains(pasted), "{err}");
            assert!(err.contains("was the secret itself pasted here"), "{err}");
        }
        let err = Secret::resolve_with("HEARTH_TELEGRAM_TOKEN", none).expect_err("unset");
        assert!(err.contains("HEARTH_TELEGRAM_TOKEN is not set"), "{err}");
        let err = Secret::resolve_with("telegram-token.cred", none).expect_err("unset");
        assert!(
            err.contains("telegram-token.cred is not set"),
            "a credential name: {err}"
        );
    }

    #[test]
    fn resolves_from_env_then_credentials_directory() {
        let dir = std::env::temp_dir().join(format!("hearth-cred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(dir.join("TOKEN"), "from-file\n").expect("write credential");
        let dir_str = dir.display().to_string();

        let from_env =
            Secret::resolve_with("TOKEN", |k| (k == "TOKEN").then(|| "from-env".to_string()));
        assert_eq!(from_env.expect("env").expose(), "from-env");

        let from_file = Secret::resolve_with("TOKEN", |k| {
            (k == "CREDENTIALS_DIRECTORY").then(|| dir_str.clone())
        });
        assert_eq!(from_file.expect("file").expose(), "from-file");

        let missing = Secret::resolve_with("NOPE", |_| None).expect_err("missing");
        assert!(missing.contains("NOPE"));
        let _ = std::fs::remove_dir_all(&dir); // best effort cleanup of a temp dir
    }
}
