//! Checks that span sections: an owner or an approvals chat on a configured channel, a
//! schedule's target, a summary provider that exists, the HTTP API on a listener that may serve
//! it. Each section checks its own values beside its type ([`super::Section`]); what is here
//! needs two of them at once.

use std::collections::HashSet;

use hearth_channel::ChannelConfig;

use super::load::{Parsed, Problem};
use super::{ChannelsConfig, Config, DaemonConfig, Owner};
use crate::channels::EachChannel;

/// The channel an identity may belong to besides the chat channels: `hearth chat`.
const TERMINAL: &str = "terminal";

/// The problems of `config` that involve more than one section. `parsed` lists entries that
/// failed to parse, which references may still name without a second, misleading error.
pub(super) fn across_sections(config: &Config, parsed: &Parsed) -> Vec<Problem> {
    let mut problems = Vec::new();
    let platforms = channels(&config.channels);
    owner(&config.daemon, &platforms, &mut problems);
    if let Some(name) = &config.context.summary_provider
        && !config.providers.iter().any(|p| p.name == *name)
        && !parsed.failed("providers").contains(name)
    {
        problems.push(Problem::new(
            "context.summary_provider",
            format!("unknown provider `{name}`: no [[providers]] has this name"),
        ));
    }
    #[cfg(feature = "http")]
    http_api(config, &mut problems);
    // `/mcp` logs in with the HTTP channel's tokens and is served on its listener.
    if config.mcp_server.enabled && !cfg!(feature = "http") {
        problems.push(Problem::new(
            "mcp_server.enabled",
            "this hearth was built without the HTTP channel, whose tokens /mcp needs; `hearth mcp serve` (stdio) works without it",
        ));
    }
    #[cfg(feature = "http")]
    if config.mcp_server.enabled && config.channels.http.is_none() {
        problems.push(Problem::new(
            "mcp_server.enabled",
            "/mcp logs in with the HTTP channel's tokens: add [channels.http] (and make a token with `hearth token create NAME`), or use `hearth mcp serve` over stdio",
        ));
    }
    let indexes = parsed.indexes("schedules");
    for (n, schedule) in config.schedules.iter().enumerate() {
        if let Err(message) = target(&schedule.target, &platforms, parsed.failed("channels")) {
            let i = indexes.get(n).copied().unwrap_or(n);
            problems.push(Problem::new(format!("schedules[{i}].target"), message));
        }
    }
    problems
}

/// `daemon.owner` and `daemon.approvals_to`: identities on channels this binary has.
fn owner(daemon: &DaemonConfig, platforms: &Platforms, problems: &mut Vec<Problem>) {
    match &daemon.owner {
        None => {}
        Some(Owner::One(entry)) => {
            if let Err(message) = identity(entry, platforms) {
                problems.push(Problem::new("daemon.owner", message));
            }
        }
        Some(Owner::Many(entries)) => {
            let mut seen = HashSet::new();
            for (index, entry) in entries.iter().enumerate() {
                let key = format!("daemon.owner[{index}]");
                if let Err(message) = identity(entry, platforms) {
                    problems.push(Problem::new(key, message));
                } else if !seen.insert(entry.as_str()) {
                    problems.push(Problem::new(key, format!("`{entry}` is listed twice")));
                }
            }
        }
    }
    if let Some(route) = &daemon.approvals_to
        && let Err(message) = approvals_to(route, daemon, platforms)
    {
        problems.push(Problem::new("daemon.approvals_to", message));
    }
}

/// `[channels.http]` is served on `daemon.http_listen`: there must be one, and one other
/// machines can reach only when the owner says so with `daemon.http_public`.
#[cfg(feature = "http")]
fn http_api(config: &Config, problems: &mut Vec<Problem>) {
    if config.channels.http.is_none() {
        return;
    }
    let Some(listen) = config.daemon.http_listen else {
        problems.push(Problem::new(
            "channels.http",
            "the HTTP API is served on daemon.http_listen, which is \"\": set it (e.g. \"127.0.0.1:8787\") or remove [channels.http]",
        ));
        return;
    };
    if !listen.ip().is_loopback() && !config.daemon.http_public {
        problems.push(Problem::new(
            "daemon.http_public",
            format!(
                "daemon.http_listen {listen} is reachable from other machines and [channels.http] would serve the API there: set daemon.http_public = true if you mean it, and put a reverse proxy with TLS in front"
            ),
        ));
    }
}

