//! A fetched mail turned into an [`Inbound`] event.
//!
//! - The platform id is the mail's `Message-ID` (a hash of the mail when it has none), so the
//!   same mail seen again — after a UIDVALIDITY change, a copy, a crash before the cursor was
//!   saved — is dropped by the inbox instead of being answered twice.
//! - Mail that must never be answered (automatic replies, bounces, list mail, mail without a
//!   return path, mailer-daemon and noreply senders, our own mail) is kept as an
//!   [`InboundKind::Notice`]: stored for the record, never answered.
//! - With `require_authentication`, the sender is verified only by the user's own server's
//!   `Authentication-Results` (see `auth`); otherwise it is unverified, and the daemon treats it
//!   as a stranger. A mail with several `From` headers or addresses is never verified.
//! - The text is the text/plain part (HTML converted to text when there is none), decoded from
//!   its charset, with quoted history and the signature cut off; images come as attachments
//!   (for vision models), text attachments with their text, others listed by name and type.
//!
//! Parsing runs on the blocking pool under a time budget and under `catch_unwind`: a mail that
//! panics the parser is reported as unreadable, one that takes too long is set aside (a notice
//! records it), and the mails after it are still read. Every text pass is linear in the mail's
//! size, so the budget is only a backstop.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use hearth_channel::{Attachment, AttachmentKind, ChatRef, Inbound, InboundKind, Sender};
use mail_parser::{HeaderValue, Message, MessageParser, MimeHeaders, PartType};
use serde_json::json;

use crate::auth;

/// The longest text handed to the daemon; beyond it the mail is cut with a note.
const MAX_TEXT_CHARS: usize = 100_000;
/// How much of a set-aside mail is searched for the end of its header.
const MAX_SET_ASIDE_HEADER: usize = 64 * 1024;

/// What the channel knows when it reads a mail.
#[derive(Clone, Debug)]
pub(crate) struct Reader {
    /// Our own address: mail from it is never answered.
    pub own_address: String,
    /// The authserv-id whose `Authentication-Results` we trust, if configured.
    pub require_authentication: Option<String>,
}

/// The outcome of reading one mail.
#[derive(Debug)]
pub(crate) enum Read {
    /// An event for the inbox.
    Event(Box<Inbound>),
    /// The mail cannot be read at all (no sender, the parser gave up or panicked); it is left
    /// in the mailbox for the user, and skipped.
    Unreadable(String),
    /// Reading took longer than its time budget (a crafted mail): skipped, left in the mailbox,
    /// and recorded as a notice (never answered) when its header names a sender, so the owner
    /// can see that a mail was set aside.
    SetAside {
        reason: String,
        notice: Option<Box<Inbound>>,
    },
}

/// Runs `work` on the blocking pool and waits at most `budget` for it. A late `work` is left
/// to finish on its own (a thread cannot be stopped), but the caller moves on.
pub(crate) async fn within_budget<T: Send + 'static>(
    budget: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    match tokio::time::timeout(budget, tokio::task::spawn_blocking(work)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(format!("the reading task failed: {e}")),
        Err(_) => Err(format!(
            "reading it took longer than {} s",
            budget.as_secs_f32()
        )),
    }
}

impl Reader {
    /// Reads one raw mail off the async runtime, within `budget`; never panics.
    pub(crate) async fn read_within(&self, raw: Arc<[u8]>, at: MailAt, budget: Duration) -> Read {
        let reader = self.clone();
        let mail = raw.clone();
        match within_budget(budget, move || reader.read(&mail, &at)).await {
            Ok(read) => read,
            Err(reason) => Read::SetAside {
                notice: self.set_aside_notice(&raw, &reason).map(Box::new),
                reason,
            },
        }
    }

    /// A notice for a mail that could not be read: from its header alone (at most 64 KiB of it,
    /// read in bounded time), saying what happened. `None` without a sender.
    pub(crate) fn set_aside_notice(&self, raw: &[u8], reason: &str) -> Option<Inbound> {
        let head_end = raw
            .windows(4)
            .take(MAX_SET_ASIDE_HEADER)
            .position(|w| w == b"\r\n\r\n")
            .map(|at| at + 4)
            .or_else(|| {
                raw.windows(2)
                    .take(MAX_SET_ASIDE_HEADER)
                    .position(|w| w == b"\n\n")
                    .map(|at| at + 2)
            })
            .unwrap_or(raw.len().min(MAX_SET_ASIDE_HEADER));
        let head = raw.get(..head_end)?;
        let message = MessageParser::default().parse_headers(head)?;
        let from = message
            .from()
            .and_then(|a| a.first())
            .and_then(|a| a.address())
            .map(|a| a.trim().to_ascii_lowercase())
            .filter(|a| a.contains('@'))?;
        let subject = message.subject().unwrap_or("").trim().to_owned();
        let text = format!(
            "This mail ({} bytes) was set aside unread: {reason}. It is still in the mailbox.",
            raw.len()
        );
        Some(Inbound {
            platform_id: platform_id(&message, raw),
            chat: ChatRef::new(&from),
            sender: Sender::new(&from).unverified(),
            kind: InboundKind::Notice {
                text: with_subject(&subject, &text),
                reason: "unreadable in time".into(),
            },
            reply_context: None,
            agent: None,
        })
    }

