//! A fetched mail turned into an [`Inbound`] event.
//!
//! - The platform id is the mail's `Message-ID` (a hash of the mail when it has none), so the
//!   same mail seen again — after a UIDVALIDITY change, a copy, a crash before the cursor was
//!   saved — is dropped by the inbox instead of being answered twice.
//! - Mail that must never be answered (automatic replies, bounces, list mail, mail without a
//!   return path, mailer-daemon and noreply senders, our own mail) is kept as an
//!   [`InboundKind::Notice`]: stored for the record, never answered.
//! - With `require_authentication`, the sender is verified only by the user's own server's
//!   `Authentication-Results`; otherwise it is unverified, and the daemon treats it as a
//!   stranger.
//! - The text is the text/plain part (HTML converted to text when there is none), decoded from
//!   its charset, with quoted history and the signature cut off; images come as attachments
//!   (for vision models), text attachments with their text, others listed by name and type.
//!
//! Parsing runs under `catch_unwind`: a mail that panics the parser is reported as unreadable,
//! and the mails after it are still read.

use std::panic::AssertUnwindSafe;

use base64::Engine;
use hearth_channel::{Attachment, AttachmentKind, ChatRef, Inbound, InboundKind, Sender};
use mail_parser::{HeaderValue, Message, MessageParser, MimeHeaders, PartType};
use serde_json::json;

/// Images larger than this are listed instead of passed on.
const MAX_IMAGE_BYTES: usize = 10 * 1024 * 1024;
/// Text attachments are passed on up to this many bytes.
const MAX_TEXT_ATTACHMENT_BYTES: usize = 256 * 1024;
/// The longest text handed to the daemon; beyond it the mail is cut with a note.
const MAX_TEXT_CHARS: usize = 100_000;

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
}

