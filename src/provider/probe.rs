//! Asks a provider's `GET /models` whether it is the API its configuration says, before a chat
//! depends on it: `hearth chat`'s start check and `hearth doctor` use [`probe_models`].
//!
//! A TCP connect is not enough: a web server that is not a model API accepts connections too,
//! and then every message of the chat fails. `/models` is cheap, needs no model loaded, and is
//! served by OpenAI, Ollama, llama.cpp, vLLM, LM Studio, OpenRouter and Anthropic alike
//! (`{base_url}/models` for OpenAI-compatible servers, `{base_url}/v1/models` for Anthropic).

use std::time::Duration;

use serde_json::Value;

use super::http::{self, connect_failure};
use crate::config::{ProviderConfig, ProviderKind, Secret};

/// Longest a probe may take: a local server answers at once, a cloud API within a second or two.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// What is wrong with a provider, by kind, so callers can decide what is fatal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeFailure {
    /// No connection: nothing listens, the name does not resolve, TLS failed, or no answer in time.
    Unreachable,
    /// 401 or 403: the key is missing or wrong.
    Unauthorized,
    /// Something answered, but not the API the configuration names (404, 405, 501, an HTML page,
    /// JSON of another shape): usually a wrong `base_url` or `kind`.
    NotTheApi,
    /// The API answered with 429 or 5xx: it is there but not well right now.
    Unavailable,
}

/// One provider's problem, as one line naming the provider, the URL asked and the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ProbeError {
    pub kind: ProbeFailure,
    pub message: String,
}

/// The model ids the provider lists (for `hearth doctor`; the configured model may be an alias
/// that is not listed, so nothing here insists on it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeAnswer {
    pub models: Vec<String>,
}

/// The URL a probe asks: `{base_url}/models`, or for Anthropic `{base_url}/v1/models` unless the
/// base already ends in `/v1`.
pub fn models_url(config: &ProviderConfig) -> String {
    let base = config.base_url.trim_end_matches('/');
    match config.kind {
        ProviderKind::Openai => http::join_url(base, "models"),
        ProviderKind::Anthropic if base.ends_with("/v1") => http::join_url(base, "models"),
        ProviderKind::Anthropic => http::join_url(base, "v1/models"),
    }
}

/// Asks `GET /models` of `config`'s server with its key; `Ok` with the listed model ids when the
/// answer is the API's model list.
pub async fn probe_models(
    config: &ProviderConfig,
    api_key: Option<&Secret>,
    timeout: Duration,
) -> Result<ProbeAnswer, ProbeError> {
    let url = models_url(config);
    let (api, fix_url) = match config.kind {
        ProviderKind::Openai => (
            "an OpenAI-compatible API",
            "base_url should be the API root, usually ending in /v1",
        ),
        ProviderKind::Anthropic => (
            "the Anthropic API",
            "base_url should be https://api.anthropic.com or a compatible server",
        ),
    };
    let fail = |kind, what: String| ProbeError {
        kind,
        message: scrub(format!("provider `{}`: {what}", config.name), api_key),
    };
    let client = hearth_channel::http_client::builder()
        .connect_timeout(timeout)
        .timeout(timeout)
        .build()
        .map_err(|err| {
            fail(
                ProbeFailure::Unreachable,
                format!("cannot build an HTTP client: {}", err.without_url()),
            )
        })?;
    let mut request = client
        .get(&url)
        .header(reqwest::header::ACCEPT, "application/json");
    request = match (config.kind, api_key) {
        (ProviderKind::Openai, Some(key)) => request.bearer_auth(key.expose()),
        (ProviderKind::Anthropic, Some(key)) => request
            .header("x-api-key", key.expose())
            .header("anthropic-version", super::anthropic::API_VERSION),
        (ProviderKind::Anthropic, None) => {
            request.header("anthropic-version", super::anthropic::API_VERSION)
        }
        (ProviderKind::Openai, None) => request,
    };
    let shown_url = redact_query(&url);
    let response = request.send().await.map_err(|err| {
        let why = if err.is_timeout() {
            format!(
                "no answer from {shown_url} within {} s",
                timeout.as_secs_f32()
            )
        } else {
            connect_failure(&err)
        };
        fail(ProbeFailure::Unreachable, why)
    })?;
    let status = response.status();
    let status_line = format!(
        "HTTP {} {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    )
    .trim_end()
    .to_string();
    let body = response.text().await.unwrap_or_default();
    let json: Option<Value> = serde_json::from_str(&body).ok();
    let server_says = json
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("message"))
                .or_else(|| v.get("error"))
        })
        .and_then(Value::as_str)
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    match status.as_u16() {
        200..=299 => {}
        401 | 403 => {
            let fix = match (&config.api_key_env, api_key) {
                (Some(variable), _) => format!("check the key in {variable}"),
                (None, _) => "set api_key_env to the variable holding its API key".to_string(),
            };
            return Err(fail(
                ProbeFailure::Unauthorized,
                format!("{shown_url} refused the credentials ({status_line}{server_says}); {fix}"),
            ));
        }
        // 501 Not Implemented is a server without this API; the other 5xx are a real API (or
        // the proxy in front of one) having a bad moment.
        429 | 500 | 502..=599 => {
            return Err(fail(
                ProbeFailure::Unavailable,
                format!("{shown_url} answered {status_line}{server_says}; try again later"),
            ));
        }
        _ => {
            return Err(fail(
                ProbeFailure::NotTheApi,
                format!(
                    "{shown_url} answered {status_line}{}: this is not {api} ({fix_url})",
                    if json.is_some() { "" } else { " and no JSON" }
                ),
            ));
        }
    }
    let models = json
        .as_ref()
        .and_then(|v| v.get("data"))
        .and_then(Value::as_array)
        .ok_or_else(|| {
            fail(
                ProbeFailure::NotTheApi,
                format!(
                    "{shown_url} answered {status_line} but not with a model list: this is not {api} ({fix_url})"
                ),
            )
        })?
        .iter()
        .filter_map(|model| model.get("id").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    Ok(ProbeAnswer { models })
}

