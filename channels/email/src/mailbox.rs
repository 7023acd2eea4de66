//! The owner's mailbox as hearth's mail tools reach it (`search_email`, `read_email`,
//! `list_unread`, `send_email`, `reply_email`), apart from the channel: one short session per
//! call on the same connection code (TLS or STARTTLS, every command under a time limit).
//!
//! - Searching is the server's work: `UID SEARCH` with the criteria quoted and escaped (never
//!   whitelisted), then one `UID FETCH` of only the hits' header fields. A mailbox is never
//!   downloaded to be searched.
//! - Non-ASCII search words go as the server can take them: plain UTF-8 after
//!   `ENABLE UTF8=ACCEPT` (RFC 6855 forbids `CHARSET` then), else `CHARSET UTF-8` with
//!   non-synchronising literals (`LITERAL+`). A server that takes neither, or answers
//!   `BADCHARSET` (Outlook), searches the ASCII criteria and the dates itself, and hearth reads
//!   the header fields of the newest [`FALLBACK_CANDIDATES`] of those hits and keeps the ones
//!   whose From, To or Subject hold the non-ASCII words; the answer says what was not searched.
//! - Reading never changes flags: folders are opened with `EXAMINE` and fetched with
//!   `BODY.PEEK`, so nothing is marked `\Seen`.
//! - Mail is parsed off the async runtime under a time budget, so a crafted mail cannot hold a
//!   worker or take the daemon down with a panic.
//! - Sending builds one mail from a [`Draft`] (exactly its fields), sends it over SMTP and
//!   appends it to the Sent folder (SPECIAL-USE `\Sent`, else a folder named Sent) when there is
//!   one.

use std::collections::HashSet;
use std::time::Duration;

use async_imap::types::{Fetch, NameAttribute};
use futures::TryStreamExt;
use hearth_channel::{ChannelError, ErrorKind};
use lettre::AsyncTransport;
use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use mail_parser::{Address, Message, MessageParser, MimeHeaders};

use crate::config::Endpoint;
use crate::imap::{self, ImapSession, timed};
use crate::inbound::{html_to_text, within_budget};
use crate::{error, outbound};

/// Mail larger than this is shown by its headers only.
pub const MAX_READ_BYTES: u32 = 10 * 1024 * 1024;
/// How long parsing one mail may take.
const PARSE_BUDGET: Duration = Duration::from_secs(10);
/// The header fields a search result shows.
const SUMMARY_FIELDS: &str = "FROM TO CC SUBJECT DATE MESSAGE-ID";
/// How many mails' header fields a search whose non-ASCII words the server refuses reads, newest
/// first, to look for them itself.
pub const FALLBACK_CANDIDATES: usize = 500;

/// One configured mailbox: where it is and who logs in. Its `Debug` leaves the password out.
#[derive(Clone)]
pub struct Account {
    pub imap: Endpoint,
    /// Without one the mailbox can be read but not sent from.
    pub smtp: Option<Endpoint>,
    pub username: String,
    pub password: String,
    /// The owner's From: an address, with a display name when the config gave one.
    pub from: Mailbox,
    /// Time limit of every IMAP command and of a whole SMTP send.
    pub command_timeout: Duration,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account")
            .field("imap", &self.imap)
            .field("smtp", &self.smtp)
            .field("username", &self.username)
            .field("from", &self.from.to_string())
            .finish_non_exhaustive()
    }
}

/// A search: every given criterion must match. Dates are the server's arrival dates.
#[derive(Clone, Debug, Default)]
pub struct Query {
    pub folder: String,
    pub from: Option<String>,
    pub to: Option<String>,
    pub subject: Option<String>,
    /// Anywhere in the headers or the body.
    pub text: Option<String>,
    /// Arrived on or after this day.
    pub since: Option<chrono::NaiveDate>,
    /// Arrived before this day.
    pub before: Option<chrono::NaiveDate>,
    pub unread_only: bool,
    /// The newest this many of the hits are shown.
    pub limit: usize,
}

/// One mail in a list: its headers, never its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    pub uid: u32,
    pub from: String,
    pub to: String,
    pub subject: String,
    /// As the mail's `Date` header says, in RFC 3339.
    pub date: Option<String>,
    pub unread: bool,
    pub size: u32,
}

/// What a search found: how many matched, and the newest of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub total: usize,
    pub mails: Vec<Summary>,
    /// What the search could not do, when the server refused its non-ASCII words and hearth
    /// looked through the headers itself.
    pub note: Option<String>,
}