/// What a valid configuration leaves weaker than its owner may expect, one line each with its
/// key: `hearth check` prints them, `hearth run` logs them at start.
pub fn warnings(config: &Config) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(listen) = config.daemon.http_listen
        && !listen.ip().is_loopback()
    {
        warnings.push(format!(
            "daemon.http_listen: {listen} is reachable from other machines, and /healthz and /metrics have no login; keep it on 127.0.0.1 and reach it through an SSH tunnel or a reverse proxy with TLS"
        ));
        #[cfg(feature = "http")]
        if config.channels.http.is_some() {
            warnings.push(format!(
                "channels.http: the HTTP API on {listen} speaks plain HTTP and tokens travel in its Authorization header: put TLS in front (a reverse proxy such as Caddy or nginx) before clients reach it over a network"
            ));
        }
    }
    // Budget warnings and notes about failed schedules go to the owner's chat; a channel that
    // shows only answers to its own events (the HTTP API) is none.
    let owners = config.daemon.owner_identities();
    if !owners.is_empty()
        && owners
            .iter()
            .all(|(channel, _)| !crate::channels::sends_unasked(channel))
    {
        let names: Vec<String> = owners.iter().map(|(c, u)| format!("{c}:{u}")).collect();
        warnings.push(format!(
            "daemon.owner: the owner can be reached only as {}, which shows messages only as answers to a client's turns: budget warnings and notes about failed schedules reach nobody. Add the owner's chat identity too (daemon.owner = [\"telegram:ID\", …])",
            names.join(", ")
        ));
    }
    struct Collect(Vec<String>);
    impl EachChannel for Collect {
        fn built<C: ChannelConfig>(&mut self, section: &mut Option<C>) {
            for warning in section.iter().flat_map(ChannelConfig::warnings) {
                let mut key = format!("channels.{}", C::NAME);
                if !warning.key.is_empty() {
                    key = format!("{key}.{}", warning.key);
                }
                self.0.push(format!("{key}: {}", warning.message));
            }
        }
        fn not_built(&mut self, _name: &'static str) {}
    }
    let mut collect = Collect(Vec::new());
    crate::channels::each(&mut config.channels.clone(), &mut collect);
    warnings.extend(collect.0);
    warnings
}

/// What the owner and schedule target checks need to know of the channel crates.
#[derive(Default)]
struct Platforms {
    built: Vec<Platform>,
    not_built: Vec<&'static str>,
}

/// A channel crate built into this binary.
struct Platform {
    name: &'static str,
    /// Whether the configuration has its section.
    configured: bool,
    user_id: fn(&str) -> Result<(), String>,
    chat_id: fn(&str) -> Result<(), String>,
    /// [`ChannelConfig::SENDS_UNASKED`]: a schedule can send here.
    sends_unasked: bool,
}

impl Platforms {
    fn get(&self, name: &str) -> Option<&Platform> {
        self.built.iter().find(|p| p.name == name)
    }
}

/// What the owner and schedule target checks need to know of each channel crate.
struct Walk(Platforms);

impl EachChannel for Walk {
    fn built<C: ChannelConfig>(&mut self, section: &mut Option<C>) {
        self.0.built.push(Platform {
            name: C::NAME,
            configured: section.is_some(),
            user_id: C::check_user_id,
            chat_id: C::check_chat_id,
            sends_unasked: C::SENDS_UNASKED,
        });
    }

    fn not_built(&mut self, name: &'static str) {
        self.0.not_built.push(name);
    }
}

/// The channel crates of this build, and which of them `channels` configures.
fn channels(channels: &ChannelsConfig) -> Platforms {
    let mut walk = Walk(Platforms::default());
    // The walk hands out the sections mutably (the loader fills them); this reads a copy.
    crate::channels::each(&mut channels.clone(), &mut walk);
    walk.0
}

/// `daemon.approvals_to`: an identity of the owner on a configured channel, the chat routed
/// prompts are sent to.
fn approvals_to(text: &str, daemon: &DaemonConfig, platforms: &Platforms) -> Result<(), String> {
    let (channel, id) = identity(text, platforms)?;
    if !platforms.get(channel).is_some_and(|p| p.configured) {
        return Err(format!(
            "`{text}` names the channel `{channel}`, which is not configured here, so prompts could not be sent there: \
             add a [channels.{channel}] section, or name the owner's identity on a configured channel"
        ));
    }
    let owners = daemon.owner_identities();
    if owners.is_empty() {
        return Err(format!(
            "`{text}` must be one of the owner's identities, and daemon.owner is not set: add it there too"
        ));
    }
    if !owners.contains(&(channel, id)) {
        let listed: Vec<String> = owners.iter().map(|(c, u)| format!("{c}:{u}")).collect();
        return Err(format!(
            "`{text}` is not one of daemon.owner's identities ({}): approval prompts go only to the owner's own chat",
            listed.join(", ")
        ));
    }
    Ok(())
}

