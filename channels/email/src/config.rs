//! The email channel's configuration: the `[channels.email]` section of hearth's config file
//! ([`EmailConfig`]), which `hearth check` checks and `hearth run` builds the channel from, and
//! the [`EmailSettings`] the channel runs on once the password is resolved.

use std::sync::Arc;
use std::time::Duration;

use hearth_channel::{
    BuildContext, Channel, ChannelConfig, ChannelError, ConfigProblem, SecretSource, check_secret,
    check_url,
};
use serde::{Deserialize, Serialize};

use crate::{CHANNEL_NAME, EmailChannel};

/// The schemes `imap_url` accepts.
pub const IMAP_SCHEMES: &[&str] = &["imaps", "imap+starttls", "imap"];
/// The schemes `smtp_url` accepts.
pub const SMTP_SCHEMES: &[&str] = &["smtps", "smtp+starttls", "smtp"];

/// `[channels.email]`: a mailbox read over IMAP and answered over SMTP. Holds the name of the
/// password's variable, never the password, so its derived `Debug` shows nothing secret.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmailConfig {
    /// `imaps://imap.example.org` (port 993), `imap+starttls://…` (143, upgraded to TLS) or
    /// `imap://…` (plain text: for a server on this machine only).
    pub imap_url: String,
    /// `smtps://smtp.example.org` (465), `smtp+starttls://…` (587) or `smtp://…` (plain text).
    pub smtp_url: String,
    /// The login name for both servers, usually the mailbox's address.
    pub username: String,
    /// The variable (or credential) holding the password: an app password where the provider
    /// has them.
    pub password_env: String,
    /// The sender of replies: `Name <address>` or a bare address. Defaults to `username`.
    #[serde(default)]
    pub from: Option<String>,
    /// The folder read for new mail.
    #[serde(default = "default_mailbox")]
    pub mailbox: String,
    /// Addresses allowed to talk to hearth (more can be paired later), compared without regard
    /// to case; `*@example.org` allows every address at exactly that domain.
    #[serde(default)]
    pub allowed_senders: Vec<String>,
    /// The authserv-id of the user's own receiving server (`mx.example.org`). A sender counts
    /// as verified only if that server's `Authentication-Results` says `dmarc=pass` for the
    /// From domain, or `dkim=pass` / `spf=pass` for that domain. Required unless
    /// `trust_unverified_from` is set.
    #[serde(default)]
    pub require_authentication: Option<String>,
    /// Believe `From` as written, without any check: anyone can then mail as the owner and be
    /// obeyed as the owner. Off by default; `hearth check` warns when it is on.
    #[serde(default)]
    pub trust_unverified_from: bool,
}

fn default_mailbox() -> String {
    "INBOX".into()
}

/// How the channel reaches a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Security {
    /// TLS from the first byte.
    Tls,
    /// Plain text upgraded with STARTTLS before the login.
    StartTls,
    /// Plain text throughout (a server on this machine).
    Plain,
}

/// A server's address and how to reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    pub security: Security,
}