/// An attachment, named and sized, never fetched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachmentInfo {
    pub name: String,
    pub mime: String,
    pub size: u64,
}

/// One mail read whole, as text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mail {
    pub uid: u32,
    pub from: String,
    pub reply_to: Option<String>,
    pub to: String,
    pub cc: String,
    pub subject: String,
    pub date: Option<String>,
    pub message_id: Option<String>,
    /// `References` then `Message-ID`: what a reply's `References` carries.
    pub thread: Vec<String>,
    /// The text/plain body, or the HTML one turned into text.
    pub text: String,
    pub attachments: Vec<AttachmentInfo>,
    pub unread: bool,
    /// Set when the mail was over [`MAX_READ_BYTES`] and only its headers were read.
    pub headers_only: bool,
}

/// A mail to send: exactly these fields, and nothing the model did not write besides the
/// owner's From, a Message-ID, the date and the threading headers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Draft {
    pub to: Vec<String>,
    pub cc: Vec<String>,
    pub subject: String,
    pub body: String,
    pub in_reply_to: Option<String>,
    pub references: Vec<String>,
}

/// What a send did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    pub message_id: String,
    /// The folder the copy went to, if any.
    pub saved_in: Option<String>,
    /// Why no copy was kept, when the server has a Sent folder but the append failed.
    pub not_saved: Option<String>,
}

/// How the server takes non-ASCII search words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Charset {
    /// `UTF8=ACCEPT` enabled: UTF-8 quoted strings, no `CHARSET`.
    Utf8Accept,
    /// `CHARSET UTF-8` with `{n+}` literals.
    LiteralPlus,
    /// Neither: ASCII only.
    AsciiOnly,
}

impl Account {
    /// An account from its config entry's values: URLs checked as the channel checks them,
    /// `address` as `Name <address>` or a bare address. The errors never hold the password.
    pub fn new(
        imap_url: &str,
        smtp_url: Option<&str>,
        username: &str,
        password: String,
        address: &str,
        command_timeout: Duration,
    ) -> Result<Self, String> {
        use crate::config::{IMAP_SCHEMES, SMTP_SCHEMES, check_endpoint, parse_from};
        let imap = check_endpoint(imap_url, IMAP_SCHEMES).map_err(|e| format!("imap_url: {e}"))?;
        let smtp = smtp_url
            .map(|url| check_endpoint(url, SMTP_SCHEMES).map_err(|e| format!("smtp_url: {e}")))
            .transpose()?;
        let (name, address) = parse_from(address).map_err(|e| format!("address: {e}"))?;
        let address = address
            .parse()
            .map_err(|e| format!("address: `{address}`: {e}"))?;
        Ok(Self {
            imap,
            smtp,
            username: username.to_owned(),
            password,
            from: Mailbox::new(name, address),
            command_timeout,
        })
    }

    async fn session(&self) -> Result<ImapSession, ChannelError> {
        imap::connect(
            &self.imap,
            &self.username,
            &self.password,
            self.command_timeout,
        )
        .await
    }

    /// Runs `work` on a fresh session and logs out, whatever `work` returned.
    async fn with_session<T>(
        &self,
        work: impl AsyncFnOnce(&mut ImapSession) -> Result<T, ChannelError>,
    ) -> Result<T, ChannelError> {
        let mut session = self.session().await?;
        let result = work(&mut session).await;
        // Ignored: the answer is in hand; the server drops the session anyway.
        let _ = timed(self.command_timeout, "logout", session.logout()).await;
        result
    }

    /// The mails matching `query`, newest first, headers only.
    pub async fn search(&self, query: &Query) -> Result<Found, ChannelError> {
        let limit = self.command_timeout;
        self.with_session(async |session| {
            let charset = if needs_charset(query) {
                charset(session, limit).await?
            } else {
                Charset::AsciiOnly
            };
            timed(limit, "examine", session.examine(&query.folder)).await?;
            if charset == Charset::AsciiOnly && needs_charset(query) {
                return headers_search(session, query, limit).await;
            }
            let criteria = criteria(query, charset)?;
            let Some(mut uids) = timed(limit, "search", uid_search(session, &criteria)).await?
            else {
                return headers_search(session, query, limit).await;
            };
            uids.sort_unstable_by(|a, b| b.cmp(a));
            let total = uids.len();
            uids.truncate(query.limit.max(1));
            let mails = summaries(session, &uids, limit).await?;
            Ok(Found {
                total,
                mails,
                note: None,
            })
        })
        .await
    }

