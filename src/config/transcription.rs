//! `[transcription]`: speech to text for voice messages.

use hearth_channel::check_url;
use serde::{Deserialize, Serialize};
use toml::Value;

use super::load::Parse;
use super::{Checks, Section};

/// An OpenAI-compatible `/audio/transcriptions` endpoint (OpenAI, Groq, a local whisper server).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranscriptionConfig {
    /// e.g. `https://api.openai.com/v1`; `/audio/transcriptions` is appended.
    pub base_url: String,
    /// Name of the environment variable (or credential file) holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default = "default_transcription_model")]
    pub model: String,
    #[serde(default = "default_transcription_timeout")]
    pub timeout_secs: u64,
    /// USD per minute of audio, for services that bill by duration (`whisper-1`: 0.006).
    #[serde(default)]
    pub price_per_minute: f64,
    /// USD per million tokens, for services that bill by tokens (`gpt-4o-transcribe`).
    #[serde(default)]
    pub price_input_per_mtok: f64,
    #[serde(default)]
    pub price_output_per_mtok: f64,
}

fn default_transcription_model() -> String {
    "whisper-1".into()
}
fn default_transcription_timeout() -> u64 {
    60
}

impl Section for Option<TranscriptionConfig> {
    fn parse(value: Value, parse: &mut Parse<'_>) -> Option<Self> {
        parse.table(value).map(Some)
    }

    fn check(&self, checks: &mut Checks<'_>) {
        let Some(transcription) = self else {
            return;
        };
        if let Err(message) = check_url(&transcription.base_url, &["http", "https"]) {
            checks.problem("base_url", message);
        }
        if let Some(name) = &transcription.api_key_env {
            checks.secret("api_key_env", name);
        }
        let prices = [
            ("price_per_minute", transcription.price_per_minute),
            ("price_input_per_mtok", transcription.price_input_per_mtok),
            ("price_output_per_mtok", transcription.price_output_per_mtok),
        ];
        for (field, price) in prices {
            if !(price.is_finite() && price >= 0.0) {
                checks.problem(field, "must be a price in USD, 0 or more");
            }
        }
    }
}