impl Endpoint {
    /// Whether the server is on this machine (`localhost`, 127.0.0.0/8, ::1), where plain text
    /// never crosses a network.
    pub fn is_loopback(&self) -> bool {
        self.host.eq_ignore_ascii_case("localhost")
            || self
                .host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// Parses an `imap*://` or `smtp*://` URL (see [`IMAP_SCHEMES`], [`SMTP_SCHEMES`]).
    pub fn parse(text: &str, schemes: &[&str]) -> Result<Self, String> {
        check_url(text, schemes)?;
        let url = url::Url::parse(text).map_err(|e| format!("`{text}`: {e}"))?;
        let (security, default_port) = match url.scheme() {
            "imaps" => (Security::Tls, 993),
            "imap+starttls" => (Security::StartTls, 143),
            "imap" => (Security::Plain, 143),
            "smtps" => (Security::Tls, 465),
            "smtp+starttls" => (Security::StartTls, 587),
            "smtp" => (Security::Plain, 25),
            other => return Err(format!("`{text}` has the unknown scheme `{other}`")),
        };
        let host = url
            .host_str()
            .ok_or_else(|| format!("`{text}` has no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        Ok(Self {
            host,
            port: url.port().unwrap_or(default_port),
            security,
        })
    }
}

/// What the channel runs on: the section with its password resolved and URLs parsed.
#[derive(Clone)]
pub struct EmailSettings {
    pub imap: Endpoint,
    pub smtp: Endpoint,
    pub username: String,
    pub password: String,
    /// The display name of `From`, if any.
    pub from_name: Option<String>,
    /// The address of `From`, lowercased.
    pub from_address: String,
    pub mailbox: String,
    pub require_authentication: Option<String>,
    /// Time limit of every IMAP command and of each SMTP send.
    pub command_timeout: Duration,
    /// How long one IDLE lasts before it is re-issued (servers drop IDLE after 30 minutes, NAT
    /// boxes much sooner).
    pub idle_refresh: Duration,
    /// How often a server without IDLE is polled.
    pub poll_interval: Duration,
    /// Mail larger than this is fetched headers only and answered with a note.
    pub max_message_bytes: u32,
    /// How long reading one mail (MIME parsing, HTML to text) may take before the mail is set
    /// aside as unreadable: a crafted mail must not hold up the mail after it.
    pub parse_budget: Duration,
    /// Part of every `Message-ID` hearth writes, unique to this installation: outbox ids start
    /// again at 1 in a new database, and mail clients (Gmail) hide a mail whose `Message-ID`
    /// they have seen before.
    pub message_id_salt: String,
}

impl std::fmt::Debug for EmailSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailSettings")
            .field("imap", &self.imap)
            .field("smtp", &self.smtp)
            .field("username", &self.username)
            .field("from_address", &self.from_address)
            .field("mailbox", &self.mailbox)
            .finish_non_exhaustive()
    }
}

impl EmailSettings {
    /// Settings with the defaults for timeouts and intervals.
    pub fn new(
        imap: Endpoint,
        smtp: Endpoint,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        let username = username.into();
        Self {
            imap,
            smtp,
            from_address: username.to_ascii_lowercase(),
            username,
            password: password.into(),
            from_name: None,
            mailbox: default_mailbox(),
            require_authentication: None,
            command_timeout: Duration::from_secs(30),
            idle_refresh: Duration::from_secs(5 * 60),
            poll_interval: Duration::from_secs(60),
            max_message_bytes: 25 * 1024 * 1024,
            parse_budget: Duration::from_secs(20),
            message_id_salt: String::new(),
        }
    }
}

/// Splits `Name <address>` (or a bare address) into its parts.
pub fn parse_from(text: &str) -> Result<(Option<String>, String), String> {
    let text = text.trim();
    let (name, address) = match (text.rfind('<'), text.ends_with('>')) {
        (Some(open), true) => {
            let name = text[..open].trim().trim_matches('"').trim();
            (
                (!name.is_empty()).then(|| name.to_owned()),
                &text[open + 1..text.len() - 1],
            )
        }
        _ => (None, text),
    };
    check_address(address)?;
    Ok((name, address.trim().to_ascii_lowercase()))
}

/// Parses a server URL (`imap_url` with [`IMAP_SCHEMES`], `smtp_url` with [`SMTP_SCHEMES`]) and
/// refuses plain text to another machine, where the password would cross the network in clear.
/// The one rule for every mail server hearth logs in to: the channel's and `[[mailboxes]]`.
pub fn check_endpoint(url: &str, schemes: &[&str]) -> Result<Endpoint, String> {
    let endpoint = Endpoint::parse(url, schemes)?;
    if endpoint.security == Security::Plain && !endpoint.is_loopback() {
        let fix = if schemes == IMAP_SCHEMES {
            "imaps:// or imap+starttls://"
        } else {
            "smtps:// or smtp+starttls://"
        };
        return Err(format!(
            "`{url}` is plain text to another machine: the password would cross the network in clear. Use {fix} (plain text is for a server on this machine only)"
        ));
    }
    Ok(endpoint)
}

