//! serenity's errors mapped to [`ChannelError`] kinds, so the supervisor and the outbox retry
//! the right ones. The token never appears in a message: serenity's errors do not carry it.

use std::time::Duration;

use hearth_channel::ChannelError;
use serenity::Error as SerenityError;
use serenity::gateway::GatewayError;
use serenity::http::HttpError;

/// How long to wait after a 429 whose `retry_after` serenity dropped (a proxy or the local fake,
/// where serenity's ratelimiter is off and the error keeps only the status).
pub const UNKNOWN_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The one line hearth shows when Discord refuses the message-content intent.
pub const INTENT_REFUSED: &str = "discord refused the Message Content intent (close code 4014): switch on \"Message Content Intent\" under Bot > Privileged Gateway Intents in the developer portal (https://discord.com/developers/applications), then restart hearth";

/// The one line hearth shows when Discord refuses the token.
pub const TOKEN_REFUSED: &str = "discord refused the bot token (close code 4004 or HTTP 401): reset the token under Bot > Token in the developer portal (https://discord.com/developers/applications) and put the new one in the variable token_env names";

/// Maps a serenity error; `what` says what was being done ("sending a message").
pub fn map(what: &str, error: SerenityError) -> ChannelError {
    let message = format!("discord: {what}: {error}");
    let channel_error = match &error {
        SerenityError::Http(HttpError::UnsuccessfulRequest(response)) => {
            let status = response.status_code.as_u16();
            let detail = format!(
                "discord: {what}: HTTP {status} (code {}): {}",
                response.error.code, response.error.message
            );
            match status {
                401 => ChannelError::auth(TOKEN_REFUSED),
                429 => {
                    let mut e = ChannelError::rate_limited(UNKNOWN_RETRY_AFTER);
                    e.message = detail;
                    e
                }
                500..=599 => ChannelError::transient(detail),
                408 => ChannelError::transient(detail),
                _ => ChannelError::rejected(detail),
            }
        }
        SerenityError::Http(HttpError::Request(_)) => ChannelError::transient(message),
        SerenityError::Http(_) => ChannelError::protocol(message),
        SerenityError::Model(_) => ChannelError::rejected(message),
        SerenityError::Json(_) | SerenityError::Decode(..) => ChannelError::protocol(message),
        SerenityError::Gateway(GatewayError::InvalidAuthentication) => {
            ChannelError::auth(TOKEN_REFUSED)
        }
        SerenityError::Gateway(GatewayError::DisallowedGatewayIntents) => {
            ChannelError::config(INTENT_REFUSED)
        }
        SerenityError::Gateway(GatewayError::InvalidGatewayIntents) => {
            ChannelError::config(format!("discord: invalid gateway intents: {error}"))
        }
        _ => ChannelError::transient(message),
    };
    channel_error.with_source(error)
}

/// A request that did not finish within the timeout.
pub fn timed_out(what: &str, after: Duration) -> ChannelError {
    ChannelError::transient(format!(
        "discord: {what}: no answer within {}s",
        after.as_secs_f32()
    ))
}