impl Reader {
    /// Reads one raw mail; never panics.
    pub(crate) fn read(&self, raw: &[u8]) -> Read {
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| self.read_inner(raw)));
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

    fn read_inner(&self, raw: &[u8]) -> Result<Inbound, String> {
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
        if let Some(server) = &self.require_authentication
            && !authenticated(&message, server, &from)
        {
            sender = sender.unverified();
        }

        let (text, attachments) = body(&message);
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

/// Whether the topmost `Authentication-Results` header from `server` vouches for `from`:
/// `dmarc=pass`, or `dkim=pass` for a signature of the sender's domain, or `spf=pass` for
/// an envelope sender of that domain. Headers from other servers are ignored: anyone can write
/// one into a mail they send; the user's server adds its own on top.
pub(crate) fn authenticated(message: &Message<'_>, server: &str, from: &str) -> bool {
    let domain = from.rsplit('@').next().unwrap_or("").to_ascii_lowercase();
    let ours = message
        .headers()
        .iter()
        .filter(|h| h.name().eq_ignore_ascii_case("Authentication-Results"))
        .filter_map(|h| {
            let start = h.offset_start() as usize;
            let end = h.offset_end() as usize;
            message
                .raw_message()
                .get(start..end)
                .map(|raw| String::from_utf8_lossy(raw).replace(['\r', '\n'], " "))
        })
        .find(|value| {
            value
                .split(';')
                .next()
                .and_then(|id| id.split_whitespace().next())
                .is_some_and(|id| id.eq_ignore_ascii_case(server))
        });
    let Some(results) = ours else {
        return false;
    };
    results.split(';').skip(1).any(|result| {
        let mut words = result.split_whitespace();
        let Some(verdict) = words.next().map(str::to_ascii_lowercase) else {
            return false;
        };
        let property_domain = |key: &str| {
            result
                .split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .map(|v| {
                    v.trim_matches(|c| c == '"' || c == ';')
                        .rsplit('@')
                        .next()
                        .unwrap_or("")
                        .to_ascii_lowercase()
                })
        };
        let same = |d: Option<String>| d.is_some_and(|d| d == domain);
        match verdict.as_str() {
            "dmarc=pass" => true,
            "dkim=pass" => same(property_domain("header.d=")) || same(property_domain("header.i=")),
            "spf=pass" => same(property_domain("smtp.mailfrom=")),
            _ => false,
        }
    })
}

/// The mail's text (quotes and signature removed) and its attachments.
fn body(message: &Message<'_>) -> (String, Vec<Attachment>) {
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
    let mut attachments = Vec::new();
    for part in message.attachments() {
        let name = part.attachment_name().map(str::to_owned);
        let mime = part
            .content_type()
            .map(|c| match c.subtype() {
                Some(sub) => format!("{}/{}", c.ctype(), sub).to_ascii_lowercase(),
                None => c.ctype().to_ascii_lowercase(),
            })
            .unwrap_or_else(|| "application/octet-stream".into());
        let attachment = match &part.body {
            PartType::Message(nested) => Attachment {
                kind: AttachmentKind::Document,
                mime: "message/rfc822".into(),
                name: name.or_else(|| nested.subject().map(|s| format!("{s}.eml"))),
                data_base64: None,
                text: nested
                    .body_text(0)
                    .map(|t| truncate(&t, MAX_TEXT_ATTACHMENT_BYTES)),
                source: None,
                size: None,
            },
            PartType::Text(t) | PartType::Html(t) => Attachment {
                kind: AttachmentKind::Document,
                mime,
                name,
                data_base64: None,
                text: Some(truncate(t, MAX_TEXT_ATTACHMENT_BYTES)),
                source: None,
                size: None,
            },
            PartType::Binary(bytes) | PartType::InlineBinary(bytes)
                if mime.starts_with("image/") && bytes.len() <= MAX_IMAGE_BYTES =>
            {
                Attachment {
                    kind: AttachmentKind::Image,
                    mime,
                    name,
                    data_base64: Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
                    text: None,
                    source: None,
                    size: None,
                }
            }
            _ => Attachment {
                kind: AttachmentKind::Document,
                mime,
                name,
                data_base64: None,
                text: None,
                source: None,
                size: None,
            },
        };
        attachments.push(attachment);
    }
    (text, attachments)
}

fn truncate(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
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
        let tag = after[1..close].trim().to_ascii_lowercase();
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        rest = &after[close + 1..];
        if !tag.starts_with('/') && (name == "script" || name == "style") {
            let end = format!("</{name}");
            rest = match rest.to_ascii_lowercase().find(&end) {
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

fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp..];
        let Some(semi) = after.find(';').filter(|&s| s <= 10) else {
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
        let quoted_follows = lines[i + 1..]
            .iter()
            .find(|l| !l.trim().is_empty() && !l.trim().to_ascii_lowercase().ends_with("wrote:"))
            .is_none_or(|l| l.trim_start().starts_with('>'));
        if wrote && quoted_follows {
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
        match reader().read(raw.as_bytes()) {
            Read::Event(event) => *event,
            Read::Unreadable(reason) => panic!("unreadable: {reason}"),
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
        let with = |headers: &str| match r.read(format!("{headers}{PLAIN}").as_bytes()) {
            Read::Event(e) => e.sender.verified,
            Read::Unreadable(x) => panic!("{x}"),
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
        // Ours on top says fail; a forged pass further down does not count.
        assert!(!with(
            "Authentication-Results: mx.example.org; dkim=fail header.d=example.org\r\nAuthentication-Results: mx.example.org; dkim=pass header.d=example.org\r\n"
        ));
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
        assert_eq!(attachments[0].kind, AttachmentKind::Image);
        assert!(attachments[0].data_base64.is_some());
        assert_eq!(attachments[1].mime, "application/pdf");
        assert_eq!(attachments[1].name.as_deref(), Some("r.pdf"));
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
        let Read::Event(e) = reader().read(big5) else {
            panic!()
        };
        let InboundKind::Message { text, .. } = e.kind else {
            panic!()
        };
        assert_eq!(text, "中文");
    }

    #[test]
    fn garbage_is_unreadable_not_a_crash() {
        assert!(matches!(reader().read(b""), Read::Unreadable(_)));
        assert!(matches!(
            reader().read(b"Subject: no sender\r\n\r\nx"),
            Read::Unreadable(_)
        ));
        let without_id = event("From: a@x.org\r\n\r\nhello\r\n");
        assert!(without_id.platform_id.starts_with("sha256:"));
    }
}
