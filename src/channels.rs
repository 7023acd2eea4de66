//! Builds the configured chat channels from their config sections. Adding a channel means one
//! function here and one line in `hearth run`.

use std::sync::Arc;

use hearth_channel::Channel;

use crate::config::{Secret, TelegramConfig, TelegramMode};

/// The Telegram channel of `[channels.telegram]`, with its token (and webhook secret) read from
/// the environment or `$CREDENTIALS_DIRECTORY`.
pub fn telegram(config: &TelegramConfig) -> Result<Arc<dyn Channel>, String> {
    let token = Secret::resolve(&config.token_env)?;
    let mut settings =
        hearth_telegram::TelegramSettings::new(token.expose()).with_api_url(&config.api_url);
    if !config.pacing {
        settings.pacing = hearth_telegram::Pacing::unlimited();
    }
    if config.mode == TelegramMode::Webhook {
        let listen = config
            .webhook_listen
            .as_deref()
            .ok_or("webhook mode needs webhook_listen")?
            .parse()
            .map_err(|_| "webhook_listen is not an address like 127.0.0.1:8443".to_string())?;
        let url = config
            .webhook_url
            .clone()
            .ok_or("webhook mode needs webhook_url")?;
        let secret_name = config
            .webhook_secret_env
            .as_deref()
            .ok_or("webhook mode needs webhook_secret_env")?;
        let secret_token = Secret::resolve(secret_name)?.expose().to_string();
        settings.mode = hearth_telegram::Mode::Webhook {
            listen,
            url,
            secret_token,
        };
    }
    let channel = hearth_telegram::TelegramChannel::new(settings).map_err(|err| err.to_string())?;
    Ok(Arc::new(channel))
}
