//! `[[feeds]]`: the RSS, Atom and JSON feeds the owner follows, read by the `read_feeds` tool
//! (docs: README, "Weather and feeds").

use std::collections::HashSet;

use hearth_channel::check_url;
use serde::{Deserialize, Serialize};
use toml::Value;

use super::load::Parse;
use super::{Checks, Section};

/// One `[[feeds]]` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedConfig {
    /// What the owner and the model call it ("Rust blog"); its items are kept under this name.
    pub name: String,
    /// The feed's address (http or https). It is the owner's choice, so it may be on the LAN
    /// or loopback, unlike URLs a model supplies to the web tools.
    pub url: String,
}

impl Section for Vec<FeedConfig> {
    fn parse(value: Value, parse: &mut Parse<'_>) -> Option<Self> {
        parse.array(value)
    }

    fn check(&self, checks: &mut Checks<'_>) {
        let mut seen = HashSet::new();
        for (i, feed) in self.iter().enumerate() {
            let name = feed.name.trim();
            if name.is_empty() {
                checks.problem(&format!("[{i}].name"), "must not be empty");
            } else if !seen.insert(name.to_lowercase()) {
                checks.problem(
                    &format!("[{i}].name"),
                    format!("duplicate feed name `{name}`"),
                );
            }
            if let Err(message) = check_url(&feed.url, &["http", "https"]) {
                checks.problem(&format!("[{i}].url"), message);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::config::load_from_str;

    #[test]
    fn feeds_load_and_bad_entries_are_named() {
        let text =
            "[[feeds]]\nname = \"Rust blog\"\nurl = \"https://blog.rust-lang.org/feed.xml\"\n";
        let config = load_from_str(text, "hearth.toml", &HashMap::new()).expect("loads");
        assert_eq!(config.feeds.len(), 1);
        assert_eq!(config.feeds[0].name, "Rust blog");

        let text = "[[feeds]]\nname = \"a\"\nurl = \"https://x.org/f\"\n\
                    [[feeds]]\nname = \"A\"\nurl = \"file:///etc/passwd\"\n\
                    [[feeds]]\nname = \" \"\nurl = \"https://x.org/g\"\n";
        let errors = load_from_str(text, "hearth.toml", &HashMap::new()).expect_err("bad feeds");
        let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["feeds[1].name", "feeds[1].url", "feeds[2].name"]);
        assert!(
            errors.to_string().contains("duplicate feed name"),
            "{errors}"
        );
    }
}
