//! The bodies of the Telegram fuzz targets in `fuzz/`, also run on their corpora by
//! the tests below. Not part of the channel API.

use hearth_channel::fuzzing::{block_on_ready, check_plan};
use hearth_channel::{Capabilities, Inbound, InboundKind, Measure};
use serde_json::Value;

use crate::api::{decode_answer, split_updates};
use crate::format::{MAX_MESSAGE_LEN, render, visible_len};
use crate::inbound::{Decoded, Mapper, Me, decode_update, find_mention};

/// The bot the fuzzed updates are addressed to.
const BOT_ID: i64 = 4242;
const BOT_USERNAME: &str = "hearth_bot";

/// `data` as the body of a `getUpdates` answer (and, whole, as one webhook update): the
/// envelope, the split into updates, each update's decoding and its mapping to an event. Panics
/// where hearth would: nothing on the way may.
pub fn update(data: &[u8]) {
    let answer = decode_answer("getUpdates", 200, data, split_updates);
    match answer {
        Ok(updates) => {
            for update in updates {
                map_one(&update);
            }
        }
        Err(error) => assert!(!error.to_string().is_empty()),
    }
    map_one(&String::from_utf8_lossy(data));
}

fn map_one(json: &str) {
    let me = Me {
        id: BOT_ID,
        username: BOT_USERNAME.to_owned(),
    };
    let mapper = Mapper {
        me: &me,
        max_document_bytes: 1000,
    };
    let update = match decode_update(json) {
        Decoded::Update { update, .. } => update,
        Decoded::Poison { error, .. } => {
            assert!(!error.is_empty());
            return;
        }
    };
    // Mapping waits only for downloads, which it never starts: files are fetched later.
    let Ok(Some(event)) = block_on_ready(mapper.map(&update)) else {
        return;
    };
    check_event(&update, &event);
}

/// What every event from an update must be: named by its update id, with its text free of the
/// bot's own mention, and storable as the inbox stores it (JSON, read back the same).
fn check_event(update: &Value, event: &Inbound) {
    assert_eq!(
        Some(event.platform_id.as_str()),
        update
            .get("update_id")
            .and_then(Value::as_i64)
            .map(|id| id.to_string())
            .as_deref(),
    );
    if let InboundKind::Message { text, .. } | InboundKind::Edit { text, .. } = &event.kind {
        assert_eq!(text.trim(), text, "the text is not trimmed");
        assert_eq!(
            find_mention(text, BOT_USERNAME),
            None,
            "the bot's mention is left in"
        );
    }
    hearth_channel::fuzzing::check_stored(event);
}

/// `data` as a reply's Markdown, planned at Telegram's limit and rendered: the checks of
/// [`check_plan`], with each part's HTML (or the Markdown sent instead) within the limit.
pub fn outbound_plan(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let capabilities = Capabilities {
        max_message_len: Some(MAX_MESSAGE_LEN),
        measure: Measure::Utf16,
        ..Capabilities::default()
    };
    check_plan(&text, &capabilities, |part| {
        let rendered = render(part);
        match &rendered.html {
            Some(html) => visible_len(html),
            None => Measure::Utf16.len(&rendered.markdown),
        }
    });
}

/// The fuzz targets' corpora (`fuzz/corpus/`, fixed crashes kept there as `regression-*`) as
/// regression tests: every input the fuzzer kept must still pass the target's checks.
#[cfg(test)]
mod tests {
    use hearth_channel::fuzzing::replay;
    #[test]
    fn telegram_update_corpus() {
        replay("telegram_update", super::update);
    }

    #[test]
    fn outbound_plan_corpus_at_telegrams_limit() {
        replay("outbound_plan", super::outbound_plan);
    }
}