/// Splits `channel:user_id` (an `owner` entry, an identity given to `hearth pair`) into its
/// parts: the channel must be known and the id look like one of that channel's ids.
pub fn parse_identity(text: &str) -> Result<(&str, &str), String> {
    identity(text, &channels(&ChannelsConfig::default()))
}

/// [`parse_identity`] with the channel crates of this build already walked.
fn identity<'t>(text: &'t str, platforms: &Platforms) -> Result<(&'t str, &'t str), String> {
    let Some((channel, id)) = text.split_once(':') else {
        return Err(format!(
            "`{text}` is not an identity: expected `channel:user_id`, e.g. `telegram:123456789`"
        ));
    };
    let mut known = crate::channels::names();
    known.push(TERMINAL);
    if !known.contains(&channel) {
        return Err(format!(
            "unknown channel `{channel}`: expected one of {}",
            known.join(", ")
        ));
    }
    if platforms.not_built.contains(&channel) {
        return Err(crate::channels::not_built(channel));
    }
    if id.is_empty() {
        return Err(format!("`{text}` has no user id after `{channel}:`"));
    }
    match platforms.get(channel) {
        Some(platform) => (platform.user_id)(id).map(|()| (channel, id)),
        // `terminal`: any name.
        None => Ok((channel, id)),
    }
}

/// Checks a schedule target the way `[[schedules]] target` is checked: a channel built into
/// this binary and configured, and an id it can send to. `hearth schedule add` calls it too, so
/// the file and the command line accept the same targets.
pub fn check_schedule_target(text: &str, channels: &ChannelsConfig) -> Result<(), String> {
    // Only which channels exist matters here; their sections were checked when loaded.
    target(text, &self::channels(channels), &[])
}

/// `channel:chat` for a schedule: the channel must be configured, or nothing could be sent.
fn target(text: &str, platforms: &Platforms, failed: &[String]) -> Result<(), String> {
    let Some((channel, chat)) = text.split_once(':') else {
        return Err(format!(
            "`{text}` is not a target: expected `channel:chat_id`, e.g. `telegram:123456789`"
        ));
    };
    if channel == TERMINAL {
        return Err(format!(
            "`{text}`: the terminal is `hearth chat`'s, which is seldom running when a schedule fires; send to a chat channel, e.g. `telegram:123456789`"
        ));
    }
    let platform = platforms.get(channel);
    let configured = match channel {
        _ if platforms.not_built.contains(&channel) => {
            return Err(crate::channels::not_built(channel));
        }
        _ => match platform {
            Some(platform) => platform.configured,
            None => {
                return Err(format!(
                    "unknown channel `{channel}`: expected one of {}",
                    crate::channels::names().join(", ")
                ));
            }
        },
    };
    if chat.is_empty() {
        return Err(format!("`{text}` has no chat id after `{channel}:`"));
    }
    if let Some(platform) = platform {
        unasked(text, platform, platforms)?;
        (platform.chat_id)(chat)?;
    }
    if !configured && !failed.iter().any(|c| c == channel) {
        return Err(format!(
            "channel `{channel}` is not configured: add a [channels.{channel}] section"
        ));
    }
    Ok(())
}

/// Whether a schedule may send to `channel:chat` unasked: a channel that only answers its
/// clients' own requests is refused, naming the configured channels that can receive. Channels
/// this build does not know (a test's own) are not its business and pass.
pub fn check_unasked_target(text: &str, channels: &ChannelsConfig) -> Result<(), String> {
    let platforms = self::channels(channels);
    let channel = text.split_once(':').map_or(text, |(channel, _)| channel);
    match platforms.get(channel) {
        Some(platform) => unasked(text, platform, &platforms),
        None => Ok(()),
    }
}

