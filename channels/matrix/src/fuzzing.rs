//! The bodies of the Matrix fuzz targets in `fuzz/`, also run on their corpora by
//! the tests below. Not part of the channel API. matrix-sdk decodes `/sync` itself (with
//! ruma); what hearth decodes of its own is each timeline event's JSON, which these reach the
//! same way the sync loop does.

use hearth_channel::fuzzing::check_plan;
use hearth_channel::{Capabilities, ChatRef, Inbound, InboundKind, Measure, Sender};
use matrix_sdk::ruma::api::IncomingResponse;
use matrix_sdk::ruma::api::client::sync::sync_events::v3::Response as SyncResponse;
use matrix_sdk::ruma::events::AnySyncTimelineEvent;
use matrix_sdk::ruma::exports::http;
use matrix_sdk::ruma::{OwnedUserId, user_id};
use serde_json::Value;

use crate::MAX_MESSAGE_BYTES;
use crate::format::{MAX_CONTENT_BYTES, notice, replacement, with_relations};
use crate::inbound::{Reading, decision_emoji, mentions, read_event};
use crate::media;

/// `data` as the body of a `/sync` answer, decoded as matrix-sdk decodes it (ruma), and each
/// joined room's timeline events taken as the sync loop takes them. Nothing may panic.
pub fn sync_response(data: &[u8]) {
    let Ok(answer) = http::Response::builder().status(200).body(data.to_vec()) else {
        return;
    };
    let Ok(response) = SyncResponse::try_from_http_response(answer) else {
        return;
    };
    for (room, joined) in &response.rooms.join {
        for raw in &joined.timeline.events {
            // matrix-sdk reads the event with ruma; hearth then reads its JSON itself.
            let _typed = raw.deserialize();
            if let Ok(json) = serde_json::from_str::<Value>(raw.json().get()) {
                take(room.as_str(), &json);
            }
        }
    }
}

/// `data` as one room event: read by ruma as matrix-sdk reads a timeline event, and taken as the
/// sync loop takes it (in a DM: every check that needs the room passes).
pub fn event(data: &[u8]) {
    let _typed = serde_json::from_slice::<AnySyncTimelineEvent>(data);
    if let Ok(json) = serde_json::from_slice::<Value>(data) {
        take("!room:example.org", &json);
    }
}

fn own() -> OwnedUserId {
    user_id!("@hearth:example.org").to_owned()
}

/// Takes one event's JSON as `convert` does in a DM, and checks the event it becomes.
fn take(room: &str, json: &Value) {
    let (Some(event_id), Some(sender)) = (json["event_id"].as_str(), json["sender"].as_str())
    else {
        return;
    };
    let Some(reading) = read_event(json, event_id) else {
        return;
    };
    let content = &json["content"];
    if let Reading::Message { text, .. } = reading {
        decision_emoji(text);
        mentions(&own(), content);
    }
    let chat = match reading.thread() {
        Some(root) => ChatRef::new(room).with_thread(root),
        None => ChatRef::new(room),
    };
    let kind = reading.event(content, event_id);
    if let InboundKind::Message { attachments, .. } = &kind {
        for attachment in attachments {
            // A file the sender named badly is refused when fetched, with a reason.
            if let Err(error) = media::prepare(attachment, u64::MAX) {
                assert!(!error.to_string().is_empty());
            }
        }
    }
    let event = Inbound {
        platform_id: event_id.to_owned(),
        chat,
        sender: Sender::new(sender),
        kind,
        reply_context: None,
        agent: None,
    };
    hearth_channel::fuzzing::check_stored(&event);
}

/// `data` as a reply's Markdown, planned at hearth's Matrix limit: the checks of [`check_plan`],
/// and each part's message, as a reply in a thread and as the edit that replaces a preview,
/// never made too large for an encrypted room by its HTML.
pub fn outbound_plan(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let capabilities = Capabilities {
        max_message_len: Some(MAX_MESSAGE_BYTES),
        measure: Measure::Bytes,
        ..Capabilities::default()
    };
    check_plan(&text, &capabilities, |part| {
        let new = with_relations(
            notice(part),
            Some("$root:example.org"),
            Some("$q:example.org"),
        );
        let edit = replacement("$preview:example.org", part);
        // The HTML never makes a content too large (plain text alone cannot be made smaller).
        for content in [new, edit] {
            let size = content.to_string().len();
            let formatted = content["formatted_body"].is_string()
                || content["m.new_content"]["formatted_body"].is_string();
            assert!(
                size <= MAX_CONTENT_BYTES || !formatted,
                "a message of {} bytes has a content of {size} bytes with its HTML, over {MAX_CONTENT_BYTES}",
                part.len()
            );
        }
        part.len()
    });
}

/// The fuzz targets' corpora (`fuzz/corpus/`, fixed crashes kept there as `regression-*`) as
/// regression tests: every input the fuzzer kept must still pass the target's checks.
#[cfg(test)]
mod tests {
    use hearth_channel::fuzzing::replay;
    #[test]
    fn matrix_sync_response_corpus() {
        replay("matrix_sync", super::sync_response);
    }

    #[test]
    fn matrix_event_corpus() {
        replay("matrix_event", super::event);
    }

    #[test]
    fn outbound_plan_corpus_at_matrixs_limit() {
        replay("outbound_plan", super::outbound_plan);
    }
}