/// Whether `address` looks like `name@domain`.
pub fn check_address(address: &str) -> Result<(), String> {
    let valid = address.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty()
            && !domain.is_empty()
            && !address
                .chars()
                .any(|c| c.is_whitespace() || c == '<' || c == '>')
    });
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{address}` is not an email address: expected `name@domain`"
        ))
    }
}

/// What `hearth check` (and every start) says in one line when `trust_unverified_from` is on.
pub const UNVERIFIED_FROM_WARNING: &str = "From is believed as written, so anyone can mail as the owner or an allowed sender and be obeyed as them; set require_authentication instead (docs/channels.md, \"Email\")";

/// An `allowed_senders` entry: an address, compared without regard to case, or `*@domain` for
/// every address at exactly that domain (not its subdomains). Any other `*` pattern is refused
/// rather than taken literally (it would never match). A domain wildcard admits everyone who
/// can send verified mail from the domain, so it is for a domain the owner controls: the big
/// public providers are refused (every user of theirs would be let in).
pub fn check_sender(address: &str) -> Result<(), String> {
    let address = address.trim();
    if let Some(domain) = address.strip_prefix("*@") {
        return check_wildcard_domain(address, domain);
    }
    if address.contains('*') {
        return Err(format!(
            "`{address}`: the only wildcard is `*@domain` (every address at exactly that domain); list other senders one by one (strangers can ask with a pairing code)"
        ));
    }
    check_address(address)
}

/// Providers where anyone can have an address: a wildcard on them would admit the world.
const PUBLIC_MAIL_DOMAINS: &[&str] = &[
    "gmail.com",
    "googlemail.com",
    "outlook.com",
    "hotmail.com",
    "live.com",
    "msn.com",
    "yahoo.com",
    "icloud.com",
    "me.com",
    "aol.com",
    "proton.me",
    "protonmail.com",
    "gmx.com",
    "gmx.de",
    "gmx.net",
    "web.de",
    "mail.com",
    "yandex.com",
    "yandex.ru",
    "mail.ru",
    "zoho.com",
    "fastmail.com",
    "tutanota.com",
];

fn check_wildcard_domain(pattern: &str, domain: &str) -> Result<(), String> {
    let domain = domain.to_ascii_lowercase();
    let valid = domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && domain
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if !valid {
        return Err(format!(
            "`{pattern}`: expected `*@domain` with a domain such as example.org"
        ));
    }
    if PUBLIC_MAIL_DOMAINS.contains(&domain.as_str()) {
        return Err(format!(
            "`{pattern}` would let every {domain} user talk to hearth; list their addresses one by one"
        ));
    }
    Ok(())
}

impl EmailConfig {
    /// The settings the channel runs on, with the password resolved.
    pub fn settings(&self, ctx: BuildContext<'_>) -> Result<EmailSettings, ChannelError> {
        let password = ctx.secret("password_env", &self.password_env)?;
        let imap = Endpoint::parse(&self.imap_url, IMAP_SCHEMES)
            .map_err(|e| ChannelError::config(format!("imap_url: {e}")))?;
        let smtp = Endpoint::parse(&self.smtp_url, SMTP_SCHEMES)
            .map_err(|e| ChannelError::config(format!("smtp_url: {e}")))?;
        let mut settings = EmailSettings::new(imap, smtp, &self.username, password.expose());
        let (name, address) = parse_from(self.from.as_deref().unwrap_or(&self.username))
            .map_err(|e| ChannelError::config(format!("from: {e}")))?;
        settings.from_name = name;
        settings.from_address = address;
        settings.mailbox = self.mailbox.clone();
        settings.require_authentication = self.require_authentication.clone();
        settings.message_id_salt = message_id_salt(ctx.data_dir)?;
        Ok(settings)
    }
}

/// The installation's `Message-ID` salt, kept in `<data_dir>/message-id-salt` (made on first
/// use), so a retried send keeps its `Message-ID` across restarts.
fn message_id_salt(data_dir: &std::path::Path) -> Result<String, ChannelError> {
    let path = data_dir.join("message-id-salt");
    if let Ok(salt) = std::fs::read_to_string(&path) {
        let salt = salt.trim();
        if !salt.is_empty() && salt.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Ok(salt.to_owned());
        }
    }
    use sha2::Digest;
    let seed = format!(
        "{:?}{}{}",
        std::time::SystemTime::now(),
        std::process::id(),
        data_dir.display()
    );
    let digest = sha2::Sha256::digest(seed.as_bytes());
    let salt: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    let write = std::fs::create_dir_all(data_dir).and_then(|()| std::fs::write(&path, &salt));
    write.map_err(|e| ChannelError::config(format!("cannot keep {}: {e}", path.display())))?;
    Ok(salt)
}

impl ChannelConfig for EmailConfig {
    const NAME: &'static str = CHANNEL_NAME;

    fn check(&self, secrets: &dyn SecretSource) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        for (key, url, schemes) in [
            ("imap_url", &self.imap_url, IMAP_SCHEMES),
            ("smtp_url", &self.smtp_url, SMTP_SCHEMES),
        ] {
            if let Err(message) = check_endpoint(url, schemes) {
                problems.push(ConfigProblem::new(key, message));
            }
        }
        if self.username.trim().is_empty() {
            problems.push(ConfigProblem::new("username", "must not be empty"));
        }
        problems.extend(check_secret("password_env", &self.password_env, secrets));
        match &self.from {
            Some(from) => {
                if let Err(message) = parse_from(from) {
                    problems.push(ConfigProblem::new("from", message));
                }
            }
            None if !self.username.trim().is_empty() => {
                if let Err(message) = check_address(self.username.trim()) {
                    problems.push(ConfigProblem::new(
                        "from",
                        format!("not set, and the username is no address to send from ({message})"),
                    ));
                }
            }
            None => {}
        }
        if self.mailbox.trim().is_empty() {
            problems.push(ConfigProblem::new("mailbox", "must not be empty"));
        }
        for (i, sender) in self.allowed_senders.iter().enumerate() {
            if let Err(message) = check_sender(sender) {
                problems.push(ConfigProblem::new(format!("allowed_senders[{i}]"), message));
            }
        }
        match (&self.require_authentication, self.trust_unverified_from) {
            (Some(server), trust) => {
                let valid = !server.trim().is_empty()
                    && server
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
                if !valid {
                    problems.push(ConfigProblem::new(
                        "require_authentication",
                        format!(
                            "`{server}` is not a server name: expected the authserv-id of your receiving server, e.g. `mx.example.org`"
                        ),
                    ));
                }
                if trust {
                    problems.push(ConfigProblem::new(
                        "trust_unverified_from",
                        "cannot be used with require_authentication: remove one (require_authentication is the safe one)",
                    ));
                }
            }
            (None, false) => problems.push(ConfigProblem::new(
                "require_authentication",
                "not set: anyone can write the owner's or an allowed sender's address into From and would be obeyed as them. Set it to the authserv-id your receiving server writes in Authentication-Results (e.g. `mx.example.org`, docs/channels.md, \"Email\"), or set trust_unverified_from = true to accept that risk",
            )),
            // Accepted; `warnings` says what it means.
            (None, true) => {}
        }
        problems
    }

    fn warnings(&self) -> Vec<ConfigProblem> {
        if self.require_authentication.is_none() && self.trust_unverified_from {
            return vec![ConfigProblem::new(
                "trust_unverified_from",
                UNVERIFIED_FROM_WARNING,
            )];
        }
        Vec::new()
    }

    fn allowed_users(&self) -> Vec<String> {
        self.allowed_senders
            .iter()
            .map(|s| s.trim().to_ascii_lowercase())
            .collect()
    }

    fn check_user_id(id: &str) -> Result<(), String> {
        if id.contains('*') {
            return Err(format!(
                "`{id}`: an identity is one address; wildcards are for allowed_senders"
            ));
        }
        // Any case: the daemon matches an owner's address in lower case, as senders arrive.
        check_sender(id)
    }

    fn check_chat_id(id: &str) -> Result<(), String> {
        check_address(id)
    }

    fn build(&self, ctx: BuildContext<'_>) -> Result<Arc<dyn Channel>, ChannelError> {
        Ok(Arc::new(EmailChannel::new(self.settings(ctx)?)?))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn section(text: &str) -> EmailConfig {
        toml::from_str(text).unwrap_or_else(|e| panic!("{e}"))
    }

    const GOOD: &str = "imap_url = \"imaps://imap.example.org\"\nsmtp_url = \"smtp+starttls://smtp.example.org\"\nusername = \"bot@example.org\"\npassword_env = \"EM\"\nrequire_authentication = \"mx.example.org\"\n";
    /// GOOD without a way to verify senders.
    const UNVERIFIED: &str = "imap_url = \"imaps://imap.example.org\"\nsmtp_url = \"smtps://smtp.example.org\"\nusername = \"bot@example.org\"\npassword_env = \"EM\"\nallowed_senders = [\"me@example.org\"]\n";

    fn env() -> HashMap<String, String> {
        [("EM".to_string(), "pw".to_string())].into()
    }

    /// The problems of a section, and what it logged while being checked.
    #[test]
    fn a_section_that_believes_any_from_is_refused_unless_said_explicitly() {
        // The owner's address in From is all a forger needs without a verification setting.
        let problems = section(UNVERIFIED).check(&env());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].key, "require_authentication");
        assert!(
            problems[0].message.contains("anyone can write the owner's"),
            "{problems:?}"
        );
        assert!(problems[0].message.contains("trust_unverified_from = true"));
        // Even without allowed_senders: the owner (daemon.owner) and paired senders are
        // recognised by From alone too.
        let bare = UNVERIFIED.replace("allowed_senders = [\"me@example.org\"]\n", "");
        assert_eq!(section(&bare).check(&env()).len(), 1);
        // Said explicitly: accepted, with a one-line warning saying what it means.
        let trusting = section(&format!("{UNVERIFIED}trust_unverified_from = true\n"));
        let problems = trusting.check(&env());
        assert_eq!(problems, [], "{problems:?}");
        let warnings = trusting.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert_eq!(warnings[0].key, "trust_unverified_from");
        assert!(warnings[0].message.contains("anyone can mail as the owner"));
        // With require_authentication there is nothing to warn of; both together is a
        // contradiction.
        let problems = section(GOOD).check(&env());
        assert_eq!(problems.len(), 0, "{problems:?}");
        assert!(section(GOOD).warnings().is_empty());
        let both = section(&format!("{GOOD}trust_unverified_from = true\n"));
        let keys: Vec<String> = both.check(&env()).into_iter().map(|p| p.key).collect();
        assert_eq!(keys, ["trust_unverified_from"]);
    }

    #[test]
    fn plain_text_to_another_machine_is_refused_and_loopback_is_fine() {
        let remote = GOOD
            .replace("imaps://imap.example.org", "imap://imap.example.org")
            .replace("smtp+starttls://smtp.example.org", "smtp://192.0.2.7:25");
        let problems = section(&remote).check(&env());
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["imap_url", "smtp_url"], "{problems:?}");
        assert!(
            problems[0]
                .message
                .contains("password would cross the network in clear")
        );
        for local in ["127.0.0.1:1143", "localhost", "[::1]:25"] {
            let text = GOOD
                .replace("imaps://imap.example.org", &format!("imap://{local}"))
                .replace(
                    "smtp+starttls://smtp.example.org",
                    &format!("smtp://{local}"),
                );
            assert_eq!(section(&text).check(&env()), [], "{local}");
        }
    }

    #[test]
    fn senders_match_in_any_case_and_only_domain_wildcards_are_taken() {
        let config = section(&format!(
            "{GOOD}allowed_senders = [\"Me@Example.ORG\", \"*@Family.Example\"]\n"
        ));
        assert_eq!(config.check(&env()), []);
        assert_eq!(
            config.allowed_users(),
            ["me@example.org", "*@family.example"]
        );
        let wild = section(&format!(
            "{GOOD}allowed_senders = [\"me@example.org\", \"*.example.org\", \"me*@example.org\", \"*@*.example.org\", \"*@localhost\", \"*@Gmail.com\"]\n"
        ));
        let problems = wild.check(&env());
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "allowed_senders[1]",
                "allowed_senders[2]",
                "allowed_senders[3]",
                "allowed_senders[4]",
                "allowed_senders[5]"
            ],
            "{problems:?}"
        );
        assert!(
            problems[0]
                .message
                .contains("the only wildcard is `*@domain`")
        );
        assert!(
            problems[1]
                .message
                .contains("the only wildcard is `*@domain`")
        );
        assert!(
            problems[2]
                .message
                .contains("expected `*@domain` with a domain")
        );
        assert!(problems[4].message.contains("every gmail.com user"));
        // An owner is one address, never a pattern.
        assert!(
            EmailConfig::check_user_id("*@example.org").is_err_and(|e| e.contains("one address"))
        );
        // An owner written in mixed case is accepted: the daemon matches it in lower case.
        assert_eq!(EmailConfig::check_user_id("Me@Example.org"), Ok(()));
        assert_eq!(EmailConfig::check_user_id("me@example.org"), Ok(()));
    }

    #[test]
    fn a_good_section_has_no_problems_and_builds() {
        let config = section(GOOD);
        let env = env();
        assert_eq!(config.check(&env), []);
        assert_eq!(config.mailbox, "INBOX");
        let dir = tempfile::tempdir().expect("dir");
        let settings = config
            .settings(BuildContext::new(&env, dir.path()))
            .expect("settings");
        let again = config
            .settings(BuildContext::new(&env, dir.path()))
            .expect("settings");
        assert_eq!(settings.message_id_salt.len(), 12);
        assert_eq!(settings.message_id_salt, again.message_id_salt, "kept");
        assert_eq!(settings.imap.port, 993);
        assert_eq!(settings.imap.security, Security::Tls);
        assert_eq!(settings.smtp.port, 587);
        assert_eq!(settings.smtp.security, Security::StartTls);
        assert_eq!(settings.from_address, "bot@example.org");
        assert!(!format!("{settings:?}").contains("pw\""));
    }

    #[test]
    fn bad_urls_missing_secrets_and_addresses_are_named() {
        let config = section(
            "imap_url = \"https://imap.example.org\"\nsmtp_url = \"smtp+tls://x\"\nusername = \"\"\npassword_env = \"UNSET_EM\"\nfrom = \"Bot <nope>\"\nallowed_senders = [\"me@example.org\", \"me\"]\nrequire_authentication = \"mx example\"\n",
        );
        let env: HashMap<String, String> = HashMap::new();
        let problems = config.check(&env);
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "imap_url",
                "smtp_url",
                "username",
                "password_env",
                "from",
                "allowed_senders[1]",
                "require_authentication"
            ],
            "{problems:?}"
        );
        assert!(
            problems[0].message.contains("scheme `https`"),
            "{problems:?}"
        );
        assert!(problems[3].message.contains("UNSET_EM"), "{problems:?}");
        assert!(problems[5].message.contains("`me` is not an email address"));
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = toml::from_str::<EmailConfig>(&format!("{GOOD}imap_port = 1\n"))
            .expect_err("unknown key");
        assert!(err.to_string().contains("imap_port"), "{err}");
    }

    #[test]
    fn from_takes_a_display_name() {
        assert_eq!(
            parse_from("Hearth Bot <Bot@Example.org>"),
            Ok((Some("Hearth Bot".into()), "bot@example.org".into()))
        );
        assert_eq!(
            parse_from("bot@example.org"),
            Ok((None, "bot@example.org".into()))
        );
        assert!(parse_from("Bot <>").is_err());
    }

    #[test]
    fn ports_default_by_scheme_and_can_be_given() {
        let e = Endpoint::parse("imap://127.0.0.1:1143", IMAP_SCHEMES).expect("url");
        assert_eq!(
            (e.host.as_str(), e.port, e.security),
            ("127.0.0.1", 1143, Security::Plain)
        );
        let e = Endpoint::parse("smtps://smtp.example.org", SMTP_SCHEMES).expect("url");
        assert_eq!(e.port, 465);
        assert!(Endpoint::parse("imap:///x", IMAP_SCHEMES).is_err());
    }
}
