//! How many tokens a model can read: the provider's `context_window` when configured, else a
//! table of known model families, else a conservative 8,192.

use crate::config::ProviderConfig;

/// The window assumed for a model hearth does not know: small enough for most local models.
pub const UNKNOWN_MODEL_WINDOW: u32 = 8_192;

/// Model name prefixes (lower case, after any `vendor/` part) and their windows; the longest
/// matching prefix wins, so `gpt-4o` beats `gpt-4`.
const FAMILIES: &[(&str, u32)] = &[
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude", 200_000),
    ("gemini", 1_048_576),
    ("deepseek", 65_536),
    ("llama3.1", 131_072),
    ("llama3.2", 131_072),
    ("llama3.3", 131_072),
    ("llama-3.1", 131_072),
    ("llama-3.2", 131_072),
    ("llama-3.3", 131_072),
    ("llama3", 8_192),
    ("qwen2.5", 32_768),
    ("qwen3", 40_960),
    ("mistral-large", 131_072),
    ("mistral-small", 32_768),
    ("mistral-nemo", 131_072),
    ("mistral", 32_768),
    ("mixtral", 32_768),
    ("gemma3", 131_072),
    ("gemma2", 8_192),
    ("phi3", 4_096),
    ("phi4", 16_384),
];

/// The window of a model by name: `openai/gpt-4o-mini`, `llama3.1:8b` and `gpt-4o` all work.
pub fn known_window(model: &str) -> Option<u32> {
    let name = model.rsplit('/').next().unwrap_or(model).to_lowercase();
    FAMILIES
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, window)| *window)
}

/// The window of `config`'s model (`model` when the agent names another one).
pub fn context_window(config: &ProviderConfig, model: Option<&str>) -> u32 {
    config.context_window.unwrap_or_else(|| {
        let model = model.filter(|m| *m != "default").unwrap_or(&config.model);
        known_window(model).unwrap_or(UNKNOWN_MODEL_WINDOW)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_matched_by_the_longest_prefix() {
        assert_eq!(known_window("gpt-4o-mini"), Some(128_000));
        assert_eq!(known_window("gpt-4"), Some(8_192));
        assert_eq!(known_window("openai/GPT-4.1-mini"), Some(1_047_576));
        assert_eq!(known_window("llama3.1:8b"), Some(131_072));
        assert_eq!(known_window("llama3:8b"), Some(8_192));
        assert_eq!(known_window("claude-sonnet-4-5"), Some(200_000));
        assert_eq!(known_window("my-own-finetune"), None);
    }
}