    /// One mail of `folder`, read as text without marking it read.
    pub async fn read(&self, folder: &str, uid: u32) -> Result<Mail, ChannelError> {
        let limit = self.command_timeout;
        self.with_session(async |session| {
            timed(limit, "examine", session.examine(folder)).await?;
            let sizes = fetch(session, uid, "(UID FLAGS RFC822.SIZE)", limit).await?;
            let Some(first) = sizes.iter().find(|f| f.uid == Some(uid)) else {
                return Err(not_found(folder, uid));
            };
            let unread = !is_seen(first);
            let size = first.size.unwrap_or(0);
            let headers_only = size > MAX_READ_BYTES;
            let item = if headers_only {
                "(UID BODY.PEEK[HEADER])"
            } else {
                "(UID BODY.PEEK[])"
            };
            let fetched = fetch(session, uid, item, limit).await?;
            let raw = fetched
                .iter()
                .find(|f| f.uid == Some(uid))
                .and_then(|f| if headers_only { f.header() } else { f.body() })
                .map(<[u8]>::to_vec)
                .ok_or_else(|| not_found(folder, uid))?;
            let mut mail = within_budget(PARSE_BUDGET, move || read_mail(&raw))
                .await
                .map_err(|why| ChannelError::rejected(format!("cannot read mail {uid}: {why}")))?
                .ok_or_else(|| {
                    ChannelError::rejected(format!("mail {uid} is not a mail hearth can read"))
                })?;
            mail.uid = uid;
            mail.unread = unread;
            mail.headers_only = headers_only;
            if headers_only {
                mail.text = format!(
                    "[This mail is {size} bytes, over the {MAX_READ_BYTES} bytes hearth reads: only its headers were read.]"
                );
            }
            Ok(mail)
        })
        .await
    }

    /// The `Message-ID` and `References` of mail `uid`, for a reply's threading headers:
    /// headers only, without marking it read.
    pub async fn thread_of(&self, folder: &str, uid: u32) -> Result<Vec<String>, ChannelError> {
        let limit = self.command_timeout;
        self.with_session(async |session| {
            timed(limit, "examine", session.examine(folder)).await?;
            let item = "(UID BODY.PEEK[HEADER.FIELDS (MESSAGE-ID REFERENCES IN-REPLY-TO)])";
            let fetched = fetch(session, uid, item, limit).await?;
            let raw = fetched
                .iter()
                .find(|f| f.uid == Some(uid))
                .and_then(Fetch::header)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| not_found(folder, uid))?;
            within_budget(PARSE_BUDGET, move || {
                let parsed = MessageParser::default().parse_headers(&raw[..]);
                parsed.map(|m| thread(&m)).unwrap_or_default()
            })
            .await
            .map_err(|why| ChannelError::rejected(format!("cannot read mail {uid}: {why}")))
        })
        .await
    }

    /// The mail `draft` becomes, as it is sent: From, To, Cc, Subject, the body as text/plain,
    /// a fresh Message-ID, the date and the threading headers.
    pub fn build(&self, draft: &Draft) -> Result<lettre::Message, ChannelError> {
        let mut builder = lettre::Message::builder()
            .from(self.from.clone())
            .subject(draft.subject.clone())
            .message_id(Some(message_id(&self.from)))
            .date_now();
        if draft.to.is_empty() {
            return Err(ChannelError::rejected(
                "a mail needs at least one recipient",
            ));
        }
        for to in &draft.to {
            builder = builder.to(address(to)?);
        }
        for cc in &draft.cc {
            builder = builder.cc(address(cc)?);
        }
        if let Some(id) = &draft.in_reply_to {
            builder = builder.in_reply_to(id.clone());
        }
        if !draft.references.is_empty() {
            builder = builder.references(draft.references.join(" "));
        }
        builder
            .header(ContentType::TEXT_PLAIN)
            .body(draft.body.clone())
            .map_err(|e| ChannelError::rejected(format!("cannot build the mail: {e}")))
    }

    /// Sends `draft` over SMTP and keeps a copy in the Sent folder when the server has one.
    pub async fn send(&self, draft: &Draft) -> Result<Sent, ChannelError> {
        let Some(smtp) = &self.smtp else {
            return Err(ChannelError::config(
                "this mailbox has no smtp_url, so it cannot send",
            ));
        };
        let mail = self.build(draft)?;
        let message_id = mail
            .headers()
            .get_raw("Message-ID")
            .unwrap_or_default()
            .to_owned();
        let bytes = mail.formatted();
        let transport =
            outbound::transport(smtp, &self.username, &self.password, self.command_timeout)?;
        match tokio::time::timeout(self.command_timeout, transport.send(mail)).await {
            Err(_) => {
                return Err(ChannelError::outcome_unknown(
                    "smtp: the server did not finish the send in time; the mail may have gone out",
                ));
            }
            Ok(Err(e)) => return Err(error::smtp(&e)),
            Ok(Ok(_)) => {}
        }
        let (saved_in, not_saved) = match self.save_sent(&bytes).await {
            Ok(folder) => (folder, None),
            Err(e) => (None, Some(e.message)),
        };
        Ok(Sent {
            message_id,
            saved_in,
            not_saved,
        })
    }

    /// Appends a sent mail, marked read, to the Sent folder; `None` when there is none.
    async fn save_sent(&self, bytes: &[u8]) -> Result<Option<String>, ChannelError> {
        let limit = self.command_timeout;
        self.with_session(async |session| {
            let names: Vec<_> = timed(limit, "list", async {
                session
                    .list(Some(""), Some("*"))
                    .await?
                    .try_collect::<Vec<_>>()
                    .await
            })
            .await?;
            let special = names
                .iter()
                .find(|n| n.attributes().contains(&NameAttribute::Sent));
            let named = || {
                names.iter().find(|n| {
                    let name = n.name();
                    let leaf = n
                        .delimiter()
                        .and_then(|d| name.rsplit(d).next())
                        .unwrap_or(name);
                    leaf.eq_ignore_ascii_case("Sent")
                })
            };
            let Some(folder) = special.or_else(named).map(|n| n.name().to_owned()) else {
                return Ok(None);
            };
            timed(
                limit,
                "append",
                session.append(&folder, Some("(\\Seen)"), None, bytes),
            )
            .await?;
            Ok(Some(folder))
        })
        .await
    }
}