    /// Reads one raw mail; never panics.
    pub(crate) fn read(&self, raw: &[u8], at: &MailAt) -> Read {
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| self.read_inner(raw, at)));
        match result {
            Ok(Ok(event)) => Read::Event(Box::new(event)),
            Ok(Err(reason)) => Read::Unreadable(reason),
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                Read::Unreadable(format!("the mail parser panicked: {what}"))
            }
        }
    }

    pub(crate) fn read_inner(&self, raw: &[u8], at: &MailAt) -> Result<Inbound, String> {
        let message = MessageParser::default()
            .parse(raw)
            .ok_or_else(|| "not a mail message".to_owned())?;
        let from = message
            .from()
            .and_then(|a| a.first())
            .and_then(|a| a.address())
            .map(|a| a.trim().to_ascii_lowercase())
            .filter(|a| a.contains('@'))
            .ok_or_else(|| "no sender address in From".to_owned())?;
        let name = message
            .from()
            .and_then(|a| a.first())
            .and_then(|a| a.name())
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty());
        let platform_id = platform_id(&message, raw);
        let subject = message.subject().unwrap_or("").trim().to_owned();
        let mut references: Vec<String> = text_list(message.references());
        let message_id = message.message_id().map(|id| format!("<{id}>"));
        if let Some(id) = &message_id
            && !references.contains(id)
        {
            references.push(id.clone());
        }
        let reply_context = json!({
            "subject": subject,
            "message_id": message_id,
            "references": references,
        });

        let mut sender = Sender::new(&from);
        if let Some(name) = name {
            sender = sender.with_name(name);
        }
        // Which of several senders would a verdict be about? None of them is believed.
        let verified = match (auth::single_from(&message), &self.require_authentication) {
            (None, _) => false,
            (Some(single), Some(server)) => auth::authenticated(&message, server, &single),
            (Some(_), None) => true,
        };
        if !verified {
            sender = sender.unverified();
        }

        let (text, attachments) = body(&message, at);
        let kind = match self.never_answer(&message, &from) {
            Some(reason) => InboundKind::Notice {
                text: with_subject(&subject, &text),
                reason,
            },
            None => InboundKind::Message {
                text,
                attachments,
                message_id: message_id.clone(),
                reply_to: message
                    .in_reply_to()
                    .as_text_list()
                    .and_then(|l| l.first().map(|id| format!("<{id}>")))
                    .or_else(|| message.in_reply_to().as_text().map(|id| format!("<{id}>"))),
            },
        };
        Ok(Inbound {
            platform_id,
            chat: ChatRef::new(&from),
            sender,
            kind,
            reply_context: Some(reply_context),
            agent: None,
        })
    }

    /// Why this mail must not be answered, if it must not.
    fn never_answer(&self, message: &Message<'_>, from: &str) -> Option<String> {
        if let Some(value) = message.header_raw("Auto-Submitted") {
            let value = value.trim().to_ascii_lowercase();
            if !value.starts_with("no") {
                return Some(format!("Auto-Submitted: {value}"));
            }
        }
        if let Some(value) = message.header_raw("Precedence") {
            let value = value.trim().to_ascii_lowercase();
            if ["bulk", "list", "junk", "auto_reply"].contains(&value.as_str()) {
                return Some(format!("Precedence: {value}"));
            }
        }
        if !message.list_id().is_empty() || message.header_raw("List-Id").is_some() {
            return Some("mailing list (List-Id)".into());
        }
        if !message.list_unsubscribe().is_empty()
            || message.header_raw("List-Unsubscribe").is_some()
        {
            return Some("mailing list (List-Unsubscribe)".into());
        }
        if message.header_raw("X-Autoreply").is_some()
            || message.header_raw("X-Autorespond").is_some()
            || message
                .header_raw("X-Auto-Response-Suppress")
                .map(str::to_ascii_lowercase)
                .is_some_and(|v| ["all", "oof", "autoreply"].iter().any(|k| v.contains(k)))
        {
            return Some("automatic reply header".into());
        }
        if let Some(path) = message.header_raw("Return-Path") {
            let path = path.trim();
            if path == "<>" || path.is_empty() {
                return Some("empty Return-Path (a bounce)".into());
            }
        }
        if let Some(ctype) = message.root_part().content_type() {
            let sub = ctype.subtype().unwrap_or("").to_ascii_lowercase();
            let report = ctype
                .attribute("report-type")
                .unwrap_or("")
                .to_ascii_lowercase();
            if ctype.ctype().eq_ignore_ascii_case("multipart") && sub == "report" {
                return Some(format!("delivery report ({report})"));
            }
        }
        let local = from.split('@').next().unwrap_or("");
        let automatic = [
            "mailer-daemon",
            "postmaster",
            "noreply",
            "no-reply",
            "do-not-reply",
            "donotreply",
            "bounce",
            "bounces",
        ];
        if automatic.contains(&local) || local.starts_with("bounce") || local.starts_with("noreply")
        {
            return Some(format!("automatic sender ({local})"));
        }
        if from == self.own_address {
            return Some("sent by this mailbox".into());
        }
        None
    }
}

