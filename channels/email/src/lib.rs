//! hearth's email channel: a mailbox read over IMAP (IDLE push) and answered over SMTP.
//!
//! [`EmailConfig`] is the `[channels.email]` section of hearth's config file and builds the
//! channel ([`hearth_channel::ChannelConfig`]). [`EmailChannel`] implements
//! [`hearth_channel::Channel`]:
//! - receiving: one IMAP connection (TCP keepalive, every command under a time limit) that
//!   SELECTs the mailbox, fetches new mail by UID one mail at a time with `BODY.PEEK[]` (its
//!   declared size checked first), reads it off the async runtime under a time budget, hands
//!   it to the sink, and only then sets `\Seen` and advances the UID cursor (kept with the
//!   mailbox's UIDVALIDITY in the channel's state, key `cursor:<mailbox>`). Attachments are
//!   stored as references to their IMAP part and fetched by [`Channel::fetch_attachment`] on a
//!   short read-only session once the daemon has checked the sender. Between fetches it
//!   IDLEs, re-issuing IDLE every few minutes (servers drop it after 30, NAT boxes sooner), or
//!   polls a server without IDLE. A lost connection is reconnected with backoff. After every
//!   wake-up it fetches everything past the cursor rather than trusting the server's EXISTS
//!   notice, which async-imap may drop;
//! - the first start begins at the mailbox's end as of the start: mail that arrived before it
//!   is never answered. A changed UIDVALIDITY re-scans the mail that arrived since the last
//!   mail hearth had seen (by INTERNALDATE); the inbox drops what it already has by
//!   `Message-ID`, and older mail found again is not answered;
//! - mail that must not be answered (automatic replies, bounces, lists) arrives as a notice,
//!   and strangers hear nothing ([`Capabilities::silent_with_strangers`]);
//! - sending: one mail per message, threaded, see `outbound`.
//!
//! [`mailbox`] is the owner's mailbox as hearth's mail tools reach it (search, read, send),
//! apart from the channel but on the same connection code.
//!
//! The password never appears in a log line or an error message.

mod auth;
mod config;
mod error;
pub mod format;
#[doc(hidden)]
pub mod fuzzing;
mod imap;
mod inbound;
pub mod mailbox;
mod outbound;
mod receive;

pub use config::{
    EmailConfig, EmailSettings, Endpoint, IMAP_SCHEMES, SMTP_SCHEMES, Security,
    UNVERIFIED_FROM_WARNING, check_address, check_endpoint, check_sender, parse_from,
};

use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use futures::TryStreamExt;
use hearth_channel::{
    Attachment, Capabilities, Channel, ChannelContext, ChannelError, ErrorKind, Format, MessageRef,
    OutboundMessage,
};

use crate::imap::{ImapSession, timed};
use crate::inbound::{PartRef, Reader};
use crate::outbound::Outbound;

/// The channel's name in config, identities, state and targets.
pub const CHANNEL_NAME: &str = "email";

/// A mailbox as a hearth channel.
pub struct EmailChannel {
    settings: EmailSettings,
    outbound: Outbound,
    reader: Reader,
}

impl std::fmt::Debug for EmailChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailChannel")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Where the channel is in the mailbox: the last UID handed to the inbox under a UIDVALIDITY,
/// when that was saved, and the arrival time (the server's INTERNALDATE) of the last mail
/// handed over (seconds since the epoch). After a UIDVALIDITY change, mail up to the UID that
/// was the mailbox's last at the re-scan (`floor_uid`) is answered only if it arrived at
/// `floor` or later: a rebuilt mailbox must not bring back the mail from before hearth.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Cursor {
    validity: u32,
    uid: u32,
    saved_at: u64,
    seen_at: u64,
    floor: u64,
    floor_uid: u32,
}

