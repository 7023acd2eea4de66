//! Voice messages to text through an OpenAI-compatible `/audio/transcriptions` endpoint.

use std::time::Duration;

use crate::config::{Secret, TranscriptionConfig};
use crate::provider::Usage;

/// What the service heard, and what it reported using for it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Transcript {
    pub text: String,
    /// Tokens, from services that bill by tokens (`usage.type = "tokens"`).
    pub usage: Usage,
    /// Seconds of audio, from services that bill by duration (`usage.type = "duration"`).
    pub seconds: f64,
}

impl Transcript {
    /// What this transcript cost at `config`'s prices, in billionths of a USD.
    pub fn cost_nusd(&self, config: &TranscriptionConfig) -> i64 {
        // USD per million tokens is a thousand billionths of a USD per token.
        let tokens = (self.usage.input_tokens as f64 * config.price_input_per_mtok
            + self.usage.output_tokens as f64 * config.price_output_per_mtok)
            * 1_000.0;
        let minutes = self.seconds / 60.0 * config.price_per_minute * 1e9;
        (tokens + minutes).round() as i64
    }
}

/// Transcribes one audio clip; the error is a short reason fit to show the user.
pub async fn transcribe(
    config: &TranscriptionConfig,
    audio: Vec<u8>,
    mime: &str,
) -> Result<Transcript, String> {
    let key = match &config.api_key_env {
        Some(name) => Some(Secret::resolve(name)?),
        None => None,
    };
    let extension = match mime {
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/mp4" | "audio/m4a" => "m4a",
        _ => "ogg",
    };
    let part = reqwest::multipart::Part::bytes(audio)
        .file_name(format!("voice.{extension}"))
        .mime_str(mime)
        .map_err(|err| format!("bad audio type {mime}: {err}"))?;
    let form = reqwest::multipart::Form::new()
        .part("file", part)
        .text("model", config.model.clone());
    let url = format!(
        "{}/audio/transcriptions",
        config.base_url.trim_end_matches('/')
    );
    let client = hearth_channel::http_client::builder()
        .timeout(Duration::from_secs(config.timeout_secs))
        .build()
        .map_err(|err| format!("cannot set up the transcription client: {err}"))?;
    let mut request = client.post(url).multipart(form);
    if let Some(key) = &key {
        request = request.bearer_auth(key.expose());
    }
    let response = request.send().await.map_err(|err| {
        format!(
            "the transcription service did not answer ({})",
            err.without_url()
        )
    })?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!(
            "the transcription service answered HTTP {}",
            status.as_u16()
        ));
    }
    let body: serde_json::Value = response
        .json()
        .await
        .map_err(|_| "the transcription service sent an unreadable answer".to_string())?;
    let text = match body["text"].as_str().map(str::trim) {
        Some(text) if !text.is_empty() => text.to_string(),
        _ => return Err("the voice message had no words in it".into()),
    };
    Ok(Transcript {
        text,
        usage: reported_tokens(&body["usage"]),
        seconds: reported_seconds(&body["usage"]),
    })
}

/// OpenAI's `usage` of a transcription: `{"type": "tokens", "input_tokens", "output_tokens"}`
/// (anything else, or none: zero).
fn reported_tokens(usage: &serde_json::Value) -> Usage {
    if usage["type"] != "tokens" {
        return Usage::default();
    }
    Usage {
        input_tokens: usage["input_tokens"].as_u64().unwrap_or(0),
        output_tokens: usage["output_tokens"].as_u64().unwrap_or(0),
        cached_input_tokens: 0,
    }
}

/// `{"type": "duration", "seconds": 12.5}`; a negative or missing duration counts as none.
fn reported_seconds(usage: &serde_json::Value) -> f64 {
    if usage["type"] != "duration" {
        return 0.0;
    }
    usage["seconds"]
        .as_f64()
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config() -> TranscriptionConfig {
        TranscriptionConfig {
            base_url: "http://127.0.0.1:1/v1".into(),
            api_key_env: None,
            model: "whisper-1".into(),
            timeout_secs: 1,
            price_per_minute: 0.006,
            price_input_per_mtok: 2.5,
            price_output_per_mtok: 10.0,
        }
    }

    #[test]
    fn duration_and_token_usage_are_priced() {
        let by_duration = Transcript {
            text: "hi".into(),
            usage: reported_tokens(&json!({"type": "duration", "seconds": 90})),
            seconds: reported_seconds(&json!({"type": "duration", "seconds": 90})),
        };
        assert_eq!(by_duration.usage, Usage::default());
        // 1.5 minutes × $0.006 = $0.009.
        assert_eq!(by_duration.cost_nusd(&config()), 9_000_000);

        let usage = json!({"type": "tokens", "input_tokens": 1000, "output_tokens": 100});
        let by_tokens = Transcript {
            text: "hi".into(),
            usage: reported_tokens(&usage),
            seconds: reported_seconds(&usage),
        };
        assert_eq!(by_tokens.seconds, 0.0);
        // 1,000 × $2.5 + 100 × $10 per million tokens = $0.0035.
        assert_eq!(by_tokens.cost_nusd(&config()), 3_500_000);
    }

    #[test]
    fn missing_or_hostile_usage_costs_nothing() {
        for usage in [
            json!(null),
            json!({"type": "duration", "seconds": -5}),
            json!({"type": "duration", "seconds": "a lot"}),
            json!({"type": "tokens", "input_tokens": -1}),
            json!({"type": "other"}),
        ] {
            let t = Transcript {
                text: "hi".into(),
                usage: reported_tokens(&usage),
                seconds: reported_seconds(&usage),
            };
            assert_eq!(t.cost_nusd(&config()), 0, "{usage}");
        }
    }
}
