//! Markdown replies as Matrix message content: `m.notice` (bots' messages, which other bots
//! do not answer) with the Markdown source as `body` and the rendered HTML as
//! `formatted_body`, plus the relations for replies, threads and edits.

use matrix_sdk::ruma::events::room::message::FormattedBody;
use serde_json::{Map, Value, json};

/// What a message's content may take. A homeserver refuses an event over 64 KiB, and in an
/// encrypted room the event travels as the base64 of its ciphertext (a third longer) in an
/// envelope of about 2 KB. The HTML rendering can be several times the Markdown (`<` becomes
/// `&lt;`, a list item `<li>…</li>`), and an edit carries the text twice: content over this
/// size is sent without its HTML rather than refused.
pub(crate) const MAX_CONTENT_BYTES: usize = 46 * 1024;

/// The `m.notice` content for Markdown `text`: the source as `body`, and the rendered HTML as
/// `formatted_body` when the Markdown has any formatting (plain text is sent as it is) and the
/// content still fits [`MAX_CONTENT_BYTES`].
pub(crate) fn notice(text: &str) -> Map<String, Value> {
    let mut content = Map::new();
    content.insert("msgtype".into(), json!("m.notice"));
    content.insert("body".into(), json!(text));
    if let Some(html) = FormattedBody::markdown(text) {
        content.insert("format".into(), json!("org.matrix.custom.html"));
        content.insert("formatted_body".into(), json!(html.body));
    }
    if size(&content) > MAX_CONTENT_BYTES {
        without_html(&mut content);
    }
    content
}

/// The size of `content` as it is sent.
pub(crate) fn size(content: &Map<String, Value>) -> usize {
    Value::Object(content.clone()).to_string().len()
}

fn without_html(content: &mut Map<String, Value>) {
    content.remove("format");
    content.remove("formatted_body");
}

/// Where a new message sits: in `thread` (a thread root's event id), quoting `reply_to`. The
/// HTML goes if the relations make the content too large.
pub(crate) fn with_relations(
    mut content: Map<String, Value>,
    thread: Option<&str>,
    reply_to: Option<&str>,
) -> Value {
    match (thread, reply_to) {
        (Some(root), reply) => {
            // In a thread the reply target is the quoted event, or (falling back, for clients
            // without threads) the root.
            content.insert(
                "m.relates_to".into(),
                json!({
                    "rel_type": "m.thread",
                    "event_id": root,
                    "is_falling_back": reply.is_none(),
                    "m.in_reply_to": {"event_id": reply.unwrap_or(root)},
                }),
            );
        }
        (None, Some(reply)) => {
            content.insert(
                "m.relates_to".into(),
                json!({"m.in_reply_to": {"event_id": reply}}),
            );
        }
        (None, None) => {}
    }
    // The relations take room too: content that fitted by itself may not with them.
    if size(&content) > MAX_CONTENT_BYTES {
        without_html(&mut content);
    }
    Value::Object(content)
}

/// An edit (`m.replace`) of `original` to Markdown `text`.
pub(crate) fn replacement(original: &str, text: &str) -> Value {
    let new_content = notice(text);
    let mut content = notice(&format!("* {text}"));
    if let Some(Value::String(html)) = new_content.get("formatted_body") {
        content.insert("formatted_body".into(), json!(format!("* {html}")));
        content.insert("format".into(), json!("org.matrix.custom.html"));
    }
    content.insert("m.new_content".into(), Value::Object(new_content));
    content.insert(
        "m.relates_to".into(),
        json!({"rel_type": "m.replace", "event_id": original}),
    );
    // The text is in an edit twice: the fallback for clients without edits loses its HTML
    // first, then the new content.
    if size(&content) > MAX_CONTENT_BYTES {
        without_html(&mut content);
    }
    if size(&content) > MAX_CONTENT_BYTES
        && let Some(Value::Object(new_content)) = content.get_mut("m.new_content")
    {
        without_html(new_content);
    }
    Value::Object(content)
}

/// A reaction (`m.annotation`) with `key` on `event`.
pub(crate) fn reaction(event: &str, key: &str) -> Value {
    json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": event, "key": key}})
}

