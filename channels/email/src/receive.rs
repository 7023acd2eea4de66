//! The receive loop: log in, catch up from the cursor, then IDLE (or poll) and hand each new
//! mail to the sink, saving the cursor only after the sink stored what came before it.

use std::time::Duration;

use async_imap::extensions::idle::IdleResponse;
use async_imap::types::UnsolicitedResponse;
use futures::TryStreamExt;
use hearth_channel::{
    Backoff, ChannelContext, ChannelError, ErrorKind, InboundKind, sleep_or_shutdown,
};
use tracing::{debug, info, warn};

use crate::imap::{ImapSession, timed};
use crate::inbound::{MailAt, Read};

use crate::{Cursor, EmailChannel, error, imap, now_secs};

/// How many mails' sizes one FETCH asks for (the mails themselves come one at a time).
const BATCH: usize = 50;
/// How far back a re-scan after a UIDVALIDITY change reaches before the cursor's last save.
const RESCAN_MARGIN: Duration = Duration::from_secs(3600);

/// Backoff between failed attempts, doubling up to the maximum.
const BACKOFF_START: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// The receive loop: one IMAP session after another ([`EmailChannel::session`]) until
/// shutdown, or until the server refuses the login.
pub(crate) async fn run(channel: &EmailChannel, ctx: ChannelContext) -> Result<(), ChannelError> {
    let started_at = now_secs();
    let mut backoff = Backoff::new(BACKOFF_START, BACKOFF_MAX);
    loop {
        let result = channel.session(&ctx, started_at, &mut backoff).await;
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

impl EmailChannel {
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
}

/// `1,2,5` for the UIDs given.
fn uid_set(uids: &[u32]) -> String {
    uids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
