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
//! The password never appears in a log line or an error message.

mod auth;
mod config;
mod error;
pub mod format;
#[doc(hidden)]
pub mod fuzzing;
mod imap;
mod inbound;
mod outbound;

pub use config::{
    EmailConfig, EmailSettings, Endpoint, IMAP_SCHEMES, SMTP_SCHEMES, Security,
    UNVERIFIED_FROM_WARNING, check_address, check_sender, parse_from,
};

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_imap::extensions::idle::IdleResponse;
use async_imap::types::UnsolicitedResponse;
use async_trait::async_trait;
use futures::TryStreamExt;
use hearth_channel::{
    Attachment, Backoff, Capabilities, Channel, ChannelContext, ChannelError, ErrorKind, Format,
    InboundKind, MessageRef, OutboundMessage, sleep_or_shutdown,
};
use tracing::{debug, info, warn};

use crate::imap::{ImapSession, timed};
use crate::inbound::{MailAt, PartRef, Read, Reader};
use crate::outbound::Outbound;

/// The channel's name in config, identities, state and targets.
pub const CHANNEL_NAME: &str = "email";

/// How many mails' sizes one FETCH asks for (the mails themselves come one at a time).
const BATCH: usize = 50;
/// How far back a re-scan after a UIDVALIDITY change reaches before the cursor's last save.
const RESCAN_MARGIN: Duration = Duration::from_secs(3600);

