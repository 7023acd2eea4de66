//! `[[mailboxes]]`: the owner's IMAP mailboxes that the mail tools (`tool/mail.rs`) search,
//! read and send from (docs: README, "Mailboxes"). The server URLs follow the email channel's
//! rules, checked by the same function (`hearth_email::check_endpoint`): `imaps://`,
//! `imap+starttls://`, and plain `imap://` only to this machine; the same for SMTP. The email
//! channel's own account may be listed too.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use toml::Value;

use super::load::Parse;
use super::{Checks, Section};

/// One `[[mailboxes]]` entry. Holds the name of the password's variable, never the password.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MailboxConfig {
    /// What the tools' `mailbox` argument names (`personal`, `work`).
    pub name: String,
    /// `imaps://imap.example.org` (port 993), `imap+starttls://…` (143) or `imap://…` (this
    /// machine only).
    pub imap_url: String,
    /// `smtps://…` (465), `smtp+starttls://…` (587) or `smtp://…` (this machine only). Without
    /// it the mailbox is read-only.
    #[serde(default)]
    pub smtp_url: Option<String>,
    /// The login for both servers, usually the address.
    pub username: String,
    /// The variable (or credential) holding the password: an app password where the provider
    /// has them.
    pub password_env: String,
    /// The owner's From: `Name <address>` or a bare address.
    pub address: String,
}

impl Section for Vec<MailboxConfig> {
    fn parse(value: Value, parse: &mut Parse<'_>) -> Option<Self> {
        parse.array(value)
    }

    fn check(&self, checks: &mut Checks<'_>) {
        let mut seen = HashSet::new();
        for (i, mailbox) in self.iter().enumerate() {
            let key = |field: &str| format!("[{i}].{field}");
            let name = mailbox.name.trim();
            let valid_name = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !valid_name {
                checks.problem(
                    &key("name"),
                    format!(
                        "`{}` is not a mailbox name: use letters, digits, `_` and `-` (the tools name it, e.g. `personal`)",
                        mailbox.name
                    ),
                );
            } else if !seen.insert(name.to_ascii_lowercase()) {
                checks.problem(&key("name"), format!("duplicate mailbox name `{name}`"));
            }
            if mailbox.username.trim().is_empty() {
                checks.problem(&key("username"), "must not be empty");
            }
            checks.secret(&key("password_env"), &mailbox.password_env);
            check_servers(mailbox, &key, checks);
        }
    }
}

#[cfg(feature = "email")]
fn check_servers(mailbox: &MailboxConfig, key: &dyn Fn(&str) -> String, checks: &mut Checks<'_>) {
    use hearth_email::{IMAP_SCHEMES, SMTP_SCHEMES, check_endpoint, parse_from};
    if let Err(message) = check_endpoint(&mailbox.imap_url, IMAP_SCHEMES) {
        checks.problem(&key("imap_url"), message);
    }
    if let Some(smtp) = &mailbox.smtp_url
        && let Err(message) = check_endpoint(smtp, SMTP_SCHEMES)
    {
        checks.problem(&key("smtp_url"), message);
    }
    if let Err(message) = parse_from(&mailbox.address) {
        checks.problem(&key("address"), message);
    }
}

#[cfg(not(feature = "email"))]
fn check_servers(_: &MailboxConfig, key: &dyn Fn(&str) -> String, checks: &mut Checks<'_>) {
    checks.problem(
        &key("imap_url"),
        "this hearth was built without email support (cargo feature `email`)",
    );
}

#[cfg(all(test, feature = "email"))]
mod tests {
    use std::collections::HashMap;

    use crate::config::load_from_str;

    const GOOD: &str = "[[mailboxes]]\nname = \"personal\"\nimap_url = \"imaps://imap.fastmail.com\"\nsmtp_url = \"smtps://smtp.fastmail.com\"\nusername = \"me@fastmail.com\"\npassword_env = \"FASTMAIL_APP_PASSWORD\"\naddress = \"Me <me@fastmail.com>\"\n";

    fn env() -> HashMap<String, String> {
        HashMap::from([("FASTMAIL_APP_PASSWORD".into(), "pw".into())])
    }

    #[test]
    fn a_mailbox_loads_and_is_checked_by_the_email_channels_rules() {
        let config = load_from_str(GOOD, "hearth.toml", &env()).expect("loads");
        assert_eq!(config.mailboxes.len(), 1);
        assert_eq!(config.mailboxes[0].name, "personal");

        let bad = format!(
            "{GOOD}\n[[mailboxes]]\nname = \"personal\"\nimap_url = \"imap://imap.example.org\"\nsmtp_url = \"ftp://x\"\nusername = \"\"\npassword_env = \"MISSING_PW\"\naddress = \"not an address\"\n"
        );
        let errors = load_from_str(&bad, "hearth.toml", &env()).expect_err("refused");
        let found: Vec<(String, String)> = errors
            .iter()
            .map(|e| (e.key.clone(), e.message.clone()))
            .collect();
        let keys: Vec<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "mailboxes[1].name",
                "mailboxes[1].username",
                "mailboxes[1].password_env",
                "mailboxes[1].imap_url",
                "mailboxes[1].smtp_url",
                "mailboxes[1].address",
            ],
            "{found:?}"
        );
        assert!(
            found[3].1.contains("plain text to another machine"),
            "{found:?}"
        );
        // The password itself never appears in what `hearth check` prints.
        assert!(found.iter().all(|(_, m)| !m.contains("pw\"")), "{found:?}");

        let unknown = format!("{GOOD}folder = \"INBOX\"\n");
        let errors = load_from_str(&unknown, "hearth.toml", &env()).expect_err("unknown key");
        assert!(
            errors.iter().any(|e| e.message.contains("folder")),
            "{errors:?}"
        );
    }
}