fn with_subject(subject: &str, text: &str) -> String {
    if subject.is_empty() {
        text.to_owned()
    } else {
        format!("{subject}\n\n{text}")
    }
}

/// The inbox id of a mail: its `Message-ID`, or a hash of the whole mail without one.
fn platform_id(message: &Message<'_>, raw: &[u8]) -> String {
    match message.message_id() {
        Some(id) if !id.trim().is_empty() => format!("<{}>", id.trim()),
        _ => {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(raw);
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            format!("sha256:{hex}")
        }
    }
}

fn text_list(value: &HeaderValue<'_>) -> Vec<String> {
    match value {
        HeaderValue::Text(id) => vec![format!("<{id}>")],
        HeaderValue::TextList(ids) => ids.iter().map(|id| format!("<{id}>")).collect(),
        _ => Vec::new(),
    }
}

/// The mail's text (quotes and signature removed) and its attachments.
fn body(message: &Message<'_>, at: &MailAt) -> (String, Vec<Attachment>) {
    let text = if message.text_body_count() > 0 {
        message.body_text(0).map(|t| t.into_owned())
    } else {
        message.body_html(0).map(|html| html_to_text(&html))
    }
    .unwrap_or_default();
    let mut text = strip_quotes_and_signature(&text);
    if text.chars().count() > MAX_TEXT_CHARS {
        text = text.chars().take(MAX_TEXT_CHARS).collect();
        text.push_str("\n[… the rest of this mail was cut]");
    }
    let sections = imap_sections(message);
    let mut attachments = Vec::new();
    for &id in &message.attachments {
        let Some(part) = message.parts.get(id as usize) else {
            continue;
        };
        let mime = part
            .content_type()
            .map(|c| match c.subtype() {
                Some(sub) => format!("{}/{}", c.ctype(), sub).to_ascii_lowercase(),
                None => c.ctype().to_ascii_lowercase(),
            })
            .unwrap_or_else(|| "application/octet-stream".into());
        let (name, mime, size) = match &part.body {
            PartType::Message(nested) => (
                part.attachment_name()
                    .map(str::to_owned)
                    .or_else(|| nested.subject().map(|s| format!("{s}.eml"))),
                "message/rfc822".to_owned(),
                nested.raw_message().len(),
            ),
            _ => (
                part.attachment_name().map(str::to_owned),
                mime,
                part.contents().len(),
            ),
        };
        let kind = AttachmentKind::of_mime(&mime);
        let Some(section) = sections.get(&id) else {
            continue;
        };
        let encoding = match &part.body {
            PartType::Message(_) => PartEncoding::Raw,
            _ => PartEncoding::from(part.encoding),
        };
        let source = PartRef {
            validity: at.validity,
            uid: at.uid,
            section: section.clone(),
            encoding,
            mailbox: at.mailbox.clone(),
        };
        let mut attachment = Attachment::remote(kind, mime, source.encode()).with_size(size as u64);
        if let Some(name) = name {
            attachment = attachment.with_name(name);
        }
        attachments.push(attachment);
    }
    (text, attachments)
}

/// Where a mail is: what an attachment reference needs besides the part.
#[derive(Clone, Debug, Default)]
pub(crate) struct MailAt {
    pub mailbox: String,
    pub validity: u32,
    pub uid: u32,
}

/// How a part's content is encoded in the mail, to undo after fetching it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PartEncoding {
    Base64,
    QuotedPrintable,
    Raw,
}

impl From<mail_parser::Encoding> for PartEncoding {
    fn from(encoding: mail_parser::Encoding) -> Self {
        match encoding {
            mail_parser::Encoding::Base64 => Self::Base64,
            mail_parser::Encoding::QuotedPrintable => Self::QuotedPrintable,
            mail_parser::Encoding::None => Self::Raw,
        }
    }
}

