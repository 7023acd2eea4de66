//! `[[calendars]]`: the owner's outside calendars, each a CalDAV collection or an ICS feed,
//! which the calendar tools read beside hearth's own (docs: README, "Calendars"; the client is
//! `src/calendar.rs`).

use std::collections::HashSet;

use hearth_channel::check_url;
use serde::{Deserialize, Serialize};
use toml::Value;

use super::load::Parse;
use super::{Checks, Section};

/// The name hearth's own calendar goes by in listings; no outside calendar may take it.
pub const OWN_CALENDAR: &str = "hearth";

/// One `[[calendars]]` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalendarConfig {
    /// Unique; events name their calendar by it and the write tools' `calendar` argument takes it.
    pub name: String,
    /// A CalDAV collection (`https://…/calendars/me/work/`) or an ICS feed (a URL ending in
    /// `.ics`, or `webcal://`).
    pub url: String,
    /// The CalDAV login; an ICS feed may have one too (basic auth).
    #[serde(default)]
    pub username: Option<String>,
    /// The environment variable (or credential) holding the password or app password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// Whether the write tools may change this calendar (a CalDAV collection only).
    #[serde(default)]
    pub writable: bool,
}

/// What a calendar URL points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CalendarKind {
    /// A CalDAV collection: synced, and writable when the entry says so.
    CalDav,
    /// A published iCalendar file: read whole, never written.
    Ics,
}

impl CalendarConfig {
    /// An ICS feed when the URL's path ends in `.ics` or its scheme is `webcal`; else CalDAV.
    pub fn kind(&self) -> CalendarKind {
        let url = self.url.trim();
        let path = url.split(['?', '#']).next().unwrap_or(url);
        if url.starts_with("webcal://") || path.to_ascii_lowercase().ends_with(".ics") {
            CalendarKind::Ics
        } else {
            CalendarKind::CalDav
        }
    }

    /// The URL to request: `webcal://` is https, and a CalDAV collection ends with a slash
    /// (some servers answer 401 or 404 to the collection without one).
    pub fn request_url(&self) -> String {
        let url = self.url.trim();
        let url = match url.strip_prefix("webcal://") {
            Some(rest) => format!("https://{rest}"),
            None => url.to_string(),
        };
        if self.kind() == CalendarKind::CalDav && !url.ends_with('/') {
            format!("{url}/")
        } else {
            url
        }
    }
}

impl Section for Vec<CalendarConfig> {
    fn parse(value: Value, parse: &mut Parse<'_>) -> Option<Self> {
        parse.array(value)
    }

    fn check(&self, checks: &mut Checks<'_>) {
        let mut seen = HashSet::new();
        for (i, calendar) in self.iter().enumerate() {
            let key = |field: &str| format!("[{i}].{field}");
            let name = calendar.name.trim();
            if name.is_empty() {
                checks.problem(&key("name"), "must not be empty");
            } else if name.eq_ignore_ascii_case(OWN_CALENDAR) {
                checks.problem(
                    &key("name"),
                    format!("`{OWN_CALENDAR}` is hearth's own calendar; choose another name"),
                );
            } else if !seen.insert(name.to_lowercase()) {
                checks.problem(&key("name"), format!("duplicate calendar name `{name}`"));
            }
            if let Err(message) = check_url(
                &calendar.url.replacen("webcal://", "https://", 1),
                &["http", "https"],
            ) {
                checks.problem(&key("url"), message);
            }
            match (&calendar.username, &calendar.password_env) {
                (_, Some(env)) => checks.secret(&key("password_env"), env),
                (Some(_), None) => checks.problem(
                    &key("password_env"),
                    "`username` is set but `password_env` is not: name the environment variable holding the password",
                ),
                (None, None) if calendar.kind() == CalendarKind::CalDav => checks.problem(
                    &key("username"),
                    "a CalDAV calendar needs `username` and `password_env` (an app password for Nextcloud, Fastmail or iCloud)",
                ),
                (None, None) => {}
            }
            if calendar.writable && calendar.kind() == CalendarKind::Ics {
                checks.problem(
                    &key("writable"),
                    "an ICS feed is read-only: remove `writable`, or give the CalDAV collection's URL to write to it",
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::CalendarKind;
    use crate::config::load_from_str;

    fn problems(toml: &str) -> String {
        let env = HashMap::from([("CAL_PASSWORD".to_string(), "pw".to_string())]);
        match load_from_str(toml, "hearth.toml", &env) {
            Ok(_) => String::new(),
            Err(err) => err.to_string(),
        }
    }

    #[test]
    fn a_caldav_and_an_ics_calendar_load() {
        let env = HashMap::from([("CAL_PASSWORD".to_string(), "pw".to_string())]);
        let config = load_from_str(
            r#"
[[calendars]]
name = "Work"
url = "https://cloud.example.com/remote.php/dav/calendars/me/work"
username = "me"
password_env = "CAL_PASSWORD"
writable = true

[[calendars]]
name = "Holidays"
url = "webcal://example.com/holidays.ics"
"#,
            "hearth.toml",
            &env,
        )
        .expect("loads");
        let [work, holidays] = &config.calendars[..] else {
            panic!("two calendars: {:?}", config.calendars);
        };
        assert_eq!(work.kind(), CalendarKind::CalDav);
        assert!(work.request_url().ends_with("/work/"));
        assert_eq!(holidays.kind(), CalendarKind::Ics);
        assert_eq!(holidays.request_url(), "https://example.com/holidays.ics");
    }

    #[test]
    fn bad_entries_are_refused_each_with_its_reason() {
        let text = problems(
            r#"
[[calendars]]
name = "Feed"
url = "https://example.com/feed.ics"
writable = true

[[calendars]]
name = "feed"
url = "ftp://example.com/cal/"
username = "me"
password_env = "MISSING_PASSWORD"

[[calendars]]
name = "hearth"
url = "https://example.com/cal/"
username = "me"
"#,
        );
        assert!(text.contains("calendars[0].writable"), "{text}");
        assert!(text.contains("an ICS feed is read-only"), "{text}");
        assert!(text.contains("duplicate calendar name `feed`"), "{text}");
        assert!(text.contains("calendars[1].url"), "{text}");
        assert!(text.contains("calendars[1].password_env"), "{text}");
        assert!(text.contains("hearth's own calendar"), "{text}");
        assert!(text.contains("calendars[2].password_env"), "{text}");
    }
}
