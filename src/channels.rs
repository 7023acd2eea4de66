//! The chat channels hearth has, and what the daemon does with their config sections.
//!
//! Each channel crate owns its `[channels.<name>]` section: the type implements
//! [`ChannelConfig`] (parse, check, ids, build), and is a cargo feature of hearth. The
//! `channels!` list below is the one place that names them: it generates both the
//! [`ChannelsConfig`] fields and [`each`], which walks them all, built into this binary or not;
//! the config loader parses with it, `hearth check` checks with it and `hearth run` builds with
//! it ([`build`]). Adding a channel crate is one line in that list (CONTRIBUTING.md,
//! "Adding a channel").

use std::path::Path;
use std::sync::Arc;

use hearth_channel::{
    BuildContext, Channel, ChannelConfig, ProcessEnv, SecretSource, channel_data_dir,
};

/// Something done once for each channel crate, with its section type when it is built in.
pub(crate) trait EachChannel {
    /// A channel compiled into this build, with its section of the configuration.
    #[allow(
        dead_code,
        reason = "never called in a build without any channel crate"
    )]
    fn built<C: ChannelConfig>(&mut self, section: &mut Option<C>);

    /// A channel whose cargo feature this build was made without.
    #[allow(dead_code, reason = "never called when every channel feature is on")]
    fn not_built(&mut self, name: &'static str);
}

/// `channels! { "<feature>" => <field>: <section type>, … }` generates [`ChannelsConfig`] (one
/// optional section per channel crate, behind its feature) and [`each`] (the walk over them, in
/// the order `hearth check` lists them). The feature, the field and the channel's `NAME` are the
/// same word.
macro_rules! channels {
    ($($name:literal => $field:ident: $section:ty),* $(,)?) => {
        /// `[channels.*]`: each chat platform is enabled by the presence of its section. A
        /// platform's section type belongs to its channel crate, which is a cargo feature of
        /// hearth.
        #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct ChannelsConfig {
            $(
                #[cfg(feature = $name)]
                pub $field: Option<$section>,
            )*
        }

        /// Walks every channel crate hearth has: its section when its feature is on, its name
        /// otherwise.
        // `channels` is unused in a build without any channel crate.
        #[allow(unused_variables)]
        pub(crate) fn each(channels: &mut ChannelsConfig, each: &mut impl EachChannel) {
            $(
                #[cfg(feature = $name)]
                each.built(&mut channels.$field);
                #[cfg(not(feature = $name))]
                each.not_built($name);
            )*
        }
    };
}

channels! {
    "telegram" => telegram: hearth_telegram::TelegramConfig,
    "discord" => discord: hearth_discord::DiscordConfig,
    "matrix" => matrix: hearth_matrix::MatrixConfig,
    "email" => email: hearth_email::EmailConfig,
    "http" => http: hearth_http::HttpConfig,
}

/// Every channel name a `[channels.<name>]` section may have: the channel crates (built in or
/// not).
pub(crate) fn names() -> Vec<&'static str> {
    struct Names(Vec<&'static str>);
    impl EachChannel for Names {
        fn built<C: ChannelConfig>(&mut self, _section: &mut Option<C>) {
            self.0.push(C::NAME);
        }
        fn not_built(&mut self, name: &'static str) {
            self.0.push(name);
        }
    }
    let mut names = Names(Vec::new());
    each(&mut ChannelsConfig::default(), &mut names);
    names.0
}

/// Whether hearth can send to the channel called `name` unasked
/// ([`ChannelConfig::SENDS_UNASKED`]): where it cannot, the daemon's own notices to the owner go
/// elsewhere. True for a name no built-in channel has.
pub(crate) fn sends_unasked(name: &str) -> bool {
    struct Find<'a> {
        name: &'a str,
        sends_unasked: bool,
    }
    impl EachChannel for Find<'_> {
        fn built<C: ChannelConfig>(&mut self, _section: &mut Option<C>) {
            if C::NAME == self.name {
                self.sends_unasked = C::SENDS_UNASKED;
            }
        }
        fn not_built(&mut self, _name: &'static str) {}
    }
    let mut find = Find {
        name,
        sends_unasked: true,
    };
    each(&mut ChannelsConfig::default(), &mut find);
    find.sends_unasked
}

/// Why a section, owner or target naming the channel `name` cannot be used by this binary.
pub(crate) fn not_built(name: &str) -> String {
    format!("hearth was built without the {name} channel; rebuild with --features {name}")
}

/// A configured channel, built, with the platform user ids its allowlist names.
pub struct BuiltChannel {
    pub channel: Arc<dyn Channel>,
    pub allowed: Vec<String>,
    /// The HTTP channel's API, which the daemon mounts on its listener with the daemon's side
    /// of the channel (`http::backend`).
    #[cfg(feature = "http")]
    pub api: Option<hearth_http::HttpApi>,
}

impl std::fmt::Debug for BuiltChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltChannel")
            .field("channel", &self.channel.name())
            .field("allowed", &self.allowed)
            .finish()
    }
}

