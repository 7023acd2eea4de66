//! The outbound plan: how one reply becomes the messages a platform shows.
//!
//! It lives here once, so every adapter only sends and edits single messages:
//! - a reply longer than [`Capabilities::max_message_len`] (counted in the channel's
//!   [`Capabilities::measure`]) is split with [`split_message`]: at paragraph, line or word
//!   breaks, never inside a character, code fences closed at the end of a part and reopened at
//!   the start of the next;
//! - the first part quotes the message being answered and takes the place of a streamed
//!   preview; the last part carries the buttons;
//! - each part has its own stable delivery id, `<reply id>.<part index>`, for platforms that
//!   deduplicate sends.
//!
//! The daemon stores the planned parts and records each one as the platform accepts it, so a
//! temporary failure or a restart resumes at the first part not yet shown instead of sending the
//! whole reply again.
//!
//! The plan measures the Markdown source. An adapter whose rendering can lengthen the visible
//! text (Telegram draws a `---` rule as a ten-character line) sends a part whose rendering would
//! not fit as plain text instead: the source was measured and fits. An adapter handed a part
//! that does not fit at all answers [`crate::ErrorKind::Rejected`]; planning is the caller's job.

use crate::split::{head, split_message};
use crate::{Capabilities, OutboundMessage};

/// One message of a planned reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedPart {
    /// Position in the reply, from 0.
    pub index: usize,
    /// How many parts the reply has.
    pub count: usize,
    /// This part's Markdown, within the platform's limit.
    pub text: String,
}

impl PlannedPart {
    /// A part as stored: its position, the reply's part count and its text.
    pub fn new(index: usize, count: usize, text: impl Into<String>) -> Self {
        Self {
            index,
            count,
            text: text.into(),
        }
    }

    /// Whether this is the first part of its reply.
    pub fn is_first(&self) -> bool {
        self.index == 0
    }

    /// Whether this is the last part of its reply.
    pub fn is_last(&self) -> bool {
        self.index + 1 >= self.count
    }

    /// Whether this part quotes the message the reply answers: the first part only.
    pub fn quotes(&self) -> bool {
        self.is_first()
    }

    /// Whether this part carries the reply's buttons: the last part only, so they sit under
    /// the end of the text and the reference the daemon keeps for later edits is theirs.
    pub fn carries_buttons(&self) -> bool {
        self.is_last()
    }

    /// Whether this part takes the place of the reply's streamed preview: the first part only.
    pub fn replaces_preview(&self) -> bool {
        self.is_first()
    }

    /// The single message an adapter sends for this part of `reply`.
    pub fn message(&self, reply: &OutboundMessage) -> OutboundMessage {
        OutboundMessage {
            chat: reply.chat.clone(),
            text: self.text.clone(),
            buttons: if self.carries_buttons() {
                reply.buttons.clone()
            } else {
                Vec::new()
            },
            reply_to: reply.reply_to.clone().filter(|_| self.quotes()),
            replaces: reply.replaces.clone().filter(|_| self.replaces_preview()),
            delivery_id: reply
                .delivery_id
                .as_ref()
                .map(|id| format!("{id}.{}", self.index)),
            // Every part belongs to the same conversation thread (an email's subject, its
            // In-Reply-To), so each carries the context.
            reply_context: reply.reply_context.clone(),
            answers_press: reply.answers_press.clone().filter(|_| self.is_first()),
        }
    }
}

/// The parts `message` is shown as on a platform with `capabilities`, in order; never empty.
///
/// Empty text gives one empty part (a reply of only buttons): whether and how that can be sent
/// is the adapter's business.
pub fn plan(message: &OutboundMessage, capabilities: &Capabilities) -> Vec<PlannedPart> {
    let texts = match capabilities.max_message_len {
        Some(max) => split_message(&message.text, max, capabilities.measure),
        None => vec![message.text.clone()],
    };
    let count = texts.len();
    texts
        .into_iter()
        .enumerate()
        .map(|(index, text)| PlannedPart::new(index, count, text))
        .collect()
}

/// `message` as one message for an edit, which cannot add messages: text beyond the limit is
/// dropped at a natural break (fences closed), like the first part of a split.
pub fn plan_edit(message: &OutboundMessage, capabilities: &Capabilities) -> OutboundMessage {
    let mut edit = message.clone();
    if let Some(max) = capabilities.max_message_len {
        edit.text = head(&message.text, max, capabilities.measure);
    }
    edit
}

