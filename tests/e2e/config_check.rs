//! What `hearth check` reports, through the library call it is built on: a real file on disk,
//! every error with the file path, key and reason. (The command itself, exit code 2, is wired in
//! the CLI.)

use std::path::Path;

use hearth::config::{ConfigErrors, load};

use crate::support::run_cli;

fn write(dir: &Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("hearth.toml");
    std::fs::write(&path, text).expect("write the config file");
    path
}

fn load_errors(path: &Path) -> ConfigErrors {
    match load(Some(path)) {
        Ok(loaded) => panic!("expected errors, got {loaded:?}"),
        Err(errors) => errors,
    }
}

#[cfg(feature = "telegram")]
#[test]
fn every_error_in_every_section_is_reported_with_file_key_and_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(
        dir.path(),
        r#"
[daemon]
timezone = "Europe/Berln"

[[providers]]
name = "local"
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
model = "llama3.1"
fallbacks = ["cloud"]

[[providers]]
name = "other"
kind = "openai"
base_url = "http://127.0.0.1:8080/v1"
modle = "qwen3"

[channels.telegram]
token_env = "HEARTH_E2E_CONFIG_CHECK_UNSET_TOKEN"
allowed_users = ["me"]

[[schedules]]
name = "morning"
cron = "30 7 * * *"
agent = "general"
prompt = "briefing"
target = "telegram:123"
"#,
    );
    let errors = load_errors(&path);
    let file = path.display().to_string();
    let expected = [
        (
            "channels.telegram.allowed_users[0]",
            "`me` is not a telegram user id: expected a number",
        ),
        ("daemon.timezone", "unknown timezone `Europe/Berln`"),
        ("providers[1].modle", "unknown key `modle`"),
        ("providers[0].fallbacks", "unknown provider `cloud`"),
        ("schedules[0].cron", "the seconds field comes first"),
        // Found now that a bad value no longer stops the rest of its section being checked.
        (
            "channels.telegram.token_env",
            "HEARTH_E2E_CONFIG_CHECK_UNSET_TOKEN is not set",
        ),
    ];
    for (key, reason) in expected {
        assert!(
            errors
                .iter()
                .any(|e| e.source == file && e.key == key && e.message.contains(reason)),
            "missing {key}: {reason} in\n{errors}"
        );
    }
    assert_eq!(errors.len(), expected.len(), "{errors}");

    // Printed one per line as `file: key: reason`.
    let printed = errors.to_string();
    assert_eq!(printed.lines().count(), expected.len());
    assert!(
        printed.contains(&format!(
            "{file}: daemon.timezone: unknown timezone `Europe/Berln`"
        )),
        "{printed}"
    );
}

#[test]
fn a_missing_explicit_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("nowhere.toml");
    let errors = load_errors(&path);
    assert_eq!(errors.len(), 1);
    let printed = errors.to_string();
    assert!(
        printed.starts_with(&path.display().to_string()),
        "{printed}"
    );
    assert!(printed.contains("file not found"), "{printed}");
}

#[test]
fn a_syntax_error_names_the_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(
        dir.path(),
        "[daemon]\ntimezone = \"UTC\"\nhttp_listen = 127.0.0.1:8787\n",
    );
    let errors = load_errors(&path);
    assert_eq!(errors.len(), 1, "{errors}");
    let error = errors.iter().next().expect("one error");
    assert_eq!(error.source, path.display().to_string());
    assert!(error.message.contains("line 3"), "{error}");
}

#[test]
fn a_valid_file_loads_and_reports_its_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(
        dir.path(),
        "[daemon]\ntimezone = \"Europe/Berlin\"\nhttp_listen = \"\"\n",
    );
    let loaded = load(Some(&path)).expect("valid config");
    assert_eq!(loaded.path.as_deref(), Some(path.as_path()));
    assert_eq!(loaded.config.daemon.timezone, chrono_tz::Europe::Berlin);
}

/// `hearth check` on `text` as the whole configuration: its exit code and standard output.
fn check(dir: &Path, text: &str) -> (Option<i32>, String) {
    write(dir, text);
    let out = run_cli(dir, &["--config", "hearth.toml", "check"], &[], "");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn an_http_listen_other_machines_can_reach_is_a_warning_in_check() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, stdout) = check(dir.path(), "[daemon]\nhttp_listen = \"0.0.0.0:8787\"\n");
    assert_eq!(code, Some(0), "a warning is no error: {stdout}");
    assert!(
        stdout
            .contains("warning: daemon.http_listen: 0.0.0.0:8787 is reachable from other machines"),
        "{stdout}"
    );
    let (_, stdout) = check(dir.path(), "[daemon]\nhttp_listen = \"127.0.0.1:8787\"\n");
    assert!(!stdout.contains("warning"), "{stdout}");
}

#[cfg(feature = "http")]
#[test]
fn an_owner_reachable_only_over_http_is_a_warning_in_check() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, stdout) = check(
        dir.path(),
        "[daemon]\nowner = \"http:laptop\"\n[channels.http]\n",
    );
    assert_eq!(code, Some(0), "a warning is no error: {stdout}");
    assert!(
        stdout.contains("warning: daemon.owner: the owner can be reached only as http:laptop")
            && stdout.contains("budget warnings"),
        "{stdout}"
    );
}