/// A person's message text without the quoted fallback older clients put in front of a reply
/// (`> <@them:server> what they said` lines and one blank line).
pub(crate) fn strip_reply_fallback(body: &str) -> &str {
    if !body.starts_with("> <") {
        return body;
    }
    let mut rest = body;
    while rest.starts_with('>') {
        rest = rest.split_once('\n').map_or("", |(_, after)| after);
    }
    rest.strip_prefix('\n').unwrap_or(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_is_rendered_and_plain_text_left_alone() {
        let content = notice("**bold** and `code` and a_b < c & d");
        let html = content["formatted_body"].as_str().expect("rendered");
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(html.contains("<code>code</code>"), "{html}");
        assert!(html.contains("a_b &lt; c &amp; d"), "{html}");
        assert_eq!(content["msgtype"], "m.notice");
        let plain = notice("just words");
        assert!(plain.get("formatted_body").is_none());
        assert_eq!(plain["body"], "just words");
    }

    #[test]
    fn replies_threads_and_edits_carry_their_relations() {
        let reply = with_relations(notice("x"), None, Some("$q"));
        assert_eq!(reply["m.relates_to"]["m.in_reply_to"]["event_id"], "$q");
        let threaded = with_relations(notice("x"), Some("$root"), None);
        assert_eq!(threaded["m.relates_to"]["rel_type"], "m.thread");
        assert_eq!(threaded["m.relates_to"]["is_falling_back"], true);
        let edit = replacement("$orig", "**new**");
        assert_eq!(edit["m.relates_to"]["rel_type"], "m.replace");
        assert_eq!(edit["m.new_content"]["body"], "**new**");
        assert!(edit["body"].as_str().is_some_and(|b| b.starts_with("* ")));
    }

    /// Found by the outbound_plan fuzz target: a notice whose HTML just fitted by itself was
    /// over the limit once its thread relation was added.
    #[test]
    fn relations_that_push_a_notice_over_the_limit_drop_its_html() {
        // Grow the text until its notice, HTML included, sits just under the limit.
        let mut text = String::new();
        loop {
            let longer = format!("{text}- item <b>&amp;</b>\n");
            if size(&notice(&longer)) > MAX_CONTENT_BYTES - 40 {
                break;
            }
            text = longer;
        }
        let alone = notice(&text);
        assert!(alone.contains_key("formatted_body"), "it fits by itself");
        let Value::Object(threaded) =
            with_relations(alone, Some("$root:example.org"), Some("$q:example.org"))
        else {
            panic!("an object")
        };
        assert!(size(&threaded) <= MAX_CONTENT_BYTES, "{}", size(&threaded));
        assert!(!threaded.contains_key("formatted_body"));
        assert_eq!(threaded["body"], text.as_str());
        assert_eq!(threaded["m.relates_to"]["rel_type"], "m.thread");
    }

    #[test]
    fn a_long_list_is_sent_without_its_html_rather_than_over_the_event_limit() {
        // Found by the outbound_plan fuzz target: 10,000 bytes of list items with markup in
        // them render to an edit of 49 KB, which an encrypted room cannot carry in 64 KiB.
        let text = "- item <b>&amp;</b>\n".repeat(500);
        let edit = replacement("$preview", &text);
        let Value::Object(edit) = edit else {
            panic!("an object")
        };
        assert!(size(&edit) <= MAX_CONTENT_BYTES, "{}", size(&edit));
        assert_eq!(edit["m.new_content"]["body"], text.as_str());
        let new = notice(&text);
        assert!(size(&new) <= MAX_CONTENT_BYTES);
        assert!(
            new.contains_key("formatted_body"),
            "a new message of this size keeps its HTML"
        );
        // Short texts keep their HTML everywhere.
        let edit = replacement("$preview", "**bold**");
        assert!(edit["formatted_body"].is_string());
        assert!(edit["m.new_content"]["formatted_body"].is_string());
    }

    #[test]
    fn reply_fallbacks_are_stripped() {
        assert_eq!(
            strip_reply_fallback("> <@a:b> earlier\n> more\n\napprove"),
            "approve"
        );
        assert_eq!(
            strip_reply_fallback("> a quote of mine"),
            "> a quote of mine"
        );
        assert_eq!(strip_reply_fallback("hello"), "hello");
    }
}
