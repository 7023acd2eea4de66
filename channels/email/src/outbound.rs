//! Replies as mails: `Re:` subject, `In-Reply-To` and `References` from the reply context, a
//! `Message-ID` derived from the outbox delivery id (the same on every attempt),
//! `Auto-Submitted: auto-replied` so other robots do not answer back, and text/plain (the
//! Markdown source) with text/html (its rendering). Sent over SMTP under a time limit that covers
//! the whole conversation with the server, not only the connect.

use std::time::Duration;

use hearth_channel::{ChannelError, MessageRef, OutboundMessage};
use lettre::message::header::{HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use serde_json::Value;

use crate::config::{EmailSettings, Endpoint, Security};
use crate::{error, format};

/// The SMTP side of the channel.
pub(crate) struct Outbound {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    domain: String,
    salt: String,
    limit: Duration,
}

impl Outbound {
    pub(crate) fn new(settings: &EmailSettings) -> Result<Self, ChannelError> {
        let transport = transport(
            &settings.smtp,
            &settings.username,
            &settings.password,
            settings.command_timeout,
        )?;
        let address = settings
            .from_address
            .parse()
            .map_err(|e| ChannelError::config(format!("from: {e}")))?;
        let domain = settings
            .from_address
            .rsplit('@')
            .next()
            .unwrap_or("localhost")
            .to_owned();
        Ok(Self {
            transport,
            from: Mailbox::new(settings.from_name.clone(), address),
            domain,
            salt: settings.message_id_salt.clone(),
            limit: settings.command_timeout,
        })
    }

    /// Sends `message` to its chat's address; the returned id is the mail's `Message-ID`.
    /// Connects, greets, starts TLS as configured, logs in and says NOOP: what a send would do
    /// up to the mail itself.
    pub(crate) async fn check(&self) -> Result<(), ChannelError> {
        match tokio::time::timeout(self.limit, self.transport.test_connection()).await {
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false)) => Err(ChannelError::protocol(
                "smtp: the server did not answer NOOP",
            )),
            // The kind as a send would have it (a refused login is `Auth`), without what a
            // send's failure would add about a mail that may have gone out.
            Ok(Err(e)) => Err(ChannelError::new(
                error::smtp(&e).kind,
                format!("smtp: {}", hearth_channel::error_chain(&e)),
            )),
            Err(_) => Err(ChannelError::transient(
                "smtp: the server did not answer in time",
            )),
        }
    }

    pub(crate) async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, ChannelError> {
        let mail = self.build(message)?;
        let message_id = mail
            .headers()
            .get_raw("Message-ID")
            .unwrap_or_default()
            .to_owned();
        match tokio::time::timeout(self.limit, self.transport.send(mail)).await {
            Err(_) => Err(ChannelError::outcome_unknown(format!(
                "smtp: the server did not finish the send in time ({})",
                error::OUTCOME_UNKNOWN
            ))),
            Ok(Err(e)) => Err(error::smtp(&e)),
            Ok(Ok(_)) => Ok(MessageRef {
                chat: message.chat.clone(),
                message_id,
            }),
        }
    }

    pub(crate) fn build(&self, message: &OutboundMessage) -> Result<lettre::Message, ChannelError> {
        let to: Mailbox = message.chat.chat_id.parse().map_err(|e| {
            ChannelError::rejected(format!("`{}` is not an address: {e}", message.chat.chat_id))
        })?;
        let context = message.reply_context.as_ref();
        let text = |key: &str| context.and_then(|c| c.get(key)).and_then(Value::as_str);
        let subject = match text("subject").map(str::trim).filter(|s| !s.is_empty()) {
            Some(s) if s.len() >= 3 && s[..3].eq_ignore_ascii_case("re:") => s.to_owned(),
            Some(s) => format!("Re: {s}"),
            None => "Message from your assistant".to_owned(),
        };
        let message_id = match &message.delivery_id {
            Some(id) if self.salt.is_empty() => format!("<{}@{}>", sanitize(id), self.domain),
            Some(id) => format!("<{}.{}@{}>", sanitize(id), self.salt, self.domain),
            None => format!(
                "<hearth-{}@{}>",
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
                self.domain
            ),
        };
        let mut builder = lettre::Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .message_id(Some(message_id))
            .date_now();
        let in_reply_to = message
            .reply_to
            .clone()
            .filter(|id| id.starts_with('<'))
            .or_else(|| text("message_id").map(str::to_owned));
        if let Some(id) = &in_reply_to {
            builder = builder.in_reply_to(id.clone());
        }
        let mut references: Vec<String> = context
            .and_then(|c| c.get("references"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(id) = in_reply_to
            && !references.contains(&id)
        {
            references.push(id);
        }
        // Long threads: the first and the last references are the ones that matter (RFC 5322).
        if references.len() > 20 {
            let tail = references.split_off(references.len() - 19);
            references.truncate(1);
            references.extend(tail);
        }
        if !references.is_empty() {
            builder = builder.references(references.join(" "));
        }
        let mut mail = builder
            .multipart(MultiPart::alternative_plain_html(
                message.text.clone(),
                format::to_html(&message.text),
            ))
            .map_err(|e| ChannelError::rejected(format!("cannot build the mail: {e}")))?;
        mail.headers_mut().insert_raw(HeaderValue::new(
            HeaderName::new_from_ascii_str("Auto-Submitted"),
            "auto-replied".into(),
        ));
        Ok(mail)
    }
}

/// An SMTP transport to `endpoint`, TLS as its scheme says, logging in as `username`; every
/// SMTP command under `limit`. Shared by the channel and the mail tools (`mailbox`).
pub(crate) fn transport(
    endpoint: &Endpoint,
    username: &str,
    password: &str,
    limit: Duration,
) -> Result<AsyncSmtpTransport<Tokio1Executor>, ChannelError> {
    let tls = || {
        TlsParameters::new(endpoint.host.clone()).map_err(|e| {
            ChannelError::config(format!("smtp tls: {}", hearth_channel::error_chain(&e)))
        })
    };
    let tls = match endpoint.security {
        Security::Tls => Tls::Wrapper(tls()?),
        Security::StartTls => Tls::Required(tls()?),
        Security::Plain => Tls::None,
    };
    Ok(
        AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&endpoint.host)
            .port(endpoint.port)
            .tls(tls)
            .credentials(Credentials::new(username.to_owned(), password.to_owned()))
            .timeout(Some(limit))
            .build(),
    )
}

