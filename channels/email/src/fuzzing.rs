//! The bodies of the email fuzz targets in `fuzz/`, also run on their corpora by
//! the tests below. Not part of the channel API.

use hearth_channel::fuzzing::{as_is, check_plan};
use hearth_channel::{Capabilities, Inbound, InboundKind, Measure};
use mail_parser::MessageParser;

use crate::auth;
use crate::inbound::{MailAt, PartRef, Reader, html_to_text, strip_quotes_and_signature};

/// The server whose verdicts the fuzzed reader trusts.
const SERVER: &str = "mx.example.org";

/// `data` as a raw mail read from the mailbox, the whole way to the inbox event: MIME parsing,
/// charsets, HTML to text, quotes and signature cut, attachments by reference, the sender's
/// authentication, the never-answer rules; and as a set-aside notice from its header. Also
/// `data` as HTML alone. Read without the channel's panic guard: nothing may panic.
pub fn message(data: &[u8]) {
    let at = MailAt {
        mailbox: "INBOX".into(),
        validity: 7,
        uid: 42,
    };
    for require_authentication in [None, Some(SERVER.to_owned())] {
        let reader = Reader {
            own_address: "bot@example.org".into(),
            require_authentication,
        };
        if let Ok(event) = reader.read_inner(data, &at) {
            check_event(&event);
        }
        if let Some(notice) = reader.set_aside_notice(data, "fuzz") {
            check_event(&notice);
        }
    }
    let html = String::from_utf8_lossy(data);
    let text = html_to_text(&html);
    strip_quotes_and_signature(&text);
}

/// What every event from a mail must be: from an address, its attachments fetchable by the
/// reference they carry, and storable as the inbox stores it.
fn check_event(event: &Inbound) {
    assert!(event.sender.id.contains('@'), "a sender without an address");
    assert_eq!(event.chat.chat_id, event.sender.id);
    if let InboundKind::Message { attachments, .. } = &event.kind {
        for attachment in attachments {
            let source = attachment.source.as_deref().expect("a part reference");
            let part = PartRef::parse(source).expect("the reference reads back");
            assert_eq!(part.encode(), source);
        }
    }
    hearth_channel::fuzzing::check_stored(event);
}

/// `data` as an `Authentication-Results` value (and an ARC one), and as the header of a mail
/// whose sender's authentication is decided from it. Nothing may panic, and a parsed result
/// names its method in lower case without a version.
pub fn authentication_results(data: &[u8]) {
    let value = String::from_utf8_lossy(data);
    for arc in [false, true] {
        let Some(results) = auth::parse(&value, arc) else {
            continue;
        };
        for result in &results.results {
            assert!(!result.method.is_empty());
            assert!(!result.method.contains('/'), "a method with its version");
            assert_eq!(result.method, result.method.to_ascii_lowercase());
            assert_eq!(result.result, result.result.to_ascii_lowercase());
        }
    }
    let mut mail = data.to_vec();
    mail.extend_from_slice(b"\r\n\r\nbody\r\n");
    if let Some(message) = MessageParser::default().parse(&mail)
        && let Some(from) = auth::single_from(&message)
    {
        auth::authenticated(&message, SERVER, &from);
    }
}

/// `data` as a reply's Markdown for a mail: one part whatever its length, rendered to HTML.
pub fn outbound_plan(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let parts = hearth_channel::plan(
        &hearth_channel::OutboundMessage::text(hearth_channel::ChatRef::new("a@b.org"), &*text),
        &Capabilities::default(),
    );
    assert_eq!(parts.len(), 1, "a mail is one part");
    assert_eq!(parts[0].text, text);
    crate::format::to_html(&text);
    // The plan itself at a byte limit, with nothing rendered: mail has none, but bytes are
    // the measure no other channel checks with a small limit.
    check_plan(
        &text,
        &Capabilities {
            max_message_len: Some(MAX_BYTES),
            measure: Measure::Bytes,
            ..Capabilities::default()
        },
        as_is(Measure::Bytes),
    );
}

/// A small byte limit for [`outbound_plan`]'s check of the splitting by bytes.
const MAX_BYTES: usize = 300;

/// The fuzz targets' corpora (`fuzz/corpus/`, fixed crashes kept there as `regression-*`) as
/// regression tests: every input the fuzzer kept must still pass the target's checks.
#[cfg(test)]
mod tests {
    use hearth_channel::fuzzing::replay;
    #[test]
    fn email_message_corpus() {
        replay("email_message", super::message);
    }

    #[test]
    fn email_authentication_results_corpus() {
        replay("email_auth", super::authentication_results);
    }

    #[test]
    fn outbound_plan_corpus_for_mail() {
        replay("outbound_plan", super::outbound_plan);
    }
}