/// Whether any search word is outside ASCII.
fn needs_charset(query: &Query) -> bool {
    [&query.from, &query.to, &query.subject, &query.text]
        .into_iter()
        .flatten()
        .any(|v| !v.is_ascii())
}

/// How this server takes non-ASCII search words (see the module header).
async fn charset(session: &mut ImapSession, limit: Duration) -> Result<Charset, ChannelError> {
    let capabilities = timed(limit, "capability", session.capabilities()).await?;
    if capabilities.has_str("UTF8=ACCEPT") {
        timed(
            limit,
            "enable",
            session.run_command_and_check_ok("ENABLE UTF8=ACCEPT"),
        )
        .await?;
        return Ok(Charset::Utf8Accept);
    }
    if capabilities.has_str("LITERAL+") {
        return Ok(Charset::LiteralPlus);
    }
    Ok(Charset::AsciiOnly)
}

/// The `UID SEARCH` criteria of `query`.
fn criteria(query: &Query, charset: Charset) -> Result<String, ChannelError> {
    let mut keys = Vec::new();
    for (key, value) in [
        ("FROM", &query.from),
        ("TO", &query.to),
        ("SUBJECT", &query.subject),
        ("TEXT", &query.text),
    ] {
        if let Some(value) = value {
            keys.push(format!("{key} {}", search_string(value, charset)?));
        }
    }
    if let Some(day) = query.since {
        keys.push(format!("SINCE {}", imap_date(day)));
    }
    if let Some(day) = query.before {
        keys.push(format!("BEFORE {}", imap_date(day)));
    }
    if query.unread_only {
        keys.push("UNSEEN".into());
    }
    if keys.is_empty() {
        keys.push("ALL".into());
    }
    let keys = keys.join(" ");
    Ok(if charset == Charset::LiteralPlus && needs_charset(query) {
        format!("CHARSET UTF-8 {keys}")
    } else {
        keys
    })
}