impl Cursor {
    fn parse(text: &str) -> Option<Self> {
        let mut parts = text.trim().split(':');
        let validity = parts.next()?.parse().ok()?;
        let uid = parts.next()?.parse().ok()?;
        let mut number = || {
            parts
                .next()
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let saved_at = number();
        let seen_at = number();
        let floor = number();
        let floor_uid = u32::try_from(number()).unwrap_or(0);
        Some(Self {
            validity,
            uid,
            saved_at,
            seen_at,
            floor,
            floor_uid,
        })
    }

    fn encode(&self) -> String {
        format!(
            "{}:{}:{}:{}:{}:{}",
            self.validity, self.uid, self.saved_at, self.seen_at, self.floor, self.floor_uid
        )
    }

    /// Whether a mail is from before the re-scan's floor: recorded as read, never answered.
    fn before_floor(&self, uid: u32, arrived: Option<u64>) -> bool {
        uid <= self.floor_uid && arrived.is_some_and(|at| at < self.floor)
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl EmailChannel {
    /// Builds the channel; no network traffic until `run` or a send.
    pub fn new(settings: EmailSettings) -> Result<Self, ChannelError> {
        if settings.username.trim().is_empty() {
            return Err(ChannelError::config("email: the username is empty"));
        }
        let outbound = Outbound::new(&settings)?;
        let reader = Reader {
            own_address: settings.from_address.clone(),
            require_authentication: settings.require_authentication.clone(),
        };
        Ok(Self {
            settings,
            outbound,
            reader,
        })
    }

    fn cursor_key(&self) -> String {
        format!("cursor:{}", self.settings.mailbox)
    }

    /// Fetches one attachment's part on a short session of its own, read-only (EXAMINE), from
    /// the mail its reference names, checking the mailbox was not renumbered since.
    async fn fetch_part(
        &self,
        session: &mut ImapSession,
        part: &PartRef,
        max_bytes: u64,
    ) -> Result<Vec<u8>, ChannelError> {
        let limit = self.settings.command_timeout;
        let mailbox = timed(limit, "examine", session.examine(&part.mailbox)).await?;
        if mailbox.uid_validity != Some(part.validity) {
            return Err(ChannelError::rejected(
                "the mailbox was renumbered since this mail arrived: its attachment cannot be found",
            ));
        }
        // At most the encoded size of `max_bytes` is asked for, and one byte more to tell a
        // part that is larger still.
        let cap = part.encoding.encoded_bound(max_bytes).saturating_add(1);
        let query = format!("(UID BODY.PEEK[{}]<0.{cap}>)", part.section);
        let fetched: Vec<_> = timed(limit, "fetch", async {
            session
                .uid_fetch(part.uid.to_string(), &query)
                .await?
                .try_collect::<Vec<_>>()
                .await
        })
        .await?;
        let path = async_imap::imap_proto::SectionPath::Part(part.section_numbers(), None);
        let Some(encoded) = fetched
            .iter()
            .filter(|f| f.uid == Some(part.uid))
            .find_map(|f| f.section(&path))
        else {
            return Err(ChannelError::rejected(
                "the mail is no longer in the mailbox: its attachment cannot be fetched",
            ));
        };
        if encoded.len() as u64 >= cap {
            return Err(too_large(max_bytes));
        }
        let bytes = part
            .encoding
            .decode(encoded)
            .ok_or_else(|| ChannelError::rejected("the attachment's encoding is broken"))?;
        if bytes.len() as u64 > max_bytes {
            return Err(too_large(max_bytes));
        }
        Ok(bytes)
    }
}

fn too_large(max_bytes: u64) -> ChannelError {
    ChannelError::rejected(format!(
        "the attachment is larger than the limit of {max_bytes} bytes"
    ))
}

#[async_trait]
impl Channel for EmailChannel {
    fn name(&self) -> &str {
        CHANNEL_NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // Confirmations use typed codes: "reply APPROVE <code>".
            buttons: false,
            edits: false,
            reactions: false,
            threads: false,
            // A mail can be long; the daemon sends one mail per reply.
            max_message_len: None,
            format: Format::Html,
            preview: None,
            deduplicates_sends: false,
            silent_with_strangers: true,
            ..Capabilities::default()
        }
    }

    async fn live_checks(&self) -> Vec<Result<String, String>> {
        let settings = &self.settings;
        let imap = async {
            let limit = settings.command_timeout;
            let mut session = imap::connect(
                &settings.imap,
                &settings.username,
                &settings.password,
                limit,
            )
            .await?;
            let capabilities = timed(limit, "capability", session.capabilities()).await?;
            let idle = capabilities.has_str("IDLE");
            let mailbox = timed(limit, "examine", session.examine(&settings.mailbox)).await?;
            // Logging out is politeness; the check already has its answer.
            let _ = timed(limit, "logout", session.logout()).await;
            Ok::<_, ChannelError>((idle, mailbox.exists))
        };
        let imap = match imap.await {
            Ok((true, mails)) => Ok(format!(
                "imap: logged in as {}; {} has {mails} mail(s); IDLE supported",
                settings.username, settings.mailbox
            )),
            Ok((false, mails)) => Ok(format!(
                "imap: logged in as {}; {} has {mails} mail(s); no IDLE, so new mail is polled every {} s",
                settings.username,
                settings.mailbox,
                settings.poll_interval.as_secs()
            )),
            Err(e) => Err(format!(
                "{} — fix: {}",
                hearth_channel::error_chain(&e),
                if e.kind == ErrorKind::Auth {
                    "check username and the password in password_env (many providers want an app password)"
                } else {
                    "check imap_url and that this machine reaches it"
                }
            )),
        };
        let smtp = match self.outbound.check().await {
            Ok(()) => Ok(format!(
                "smtp: logged in as {} and greeted",
                settings.username
            )),
            Err(e) => Err(format!(
                "{} — fix: {}",
                hearth_channel::error_chain(&e),
                if e.kind == ErrorKind::Auth {
                    "check username and the password in password_env"
                } else {
                    "check smtp_url (smtps:// is usually port 465, smtp+starttls:// port 587)"
                }
            )),
        };
        vec![imap, smtp]
    }

    async fn run(&self, ctx: ChannelContext) -> Result<(), ChannelError> {
        receive::run(self, ctx).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, ChannelError> {
        if !message.buttons.is_empty() {
            return Err(ChannelError::rejected(
                "email has no buttons: confirmations use typed codes",
            ));
        }
        self.outbound.send(message).await
    }

    async fn edit(
        &self,
        _target: &MessageRef,
        _message: &OutboundMessage,
    ) -> Result<(), ChannelError> {
        Err(ChannelError::rejected("a sent mail cannot be edited"))
    }

    async fn fetch_attachment(
        &self,
        attachment: &Attachment,
        max_bytes: u64,
    ) -> Result<Vec<u8>, ChannelError> {
        let source = attachment.source.as_deref().unwrap_or_default();
        let part = PartRef::parse(source).ok_or_else(|| {
            ChannelError::rejected(format!("`{source}` is not an attachment of a mail"))
        })?;
        // Refused by the size the mail declared, before a connection is made.
        if let Some(size) = attachment.size
            && size > max_bytes
        {
            return Err(ChannelError::rejected(format!(
                "the attachment is {size} bytes, over the limit of {max_bytes}"
            )));
        }
        let limit = self.settings.command_timeout;
        let mut session = imap::connect(
            &self.settings.imap,
            &self.settings.username,
            &self.settings.password,
            limit,
        )
        .await?;
        let result = self.fetch_part(&mut session, &part, max_bytes).await;
        // Ignored: the part is fetched (or not) either way; the server drops the session.
        let _ = timed(limit, "logout", session.logout()).await;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_old_ones_parse() {
        let cursor = Cursor {
            validity: 7,
            uid: 42,
            saved_at: 1_700_000_000,
            seen_at: 1_699_999_000,
            floor: 1_600_000_000,
            floor_uid: 40,
        };
        assert_eq!(Cursor::parse(&cursor.encode()), Some(cursor));
        assert_eq!(
            Cursor::parse("7:42"),
            Some(Cursor {
                validity: 7,
                uid: 42,
                ..Cursor::default()
            })
        );
        assert_eq!(
            Cursor::parse("7:42:1700000000").map(|c| (c.saved_at, c.seen_at)),
            Some((1_700_000_000, 0))
        );
        assert_eq!(Cursor::parse("x"), None);
        // Below the floor: only up to floor_uid, only when known to be older.
        assert!(cursor.before_floor(40, Some(1_500_000_000)));
        assert!(!cursor.before_floor(41, Some(1_500_000_000)));
        assert!(!cursor.before_floor(40, Some(1_600_000_000)));
        assert!(!cursor.before_floor(40, None));
    }
}