/// Backoff between failed attempts, doubling up to the maximum.
const BACKOFF_START: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

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

    /// One connection's life: login, catch up, then IDLE (or poll) and fetch until the
    /// connection fails or shutdown. `Ok` only after shutdown.
    async fn session(
        &self,
        ctx: &ChannelContext,
        started_at: u64,
        backoff: &mut Backoff,
    ) -> Result<(), ChannelError> {
        let limit = self.settings.command_timeout;
        let connect = imap::connect(
            &self.settings.imap,
            &self.settings.username,
            &self.settings.password,
            limit,
        );
        let mut session = tokio::select! {
            () = ctx.shutdown.cancelled() => return Ok(()),
            session = connect => session?,
        };
        ctx.status.connected();
        let capabilities = timed(limit, "capability", session.capabilities()).await?;
        let idle = capabilities.has_str("IDLE");
        let mailbox = timed(limit, "select", session.select(&self.settings.mailbox)).await?;
        let validity = mailbox.uid_validity.unwrap_or(0);
        let last_uid = mailbox.uid_next.unwrap_or(1).saturating_sub(1);
        info!(mailbox = %self.settings.mailbox, validity, idle, "email connected");
        let stored = match ctx.state.load(&self.cursor_key()).await {
            Ok(stored) => stored.as_deref().and_then(Cursor::parse),
            Err(e) => return Err(ChannelError::transient(format!("loading the cursor: {e}"))),
        };
        let mut cursor = match stored {
            Some(cursor) if cursor.validity == validity => cursor,
            Some(old) => {
                // From the last mail hearth had seen; a cursor saved before arrival times were
                // kept falls back to an hour before its last save.
                let since = match old.seen_at {
                    0 => old.saved_at.saturating_sub(RESCAN_MARGIN.as_secs()),
                    seen => seen,
                };
                warn!(
                    old = old.validity,
                    new = validity,
                    since,
                    "the mailbox's UIDVALIDITY changed: re-scanning the mail that arrived since the last one seen (answered mail is recognised by its Message-ID, older mail is not answered)"
                );
                self.baseline(ctx, &mut session, validity, since, last_uid)
                    .await?
            }
            None => {
                self.baseline(ctx, &mut session, validity, started_at, last_uid)
                    .await?
            }
        };
        loop {
            if self
                .fetch_new(ctx, &mut session, &mut cursor, backoff)
                .await?
            {
                return Ok(());
            }
            backoff.reset();
            // Notices were read by the fetches; what they said is fetched by UID anyway.
            while session.unsolicited_responses.try_recv().is_ok() {}
            if idle {
                // A mail that lands between the search above and the server's "+ idling" is
                // announced before the continuation, which async-imap files with the other
                // notices: look there once IDLE has started, and fetch at once if it did.
                let notices = session.unsolicited_responses.clone();
                let mut handle = session.idle();
                timed(limit, "idle", handle.init()).await?;
                let refresh = self.settings.idle_refresh;
                let pending = std::iter::from_fn(|| notices.try_recv().ok())
                    .filter(|n| matches!(n, UnsolicitedResponse::Exists(_)))
                    .count()
                    > 0;
                let woke = if pending {
                    debug!("mail announced as IDLE started");
                    Ok(Ok(IdleResponse::Timeout))
                } else {
                    let (wait, _stop) = handle.wait_with_timeout(refresh);
                    tokio::select! {
                        () = ctx.shutdown.cancelled() => return Ok(()),
                        // Servers send "still here" now and then, which restarts async-imap's
                        // own timeout: this one re-issues IDLE whatever the server says.
                        woke = tokio::time::timeout(refresh, wait) => woke,
                    }
                };
                match woke {
                    Err(_) | Ok(Ok(IdleResponse::Timeout)) => debug!("re-issuing IDLE"),
                    Ok(Ok(IdleResponse::NewData(_))) => debug!("IDLE woke up"),
                    // We never interrupt IDLE ourselves: this is the stream ending, the server
                    // gone (async-imap reports a closed stream as an interrupt).
                    Ok(Ok(IdleResponse::ManualInterrupt)) => {
                        return Err(ChannelError::transient(
                            "imap idle: the server closed the connection",
                        ));
                    }
                    Ok(Err(e)) => return Err(error::imap("idle", e)),
                }
                session = timed(limit, "done", handle.done()).await?;
            } else {
                if sleep_or_shutdown(&ctx.shutdown, self.settings.poll_interval).await {
                    return Ok(());
                }
                timed(limit, "noop", session.noop()).await?;
            }
        }
    }

    /// The cursor for a mailbox seen for the first time (or under a new UIDVALIDITY): just
    /// before the first mail that arrived at `since` or later, or the mailbox's end. Saved at
    /// once, so a restart keeps the same starting point.
    async fn baseline(
        &self,
        ctx: &ChannelContext,
        session: &mut ImapSession,
        validity: u32,
        since: u64,
        last_uid: u32,
    ) -> Result<Cursor, ChannelError> {
        let limit = self.settings.command_timeout;
        let since_day = chrono::DateTime::from_timestamp(since as i64, 0)
            .unwrap_or_default()
            .checked_sub_signed(chrono::TimeDelta::days(1))
            .unwrap_or_default()
            .format("%d-%b-%Y")
            .to_string();
        let candidates = timed(
            limit,
            "search",
            session.uid_search(format!("SINCE {since_day}")),
        )
        .await?;
        let mut candidates: Vec<u32> = candidates.into_iter().collect();
        candidates.sort_unstable();
        let mut first_new = None;
        for chunk in candidates.chunks(200) {
            let set = uid_set(chunk);
            let fetches: Vec<_> = timed(limit, "fetch", async {
                session
                    .uid_fetch(&set, "(UID INTERNALDATE)")
                    .await?
                    .try_collect::<Vec<_>>()
                    .await
            })
            .await?;
            let mut newer: Vec<u32> = fetches
                .iter()
                .filter(|f| {
                    f.internal_date()
                        .is_some_and(|d| d.timestamp() >= since as i64)
                })
                .filter_map(|f| f.uid)
                .collect();
            newer.sort_unstable();
            if let Some(&uid) = newer.first() {
                first_new = Some(uid);
                break;
            }
        }
        let uid = match first_new {
            Some(uid) => uid.saturating_sub(1),
            None => last_uid.max(candidates.last().copied().unwrap_or(0)),
        };
        let cursor = Cursor {
            validity,
            uid,
            saved_at: now_secs(),
            seen_at: since,
            floor: since,
            floor_uid: last_uid.max(candidates.last().copied().unwrap_or(0)),
        };
        info!(uid, validity, "email starts after UID {uid}");
        self.save(ctx, &cursor).await;
        Ok(cursor)
    }

    async fn save(&self, ctx: &ChannelContext, cursor: &Cursor) {
        if let Err(e) = ctx.state.save(&self.cursor_key(), &cursor.encode()).await {
            // A stale cursor means mail fetched again, and the inbox drops it by Message-ID.
            warn!(error = %e, "could not save the email cursor");
        }
    }

    /// Fetches and delivers everything past the cursor, in UID order, one mail at a time (a
    /// batch of large mails must not sit in memory together). Returns `true` on shutdown.
    async fn fetch_new(
        &self,
        ctx: &ChannelContext,
        session: &mut ImapSession,
        cursor: &mut Cursor,
        backoff: &mut Backoff,
    ) -> Result<bool, ChannelError> {
        let limit = self.settings.command_timeout;
        loop {
            let found = timed(
                limit,
                "search",
                session.uid_search(format!("UID {}:*", cursor.uid.saturating_add(1))),
            )
            .await?;
            // `n:*` always matches the last mail, even below n.
            let mut uids: Vec<u32> = found.into_iter().filter(|&u| u > cursor.uid).collect();
            if uids.is_empty() {
                return Ok(false);
            }
            uids.sort_unstable();
            for chunk in uids.chunks(BATCH) {
                let set = uid_set(chunk);
                let fetched: Vec<_> = timed(limit, "fetch", async {
                    session
                        .uid_fetch(&set, "(UID RFC822.SIZE INTERNALDATE)")
                        .await?
                        .try_collect::<Vec<_>>()
                        .await
                })
                .await?;
                let mut sizes: Vec<(u32, u32, Option<u64>)> = fetched
                    .iter()
                    .filter_map(|f| {
                        let arrived = f
                            .internal_date()
                            .and_then(|d| u64::try_from(d.timestamp()).ok());
                        Some((f.uid?, f.size.unwrap_or(0), arrived))
                    })
                    .collect();
                sizes.sort_unstable();
                for (uid, size, arrived) in sizes {
                    if uid <= cursor.uid {
                        continue;
                    }
                    if cursor.before_floor(uid, arrived) {
                        info!(
                            uid,
                            "mail from before the last one hearth had seen, found again after a UIDVALIDITY change: not answered"
                        );
                    } else if let Some(raw) = self.fetch_mail(session, uid, size).await? {
                        let at = MailAt {
                            mailbox: self.settings.mailbox.clone(),
                            validity: cursor.validity,
                            uid,
                        };
                        let read = self
                            .reader
                            .read_within(raw.into(), at, self.settings.parse_budget)
                            .await;
                        if self.hand_over(ctx, session, uid, read, backoff).await? {
                            return Ok(true);
                        }
                    }
                    cursor.uid = uid;
                    cursor.saved_at = now_secs();
                    cursor.seen_at = cursor.seen_at.max(arrived.unwrap_or(0));
                    self.save(ctx, cursor).await;
                }
            }
        }
    }

    /// One mail: whole when it is within `max_message_bytes` (by its declared RFC822.SIZE,
    /// checked before any of it is fetched), else its header and a note saying only the header
    /// was read. `None` when the mail is gone.
    async fn fetch_mail(
        &self,
        session: &mut ImapSession,
        uid: u32,
        size: u32,
    ) -> Result<Option<Vec<u8>>, ChannelError> {
        let limit = self.settings.command_timeout;
        let whole = size <= self.settings.max_message_bytes;
        let query = if whole {
            "(UID BODY.PEEK[])"
        } else {
            "(UID BODY.PEEK[HEADER])"
        };
        let fetched: Vec<_> = timed(limit, "fetch", async {
            session
                .uid_fetch(uid.to_string(), query)
                .await?
                .try_collect::<Vec<_>>()
                .await
        })
        .await?;
        let Some(fetch) = fetched.iter().find(|f| f.uid == Some(uid)) else {
            return Ok(None);
        };
        if whole {
            return Ok(fetch.body().map(<[u8]>::to_vec));
        }
        Ok(fetch.header().map(|head| {
            let mut raw = head.to_vec();
            raw.extend_from_slice(
                format!(
                    "\r\n(This mail is {size} bytes, larger than the {} bytes hearth reads; only its headers were read.)\r\n",
                    self.settings.max_message_bytes
                )
                .as_bytes(),
            );
            raw
        }))
    }

    /// Hands what was read of one mail to the inbox, and marks an answered mail as read.
    /// Returns `true` on shutdown.
    async fn hand_over(
        &self,
        ctx: &ChannelContext,
        session: &mut ImapSession,
        uid: u32,
        read: Read,
        backoff: &mut Backoff,
    ) -> Result<bool, ChannelError> {
        let event = match read {
            Read::Unreadable(reason) => {
                // Left unread in the mailbox for the user; later mail goes on.
                tracing::error!(uid, %reason, "mail set aside: it cannot be read");
                return Ok(false);
            }
            Read::SetAside { reason, notice } => {
                tracing::error!(uid, %reason, "mail set aside unread: reading it took too long");
                match notice {
                    Some(notice) => notice,
                    None => return Ok(false),
                }
            }
            Read::Event(event) => event,
        };
        let answered = matches!(event.kind, InboundKind::Message { .. });
        if let InboundKind::Notice { reason, .. } = &event.kind {
            info!(uid, from = %event.sender.id, %reason, "mail kept, never answered");
        }
        loop {
            let stored = tokio::select! {
                () = ctx.shutdown.cancelled() => return Ok(true),
                stored = ctx.sink.deliver((*event).clone()) => stored,
            };
            match stored {
                Ok(()) => break,
                Err(e) => {
                    warn!(uid, error = %e, "inbox refused a mail; will retry");
                    if sleep_or_shutdown(&ctx.shutdown, backoff.next()).await {
                        return Ok(true);
                    }
                }
            }
        }
        if answered {
            // Best effort: a mail left unread is fetched by UID, not by flag.
            let limit = self.settings.command_timeout;
            let seen = timed(limit, "store", async {
                session
                    .uid_store(uid.to_string(), "+FLAGS.SILENT (\\Seen)")
                    .await?
                    .try_collect::<Vec<_>>()
                    .await
            })
            .await;
            if let Err(e) = seen {
                warn!(uid, error = %e, "could not mark a mail as read");
                return Err(e);
            }
        }
        Ok(false)
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

/// `1,2,5` for the UIDs given.
fn uid_set(uids: &[u32]) -> String {
    uids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
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
        let started_at = now_secs();
        let mut backoff = Backoff::new(BACKOFF_START, BACKOFF_MAX);
        loop {
            let result = self.session(&ctx, started_at, &mut backoff).await;
            if ctx.shutdown.is_cancelled() {
                return Ok(());
            }
            match result {
                Ok(()) => return Ok(()),
                Err(error) if matches!(error.kind, ErrorKind::Auth | ErrorKind::Config) => {
                    tracing::error!(%error, "email channel stopped");
                    ctx.status.failed(error.to_string());
                    return Err(error);
                }
                Err(error) => {
                    // Not "connection lost": the error may be that none was ever made.
                    warn!(%error, "email: reconnecting after an error");
                    ctx.status.reconnecting(error.to_string());
                    if sleep_or_shutdown(&ctx.shutdown, backoff.next()).await {
                        return Ok(());
                    }
                }
            }
        }
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