/// One search word as IMAP has it: line breaks and other controls become spaces (a quoted
/// string cannot hold them, and a line break would end the command), `\` and `"` are escaped,
/// and non-ASCII text goes as the server takes it.
fn search_string(value: &str, charset: Charset) -> Result<String, ChannelError> {
    let value: String = value
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if value.is_ascii() || charset == Charset::Utf8Accept {
        let escaped = value.replace('\\', "\\\\").replace('"', "\\\"");
        return Ok(format!("\"{escaped}\""));
    }
    match charset {
        // A non-synchronising literal: the bytes follow the line at once, with no round trip.
        Charset::LiteralPlus => Ok(format!("{{{}+}}\r\n{value}", value.len())),
        _ => Err(ChannelError::rejected(format!(
            "this mail server cannot search for non-ASCII text such as `{value}` (it offers neither UTF8=ACCEPT nor LITERAL+): search with ASCII words, a sender's address or dates"
        ))),
    }
}

/// A search the server cannot take in full (its non-ASCII words refused): the server searches
/// the ASCII criteria, the dates and `UNSEEN`; hearth reads the header fields of the newest
/// [`FALLBACK_CANDIDATES`] hits and keeps those whose From, To or Subject hold every non-ASCII
/// word, as SEARCH matches (case-insensitive substrings). A non-ASCII `text` is looked for in
/// those headers only, and the answer's note says so.
async fn headers_search(
    session: &mut ImapSession,
    query: &Query,
    limit: Duration,
) -> Result<Found, ChannelError> {
    let ascii = |v: &Option<String>| v.clone().filter(|v| v.is_ascii());
    let server_part = Query {
        from: ascii(&query.from),
        to: ascii(&query.to),
        subject: ascii(&query.subject),
        text: ascii(&query.text),
        ..query.clone()
    };
    let criteria = criteria(&server_part, Charset::AsciiOnly)?;
    let mut uids = timed(limit, "search", uid_search(session, &criteria))
        .await?
        .ok_or_else(|| ChannelError::rejected("the mail server refused a search in ASCII"))?;
    uids.sort_unstable_by(|a, b| b.cmp(a));
    let candidates = uids.len();
    uids.truncate(FALLBACK_CANDIDATES);
    let words = |v: &Option<String>| {
        v.as_deref()
            .filter(|v| !v.is_ascii())
            .map(str::to_lowercase)
    };
    let (from, to, subject, text) = (
        words(&query.from),
        words(&query.to),
        words(&query.subject),
        words(&query.text),
    );
    let holds = |field: &str, word: &Option<String>| {
        word.as_ref()
            .is_none_or(|w| field.to_lowercase().contains(w.as_str()))
    };
    let mut mails: Vec<Summary> = summaries(session, &uids, limit)
        .await?
        .into_iter()
        .filter(|m| {
            holds(&m.from, &from)
                && holds(&m.to, &to)
                && holds(&m.subject, &subject)
                && (holds(&m.from, &text) || holds(&m.to, &text) || holds(&m.subject, &text))
        })
        .collect();
    let total = mails.len();
    mails.truncate(query.limit.max(1));
    let mut note = String::from(
        "this mail server does not search for non-ASCII words, so hearth looked for them in the From, To and Subject of the mails",
    );
    if text.is_some() {
        note.push_str("; the bodies were not searched for the non-ASCII text");
    }
    if candidates > FALLBACK_CANDIDATES {
        note.push_str(&format!(
            "; only the newest {FALLBACK_CANDIDATES} of {candidates} mails were looked through: narrow the search with since, before or ASCII words"
        ));
    }
    Ok(Found {
        total,
        mails,
        note: Some(note),
    })
}

/// The uids `UID SEARCH criteria` finds, or `None` when the server refuses the search's charset
/// (`NO [BADCHARSET]`). Written here because async-imap's `uid_search` never reads the
/// command's status: a NO or a BAD would look like a search with no hits.
async fn uid_search(
    session: &mut ImapSession,
    criteria: &str,
) -> Result<Option<Vec<u32>>, async_imap::error::Error> {
    use async_imap::error::Error;
    use async_imap::imap_proto::{MailboxDatum, Response, ResponseCode, Status};
    let tag = session
        .run_command(format!("UID SEARCH {criteria}"))
        .await?;
    let mut uids = Vec::new();
    while let Some(response) = session.read_response().await? {
        match response.parsed() {
            Response::MailboxData(MailboxDatum::Search(found)) => uids.extend_from_slice(found),
            Response::Done {
                tag: done,
                status,
                outcome,
            } if *done == tag => {
                let why = outcome
                    .information
                    .as_deref()
                    .unwrap_or_default()
                    .to_owned();
                return match status {
                    Status::Ok => Ok(Some(uids)),
                    _ if matches!(outcome.code, Some(ResponseCode::BadCharset(_))) => Ok(None),
                    Status::Bad => Err(Error::Bad(why)),
                    _ => Err(Error::No(why)),
                };
            }
            // Other untagged answers (EXISTS, EXPUNGE) do not matter to a search.
            _ => {}
        }
    }
    Err(Error::ConnectionLost)
}

