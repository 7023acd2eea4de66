//! Markdown replies as Matrix message content: `m.notice` (bots' messages, which other bots
//! do not answer) with the Markdown source as `body` and the rendered HTML as
//! `formatted_body`, plus the relations for replies, threads and edits.

use matrix_sdk::ruma::events::room::message::FormattedBody;
use serde_json::{Map, Value, json};

/// The `m.notice` content for Markdown `text`: the source as `body`, and the rendered HTML as
/// `formatted_body` when the Markdown has any formatting (plain text is sent as it is).
pub(crate) fn notice(text: &str) -> Map<String, Value> {
    let mut content = Map::new();
    content.insert("msgtype".into(), json!("m.notice"));
    content.insert("body".into(), json!(text));
    if let Some(html) = FormattedBody::markdown(text) {
        content.insert("format".into(), json!("org.matrix.custom.html"));
        content.insert("formatted_body".into(), json!(html.body));
    }
    content
}

/// Where a new message sits: in `thread` (a thread root's event id), quoting `reply_to`.
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