impl PartEncoding {
    fn name(self) -> &'static str {
        match self {
            Self::Base64 => "base64",
            Self::QuotedPrintable => "qp",
            Self::Raw => "raw",
        }
    }

    /// The most bytes `decoded` bytes take encoded: base64 4 for 3 plus a line break every 76,
    /// quoted-printable at worst 3 for 1 plus soft line breaks.
    pub(crate) fn encoded_bound(self, decoded: u64) -> u64 {
        // Saturating: the limit comes from the daemon's configuration and may be huge.
        let (body, line) = match self {
            Self::Base64 => (decoded.div_ceil(3).saturating_mul(4), 76),
            Self::QuotedPrintable => (decoded.saturating_mul(3), 73),
            Self::Raw => return decoded,
        };
        body.saturating_add(body / line * 2).saturating_add(4)
    }

    /// Undoes the encoding.
    pub(crate) fn decode(self, bytes: &[u8]) -> Option<Vec<u8>> {
        match self {
            Self::Base64 => mail_parser::decoders::base64::base64_decode(bytes),
            Self::QuotedPrintable => {
                mail_parser::decoders::quoted_printable::quoted_printable_decode(bytes)
            }
            Self::Raw => Some(bytes.to_vec()),
        }
    }
}

/// An attachment's [`Attachment::source`]: `imap:<uidvalidity>:<uid>:<section>:<encoding>:<mailbox>`,
/// e.g. `imap:1700000000:42:2.1:base64:INBOX`. The section is the IMAP part number
/// (RFC 3501 6.4.5), fetched alone with `BODY.PEEK[<section>]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PartRef {
    pub validity: u32,
    pub uid: u32,
    pub section: String,
    pub encoding: PartEncoding,
    pub mailbox: String,
}

impl PartRef {
    pub(crate) fn encode(&self) -> String {
        format!(
            "imap:{}:{}:{}:{}:{}",
            self.validity,
            self.uid,
            self.section,
            self.encoding.name(),
            self.mailbox
        )
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        let mut fields = text.strip_prefix("imap:")?.splitn(5, ':');
        let validity = fields.next()?.parse().ok()?;
        let uid = fields.next()?.parse().ok()?;
        let section = fields.next()?.to_owned();
        let valid_section = !section.is_empty()
            && section
                .split('.')
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !valid_section {
            return None;
        }
        let encoding = match fields.next()? {
            "base64" => PartEncoding::Base64,
            "qp" => PartEncoding::QuotedPrintable,
            "raw" => PartEncoding::Raw,
            _ => return None,
        };
        let mailbox = fields.next()?.to_owned();
        (!mailbox.is_empty()).then_some(Self {
            validity,
            uid,
            section,
            encoding,
            mailbox,
        })
    }

    /// The section as the numbers IMAP answers with.
    pub(crate) fn section_numbers(&self) -> Vec<u32> {
        self.section
            .split('.')
            .filter_map(|n| n.parse().ok())
            .collect()
    }
}

/// The IMAP part number (`1`, `2`, `2.1`, …) of each part of `message`, by mail-parser's part
/// id: a multipart's children are numbered from 1 under it; a mail that is not multipart is
/// part `1`.
fn imap_sections(message: &Message<'_>) -> std::collections::HashMap<u32, String> {
    let mut sections = std::collections::HashMap::new();
    match message.parts.first().map(|p| &p.body) {
        Some(PartType::Multipart(children)) => {
            // Depth-first with an explicit stack: a deeply nested mail must not overflow ours.
            let mut stack: Vec<(u32, String)> = children
                .iter()
                .enumerate()
                .rev()
                .map(|(i, &id)| (id, (i + 1).to_string()))
                .collect();
            while let Some((id, path)) = stack.pop() {
                if let Some(PartType::Multipart(children)) =
                    message.parts.get(id as usize).map(|p| &p.body)
                {
                    stack.extend(
                        children
                            .iter()
                            .enumerate()
                            .rev()
                            .map(|(i, &child)| (child, format!("{path}.{}", i + 1))),
                    );
                }
                // A loop in a malformed tree cannot grow this without end: each id once.
                if sections.insert(id, path).is_some() {
                    stack.clear();
                }
            }
        }
        Some(_) => {
            sections.insert(0, "1".to_owned());
        }
        None => {}
    }
    sections
}

