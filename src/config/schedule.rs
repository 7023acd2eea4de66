//! `[[schedules]]`: prompts run by an agent at cron times.

use std::collections::HashSet;
use std::str::FromStr;

use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use toml::Value;

use super::load::Parse;
use super::value::optional_zone;
use super::{Checks, Section};

/// What an unattended schedule does when a tool asks for confirmation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnConfirmation {
    #[default]
    Deny,
    Ask,
    Allow,
}

/// One `[[schedules]]` entry: a prompt run by an agent at cron times.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleConfig {
    pub name: String,
    /// Cron with a seconds field first: `0 30 7 * * Mon-Fri`.
    pub cron: String,
    /// Defaults to `daemon.timezone`.
    #[serde(default, with = "optional_zone")]
    pub timezone: Option<Tz>,
    pub agent: String,
    pub prompt: String,
    /// `channel:chat_id`, e.g. `telegram:123456789`.
    pub target: String,
    #[serde(default)]
    pub on_confirmation: OnConfirmation,
    /// With `on_confirmation = "allow"`: the tools that may run unattended without asking;
    /// any other tool that would ask is denied.
    #[serde(default)]
    pub allow_tools: Vec<String>,
    /// A fire missed while hearth was down runs once at start if it is at most this many
    /// minutes old; older ones are recorded as missed.
    #[serde(default = "default_catch_up_minutes")]
    pub catch_up_minutes: u64,
}

fn default_catch_up_minutes() -> u64 {
    60
}

impl Section for Vec<ScheduleConfig> {
    fn parse(value: Value, parse: &mut Parse<'_>) -> Option<Self> {
        parse.array(value)
    }

    // `target` names a channel: validate.rs checks it against the channel sections.
    fn check(&self, checks: &mut Checks<'_>) {
        let mut seen = HashSet::new();
        for (i, schedule) in self.iter().enumerate() {
            let key = |field: &str| format!("[{i}].{field}");
            if schedule.name.trim().is_empty() {
                checks.problem(&key("name"), "must not be empty");
            } else if !seen.insert(schedule.name.as_str()) {
                checks.problem(
                    &key("name"),
                    format!("duplicate schedule name `{}`", schedule.name),
                );
            }
            if let Err(message) = cron_expression(&schedule.cron) {
                checks.problem(&key("cron"), message);
            }
            if schedule.agent.trim().is_empty() {
                checks.problem(&key("agent"), "must not be empty");
            }
            if schedule.prompt.trim().is_empty() {
                checks.problem(&key("prompt"), "must not be empty");
            }
        }
    }
}

/// A cron expression in the `cron` crate's dialect: seconds first, then minute, hour, day of
/// month, month, day of week and an optional year.
fn cron_expression(expression: &str) -> Result<(), String> {
    match cron::Schedule::from_str(expression) {
        Ok(_) => Ok(()),
        Err(err) => {
            // The usual mistake is a five-field crontab line; say how to fix it.
            let hint = if expression.split_whitespace().count() == 5 {
                format!(" (the seconds field comes first: try `0 {expression}`)")
            } else {
                " (fields: second minute hour day-of-month month day-of-week [year])".to_string()
            };
            Err(format!(
                "invalid cron expression `{expression}`: {}{hint}",
                cron_reason(&err.to_string())
            ))
        }
    }
}

/// The cron crate's message in one line. Its parser renders errors as the expression, a line
/// with a caret under the failing column, then the reason (often empty).
fn cron_reason(message: &str) -> String {
    let lines: Vec<&str> = message.lines().collect();
    match lines.as_slice() {
        [_, caret, reason @ ..] if caret.trim() == "^" => {
            let column = caret.find('^').map_or(1, |i| i + 1);
            let reason = reason.join(" ");
            let reason = reason.trim();
            if reason.is_empty() {
                format!("cannot parse at column {column}")
            } else {
                format!("{reason} (at column {column})")
            }
        }
        _ => lines.join(" "),
    }
}