/// Builds every channel that has a section, with its secrets read from the environment or
/// `$CREDENTIALS_DIRECTORY` and its directory under `data_dir` (`channels/<name>/`). The error
/// names the section: `channels.telegram: …`.
pub fn build(channels: &ChannelsConfig, data_dir: &Path) -> Result<Vec<BuiltChannel>, String> {
    build_with(channels, data_dir, &ProcessEnv)
}

/// [`build`] with the secrets looked up in `secrets`.
/// What the channel crate called `name` says of `chat` as a chat id (a schedule's target
/// `name:chat`); `None` when no channel of that name is built in.
pub fn check_chat_id(name: &str, chat: &str) -> Option<Result<(), String>> {
    struct Check<'a> {
        name: &'a str,
        chat: &'a str,
        verdict: Option<Result<(), String>>,
    }
    impl EachChannel for Check<'_> {
        fn built<C: ChannelConfig>(&mut self, _section: &mut Option<C>) {
            if C::NAME == self.name {
                self.verdict = Some(C::check_chat_id(self.chat));
            }
        }
        fn not_built(&mut self, _name: &'static str) {}
    }
    let mut check = Check {
        name,
        chat,
        verdict: None,
    };
    each(&mut ChannelsConfig::default(), &mut check);
    check.verdict
}

/// Each configured channel's allowlist (`allowed_users`, as the channel spells user ids),
/// without building the channels: what the CLI syncs before it touches identities.
pub fn allowlists(channels: &ChannelsConfig) -> Vec<(String, Vec<String>)> {
    struct Collect(Vec<(String, Vec<String>)>);
    impl EachChannel for Collect {
        fn built<C: ChannelConfig>(&mut self, section: &mut Option<C>) {
            if let Some(section) = section {
                self.0.push((C::NAME.to_string(), section.allowed_users()));
            }
        }
        fn not_built(&mut self, _name: &'static str) {}
    }
    let mut collect = Collect(Vec::new());
    each(&mut channels.clone(), &mut collect);
    collect.0
}

pub fn build_with(
    channels: &ChannelsConfig,
    data_dir: &Path,
    secrets: &dyn SecretSource,
) -> Result<Vec<BuiltChannel>, String> {
    #[allow(dead_code, reason = "only read for a channel crate built in")]
    struct Build<'a> {
        data_dir: &'a Path,
        secrets: &'a dyn SecretSource,
        built: Result<Vec<BuiltChannel>, String>,
    }
    impl EachChannel for Build<'_> {
        fn built<C: ChannelConfig>(&mut self, section: &mut Option<C>) {
            let (Some(section), Ok(built)) = (section, &mut self.built) else {
                return;
            };
            let dir = channel_data_dir(self.data_dir, C::NAME);
            match section.build(BuildContext::new(self.secrets, &dir)) {
                Ok(channel) => built.push(BuiltChannel {
                    channel,
                    allowed: section.allowed_users(),
                    #[cfg(feature = "http")]
                    api: None,
                }),
                Err(err) => self.built = Err(format!("channels.{}: {err}", C::NAME)),
            }
        }
        // The config loader already refused a section for a channel that is not built in.
        fn not_built(&mut self, _name: &'static str) {}
    }

    let mut build = Build {
        data_dir,
        secrets,
        built: Ok(Vec::new()),
    };
    // The walk hands out the sections mutably (the loader fills them); building reads a copy.
    let mut sections = channels.clone();
    // The HTTP channel is built here, not by the walk: besides the channel, the daemon mounts
    // its API on the listener, and this is where both come from one section.
    #[cfg(feature = "http")]
    let http = sections.http.take().map(hearth_http::HttpChannel::new);
    each(&mut sections, &mut build);
    #[cfg(feature = "http")]
    if let (Some(http), Ok(built)) = (http, &mut build.built) {
        built.push(BuiltChannel {
            api: Some(http.api()),
            channel: Arc::new(http),
            allowed: Vec::new(),
        });
    }
    build.built
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_list_every_channel_whether_built_or_not() {
        assert_eq!(names(), ["telegram", "discord", "matrix", "email", "http"]);
    }

    #[cfg(feature = "telegram")]
    #[test]
    fn builds_the_configured_channels_with_their_allowlists() {
        let mut channels = ChannelsConfig::default();
        assert!(
            build_with(&channels, Path::new("/nonexistent"), &ProcessEnv)
                .expect("nothing to build")
                .is_empty()
        );

        let mut telegram = hearth_telegram::TelegramConfig::new("TG");
        telegram.allowed_users = vec![42];
        channels.telegram = Some(telegram);
        let secrets: std::collections::HashMap<String, String> =
            [("TG".to_string(), "123:abc".to_string())].into();
        let built = build_with(&channels, Path::new("/nonexistent"), &secrets).expect("built");
        assert_eq!(built.len(), 1);
        assert_eq!(built[0].channel.name(), "telegram");
        assert_eq!(built[0].allowed, ["42"]);

        let none = std::collections::HashMap::new();
        let err = build_with(&channels, Path::new("/nonexistent"), &none).expect_err("no token");
        assert!(err.starts_with("channels.telegram: token_env: "), "{err}");
    }
}
