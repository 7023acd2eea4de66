//! The receive loop: `getUpdates` long polling or the webhook server, each update mapped
//! ([`crate::inbound`]) and handed to the sink, and the update offset saved only after the sink
//! stored what came before it.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use hearth_channel::{Backoff, ChannelContext, ChannelError, ErrorKind, sleep_or_shutdown};
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use crate::inbound::{Decoded, Mapper, Me, decode_update};
use crate::{Mode, OFFSET_KEY, TelegramChannel};

/// The update kinds hearth asks for.
const ALLOWED_UPDATES: &[&str] = &["message", "edited_message", "callback_query"];

/// Backoff after a failed poll or delivery, doubling up to the maximum.
const BACKOFF_START: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The receive loop: checks the token, then polls (or serves the webhook) until shutdown.
pub(crate) async fn run(
    channel: &TelegramChannel,
    ctx: ChannelContext,
) -> Result<(), ChannelError> {
    let me = tokio::select! {
        () = ctx.shutdown.cancelled() => return Ok(()),
        me = channel.me() => me,
    };
    let me = match me {
        Ok(me) => me,
        Err(error) => {
            if error.kind == ErrorKind::Auth {
                tracing::error!(%error, "telegram channel stopped: the bot token was refused");
                ctx.status.failed(error.to_string());
            }
            return Err(error);
        }
    };
    // Telegram accepted the token: the bot is connected, whatever the mode.
    ctx.status.connected();
    let result = match &channel.settings.mode {
        Mode::Polling => channel.poll(&ctx, &me).await,
        Mode::Webhook {
            listen,
            url,
            secret_token,
        } => {
            let secret_token = secret_token.expose();
            channel.webhook(&ctx, me, *listen, url, secret_token).await
        }
    };
    if ctx.shutdown.is_cancelled() && result.as_ref().is_err_and(ChannelError::is_temporary) {
        // Errors from requests cut short by the shutdown are not failures.
        return Ok(());
    }
    result
}

impl TelegramChannel {
    async fn poll(&self, ctx: &ChannelContext, me: &Me) -> Result<(), ChannelError> {
        // A webhook left behind would make getUpdates fail with 409.
        self.api
            .call::<Value>("deleteWebhook", &json!({ "drop_pending_updates": false }))
            .await?;
        // The menu goes beside the first poll, so a message that waited for the start is not
        // held up by it.
        let ((), polled) = tokio::join!(self.set_commands(), self.poll_updates(ctx, me));
        polled
    }

    /// Long polling from the stored offset, until the shutdown or an error the supervisor
    /// must see.
    async fn poll_updates(&self, ctx: &ChannelContext, me: &Me) -> Result<(), ChannelError> {
        let mut offset = match ctx.state.load(OFFSET_KEY).await {
            Ok(Some(saved)) => saved.trim().parse::<i64>().ok().or_else(|| {
                warn!(saved = %saved, "stored telegram offset is not a number; starting over");
                None
            }),
            Ok(None) => None,
            Err(e) => return Err(ChannelError::transient(format!("loading the offset: {e}"))),
        };
        let mapper = Mapper {
            me,
            max_document_bytes: self.settings.max_document_bytes,
        };
        let timeout = self.settings.poll_timeout_secs;
        // Two backoffs: a poll that works says nothing about the inbox that refused the last
        // update (a full disk), so its own wait must keep growing until an update is stored.
        let mut poll_backoff = Backoff::new(BACKOFF_START, BACKOFF_MAX);
        let mut store_backoff = Backoff::new(BACKOFF_START, BACKOFF_MAX);
        info!(?offset, "telegram long polling");
        loop {
            let mut body = json!({ "timeout": timeout, "allowed_updates": ALLOWED_UPDATES });
            if let Some(offset) = offset {
                body["offset"] = json!(offset);
            }
            let poll = self
                .api
                .get_updates(&body, Duration::from_secs(timeout + 15));
            let updates = tokio::select! {
                () = ctx.shutdown.cancelled() => return Ok(()),
                result = poll => result,
            };
            let updates = match updates {
                Ok(updates) => updates,
                Err(e) => {
                    let error = ChannelError::from(e);
                    if !error.is_temporary() {
                        return Err(error);
                    }
                    warn!(%error, "getUpdates failed; retrying");
                    ctx.status.reconnecting(error.to_string());
                    let wait = error.retry_after().unwrap_or_else(|| poll_backoff.next());
                    if sleep_or_shutdown(&ctx.shutdown, wait).await {
                        return Ok(());
                    }
                    continue;
                }
            };
            poll_backoff.reset();
            ctx.status.connected();
            let confirmed = offset;
            let mut stop = false;
            for raw in updates {
                let update = match decode_update(&raw) {
                    Decoded::Update { update, repaired } => {
                        if repaired {
                            warn_repaired(&update);
                        }
                        update
                    }
                    Decoded::Poison {
                        update_id: Some(update_id),
                        error,
                    } => {
                        // Fetching it again would fail the same way: confirm it and move on.
                        warn!(update_id, %error, "telegram update cannot be decoded; skipped");
                        offset = Some(update_id + 1);
                        continue;
                    }
                    Decoded::Poison {
                        update_id: None,
                        error,
                    } => {
                        warn!(%error, "telegram update without a readable update_id cannot be decoded; skipped");
                        continue;
                    }
                };
                let Some(update_id) = update.get("update_id").and_then(Value::as_i64) else {
                    warn!("update without update_id skipped");
                    continue;
                };
                match self.deliver(ctx, &mapper, &update).await {
                    Delivery::Stored => store_backoff.reset(),
                    Delivery::Shutdown => {
                        stop = true;
                        break;
                    }
                    Delivery::Retry => {
                        // Keep the offset: the next poll returns this update again.
                        stop = sleep_or_shutdown(&ctx.shutdown, store_backoff.next()).await;
                        break;
                    }
                }
                offset = Some(update_id + 1);
            }
            // The offset is saved once per batch rather than once per update (one write
            // instead of up to a hundred): every update before it is already in the inbox, and
            // the inbox deduplicates on the update id, so a crash before this line only means
            // the batch's stored updates are fetched again and dropped as duplicates.
            if offset != confirmed
                && let Some(next) = offset
                && let Err(e) = ctx.state.save(OFFSET_KEY, &next.to_string()).await
            {
                // A stale offset only means a redelivery after a restart (see above).
                warn!(error = %e, "could not save the telegram offset");
            }
            if stop {
                return Ok(());
            }
        }
    }

