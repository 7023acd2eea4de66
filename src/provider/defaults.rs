//! The provider hearth uses when the config names none, so `hearth chat` works with zero setup:
//! `OPENAI_API_KEY` (with `OPENAI_BASE_URL`), else `ANTHROPIC_API_KEY`, else an OpenAI-compatible
//! server at `OPENAI_BASE_URL`, else Ollama's default address. `HEARTH_MODEL` picks the model.

use crate::config::{ProviderConfig, ProviderKind};

const OLLAMA_URL: &str = "http://127.0.0.1:11434/v1";

/// The configured providers, or the guessed default and a hint to show when it does not answer.
pub fn effective_providers(configured: &[ProviderConfig]) -> (Vec<ProviderConfig>, Option<String>) {
    effective_providers_with(configured, |name| {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    })
}

pub fn effective_providers_with(
    configured: &[ProviderConfig],
    env: impl Fn(&str) -> Option<String>,
) -> (Vec<ProviderConfig>, Option<String>) {
    if !configured.is_empty() {
        return (configured.to_vec(), None);
    }
    let model = env("HEARTH_MODEL");
    let base = |kind, base_url: String, api_key_env: Option<&str>, default_model: &str| {
        let model = model.as_deref().unwrap_or(default_model);
        ProviderConfig {
            api_key_env: api_key_env.map(str::to_string),
            ..ProviderConfig::new("default", kind, &base_url, model)
        }
    };
    // The hint is for a local model server only: a cloud API that cannot be reached gets its
    // real cause (DNS, refused, TLS, 401), not advice to start Ollama.
    let local = env("OPENAI_API_KEY").is_none() && env("ANTHROPIC_API_KEY").is_none();
    let provider = if env("OPENAI_API_KEY").is_some() {
        let url = env("OPENAI_BASE_URL").unwrap_or_else(|| "https://api.openai.com/v1".into());
        base(
            ProviderKind::Openai,
            url,
            Some("OPENAI_API_KEY"),
            "gpt-4o-mini",
        )
    } else if env("ANTHROPIC_API_KEY").is_some() {
        base(
            ProviderKind::Anthropic,
            "https://api.anthropic.com".into(),
            Some("ANTHROPIC_API_KEY"),
            "claude-sonnet-4-5",
        )
    } else {
        let url = env("OPENAI_BASE_URL").unwrap_or_else(|| OLLAMA_URL.into());
        base(ProviderKind::Openai, url, None, "llama3.1")
    };
    let hint = local.then(|| format!(
        "⚠️ No model provider answered at {}. Start one there (e.g. `ollama serve` and `ollama pull {}`), \
         or set OPENAI_API_KEY (and OPENAI_BASE_URL) or ANTHROPIC_API_KEY, or add a [[providers]] section to hearth.toml.",
        provider.base_url, provider.model
    ));
    (vec![provider], hint)
}

/// One line on where a discovered provider came from, for `hearth check`.
pub fn describe_discovered(provider: &ProviderConfig) -> String {
    let kind = match provider.kind {
        ProviderKind::Openai => "the OpenAI-compatible API",
        ProviderKind::Anthropic => "the Anthropic API",
    };
    let why = match provider.api_key_env.as_deref() {
        Some(variable) => format!("{variable} is set"),
        None => "no API key in the environment, so a local server such as Ollama".to_string(),
    };
    format!(
        "{kind} at {}, model {} ({why})",
        provider.base_url, provider.model
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn picks_openai_then_anthropic_then_a_local_server() {
        let (p, hint) = effective_providers_with(
            &[],
            env(&[("OPENAI_API_KEY", "sk"), ("ANTHROPIC_API_KEY", "a")]),
        );
        assert_eq!(
            (p[0].kind, p[0].base_url.as_str()),
            (ProviderKind::Openai, "https://api.openai.com/v1")
        );
        assert!(
            hint.is_none(),
            "a cloud API gets its real error, not the Ollama hint"
        );
        let (p, _) = effective_providers_with(
            &[],
            env(&[("ANTHROPIC_API_KEY", "a"), ("HEARTH_MODEL", "claude-x")]),
        );
        assert_eq!(
            (p[0].kind, p[0].model.as_str()),
            (ProviderKind::Anthropic, "claude-x")
        );
        let (p, hint) = effective_providers_with(&[], env(&[]));
        assert_eq!(p[0].base_url, OLLAMA_URL);
        assert!(hint.is_some_and(|h| h.contains("OPENAI_API_KEY") && h.contains(OLLAMA_URL)));
        let (p, _) =
            effective_providers_with(&[], env(&[("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")]));
        assert_eq!(
            (p[0].base_url.as_str(), p[0].api_key_env.as_deref()),
            ("http://127.0.0.1:8080/v1", None)
        );
    }

    #[test]
    fn configured_providers_win_and_get_no_hint() {
        let (mut guessed, _) = effective_providers_with(&[], env(&[]));
        guessed[0].name = "mine".into();
        let (p, hint) = effective_providers_with(&guessed, env(&[("OPENAI_API_KEY", "sk")]));
        assert_eq!(p[0].name, "mine");
        assert!(hint.is_none());
    }
}