/// What a start check found: problems of the providers the agents name (the chat cannot work)
/// and of their fallbacks (it works while the first choice answers, so these only warn).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StartCheck {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

/// Probes, all at once, the providers named in `used` (`"default"`: the first of `providers`)
/// and their fallbacks. `local_hint` replaces the message of an unreachable first provider when
/// hearth guessed a local model server (it says how to start one or configure another).
pub async fn check_providers(
    providers: &[ProviderConfig],
    used: &[&str],
    local_hint: Option<&str>,
    timeout: Duration,
) -> StartCheck {
    let find = |name: &str| {
        if name == "default" {
            providers.first()
        } else {
            providers.iter().find(|p| p.name == name)
        }
    };
    let mut primary: Vec<&ProviderConfig> = Vec::new();
    for name in used {
        if let Some(provider) = find(name)
            && !primary.iter().any(|p| p.name == provider.name)
        {
            primary.push(provider);
        }
    }
    let mut fallbacks: Vec<&ProviderConfig> = Vec::new();
    for provider in &primary {
        for name in &provider.fallbacks {
            if let Some(fallback) = find(name)
                && !primary.iter().any(|p| p.name == fallback.name)
                && !fallbacks.iter().any(|p| p.name == fallback.name)
            {
                fallbacks.push(fallback);
            }
        }
    }
    let probe = |provider: &ProviderConfig| {
        let provider = provider.clone();
        async move {
            let key = match &provider.api_key_env {
                Some(variable) => match Secret::resolve(variable) {
                    Ok(key) => Some(key),
                    Err(problem) => {
                        return Err(ProbeError {
                            kind: ProbeFailure::Unauthorized,
                            message: format!(
                                "provider `{}`: API key {variable}: {problem}",
                                provider.name
                            ),
                        });
                    }
                },
                None => None,
            };
            probe_models(&provider, key.as_ref(), timeout)
                .await
                .map(|_| ())
        }
    };
    let (primary_results, fallback_results) = futures::future::join(
        futures::future::join_all(primary.iter().map(|p| probe(p))),
        futures::future::join_all(fallbacks.iter().map(|p| probe(p))),
    )
    .await;
    let mut check = StartCheck::default();
    for (index, result) in primary_results.into_iter().enumerate() {
        if let Err(err) = result {
            let message = match local_hint {
                Some(hint) if index == 0 && err.kind == ProbeFailure::Unreachable => {
                    hint.to_string()
                }
                _ => err.message,
            };
            check.errors.push(message);
        }
    }
    for err in fallback_results.into_iter().filter_map(Result::err) {
        check.warnings.push(format!(
            "{} (a fallback; the chat starts without it)",
            err.message
        ));
    }
    check
}

/// The URL without its query, which may carry a key (`?key=…` on some gateways).
fn redact_query(url: &str) -> String {
    match url.split_once('?') {
        Some((base, _)) => format!("{base}?…"),
        None => url.to_string(),
    }
}

/// `message` without the key, should a server have echoed it.
fn scrub(message: String, api_key: Option<&Secret>) -> String {
    match api_key {
        Some(key) if !key.expose().is_empty() => message.replace(key.expose(), "<redacted>"),
        _ => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(kind: ProviderKind, base_url: &str) -> ProviderConfig {
        ProviderConfig {
            timeout_secs: 5,
            max_retries: 0,
            ..ProviderConfig::new("p", kind, base_url, "m")
        }
    }

    #[test]
    fn the_models_url_follows_each_api() {
        assert_eq!(
            models_url(&provider(ProviderKind::Openai, "http://h:11434/v1/")),
            "http://h:11434/v1/models"
        );
        assert_eq!(
            models_url(&provider(
                ProviderKind::Anthropic,
                "https://api.anthropic.com"
            )),
            "https://api.anthropic.com/v1/models"
        );
        assert_eq!(
            models_url(&provider(ProviderKind::Anthropic, "http://h/v1")),
            "http://h/v1/models"
        );
    }

    #[test]
    fn keys_never_reach_the_message() {
        let key = Secret::new("sk-secret");
        assert_eq!(
            scrub("bad key sk-secret".into(), Some(&key)),
            "bad key <redacted>"
        );
        assert_eq!(
            redact_query("http://h/v1/models?key=x"),
            "http://h/v1/models?…"
        );
    }
}