    /// Maps one update and hands it to the sink.
    async fn deliver(&self, ctx: &ChannelContext, mapper: &Mapper<'_>, update: &Value) -> Delivery {
        let event = tokio::select! {
            () = ctx.shutdown.cancelled() => return Delivery::Shutdown,
            event = mapper.map(update) => event,
        };
        let event = match event {
            Ok(Some(event)) => event,
            Ok(None) => return Delivery::Stored,
            Err(error) => {
                warn!(%error, "update could not be processed; will retry");
                return Delivery::Retry;
            }
        };
        let platform_id = event.platform_id.clone();
        let stored = tokio::select! {
            () = ctx.shutdown.cancelled() => return Delivery::Shutdown,
            stored = ctx.sink.deliver(event) => stored,
        };
        match stored {
            Ok(()) => {
                debug!(update_id = %platform_id, "telegram update stored");
                Delivery::Stored
            }
            Err(error) => {
                warn!(update_id = %platform_id, %error, "inbox refused a telegram update; will retry");
                Delivery::Retry
            }
        }
    }

    async fn webhook(
        &self,
        ctx: &ChannelContext,
        me: Me,
        listen: std::net::SocketAddr,
        url: &str,
        secret_token: &str,
    ) -> Result<(), ChannelError> {
        let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
            ChannelError::config(format!("telegram webhook: cannot listen on {listen}: {e}"))
        })?;
        self.api
            .call::<Value>(
                "setWebhook",
                &json!({
                    "url": url,
                    "secret_token": secret_token,
                    "allowed_updates": ALLOWED_UPDATES,
                }),
            )
            .await?;
        self.set_commands().await;
        info!(%listen, "telegram webhook listening");
        let hook = Arc::new(Hook {
            me,
            max_document_bytes: self.settings.max_document_bytes,
            secret_token: secret_token.to_owned(),
            ctx: ctx.clone(),
        });
        let app = axum::Router::new()
            .fallback(axum::routing::post(receive))
            .with_state(hook);
        let shutdown = ctx.shutdown.clone();
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
            .map_err(|e| ChannelError::transient(format!("telegram webhook server: {e}")))
    }
}

enum Delivery {
    Stored,
    Retry,
    Shutdown,
}

/// What the webhook handler needs.
struct Hook {
    me: Me,
    max_document_bytes: u64,
    secret_token: String,
    ctx: ChannelContext,
}

/// One webhook request: 401 without the secret, 200 only once the update is stored, 500 so
/// Telegram sends it again otherwise.
async fn receive(
    State(hook): State<Arc<Hook>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let secret = headers
        .get("x-telegram-bot-api-secret-token")
        .and_then(|v| v.to_str().ok());
    if secret != Some(hook.secret_token.as_str()) {
        warn!("webhook request without the right secret token refused");
        return StatusCode::UNAUTHORIZED;
    }
    let update = match decode_update(&String::from_utf8_lossy(&body)) {
        Decoded::Update { update, repaired } => {
            if repaired {
                warn_repaired(&update);
            }
            update
        }
        Decoded::Poison { update_id, error } => {
            // Telegram would send the same garbage again; acknowledge and move on.
            warn!(?update_id, %error, "webhook update cannot be decoded; skipped");
            return StatusCode::OK;
        }
    };
    let mapper = Mapper {
        me: &hook.me,
        max_document_bytes: hook.max_document_bytes,
    };
    let event = tokio::select! {
        () = hook.ctx.shutdown.cancelled() => return StatusCode::SERVICE_UNAVAILABLE,
        event = mapper.map(&update) => event,
    };
    let event = match event {
        Ok(Some(event)) => event,
        Ok(None) => return StatusCode::OK,
        Err(error) => {
            warn!(%error, "webhook update could not be processed; Telegram will resend it");
            return StatusCode::INTERNAL_SERVER_ERROR;
        }
    };
    let stored = tokio::select! {
        () = hook.ctx.shutdown.cancelled() => return StatusCode::SERVICE_UNAVAILABLE,
        stored = hook.ctx.sink.deliver(event) => stored,
    };
    match stored {
        Ok(()) => StatusCode::OK,
        Err(error) => {
            warn!(%error, "inbox refused a webhook update; Telegram will resend it");
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

/// Logs an update whose text was broken (a lone UTF-16 surrogate) and repaired.
fn warn_repaired(update: &Value) {
    let update_id = update.get("update_id").and_then(Value::as_i64);
    warn!(
        update_id,
        "telegram update had broken text (a lone UTF-16 surrogate); delivered with U+FFFD in its place"
    );
}