/// The part of `text` a preview can show: its beginning, up to the platform's limit.
pub fn preview_text(text: &str, capabilities: &Capabilities) -> String {
    match capabilities.max_message_len {
        Some(max) => head(text, max, capabilities.measure),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::Measure;
    use crate::{Button, ChatRef, MessageRef};

    fn caps(max: usize, measure: Measure) -> Capabilities {
        Capabilities {
            max_message_len: Some(max),
            measure,
            ..Capabilities::default()
        }
    }

    fn reply(text: &str) -> OutboundMessage {
        OutboundMessage {
            chat: ChatRef::new("c").with_thread("t"),
            text: text.to_owned(),
            buttons: vec![Button {
                label: "✅ Approve".into(),
                data: "c:x:a".into(),
                emoji: Some("✅".into()),
            }],
            reply_to: Some("41".into()),
            replaces: Some(MessageRef {
                chat: ChatRef::new("c"),
                message_id: "7".into(),
            }),
            delivery_id: Some("hearth-9".into()),
            reply_context: Some(serde_json::json!({"subject": "Re: plans"})),
            answers_press: None,
        }
    }

    /// Whether every fence opened in `part` is closed in it.
    fn fences_balanced(part: &str) -> bool {
        part.lines()
            .filter(|l| l.trim_start().starts_with("```"))
            .count()
            % 2
            == 0
    }

    #[test]
    fn a_short_reply_is_one_part_with_every_role() {
        let parts = plan(&reply("hello"), &caps(100, Measure::Chars));
        assert_eq!(parts, [PlannedPart::new(0, 1, "hello")]);
        let message = parts[0].message(&reply("hello"));
        assert_eq!(message, {
            let mut m = reply("hello");
            m.delivery_id = Some("hearth-9.0".into());
            m
        });
    }

    #[test]
    fn no_limit_means_one_part_whatever_the_length() {
        let text = "word ".repeat(10_000);
        let parts = plan(&reply(&text), &Capabilities::default());
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].text, text);
    }

    #[test]
    fn the_first_part_quotes_and_replaces_the_preview_the_last_carries_the_buttons() {
        let text = "alpha beta gamma delta epsilon zeta eta theta iota kappa";
        let original = reply(text);
        let parts = plan(&original, &caps(20, Measure::Chars));
        assert!(parts.len() >= 3, "{parts:?}");
        let messages: Vec<OutboundMessage> = parts.iter().map(|p| p.message(&original)).collect();
        let last = messages.len() - 1;
        for (i, m) in messages.iter().enumerate() {
            assert_eq!(
                m.chat, original.chat,
                "every part goes to the same chat and thread"
            );
            assert_eq!(m.reply_to.is_some(), i == 0, "only the first part quotes");
            assert_eq!(
                m.replaces.is_some(),
                i == 0,
                "only the first part replaces the preview"
            );
            assert_eq!(
                m.buttons.is_empty(),
                i != last,
                "only the last part has buttons"
            );
            assert_eq!(m.delivery_id, Some(format!("hearth-9.{i}")));
            assert!(m.text.chars().count() <= 20);
        }
        assert_eq!(
            messages
                .iter()
                .map(|m| m.text.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            text
        );
        assert!(parts[0].is_first() && !parts[0].is_last());
        assert!(parts[last].is_last() && !parts[last].is_first());
    }

    #[test]
    fn code_fences_are_never_broken() {
        let code: Vec<String> = (0..300).map(|i| format!("    let x{i} = {i};")).collect();
        let text = format!(
            "Here:\n\n```rust\n{}\n```\n\nAnd more text after the block.",
            code.join("\n")
        );
        let parts = plan(&reply(&text), &caps(400, Measure::Chars));
        assert!(parts.len() > 5);
        for part in &parts {
            assert!(part.text.chars().count() <= 400);
            assert!(fences_balanced(&part.text), "{:?}", part.text);
        }
        for part in &parts[1..parts.len() - 1] {
            assert!(part.text.starts_with("```rust\n"), "{:?}", part.text);
        }
        let joined: Vec<&str> = parts.iter().flat_map(|p| p.text.lines()).collect();
        for line in &code {
            assert!(joined.contains(&line.as_str()), "{line} lost or torn");
        }
    }

    #[test]
    fn telegram_counts_utf16_so_emoji_count_twice() {
        // 3,000 emoji: 3,000 characters but 6,000 UTF-16 units.
        let text = "😀".repeat(3_000);
        let by_chars = plan(&reply(&text), &caps(4096, Measure::Chars));
        assert_eq!(by_chars.len(), 1);
        let by_utf16 = plan(&reply(&text), &caps(4096, Measure::Utf16));
        assert_eq!(by_utf16.len(), 2);
        for part in &by_utf16 {
            assert!(part.text.encode_utf16().count() <= 4096);
        }
        assert_eq!(
            by_utf16.iter().map(|p| p.text.as_str()).collect::<String>(),
            text
        );
    }

    #[test]
    fn parts_rebuilt_from_storage_keep_their_roles() {
        let original = reply("x");
        let middle = PlannedPart::new(1, 3, "middle");
        let message = middle.message(&original);
        assert!(message.buttons.is_empty() && message.reply_to.is_none());
        assert!(message.replaces.is_none());
        assert_eq!(message.delivery_id.as_deref(), Some("hearth-9.1"));
        let last = PlannedPart::new(2, 3, "end").message(&original);
        assert_eq!(last.buttons, original.buttons);
        let mut anonymous = original.clone();
        anonymous.delivery_id = None;
        assert_eq!(middle.message(&anonymous).delivery_id, None);
    }

    #[test]
    fn an_empty_reply_is_one_empty_part() {
        let parts = plan(&reply(""), &caps(10, Measure::Utf16));
        assert_eq!(parts, [PlannedPart::new(0, 1, "")]);
    }

    #[test]
    fn edits_and_previews_stay_one_message() {
        let text = format!("{}\n\n{}", "a ".repeat(30).trim_end(), "b ".repeat(30));
        let edit = plan_edit(&reply(&text), &caps(70, Measure::Chars));
        assert_eq!(edit.text, "a ".repeat(30).trim_end());
        assert_eq!(edit.buttons, reply("").buttons, "an edit keeps its buttons");
        assert_eq!(
            preview_text(&text, &caps(70, Measure::Chars)),
            "a ".repeat(30).trim_end()
        );
        assert_eq!(preview_text(&text, &Capabilities::default()), text);
    }
}
