//! Voice messages to text through an OpenAI-compatible `/audio/transcriptions` endpoint.

use std::time::Duration;

use crate::config::{Secret, TranscriptionConfig};

/// Transcribes one audio clip; the error is a short reason fit to show the user.
pub async fn transcribe(
    config: &TranscriptionConfig,
    audio: Vec<u8>,
    mime: &str,
) -> Result<String, String> {
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
    let client = reqwest::Client::builder()
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
    match body["text"].as_str().map(str::trim) {
        Some(text) if !text.is_empty() => Ok(text.to_string()),
        _ => Err("the voice message had no words in it".into()),
    }
}