/// A delivery id as the left part of a Message-ID: only characters allowed there.
fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use hearth_channel::ChatRef;
    use serde_json::json;

    use super::*;
    use crate::config::Endpoint;

    fn outbound() -> Outbound {
        let imap = Endpoint::parse("imap://127.0.0.1:1", crate::config::IMAP_SCHEMES).expect("u");
        let smtp = Endpoint::parse("smtp://127.0.0.1:1", crate::config::SMTP_SCHEMES).expect("u");
        let mut settings = EmailSettings::new(imap, smtp, "bot@example.org", "pw");
        settings.from_name = Some("Hearth".into());
        settings.message_id_salt = "a1b2c3".into();
        Outbound::new(&settings).expect("outbound")
    }

    #[test]
    fn replies_thread_and_say_they_are_automatic() {
        let mut message = OutboundMessage::text(ChatRef::new("ann@example.org"), "**Hi**");
        message.delivery_id = Some("hearth-42.0".into());
        message.reply_context = Some(json!({
            "subject": "plans",
            "message_id": "<m1@example.org>",
            "references": ["<m0@example.org>", "<m1@example.org>"],
        }));
        let mail = outbound().build(&message).expect("mail");
        let text = String::from_utf8_lossy(&mail.formatted()).into_owned();
        assert!(text.contains("Subject: Re: plans"), "{text}");
        assert!(text.contains("In-Reply-To: <m1@example.org>"), "{text}");
        assert!(
            text.contains("References: <m0@example.org> <m1@example.org>"),
            "{text}"
        );
        assert!(
            text.contains("Message-ID: <hearth-42.0.a1b2c3@example.org>"),
            "{text}"
        );
        assert!(text.contains("Auto-Submitted: auto-replied"), "{text}");
        assert!(text.contains("From: Hearth <bot@example.org>"), "{text}");
        assert!(
            text.contains("text/plain") && text.contains("text/html"),
            "{text}"
        );
        // Sent again (a retry): the same Message-ID.
        let again = outbound().build(&message).expect("mail");
        assert_eq!(
            again.headers().get_raw("Message-ID"),
            mail.headers().get_raw("Message-ID")
        );
        let re = OutboundMessage {
            reply_context: Some(json!({"subject": "RE: plans"})),
            ..message
        };
        let text =
            String::from_utf8_lossy(&outbound().build(&re).expect("m").formatted()).into_owned();
        assert!(text.contains("Subject: RE: plans"), "{text}");
    }

    #[test]
    fn a_chat_that_is_no_address_is_rejected() {
        let message = OutboundMessage::text(ChatRef::new("not an address"), "x");
        let error = outbound().build(&message).expect_err("no address");
        assert_eq!(error.kind, hearth_channel::ErrorKind::Rejected);
    }
}
