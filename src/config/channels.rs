//! `[channels.<name>]`: each section belongs to its channel crate, which parses and checks it
//! ([`ChannelConfig`]); here they are read one by one, so that a section for a channel this
//! binary was built without is a clear error of its own.

use hearth_channel::ChannelConfig;
use toml::Value;

use super::load::{Parse, unknown_key, wrong_kind};
use super::{ChannelsConfig, Checks, Section};
use crate::channels::EachChannel;

impl Section for ChannelsConfig {
    fn parse(value: Value, parse: &mut Parse<'_>) -> Option<Self> {
        let Value::Table(sections) = value else {
            parse.problem(wrong_kind("channels", "a table", &value));
            return None;
        };
        let mut channels = ChannelsConfig::default();
        for (name, value) in sections {
            let key = format!("channels.{name}");
            let mut section = ChannelSection {
                name: &name,
                key: &key,
                value: Some(value),
                parse,
                parsed: false,
            };
            crate::channels::each(&mut channels, &mut section);
            let parsed = match section.value {
                // A channel crate of this name took the section.
                None => section.parsed,
                Some(_) => {
                    let known = crate::channels::names();
                    parse.problem(unknown_key(&key, &name, &known));
                    true
                }
            };
            if !parsed {
                parse.failed(name);
            }
        }
        Some(channels)
    }

    fn check(&self, checks: &mut Checks<'_>) {
        struct Check<'c, 'a> {
            checks: &'c mut Checks<'a>,
        }
        impl EachChannel for Check<'_, '_> {
            fn built<C: ChannelConfig>(&mut self, section: &mut Option<C>) {
                let Some(section) = section else {
                    return;
                };
                for problem in section.check(self.checks.env) {
                    let mut key = C::NAME.to_string();
                    if !problem.key.is_empty() {
                        key = format!("{key}.{}", problem.key);
                    }
                    self.checks.problem(&key, problem.message);
                }
            }
            fn not_built(&mut self, _name: &'static str) {}
        }
        // The walk hands out the sections mutably (the loader fills them); checking reads a copy.
        crate::channels::each(&mut self.clone(), &mut Check { checks });
    }
}

/// `[channels.<name>]` parsed into the section type of the channel crate called `name`, or
/// refused when that crate is not built in; left alone (`value` kept) for any other name.
struct ChannelSection<'s, 'p> {
    name: &'s str,
    key: &'s str,
    value: Option<Value>,
    parse: &'s mut Parse<'p>,
    /// Once a channel of this name took `value`: whether the section parsed.
    parsed: bool,
}

impl EachChannel for ChannelSection<'_, '_> {
    fn built<C: ChannelConfig>(&mut self, slot: &mut Option<C>) {
        if C::NAME == self.name
            && let Some(value) = self.value.take()
        {
            *slot = self.parse.table_at(value, self.key);
            self.parsed = slot.is_some();
        }
    }

    fn not_built(&mut self, name: &'static str) {
        if name == self.name && self.value.take().is_some() {
            let reason = crate::channels::not_built(name);
            self.parse
                .problem(super::load::Problem::new(self.key, reason));
        }
    }
}