/// HTML to readable text: tags dropped, block ends as line breaks, entities decoded; script
/// and style contents dropped.
pub(crate) fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        out.push_str(&decode_entities(&rest[..open]));
        let after = &rest[open..];
        let Some(close) = after.find('>') else {
            rest = "";
            break;
        };
        let tag = after[1..close].trim();
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .map(|c| c.to_ascii_lowercase())
            .collect();
        rest = &after[close + 1..];
        if !tag.starts_with('/') && (name == "script" || name == "style") {
            rest = match find_closing_tag(rest, &name) {
                Some(at) => &rest[at..],
                None => "",
            };
            continue;
        }
        if matches!(
            name.as_str(),
            "br" | "p"
                | "div"
                | "li"
                | "tr"
                | "h1"
                | "h2"
                | "h3"
                | "h4"
                | "h5"
                | "h6"
                | "blockquote"
                | "pre"
                | "table"
                | "ul"
                | "ol"
        ) && !out.ends_with('\n')
        {
            out.push('\n');
        }
    }
    out.push_str(&decode_entities(rest));
    // Collapse the blank lines markup leaves behind.
    let mut text = String::new();
    let mut blank = 0;
    for line in out.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        text.push_str(line);
        text.push('\n');
    }
    text.trim().to_owned()
}

/// Where `</name` (any case) starts in `text`. One pass over `text`: the search for the end of
/// a `<script>` must not copy or re-read the rest of the mail once per tag.
fn find_closing_tag(text: &str, name: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let name = name.as_bytes();
    let mut from = 0;
    while let Some(at) = bytes[from..].windows(2).position(|w| w == b"</") {
        let start = from + at;
        let candidate = &bytes[start + 2..];
        if candidate.len() >= name.len() && candidate[..name.len()].eq_ignore_ascii_case(name) {
            return Some(start);
        }
        from = start + 2;
    }
    None
}

fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp..];
        // Only the next few bytes: a `&` with no `;` after it must not scan the rest each time.
        let Some(semi) = after.bytes().take(11).position(|b| b == b';') else {
            out.push('&');
            rest = &after[1..];
            continue;
        };
        let entity = &after[1..semi];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" | "#39" => Some('\''),
            "nbsp" => Some(' '),
            _ => entity
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &after[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &after[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The new part of a reply: quoted lines (`>`), the history after an "On … wrote:" line or an
/// Outlook-style "-----Original Message-----", and the signature after "-- " are cut.
pub(crate) fn strip_quotes_and_signature(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    // For each line, whether the next line that is neither blank nor another "… wrote:" is
    // quoted (or there is none): worked out backwards once, not by a scan from every line,
    // which a mail of a million blank lines would make quadratic.
    let mut quoted_after = vec![true; lines.len() + 1];
    for i in (0..lines.len()).rev() {
        let line = lines[i].trim();
        quoted_after[i] = if line.is_empty() || line.to_ascii_lowercase().ends_with("wrote:") {
            quoted_after[i + 1]
        } else {
            line.starts_with('>')
        };
    }
    let mut kept: Vec<&str> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_end();
        if trimmed == "--" || *line == "-- " {
            break;
        }
        let lower = trimmed.trim().to_ascii_lowercase();
        if lower.starts_with("-----original message-----")
            || lower.starts_with("________________________________")
        {
            break;
        }
        // "On Mon, 1 Jan 2026, Ann <a@x> wrote:", possibly wrapped onto the next line, followed
        // by quoted lines.
        let wrote = lower.ends_with("wrote:")
            || (lower.starts_with("on ")
                && lines
                    .get(i + 1)
                    .is_some_and(|next| next.trim().to_ascii_lowercase().ends_with("wrote:")));
        if wrote && quoted_after[i + 1] {
            break;
        }
        if trimmed.trim_start().starts_with('>') {
            continue;
        }
        kept.push(trimmed);
    }
    kept.join("\n").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader() -> Reader {
        Reader {
            own_address: "bot@example.org".into(),
            require_authentication: None,
        }
    }

    fn event(raw: &str) -> Inbound {
        match reader().read(raw.as_bytes(), &MailAt::default()) {
            Read::Event(event) => *event,
            other => panic!("unreadable: {other:?}"),
        }
    }

    const PLAIN: &str = "From: Ann <Ann@Example.org>\r\nTo: bot@example.org\r\nSubject: plans\r\nMessage-ID: <m1@example.org>\r\n\r\nHello there\r\n\r\nOn Mon, 1 Jan 2026, Bot <bot@example.org> wrote:\r\n> old text\r\n> more\r\n";

    #[test]
    fn a_plain_mail_becomes_a_message_in_the_senders_chat() {
        let e = event(PLAIN);
        assert_eq!(e.platform_id, "<m1@example.org>");
        assert_eq!(e.chat, ChatRef::new("ann@example.org"));
        assert_eq!(e.sender.id, "ann@example.org");
        assert_eq!(e.sender.name.as_deref(), Some("Ann"));
        let InboundKind::Message {
            text, message_id, ..
        } = &e.kind
        else {
            panic!("{e:?}")
        };
        assert_eq!(text, "Hello there");
        assert_eq!(message_id.as_deref(), Some("<m1@example.org>"));
        let context = e.reply_context.expect("context");
        assert_eq!(context["subject"], "plans");
        assert_eq!(context["references"][0], "<m1@example.org>");
    }

    #[test]
    fn loops_are_stored_as_notices() {
        for (header, reason) in [
            ("Auto-Submitted: auto-replied\r\n", "Auto-Submitted"),
            ("Precedence: bulk\r\n", "Precedence"),
            ("List-Id: <x.lists.example.org>\r\n", "List-Id"),
            (
                "List-Unsubscribe: <mailto:u@example.org>\r\n",
                "List-Unsubscribe",
            ),
            ("Return-Path: <>\r\n", "Return-Path"),
            // Exchange's out-of-office replies.
            ("X-Auto-Response-Suppress: OOF\r\n", "automatic reply"),
            ("X-Auto-Response-Suppress: All\r\n", "automatic reply"),
        ] {
            let raw = format!("{header}{PLAIN}");
            let e = event(&raw);
            let InboundKind::Notice { reason: got, .. } = &e.kind else {
                panic!("{header}: {e:?}")
            };
            assert!(got.contains(reason), "{got} for {header}");
        }
        let not_auto = event(&format!("Auto-Submitted: no\r\n{PLAIN}"));
        assert!(matches!(not_auto.kind, InboundKind::Message { .. }));
        let daemon = event(&PLAIN.replace("Ann <Ann@Example.org>", "MAILER-DAEMON@example.org"));
        assert!(matches!(daemon.kind, InboundKind::Notice { .. }));
        let own = event(&PLAIN.replace("Ann <Ann@Example.org>", "bot@example.org"));
        assert!(matches!(own.kind, InboundKind::Notice { .. }));
        let report = "From: postmaster@x.org\r\nMessage-ID: <r@x>\r\nContent-Type: multipart/report; report-type=delivery-status; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nfailed\r\n--b--\r\n";
        assert!(matches!(event(report).kind, InboundKind::Notice { .. }));
    }

    #[test]
    fn only_our_servers_authentication_results_count() {
        let r = Reader {
            own_address: "bot@example.org".into(),
            require_authentication: Some("mx.example.org".into()),
        };
        let with = |headers: &str| match r
            .read(format!("{headers}{PLAIN}").as_bytes(), &MailAt::default())
        {
            Read::Event(e) => e.sender.verified,
            other => panic!("{other:?}"),
        };
        assert!(with(
            "Authentication-Results: mx.example.org; dkim=pass header.d=example.org; spf=fail\r\n"
        ));
        assert!(with(
            "Authentication-Results: mx.example.org;\r\n\tdmarc=pass header.from=example.org\r\n"
        ));
        assert!(!with(
            "Authentication-Results: evil.example.net; dkim=pass header.d=example.org\r\n"
        ));
        assert!(!with(
            "Authentication-Results: mx.example.org; dkim=pass header.d=other.org; spf=fail\r\n"
        ));
        assert!(!with(""));
        // Ours on top says fail; a forged pass below the server's intake does not count.
        assert!(!with(
            "Authentication-Results: mx.example.org; dkim=fail header.d=example.org\r\nReceived: from x.example.net (x.example.net [198.51.100.7]) by mx.example.org with ESMTP\r\nAuthentication-Results: mx.example.org; dkim=pass header.d=example.org\r\n"
        ));
        // Without require_authentication From is believed, unless it names several senders.
        let trusting = reader();
        let two = format!("From: attacker@evil.example\r\n{PLAIN}");
        let Read::Event(e) = trusting.read(two.as_bytes(), &MailAt::default()) else {
            panic!()
        };
        assert!(!e.sender.verified, "{e:?}");
        let Read::Event(e) = trusting.read(PLAIN.as_bytes(), &MailAt::default()) else {
            panic!()
        };
        assert!(e.sender.verified);
    }

    #[test]
    fn html_only_mail_is_turned_into_text_and_signatures_cut() {
        let raw = "From: a@x.org\r\nMessage-ID: <h@x>\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html><style>p{}</style><p>Hi &amp; <b>bye</b></p><p>line two</p></html>\r\n";
        let InboundKind::Message { text, .. } = event(raw).kind else {
            panic!()
        };
        assert_eq!(text, "Hi & bye\nline two");
        assert_eq!(
            strip_quotes_and_signature("Yes please\n\n-- \nAnn\nCEO"),
            "Yes please"
        );
    }

    #[test]
    fn charsets_are_decoded_and_images_attached() {
        let raw = "From: a@x.org\r\nMessage-ID: <c@x>\r\nContent-Type: multipart/mixed; boundary=zz\r\n\r\n--zz\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nGr=FC=DFe\r\n--zz\r\nContent-Type: image/png; name=a.png\r\nContent-Disposition: attachment; filename=a.png\r\nContent-Transfer-Encoding: base64\r\n\r\niVBORw0KGgo=\r\n--zz\r\nContent-Type: application/pdf; name=r.pdf\r\nContent-Disposition: attachment; filename=r.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0=\r\n--zz--\r\n";
        let InboundKind::Message {
            text, attachments, ..
        } = event(raw).kind
        else {
            panic!()
        };
        assert_eq!(text, "Grüße");
        assert_eq!(attachments.len(), 2, "{attachments:?}");
        // By reference only: nothing of the files is in the stored event.
        assert_eq!(attachments[0].kind, AttachmentKind::Image);
        assert_eq!(attachments[0].data_base64, None);
        assert_eq!(attachments[0].source.as_deref(), Some("imap:0:0:2:base64:"));
        assert_eq!(attachments[0].size, Some(8));
        assert_eq!(attachments[1].mime, "application/pdf");
        assert_eq!(attachments[1].name.as_deref(), Some("r.pdf"));
        assert_eq!(attachments[1].source.as_deref(), Some("imap:0:0:3:base64:"));
    }

    #[test]
    fn attachment_references_name_the_imap_part_and_round_trip() {
        let raw = "From: a@x.org\r\nMessage-ID: <n@x>\r\nContent-Type: multipart/mixed; boundary=o\r\n\r\n--o\r\nContent-Type: multipart/alternative; boundary=i\r\n\r\n--i\r\nContent-Type: text/plain\r\n\r\nhello\r\n--i\r\nContent-Type: text/html\r\n\r\n<p>hello</p>\r\n--i--\r\n--o\r\nContent-Type: audio/ogg\r\nContent-Disposition: attachment; filename=v.ogg\r\nContent-Transfer-Encoding: base64\r\n\r\nT2dnUw==\r\n--o\r\nContent-Type: text/plain; name=n.txt\r\nContent-Disposition: attachment; filename=n.txt\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nbuy milk=3D2\r\n--o--\r\n";
        let at = MailAt {
            mailbox: "Inbox:Assistant".into(),
            validity: 7,
            uid: 42,
        };
        let Read::Event(e) = reader().read(raw.as_bytes(), &at) else {
            panic!()
        };
        let InboundKind::Message {
            text, attachments, ..
        } = e.kind
        else {
            panic!()
        };
        assert_eq!(text, "hello");
        let sources: Vec<&str> = attachments
            .iter()
            .filter_map(|a| a.source.as_deref())
            .collect();
        assert_eq!(
            sources,
            [
                "imap:7:42:2:base64:Inbox:Assistant",
                "imap:7:42:3:qp:Inbox:Assistant"
            ]
        );
        assert_eq!(attachments[0].kind, AttachmentKind::Voice);
        assert_eq!(attachments[1].kind, AttachmentKind::Document);
        assert!(
            attachments
                .iter()
                .all(|a| a.data_base64.is_none() && a.text.is_none())
        );
        let part = PartRef::parse(sources[1]).expect("parses");
        assert_eq!(part.mailbox, "Inbox:Assistant");
        assert_eq!(part.section_numbers(), [3]);
        assert_eq!(
            part.encoding.decode(b"buy milk=3D2").as_deref(),
            Some(&b"buy milk=2"[..])
        );
        assert_eq!(PartRef::parse(&part.encode()), Some(part));
        for bad in [
            "imap:1:2:x:raw:INBOX",
            "imap:1:2:1..2:raw:INBOX",
            "imap:1:2:1:zip:INBOX",
            "imap:1:2:1:raw:",
            "https://x",
        ] {
            assert_eq!(PartRef::parse(bad), None, "{bad}");
        }
        // A mail that is only an attachment is part 1.
        let single = "From: a@x.org\r\nMessage-ID: <s@x>\r\nContent-Type: application/pdf; name=r.pdf\r\nContent-Disposition: attachment; filename=r.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0=\r\n";
        let Read::Event(e) = reader().read(single.as_bytes(), &at) else {
            panic!()
        };
        let InboundKind::Message { attachments, .. } = e.kind else {
            panic!()
        };
        assert_eq!(
            attachments[0].source.as_deref(),
            Some("imap:7:42:1:base64:Inbox:Assistant")
        );
        // The bound on the encoded size covers real encodings.
        use base64::Engine;
        assert_eq!(PartEncoding::Base64.encoded_bound(u64::MAX), u64::MAX);
        for n in [0u64, 1, 57, 1000, 3_000_000] {
            let encoded = base64::engine::general_purpose::STANDARD.encode(vec![0u8; n as usize]);
            let wrapped = encoded.len() as u64 + encoded.len() as u64 / 76 * 2;
            assert!(PartEncoding::Base64.encoded_bound(n) >= wrapped, "{n}");
        }
    }

    /// The H4 mail: a text/html part of `<script></script>` repeated, in a multipart that never
    /// closes, so mail-parser leaves the text body empty and hearth converts the HTML itself.
    fn script_bomb(repeats: usize) -> String {
        format!(
            "From: stranger@evil.example\r\nMessage-ID: <bomb@evil.example>\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/html\r\n\r\n{}hello",
            "<script></script>".repeat(repeats)
        )
    }

    #[test]
    fn html_to_text_is_linear_on_the_script_bomb() {
        // 200,000 tags (3.4 MB): the old code lower-cased the rest of the mail once per tag,
        // about 3.4e11 byte operations (minutes); linear, it is milliseconds.
        let html = format!("{}hello", "<script></script>".repeat(200_000));
        let started = std::time::Instant::now();
        assert_eq!(html_to_text(&html), "hello");
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
        // The whole mail, as a stranger sends it, is read in linear time too (whichever of
        // mail-parser's recovery or hearth's converter handles its HTML).
        let started = std::time::Instant::now();
        let e = event(&script_bomb(200_000));
        assert_eq!(e.platform_id, "<bomb@evil.example>");
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
        assert_eq!(
            html_to_text("a<SCRIPT>x</p>y</ScRiPt >b<style>c</STYLE>d &&&& &amp;"),
            "abd &&&& &"
        );
        // Mixed case and a tag that never closes: the rest is script.
        assert_eq!(html_to_text("<p>keep</p><script>drop all"), "keep");
        // A million blank lines and "wrote:" lines are one pass too.
        let blank = format!("hi{}end", "\n".repeat(1_000_000));
        assert!(strip_quotes_and_signature(&blank).ends_with("end"));
        let wrote = "x wrote:\n".repeat(200_000);
        assert_eq!(strip_quotes_and_signature(&format!("{wrote}> q")), "");
    }

    #[tokio::test]
    async fn a_mail_over_its_time_budget_is_set_aside_with_a_notice() {
        // A reading that never ends on its own (tokio does not advance a paused clock while a
        // blocking task runs, so this uses a short real budget; the work waits for release).
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let late = within_budget(Duration::from_millis(50), move || {
            // Ignored: the sender is dropped or signals; either way the work ends.
            let _ = wait.recv();
            1
        })
        .await;
        assert!(late.is_err_and(|e| e.contains("longer than 0.05 s")));
        drop(release);
        assert_eq!(within_budget(Duration::from_secs(20), || 2).await, Ok(2));
        // The notice a set-aside mail leaves: its sender, subject and size, never answered.
        let raw = script_bomb(10);
        let notice = reader()
            .set_aside_notice(raw.as_bytes(), "reading it took longer than 20 s")
            .expect("a notice");
        assert_eq!(notice.platform_id, "<bomb@evil.example>");
        assert_eq!(notice.chat, ChatRef::new("stranger@evil.example"));
        assert!(!notice.sender.verified);
        let InboundKind::Notice { text, .. } = &notice.kind else {
            panic!("{notice:?}")
        };
        assert!(
            text.contains("set aside unread: reading it took longer than 20 s"),
            "{text}"
        );
        let read = reader()
            .read_within(
                Arc::from(raw.into_bytes()),
                MailAt::default(),
                Duration::from_secs(20),
            )
            .await;
        assert!(matches!(read, Read::Event(_)), "{read:?}");
    }

    #[test]
    fn east_asian_charsets_are_decoded() {
        // "日本" in ISO-2022-JP and BIG5 ("中文").
        let jis = b"From: a@x.org\r\nMessage-ID: <j@x>\r\nContent-Type: text/plain; charset=iso-2022-jp\r\n\r\n\x1b$BF|K\\\x1b(B\r\n";
        let InboundKind::Message { text, .. } = event(&String::from_utf8_lossy(jis)).kind else {
            panic!()
        };
        assert_eq!(text, "日本");
        let big5 = b"From: a@x.org\r\nMessage-ID: <b@x>\r\nContent-Type: text/plain; charset=big5\r\n\r\n\xa4\xa4\xa4\xe5\r\n";
        let Read::Event(e) = reader().read(big5, &MailAt::default()) else {
            panic!()
        };
        let InboundKind::Message { text, .. } = e.kind else {
            panic!()
        };
        assert_eq!(text, "中文");
    }

    #[test]
    fn garbage_is_unreadable_not_a_crash() {
        assert!(matches!(
            reader().read(b"", &MailAt::default()),
            Read::Unreadable(_)
        ));
        assert!(matches!(
            reader().read(b"Subject: no sender\r\n\r\nx", &MailAt::default()),
            Read::Unreadable(_)
        ));
        let without_id = event("From: a@x.org\r\n\r\nhello\r\n");
        assert!(without_id.platform_id.starts_with("sha256:"));
    }
}