/// [`check_unasked_target`] for a channel crate built in.
fn unasked(text: &str, platform: &Platform, platforms: &Platforms) -> Result<(), String> {
    if platform.sends_unasked {
        return Ok(());
    }
    let receivers: Vec<&str> = platforms
        .built
        .iter()
        .filter(|p| p.sends_unasked && p.configured)
        .map(|p| p.name)
        .collect();
    let choice = if receivers.is_empty() {
        let built: Vec<&str> = platforms
            .built
            .iter()
            .filter(|p| p.sends_unasked)
            .map(|p| p.name)
            .collect();
        format!(
            "no channel configured here can: add a section for one of {}",
            built.join(", ")
        )
    } else {
        format!("send to one of the configured {}", receivers.join(", "))
    };
    Err(format!(
        "`{text}`: the {} channel only answers its clients' own requests, so a schedule's answer sent there would reach nobody; {choice} (e.g. `{}:<chat id>`)",
        platform.name,
        receivers.first().copied().unwrap_or("telegram")
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::config::load_from_str;

    /// Loads `text` with `vars` as the environment and returns its errors as (key, message).
    fn errors(text: &str, vars: &[(&str, &str)]) -> Vec<(String, String)> {
        let env: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        match load_from_str(text, "hearth.toml", &env) {
            Ok(config) => panic!("expected errors, got {config:?}"),
            Err(errors) => errors
                .iter()
                .inspect(|e| assert_eq!(e.source, "hearth.toml"))
                .map(|e| (e.key.clone(), e.message.clone()))
                .collect(),
        }
    }

    /// Asserts that loading `text` gives exactly one error, at `key`, mentioning `message`.
    fn one(text: &str, vars: &[(&str, &str)], key: &str, message: &str) {
        let errors = errors(text, vars);
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert_eq!(errors[0].0, key, "{errors:#?}");
        assert!(errors[0].1.contains(message), "{errors:#?}");
    }

    #[test]
    fn compact_to_is_a_share_below_compact_at() {
        one(
            "[context]\ncompact_to = 0.7\n",
            &[],
            "context.compact_to",
            "below context.compact_at",
        );
        one(
            "[context]\ncompact_at = 0.5\ncompact_to = 0\n",
            &[],
            "context.compact_to",
            "above 0",
        );
        let fine = "[context]\ncompact_at = 0.8\ncompact_to = 0.5\n";
        if let Err(errors) = load_from_str(fine, "hearth.toml", &HashMap::new()) {
            panic!("{errors}");
        }
    }

    #[test]
    fn transcription_prices_are_zero_or_more() {
        let section = |price: &str| {
            format!("[transcription]\nbase_url = \"http://127.0.0.1:9000/v1\"\n{price}\n")
        };
        one(
            &section("price_per_minute = -0.006"),
            &[],
            "transcription.price_per_minute",
            "0 or more",
        );
        one(
            &section("price_output_per_mtok = nan"),
            &[],
            "transcription.price_output_per_mtok",
            "0 or more",
        );
        let fine = section("price_per_minute = 0.006");
        if let Err(errors) = load_from_str(&fine, "hearth.toml", &HashMap::new()) {
            panic!("{errors}");
        }
    }

    #[test]
    fn web_search_needs_an_endpoint_and_brave_a_key() {
        let section = |body: &str| format!("[tools.web_search]\n{body}");
        one(
            &section("backend = \"searxng\"\n"),
            &[],
            "tools.web_search.base_url",
            "SearXNG needs the instance's address",
        );
        one(
            &section("backend = \"searxng\"\nbase_url = \"searx.lan\"\n"),
            &[],
            "tools.web_search.base_url",
            "searx.lan",
        );
        one(
            &section(
                "backend = \"searxng\"\nbase_url = \"http://127.0.0.1:8888\"\napi_key_env = \"K\"\n",
            ),
            &[],
            "tools.web_search.api_key_env",
            "SearXNG takes no API key",
        );
        one(
            &section("backend = \"brave\"\n"),
            &[],
            "tools.web_search.api_key_env",
            "subscription token",
        );
        one(
            &section("backend = \"brave\"\napi_key_env = \"BRAVE_KEY\"\n"),
            &[],
            "tools.web_search.api_key_env",
            "BRAVE_KEY is not set",
        );
        one(
            &section("backend = \"brave\"\napi_key_env = \"BRAVE_KEY\"\nmax_results = 50\n"),
            &[("BRAVE_KEY", "token")],
            "tools.web_search.max_results",
            "between 1 and 20",
        );
        let good = section("backend = \"brave\"\napi_key_env = \"BRAVE_KEY\"\n");
        let env: HashMap<String, String> = [("BRAVE_KEY".to_string(), "token".to_string())].into();
        let config = load_from_str(&good, "hearth.toml", &env).expect("valid");
        let search = config.tools.web_search.expect("section");
        assert_eq!(search.base_url(), Some("https://api.search.brave.com"));
        assert_eq!(search.max_results, 8);
        let unknown = errors(&section("backend = \"bing\"\n"), &[]);
        assert!(
            unknown
                .iter()
                .any(|(key, message)| key.starts_with("tools") && message.contains("bing")),
            "{unknown:?}"
        );
    }

    fn provider(extra: &str) -> String {
        format!(
            "[[providers]]\nname = \"local\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1\"\nmodel = \"llama3.1\"\n{extra}\n"
        )
    }

    #[cfg(feature = "telegram")]
    const TELEGRAM: &str = "[channels.telegram]\ntoken_env = \"TG\"\n";

    #[cfg(feature = "telegram")]
    fn schedule(extra: &str) -> String {
        let mut text = format!("{TELEGRAM}[[schedules]]\nagent = \"general\"\nprompt = \"hi\"\n");
        for (key, default) in [
            ("name", "\"s\""),
            ("cron", "\"0 30 7 * * *\""),
            ("target", "\"telegram:1\""),
        ] {
            if !extra.contains(&format!("{key} =")) {
                text.push_str(&format!("{key} = {default}\n"));
            }
        }
        text + extra + "\n"
    }

    #[test]
    fn daemon_values() {
        let cases = [
            (
                "timezone = \"Europe/Berln\"",
                "daemon.timezone",
                "unknown timezone `Europe/Berln`",
            ),
            (
                "database_url = \"mysql://x\"",
                "daemon.database_url",
                "expected `sqlite://…` or `postgres://…`",
            ),
            (
                "http_listen = \"localhost\"",
                "daemon.http_listen",
                "is not a socket address",
            ),
            (
                "owner = \"telegram\"",
                "daemon.owner",
                "expected `channel:user_id`",
            ),
            (
                "owner = \"slack:U1\"",
                "daemon.owner",
                "unknown channel `slack`",
            ),
            (
                "max_concurrent_conversations = 0",
                "daemon.max_concurrent_conversations",
                "greater than 0",
            ),
            (
                "max_reply_chars = 50",
                "daemon.max_reply_chars",
                "at least 200",
            ),
        ];
        for (line, key, message) in cases {
            one(&format!("[daemon]\n{line}\n"), &[], key, message);
        }
    }

    #[cfg(feature = "http")]
    #[test]
    fn the_http_api_needs_a_listener_and_consent_to_be_public() {
        one(
            "[daemon]\nhttp_listen = \"\"\n[channels.http]\n",
            &[],
            "channels.http",
            "served on daemon.http_listen",
        );
        one(
            "[daemon]\nhttp_listen = \"0.0.0.0:8787\"\n[channels.http]\n",
            &[],
            "daemon.http_public",
            "reverse proxy with TLS",
        );
        one(
            "[daemon]\nhttp_listen = \"127.0.0.1:8787\"\n[channels.http]\nconfirm_wait_secs = 7200\n",
            &[],
            "channels.http.confirm_wait_secs",
            "at most 3600",
        );
        let public =
            "[daemon]\nhttp_listen = \"0.0.0.0:8787\"\nhttp_public = true\n[channels.http]\n";
        let config = load_from_str(public, "hearth.toml", &HashMap::new()).expect("valid");
        let warnings = super::warnings(&config);
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with("channels.http:") && w.contains("put TLS in front")),
            "{warnings:#?}"
        );
        let local = "[daemon]\nhttp_listen = \"127.0.0.1:8787\"\n[channels.http]\n";
        let config = load_from_str(local, "hearth.toml", &HashMap::new()).expect("valid");
        assert!(super::warnings(&config).is_empty());
    }

    #[cfg(all(feature = "http", feature = "telegram"))]
    #[test]
    fn an_owner_reachable_only_over_http_is_a_warning() {
        let config = |owner: &str| {
            let text = format!(
                "[daemon]\nowner = {owner}\n[channels.http]\n[channels.telegram]\ntoken_env = \"TG\"\n"
            );
            let env = HashMap::from([("TG".to_string(), "123:abc".to_string())]);
            load_from_str(&text, "hearth.toml", &env).expect("valid")
        };
        let only_http = super::warnings(&config(r#"["http:laptop", "http:phone"]"#));
        assert!(
            only_http.iter().any(|w| w.starts_with("daemon.owner:")
                && w.contains("http:laptop, http:phone")
                && w.contains("budget warnings")),
            "{only_http:#?}"
        );
        let with_chat = super::warnings(&config(r#"["http:laptop", "telegram:42"]"#));
        assert!(
            !with_chat.iter().any(|w| w.starts_with("daemon.owner:")),
            "{with_chat:#?}"
        );
    }

    // Cases of `daemon_values`, on their own because they need the channel built in.
    #[cfg(feature = "matrix")]
    #[test]
    fn daemon_owner_on_matrix() {
        one(
            "[daemon]\nowner = \"matrix:me\"\n",
            &[],
            "daemon.owner",
            "expected `@user:server`",
        );
    }

    #[cfg(feature = "email")]
    #[test]
    fn daemon_owner_on_email() {
        one(
            "[daemon]\nowner = \"email:me\"\n",
            &[],
            "daemon.owner",
            "expected `name@domain`",
        );
    }

    // A case of `daemon_values`, on its own because it needs the Telegram channel built in.
    #[cfg(feature = "telegram")]
    #[test]
    fn daemon_owner_on_telegram() {
        one(
            "[daemon]\nowner = \"telegram:me\"\n",
            &[],
            "daemon.owner",
            "expected a number",
        );
    }

    #[cfg(feature = "telegram")]
    #[test]
    fn approvals_to_names_a_configured_channel_and_an_owner_identity() {
        let daemon = |lines: &str| format!("[daemon]\n{lines}\n{TELEGRAM}");
        let vars = [("TG", "123:abc")];
        let env: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let fine = daemon(
            "owner = [\"telegram:42\", \"email:me@example.org\"]\napprovals_to = \"telegram:42\"",
        );
        let config = load_from_str(&fine, "hearth.toml", &env).expect("valid");
        assert_eq!(config.daemon.approvals_to(), Some(("telegram", "42")));
        for (lines, message) in [
            (
                "owner = \"telegram:42\"\napprovals_to = \"telegram\"",
                "expected `channel:user_id`",
            ),
            (
                "owner = \"telegram:42\"\napprovals_to = \"telegram:me\"",
                "expected a number",
            ),
            ("approvals_to = \"telegram:42\"", "daemon.owner is not set"),
            (
                "owner = \"telegram:42\"\napprovals_to = \"telegram:43\"",
                "not one of daemon.owner's identities (telegram:42)",
            ),
            (
                "owner = [\"telegram:42\", \"terminal:me\"]\napprovals_to = \"terminal:me\"",
                "`terminal`, which is not configured",
            ),
        ] {
            one(&daemon(lines), &vars, "daemon.approvals_to", message);
        }
        #[cfg(feature = "discord")]
        one(
            &daemon("owner = [\"telegram:42\", \"discord:1\"]\napprovals_to = \"discord:1\""),
            &vars,
            "daemon.approvals_to",
            "`discord`, which is not configured",
        );
    }

    #[test]
    fn daemon_values_that_are_fine() {
        let env = HashMap::new();
        for line in [
            "database_url = \"postgres://u@localhost/hearth\"",
            "database_url = \"postgresql://u@localhost/hearth\"",
            "database_url = \"sqlite::memory:\"",
            "http_listen = \"\"",
            "http_listen = \"[::1]:8787\"",
            "owner = \"terminal:me\"",
            "owner = \"matrix:@me:example.org\"",
            "max_reply_chars = 200",
            "max_reply_chars = 100000",
        ]
        .into_iter()
        .filter(|line| cfg!(feature = "matrix") || !line.contains("matrix:"))
        {
            let text = format!("[daemon]\n{line}\n");
            if let Err(errors) = load_from_str(&text, "hearth.toml", &env) {
                panic!("{line}: {errors}");
            }
        }
    }

    #[test]
    fn owner_is_one_identity_or_a_list_and_each_entry_is_checked() {
        let env = HashMap::new();
        let one_owner = load_from_str("[daemon]\nowner = \"telegram:42\"\n", "hearth.toml", &env)
            .expect("a single string still works");
        assert_eq!(one_owner.daemon.owner_identities(), [("telegram", "42")]);
        let list = load_from_str(
            "[daemon]\nowner = [\"telegram:42\", \"email:me@example.org\", \"terminal:me\"]\n",
            "hearth.toml",
            &env,
        )
        .expect("a list works");
        assert_eq!(
            list.daemon.owner_identities(),
            [
                ("telegram", "42"),
                ("email", "me@example.org"),
                ("terminal", "me")
            ]
        );
        let empty = load_from_str("[daemon]\nowner = []\n", "hearth.toml", &env)
            .expect("an empty list means no owner");
        assert!(empty.daemon.owner_identities().is_empty());

        let errors = errors(
            "[daemon]\nowner = [\"telegram:42\", \"email:me\", \"telegram:42\", \"slack:U1\"]\n",
            &[],
        );
        assert_eq!(
            errors,
            [
                (
                    "daemon.owner[1]".to_string(),
                    "`me` is not an email address: expected `name@domain`".to_string()
                ),
                (
                    "daemon.owner[2]".to_string(),
                    "`telegram:42` is listed twice".to_string()
                ),
                (
                    "daemon.owner[3]".to_string(),
                    format!(
                        "unknown channel `slack`: expected one of {}, terminal",
                        crate::channels::names().join(", ")
                    )
                ),
            ]
        );
        one(
            "[daemon]\nowner = 42\n",
            &[],
            "daemon.owner",
            "expected an identity like \"telegram:123456789\" or an array of them, found an integer 42",
        );
        one(
            "[daemon]\nowner = [\"telegram:1\", 2]\n",
            &[],
            "daemon.owner[1]",
            "expected a string, found an integer 2",
        );
        // The environment can give a list too.
        let from_env = load_from_str(
            "",
            "hearth.toml",
            &[(
                "HEARTH_DAEMON__OWNER".to_string(),
                "[\"telegram:1\", \"discord:2\"]".to_string(),
            )]
            .into_iter()
            .collect(),
        )
        .expect("valid");
        assert_eq!(
            from_env.daemon.owner_identities(),
            [("telegram", "1"), ("discord", "2")]
        );
    }

    #[test]
    fn router_and_runtime_values() {
        one(
            "[router]\ndefault_agent = \"\"\n",
            &[],
            "router.default_agent",
            "must not be empty",
        );
        one(
            "[runtime]\ntool_timeout_secs = 0\n",
            &[],
            "runtime.tool_timeout_secs",
            "greater than 0",
        );
    }

    #[test]
    fn tools_values() {
        one(
            "[tools]\nconfirmation_timeout_secs = 0\n",
            &[],
            "tools.confirmation_timeout_secs",
            "greater than 0",
        );
        one(
            "[tools]\nglobal_calls_per_minute = 0\n",
            &[],
            "tools.global_calls_per_minute",
            "greater than 0",
        );
        one(
            "[tools]\nallowed_private_hosts = [\"10.0.0.0/99\"]\n",
            &[],
            "tools.allowed_private_hosts[0]",
            "CIDR",
        );
        one(
            "[tools]\nautonomy = \"reckless\"\n",
            &[],
            "tools.autonomy",
            "reckless",
        );
    }

    #[test]
    fn provider_values() {
        let cases = [
            (
                "base_url = \"ftp://x\"",
                "providers[0].base_url",
                "has the scheme `ftp`: expected one of http://, https://",
            ),
            (
                "base_url = \"127.0.0.1:11434\"",
                "providers[0].base_url",
                "expected one starting with http://, https://",
            ),
            (
                "base_url = \"localhost/v1\"",
                "providers[0].base_url",
                "is not a valid URL",
            ),
            (
                "timeout_secs = 0",
                "providers[0].timeout_secs",
                "greater than 0",
            ),
            (
                "max_tokens = 0",
                "providers[0].max_tokens",
                "greater than 0",
            ),
            (
                "fallbacks = [\"local\"]",
                "providers[0].fallbacks",
                "cannot be its own fallback",
            ),
            (
                "fallbacks = [\"gpt\"]",
                "providers[0].fallbacks",
                "unknown provider `gpt`",
            ),
            (
                "api_key_env = \"OPENAI_API_KEY\"",
                "providers[0].api_key_env",
                "OPENAI_API_KEY is not set",
            ),
        ];
        for (line, key, message) in cases {
            // Later lines win in TOML only as errors, so replace the default line instead.
            let field = line.split(" =").next().expect("a key");
            let text: String = provider("")
                .lines()
                .filter(|l| !l.starts_with(&format!("{field} =")))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
                + line
                + "\n";
            one(&text, &[], key, message);
        }
        let empty_name = provider("").replace("name = \"local\"", "name = \"\"");
        one(&empty_name, &[], "providers[0].name", "must not be empty");
        let empty_model = provider("").replace("model = \"llama3.1\"", "model = \" \"");
        one(&empty_model, &[], "providers[0].model", "must not be empty");
    }

    #[test]
    fn provider_names_are_unique() {
        let text = provider("") + provider("").as_str();
        one(
            &text,
            &[],
            "providers[1].name",
            "duplicate provider name `local`",
        );
    }

    #[test]
    fn fallback_to_a_provider_that_failed_to_parse_is_not_reported_twice() {
        let text = provider("fallbacks = [\"big\"]") + "[[providers]]\nname = \"big\"\n";
        let errors = errors(&text, &[]);
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert_eq!(errors[0].0, "providers[1]");
    }

    #[test]
    fn secrets_resolve_from_env_or_credentials_directory() {
        let text = provider("api_key_env = \"KEY\"");
        let env = |vars: &[(&str, &str)]| -> HashMap<String, String> {
            vars.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(load_from_str(&text, "f", &env(&[("KEY", "sk")])).is_ok());

        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("KEY"), "sk\n").expect("write credential");
        let credentials = dir.path().to_str().expect("utf-8 temp path");
        let vars = env(&[("CREDENTIALS_DIRECTORY", credentials)]);
        assert!(load_from_str(&text, "f", &vars).is_ok());

        one(
            &text,
            &[("KEY", "")],
            "providers[0].api_key_env",
            "KEY is not set",
        );
        let blank = provider("api_key_env = \"\"");
        one(
            &blank,
            &[],
            "providers[0].api_key_env",
            "must name an environment variable",
        );
    }

    #[cfg(feature = "telegram")]
    #[test]
    fn telegram_and_discord() {
        one(
            TELEGRAM,
            &[],
            "channels.telegram.token_env",
            "TG is not set",
        );
        let text = format!("{TELEGRAM}api_url = \"api.telegram.org\"\n");
        one(
            &text,
            &[("TG", "t")],
            "channels.telegram.api_url",
            "is not a valid URL",
        );
        let discord = "[channels.discord]\ntoken_env = \"DC\"\napi_url = \"ws://x\"\n";
        let errors = errors(discord, &[]);
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert_eq!(errors[0].0, "channels.discord.token_env");
        assert!(errors[0].1.contains("DC is not set"));
        assert_eq!(errors[1].0, "channels.discord.api_url");
        assert!(errors[1].1.contains("scheme `ws`"));
    }

    // The section's own checks are in hearth-matrix (config.rs); this one shows the daemon
    // prefixes their keys.
    #[cfg(feature = "matrix")]
    #[test]
    fn matrix() {
        let text = "[channels.matrix]\nhomeserver = \"matrix.example.org\"\nuser = \"hearth\"\npassword_env = \"MX\"\nallowed_users = [\"@me:example.org\", \"me\"]\n";
        let errors = errors(text, &[]);
        let keys: Vec<&str> = errors.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "channels.matrix.homeserver",
                "channels.matrix.user",
                "channels.matrix.password_env",
                "channels.matrix.allowed_users[1]",
            ],
            "{errors:#?}"
        );
        assert!(errors[1].1.contains("expected `@user:server`"));
        assert!(errors[2].1.contains("MX is not set"));
    }

    #[cfg(all(feature = "telegram", feature = "discord"))]
    #[test]
    fn schedule_values() {
        let secret = [("TG", "t")];
        let cases = [
            (
                "cron = \"30 7 * * *\"",
                "schedules[0].cron",
                "the seconds field comes first: try `0 30 7 * * *`",
            ),
            (
                "cron = \"0 61 7 * * *\"",
                "schedules[0].cron",
                "Minutes must be less than",
            ),
            (
                "cron = \"every day\"",
                "schedules[0].cron",
                "invalid cron expression `every day`",
            ),
            (
                "timezone = \"Berlin\"",
                "schedules[0].timezone",
                "unknown timezone `Berlin`",
            ),
            (
                "target = \"telegram\"",
                "schedules[0].target",
                "expected `channel:chat_id`",
            ),
            (
                "target = \"sms:1\"",
                "schedules[0].target",
                "unknown channel `sms`",
            ),
            (
                "target = \"terminal:local\"",
                "schedules[0].target",
                "the terminal is `hearth chat`'s",
            ),
            (
                "target = \"telegram:me\"",
                "schedules[0].target",
                "expected a number",
            ),
            (
                "target = \"discord:1\"",
                "schedules[0].target",
                "channel `discord` is not configured",
            ),
            ("name = \"\"", "schedules[0].name", "must not be empty"),
        ];
        for (line, key, message) in cases {
            one(&schedule(line), &secret, key, message);
        }
        let bad_confirmation = schedule("on_confirmation = \"sometimes\"");
        one(
            &bad_confirmation,
            &secret,
            "schedules[0].on_confirmation",
            "expected one of `deny`, `ask`, `allow`",
        );
    }

    #[cfg(feature = "telegram")]
    #[test]
    fn target_on_a_channel_that_failed_to_parse_is_not_reported_twice() {
        let text = schedule("").replace("token_env = \"TG\"", "token_env = 5");
        one(
            &text,
            &[],
            "channels.telegram.token_env",
            "expected a string",
        );
    }

    #[cfg(all(feature = "telegram", feature = "http"))]
    #[test]
    fn a_schedule_target_on_the_http_channel_is_refused_naming_who_can_receive() {
        // The HTTP channel configured, the target well formed: still nobody would read it.
        let text = format!("[channels.http]\n{}", schedule("target = \"http:laptop\""));
        one(
            &text,
            &[("TG", "t")],
            "schedules[0].target",
            "only answers its clients' own requests, so a schedule's answer sent there would reach nobody; send to one of the configured telegram",
        );
        // With no channel that can receive, the message says which to add.
        let channels = crate::config::ChannelsConfig::default();
        let message = super::check_schedule_target("http:laptop", &channels).expect_err("refused");
        assert!(
            message.contains("no channel configured here can: add a section for one of")
                && message.contains("telegram"),
            "{message}"
        );
    }

    #[cfg(feature = "telegram")]
    #[test]
    fn schedule_names_are_unique() {
        let text = schedule("")
            + "[[schedules]]\nname = \"s\"\ncron = \"0 0 8 * * *\"\nagent = \"a\"\nprompt = \"p\"\ntarget = \"telegram:1\"\n";
        one(
            &text,
            &[("TG", "t")],
            "schedules[1].name",
            "duplicate schedule name `s`",
        );
    }
}