/// `1-Feb-2026`, as SEARCH takes dates.
fn imap_date(day: chrono::NaiveDate) -> String {
    day.format("%-d-%b-%Y").to_string()
}

async fn fetch(
    session: &mut ImapSession,
    uid: u32,
    items: &str,
    limit: Duration,
) -> Result<Vec<Fetch>, ChannelError> {
    timed(limit, "fetch", async {
        session
            .uid_fetch(uid.to_string(), items)
            .await?
            .try_collect::<Vec<_>>()
            .await
    })
    .await
}

/// The header fields of `uids` in one FETCH, as summaries in the order of `uids`.
async fn summaries(
    session: &mut ImapSession,
    uids: &[u32],
    limit: Duration,
) -> Result<Vec<Summary>, ChannelError> {
    if uids.is_empty() {
        return Ok(Vec::new());
    }
    let set: Vec<String> = uids.iter().map(u32::to_string).collect();
    let items = format!("(UID FLAGS RFC822.SIZE BODY.PEEK[HEADER.FIELDS ({SUMMARY_FIELDS})])");
    let fetched: Vec<Fetch> = timed(limit, "fetch", async {
        session
            .uid_fetch(set.join(","), &items)
            .await?
            .try_collect::<Vec<_>>()
            .await
    })
    .await?;
    let heads: Vec<(u32, bool, u32, Vec<u8>)> = fetched
        .iter()
        .filter_map(|f| {
            let uid = f.uid?;
            Some((
                uid,
                !is_seen(f),
                f.size.unwrap_or(0),
                f.header().unwrap_or_default().to_vec(),
            ))
        })
        .collect();
    let mut found = within_budget(PARSE_BUDGET, move || {
        heads
            .into_iter()
            .map(|(uid, unread, size, head)| {
                let parsed = MessageParser::default().parse_headers(&head[..]);
                let field = |get: fn(&Message<'_>) -> String| parsed.as_ref().map(get);
                Summary {
                    uid,
                    from: field(|m| addresses(m.from())).unwrap_or_default(),
                    to: field(|m| addresses(m.to())).unwrap_or_default(),
                    subject: field(|m| m.subject().unwrap_or_default().to_owned())
                        .unwrap_or_default(),
                    date: parsed
                        .as_ref()
                        .and_then(|m| m.date())
                        .map(mail_parser::DateTime::to_rfc3339),
                    unread,
                    size,
                }
            })
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|why| ChannelError::rejected(format!("cannot read the mails' headers: {why}")))?;
    let order: Vec<u32> = uids.to_vec();
    found.sort_by_key(|s| order.iter().position(|u| *u == s.uid));
    Ok(found)
}

fn is_seen(fetch: &Fetch) -> bool {
    fetch
        .flags()
        .any(|f| matches!(f, async_imap::types::Flag::Seen))
}

fn not_found(folder: &str, uid: u32) -> ChannelError {
    ChannelError::rejected(format!(
        "there is no mail {uid} in {folder}: search again for its current uid"
    ))
}

/// A mail as text; `None` when the bytes are no mail at all.
fn read_mail(raw: &[u8]) -> Option<Mail> {
    let message = MessageParser::default().parse(raw)?;
    let text = if message.text_body_count() > 0 {
        message.body_text(0).map(|t| t.into_owned())
    } else {
        message.body_html(0).map(|html| html_to_text(&html))
    }
    .unwrap_or_default();
    let attachments = message
        .attachments()
        .map(|part| AttachmentInfo {
            name: part
                .attachment_name()
                .unwrap_or("(unnamed attachment)")
                .to_owned(),
            mime: part
                .content_type()
                .map(|c| match c.subtype() {
                    Some(sub) => format!("{}/{}", c.ctype(), sub).to_ascii_lowercase(),
                    None => c.ctype().to_ascii_lowercase(),
                })
                .unwrap_or_else(|| "application/octet-stream".into()),
            size: part.len() as u64,
        })
        .collect();
    Some(Mail {
        uid: 0,
        from: addresses(message.from()),
        reply_to: Some(addresses(message.reply_to())).filter(|s| !s.is_empty()),
        to: addresses(message.to()),
        cc: addresses(message.cc()),
        subject: message.subject().unwrap_or_default().to_owned(),
        date: message.date().map(mail_parser::DateTime::to_rfc3339),
        message_id: message.message_id().map(|id| format!("<{id}>")),
        thread: thread(&message),
        text,
        attachments,
        unread: false,
        headers_only: false,
    })
}

/// `References` then `Message-ID`, bracketed, without repeats: a reply's `References`.
fn thread(message: &Message<'_>) -> Vec<String> {
    let mut ids: Vec<String> = message
        .references()
        .as_text_list()
        .unwrap_or_default()
        .iter()
        .map(|id| format!("<{id}>"))
        .collect();
    if let Some(id) = message.message_id() {
        ids.push(format!("<{id}>"));
    }
    let mut seen = HashSet::new();
    ids.retain(|id| seen.insert(id.clone()));
    // Long threads: the first and the last references are the ones that matter (RFC 5322).
    if ids.len() > 20 {
        let tail = ids.split_off(ids.len() - 19);
        ids.truncate(1);
        ids.extend(tail);
    }
    ids
}

/// `Name <address>, address` as a person reads it.
fn addresses(address: Option<&Address<'_>>) -> String {
    let Some(address) = address else {
        return String::new();
    };
    address
        .iter()
        .map(|a| match (a.name(), a.address()) {
            (Some(name), Some(addr)) => format!("{name} <{addr}>"),
            (None, Some(addr)) => addr.to_owned(),
            (Some(name), None) => name.to_owned(),
            (None, None) => String::new(),
        })
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

fn address(text: &str) -> Result<Mailbox, ChannelError> {
    text.trim()
        .parse()
        .map_err(|e| ChannelError::rejected(format!("`{text}` is not an email address: {e}")))
}

/// A Message-ID at the sender's domain, unique by time and a counter.
fn message_id(from: &Mailbox) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "<hearth-{nanos}.{n}.{}@{}>",
        std::process::id(),
        from.email.domain()
    )
}

/// Whether `error` means the mail is not there (as opposed to a server or network failure).
pub fn is_not_found(error: &ChannelError) -> bool {
    error.kind == ErrorKind::Rejected && error.message.starts_with("there is no mail")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_words_are_quoted_escaped_and_never_break_the_line() {
        let query = Query {
            folder: "INBOX".into(),
            from: Some("ann\"@x.org\\".into()),
            subject: Some("rent\r\nA1 LOGOUT".into()),
            since: chrono::NaiveDate::from_ymd_opt(2026, 2, 1),
            unread_only: true,
            ..Query::default()
        };
        assert_eq!(
            criteria(&query, Charset::AsciiOnly).expect("ascii"),
            r#"FROM "ann\"@x.org\\" SUBJECT "rent  A1 LOGOUT" SINCE 1-Feb-2026 UNSEEN"#
        );
        assert_eq!(
            criteria(&Query::default(), Charset::AsciiOnly).expect("all"),
            "ALL"
        );
    }

    #[test]
    fn non_ascii_words_go_as_the_server_takes_them() {
        let query = Query {
            subject: Some("Grüße".into()),
            ..Query::default()
        };
        assert_eq!(
            criteria(&query, Charset::LiteralPlus).expect("literal"),
            "CHARSET UTF-8 SUBJECT {7+}\r\nGrüße"
        );
        assert_eq!(
            criteria(&query, Charset::Utf8Accept).expect("utf8"),
            "SUBJECT \"Grüße\""
        );
        let refused = criteria(&query, Charset::AsciiOnly).expect_err("ascii only");
        assert!(refused.message.contains("non-ASCII"), "{}", refused.message);
    }

    #[test]
    fn garbage_is_no_mail_and_a_hostile_header_is_data() {
        assert_eq!(read_mail(b""), None);
        let raw = b"From: \"=?utf-8?B?////?=\" <a@x.org>\r\nSubject: =?bogus?Q?x?=\r\nReferences: <<<>>>\r\nContent-Type: multipart/mixed; boundary=\"\"\r\n\r\n--\r\n--\r\n";
        let mail = read_mail(raw).expect("headers parse");
        assert!(mail.from.contains("a@x.org"), "{mail:?}");
    }
}
