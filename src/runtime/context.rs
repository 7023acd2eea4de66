//! The conversation as the model sees it on each call: the turns since the latest summary, old
//! tool results shortened to stubs, every tool call paired with its result, the current turn
//! last; and an estimate of the request's size anchored on the tokens the provider reported for
//! the previous call.
//!
//! Nothing here drops a turn: turns leave the model's view only when a stored summary covers
//! them (see [`super::compact`]).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::provider::{ChatMessage, ContentPart};
use crate::store::{StoredMessage, Summary};

/// Characters per token for the part of a request the provider has not counted yet.
pub const CHARS_PER_TOKEN: usize = 4;

/// Tool results of this many latest turns (the current one included) stay whole; older ones
/// become stubs that the `tool_result` tool fetches back.
pub const WHOLE_RESULT_TURNS: usize = 3;

/// A tool result at most this long is kept even in old turns: a stub would not be shorter.
const STUB_OVER_CHARS: usize = 400;

/// How much of a stubbed result the model still sees.
const STUB_HEAD_CHARS: usize = 200;

/// The heading of the summary's system block.
pub const SUMMARY_HEADING: &str = "Earlier in this conversation (reference, already handled)";

/// The messages to send: the turns after the summary, with the current turn last even when
/// another turn was written after it started (it waited for an approval). Other turns still
/// open (`unfinished`) contribute only their user messages, since their tool calls have no
/// results yet. Old tool results become stubs; the result is [`paired`].
pub fn assemble(
    messages: &[StoredMessage],
    current_turn: i64,
    unfinished: &[i64],
) -> Vec<ChatMessage> {
    let is_current = |m: &&StoredMessage| m.turn_id == Some(current_turn);
    let open_elsewhere = |m: &&StoredMessage| {
        m.turn_id
            .is_some_and(|t| t != current_turn && unfinished.contains(&t))
            && !matches!(m.message, ChatMessage::User { .. })
    };
    let mut kept: Vec<&StoredMessage> = messages
        .iter()
        .filter(|m| !is_current(m) && !open_elsewhere(m))
        .collect();
    kept.extend(messages.iter().filter(is_current));
    // The view starts with a user message, never with the tail of a turn.
    let first_user = kept
        .iter()
        .position(|m| matches!(m.message, ChatMessage::User { .. }))
        .unwrap_or(kept.len());
    let kept = &kept[first_user..];

    // Turns in the order they appear; the last few keep their tool results whole.
    let mut order: Vec<Option<i64>> = Vec::new();
    for m in kept {
        if order.last() != Some(&m.turn_id) && !order.contains(&m.turn_id) {
            order.push(m.turn_id);
        }
    }
    let recent = &order[order.len().saturating_sub(WHOLE_RESULT_TURNS)..];
    let out = kept
        .iter()
        .map(|stored| {
            if recent.contains(&stored.turn_id) {
                stored.message.clone()
            } else {
                stub(&stored.message)
            }
        })
        .collect();
    paired(out)
}

/// A long tool result replaced by its tool, status and first characters, and how to get the
/// rest. Everything else is returned as it is.
pub fn stub(message: &ChatMessage) -> ChatMessage {
    let ChatMessage::Tool {
        call_id,
        name,
        content,
        is_error,
    } = message
    else {
        return message.clone();
    };
    if content.chars().count() <= STUB_OVER_CHARS {
        return message.clone();
    }
    let head: String = content.chars().take(STUB_HEAD_CHARS).collect();
    let status = if *is_error { "error" } else { "ok" };
    ChatMessage::Tool {
        call_id: call_id.clone(),
        name: name.clone(),
        content: format!(
            "[Earlier result of {name} ({status}), shortened to its first {STUB_HEAD_CHARS} of {} characters; call tool_result with call_id \"{call_id}\" for all of it]\n{head}…",
            content.chars().count()
        ),
        is_error: *is_error,
    }
}

/// The pairing check run before every provider call: each assistant message that calls tools
/// is followed by exactly one result per call, before anything else. A result that is missing
/// (a crash mid-turn, a turn stopped early) is filled in as "no result"; a result with no call
/// before it, or a second result for one call, is left out. Providers refuse a request that
/// breaks these rules (HTTP 400), and would refuse every later one too.
///
/// Results are matched within the run of tool messages after their call, since providers may
/// reuse call ids (`call_0`) from one answer to the next.
pub fn paired(messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let mut out = Vec::with_capacity(messages.len());
    let mut iter = messages.into_iter().peekable();
    while let Some(message) = iter.next() {
        match message {
            ChatMessage::Tool { .. } => {
                // Not right after its call: an orphan.
            }
            ChatMessage::Assistant { ref tool_calls, .. } if !tool_calls.is_empty() => {
                let calls = tool_calls.clone();
                out.push(message);
                let mut results = Vec::new();
                while let Some(ChatMessage::Tool { .. }) = iter.peek() {
                    if let Some(result) = iter.next() {
                        results.push(result);
                    }
                }
                for call in calls {
                    let found = results.iter().position(
                        |r| matches!(r, ChatMessage::Tool { call_id, .. } if *call_id == call.id),
                    );
                    match found {
                        Some(index) => out.push(results.swap_remove(index)),
                        None => out.push(ChatMessage::Tool {
                            call_id: call.id.clone(),
                            name: call.name.clone(),
                            content: "No result was recorded for this call (it was interrupted or stopped); it may not have run. Check before repeating it.".into(),
                            is_error: true,
                        }),
                    }
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// The system block that stands for the turns a summary covers.
pub fn summary_block(summary: &Summary) -> String {
    let ledger = super::compact::render_ledger(&summary.ledger);
    let mut block = format!("## {SUMMARY_HEADING}\n{}", summary.narrative.trim());
    if !ledger.is_empty() {
        block.push_str("\n\nActions already taken in those turns (done; do not repeat them unless the user asks again):\n");
        block.push_str(&ledger);
    }
    block
}

/// What a message costs besides its text: its role and the wrapping every API adds (a few
/// tokens a message), so a history of many short messages is not underestimated.
const MESSAGE_OVERHEAD_CHARS: usize = 16;

/// Characters a message costs in a request, roughly as the provider counts them.
pub fn message_chars(message: &ChatMessage) -> usize {
    MESSAGE_OVERHEAD_CHARS
        + match message {
            ChatMessage::User { content } => content
                .iter()
                .map(|part| match part {
                    ContentPart::Text { text } => text.len(),
                    // An image costs about a thousand tokens whatever its file size.
                    ContentPart::Image { .. } => 1_000 * CHARS_PER_TOKEN,
                })
                .sum(),
            ChatMessage::Assistant { text, tool_calls } => {
                text.len()
                    + tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.len() + 16)
                        .sum::<usize>()
            }
            ChatMessage::Tool { content, name, .. } => content.len() + name.len() + 16,
        }
}

/// The size of the previous request of a conversation as sent and as the provider counted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Anchor {
    chars: usize,
    tokens: u64,
}

/// What hearth learned about one provider and model from the tokens it reported: how many
/// characters of a request make a token, and, once the server refused a request for its length
/// naming its numbers, the most prompt tokens it takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    pub chars_per_token: f64,
    pub prompt_limit: Option<u64>,
}

impl Default for Calibration {
    fn default() -> Self {
        Self {
            chars_per_token: CHARS_PER_TOKEN as f64,
            prompt_limit: None,
        }
    }
}

impl Calibration {
    /// As stored in `model_calibrations`.
    pub fn row(&self, model: &str) -> crate::store::CalibrationRow {
        crate::store::CalibrationRow {
            model: model.to_string(),
            chars_per_1000_tokens: (self.chars_per_token * 1_000.0).round() as i64,
            prompt_limit: self
                .prompt_limit
                .map(|l| i64::try_from(l).unwrap_or(i64::MAX)),
        }
    }

    /// Read back from `model_calibrations`; a stored ratio out of range is not believed.
    pub fn from_row(row: &crate::store::CalibrationRow) -> Self {
        let ratio = row.chars_per_1000_tokens as f64 / 1_000.0;
        Self {
            chars_per_token: if (CHARS_PER_TOKEN_RANGE.0..=CHARS_PER_TOKEN_RANGE.1).contains(&ratio)
            {
                ratio
            } else {
                CHARS_PER_TOKEN as f64
            },
            prompt_limit: row
                .prompt_limit
                .and_then(|l| u64::try_from(l).ok())
                .filter(|l| *l > 0),
        }
    }
}

/// Learned characters per token stay in this range: a server that reports a fixed or missing
/// count must not make every estimate absurd.
const CHARS_PER_TOKEN_RANGE: (f64, f64) = (1.0, 8.0);

/// Token estimates: per conversation the provider's reported prompt tokens of the last call plus
/// the characters added since, and per provider and model ([`model_key`]) the characters per
/// token learned from every report. A request that is not a growth of the last one (after a
/// compaction, a `/new`, a restart) is estimated from its characters and the learned ratio until
/// the provider reports again.
#[derive(Debug, Default)]
pub struct Estimator {
    anchors: Mutex<HashMap<i64, Anchor>>,
    calibrations: Mutex<HashMap<String, Calibration>>,
}

/// The key of a provider and model for [`Estimator`]: `provider/model`.
pub fn model_key(provider: &str, model: &str) -> String {
    format!("{provider}/{model}")
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Estimator {
    /// What is known of `model` (its default when nothing was learned yet).
    pub fn calibration(&self, model: &str) -> Calibration {
        lock(&self.calibrations)
            .get(model)
            .copied()
            .unwrap_or_default()
    }

    /// Characters per token of `model`.
    pub fn chars_per_token(&self, model: &str) -> f64 {
        self.calibration(model).chars_per_token
    }

    /// Tokens of `chars` characters of `model` with no anchor.
    pub fn tokens_of(&self, model: &str, chars: usize) -> u64 {
        (chars as f64 / self.chars_per_token(model)).ceil() as u64
    }

    /// Characters that make `tokens` tokens of `model`.
    pub fn chars_of(&self, model: &str, tokens: u64) -> usize {
        (tokens as f64 * self.chars_per_token(model)) as usize
    }

    /// Calibrations read back from the database at start.
    pub fn load(&self, entries: impl IntoIterator<Item = (String, Calibration)>) {
        lock(&self.calibrations).extend(entries);
    }

    /// Estimated tokens of a request of `chars` characters in `conversation`, sent to `model`.
    pub fn estimate(&self, conversation: i64, model: &str, chars: usize) -> u64 {
        let by_chars = self.tokens_of(model, chars);
        match lock(&self.anchors).get(&conversation) {
            Some(anchor) if chars >= anchor.chars => {
                let anchored = anchor.tokens + self.tokens_of(model, chars - anchor.chars);
                // A server that reports far fewer tokens than the text can hold (a fixed or
                // missing count) is not believed below half the characters' estimate.
                anchored.max(by_chars / 2)
            }
            _ => by_chars,
        }
    }

    /// The provider counted `tokens` for a request of `chars` characters to `model`. Returns
    /// the new calibration when it moved by more than a twentieth (worth storing).
    pub fn reported(
        &self,
        conversation: i64,
        model: &str,
        chars: usize,
        tokens: u64,
    ) -> Option<Calibration> {
        if tokens == 0 || chars == 0 {
            return None;
        }
        let observed = chars as f64 / tokens as f64;
        if !(CHARS_PER_TOKEN_RANGE.0..=CHARS_PER_TOKEN_RANGE.1).contains(&observed) {
            // A fixed or missing count, not the request's: neither anchored nor learned.
            return None;
        }
        lock(&self.anchors).insert(conversation, Anchor { chars, tokens });
        let mut calibrations = lock(&self.calibrations);
        let entry = calibrations.entry(model.to_string());
        let known = matches!(entry, std::collections::hash_map::Entry::Occupied(_));
        let calibration = entry.or_default();
        let before = calibration.chars_per_token;
        // New reports weigh more than old ones, but one odd request does not swing it all.
        calibration.chars_per_token = if known {
            before * 0.5 + observed * 0.5
        } else {
            observed
        };
        let moved = (calibration.chars_per_token - before).abs() / before > 0.05;
        (moved || !known).then_some(*calibration)
    }

    /// The server refused a request of `chars` characters for its length, counting `tokens`
    /// against its limit of `limit` prompt tokens: the calibration is corrected at once. A
    /// refusal without numbers only makes the estimates a sixth larger (the next reports
    /// correct that again), since a guessed limit kept for good could shrink the window forever.
    pub fn overflowed(
        &self,
        conversation: i64,
        model: &str,
        chars: usize,
        limit: Option<u64>,
        tokens: Option<u64>,
    ) -> Calibration {
        let mut calibrations = lock(&self.calibrations);
        let calibration = calibrations.entry(model.to_string()).or_default();
        match tokens.filter(|t| *t > 0 && chars > 0) {
            Some(tokens) => {
                calibration.chars_per_token = (chars as f64 / tokens as f64)
                    .clamp(CHARS_PER_TOKEN_RANGE.0, CHARS_PER_TOKEN_RANGE.1);
                lock(&self.anchors).insert(conversation, Anchor { chars, tokens });
            }
            None => {
                lock(&self.anchors).remove(&conversation);
                if limit.is_none() {
                    calibration.chars_per_token =
                        (calibration.chars_per_token * 0.85).max(CHARS_PER_TOKEN_RANGE.0);
                }
            }
        }
        if let Some(limit) = limit {
            calibration.prompt_limit =
                Some(calibration.prompt_limit.map_or(limit, |l| l.min(limit)));
        }
        *calibration
    }

    /// Forgets the anchor: the next request is not a growth of the last one.
    pub fn reset(&self, conversation: i64) {
        lock(&self.anchors).remove(&conversation);
    }
}

/// The numbers of a "context too long" refusal: the server's limit for the prompt and, when it
/// says so, the tokens it counted for the refused request. OpenAI: "maximum context length is
/// 8192 tokens. However, your messages resulted in 9000 tokens" (or "you requested 9000 tokens
/// (8000 in the messages, 1000 in the completion)"); llama.cpp: "request (9000 tokens) exceeds
/// the available context size (8192 tokens)"; vLLM: "maximum model length is 8192 tokens.
/// However, you requested 9000 tokens".
pub fn overflow_numbers(message: &str) -> Option<(u64, Option<u64>)> {
    let lower = message.to_lowercase();
    let numbers: Vec<(usize, u64)> = number_positions(&lower);
    let near = |phrases: &[&str]| {
        phrases.iter().find_map(|phrase| {
            let at = lower.find(phrase)?;
            numbers
                .iter()
                .find(|(pos, _)| *pos >= at && *pos <= at + phrase.len() + 24)
                .map(|(_, n)| *n)
        })
    };
    // Anthropic: "prompt is too long: 210000 tokens > 200000 maximum".
    if let Some(at) = lower.find(" tokens > ")
        && lower[at..].contains("maximum")
    {
        let before = numbers
            .iter()
            .rev()
            .find(|(pos, _)| *pos < at)
            .map(|(_, n)| *n);
        let after = numbers.iter().find(|(pos, _)| *pos > at).map(|(_, n)| *n);
        if let (Some(counted), Some(limit)) = (before, after) {
            return Some((limit, Some(counted)));
        }
    }
    let window = near(&[
        "maximum context length",
        "context size",
        "maximum model length",
        "context window",
        "context length",
    ])?;
    let completion = lower
        .find("in the completion")
        .and_then(|at| numbers.iter().rev().find(|(pos, _)| *pos < at))
        .map(|(_, n)| *n);
    let messages = lower
        .find("in the messages")
        .and_then(|at| numbers.iter().rev().find(|(pos, _)| *pos < at))
        .map(|(_, n)| *n);
    let counted = messages
        .or_else(|| near(&["resulted in", "you requested", "request ("]).filter(|n| *n != window));
    // A server that counts the answer's allowance against its window leaves the prompt less.
    let limit = window.saturating_sub(completion.unwrap_or(0));
    (limit > 0).then_some((limit, counted))
}

/// Each run of digits in `text` (commas inside a number allowed) with where it starts.
fn number_positions(text: &str) -> Vec<(usize, u64)> {
    let mut out = Vec::new();
    let mut start = None;
    let mut digits = String::new();
    for (at, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        if c.is_ascii_digit() {
            start.get_or_insert(at);
            digits.push(c);
        } else if c == ','
            && start.is_some()
            && text[at + 1..].starts_with(|d: char| d.is_ascii_digit())
        {
            continue;
        } else if let Some(begin) = start.take() {
            if let Ok(n) = digits.parse() {
                out.push((begin, n));
            }
            digits.clear();
        }
    }
    out
}

/// The messages of a request that leaves out the oldest turns: `dropped` turns of `order` (the
/// history's turns, oldest first, the current one excluded) are not shown.
pub fn without_oldest(
    messages: &[StoredMessage],
    order: &[i64],
    dropped: usize,
) -> Vec<StoredMessage> {
    let gone = &order[..dropped.min(order.len())];
    messages
        .iter()
        .filter(|m| !m.turn_id.is_some_and(|t| gone.contains(&t)))
        .cloned()
        .collect()
}

/// The turns of `messages` in the order they began, `current` left out: the ones a request may
/// leave out, oldest first.
pub fn droppable_turns(messages: &[StoredMessage], current: i64) -> Vec<i64> {
    let mut order: Vec<i64> = Vec::new();
    for turn in messages.iter().filter_map(|m| m.turn_id) {
        if turn != current && !order.contains(&turn) {
            order.push(turn);
        }
    }
    order
}

/// The line in the system block of a request that leaves out older turns.
pub const LEFT_OUT_NOTE: &str = "Earlier turns of this conversation were left out of this request to fit the model's context window; they are stored, and the actions listed here were taken in them.";

/// The context check's cost, for `hearth-context-check` in bench/ (and the histories the tests
/// build).
#[doc(hidden)]
pub mod bench {
    use std::time::{Duration, Instant};

    use super::{Estimator, assemble, message_chars};
    use crate::provider::{ChatMessage, ToolCall};
    use crate::store::StoredMessage;

    pub(crate) fn stored(id: i64, turn: i64, message: ChatMessage) -> StoredMessage {
        let chars = crate::store::message_chars(&message) as i64;
        StoredMessage {
            id,
            turn_id: Some(turn),
            message,
            chars,
            turn_unfinished: false,
        }
    }

    pub(crate) fn call(id: &str) -> ChatMessage {
        ChatMessage::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "t".into(),
                arguments: "{}".into(),
            }],
        }
    }

    pub(crate) fn result(id: &str, content: &str) -> ChatMessage {
        ChatMessage::Tool {
            call_id: id.into(),
            name: "t".into(),
            content: content.into(),
            is_error: false,
        }
    }

    /// A history of `turns` turns: a user message of 20 words, in every third turn a tool call
    /// with a 2,000-character result, and an answer of six sentences.
    pub fn history(turns: i64) -> Vec<StoredMessage> {
        let mut history = Vec::new();
        let mut id = 0;
        for turn in 1..=turns {
            let mut push = |message: ChatMessage| {
                id += 1;
                history.push(stored(id, turn, message));
            };
            push(ChatMessage::user(format!(
                "message {turn}: {}",
                "words ".repeat(20)
            )));
            if turn % 3 == 0 {
                let call_id = format!("call_{turn}");
                push(call(&call_id));
                push(result(&call_id, &"result text ".repeat(170)));
            }
            push(ChatMessage::assistant(
                "an answer of a few sentences. ".repeat(6),
            ));
        }
        history
    }

    /// The mean time of the check before one model call on `history`: assembling (stubbing
    /// old tool results, the pairing check), counting the characters and the estimate, over
    /// `rounds` rounds. Also returns a checksum, so the work is not optimised away.
    pub fn context_check(history: &[StoredMessage], rounds: u32) -> (Duration, u64) {
        let estimator = Estimator::default();
        estimator.reported(1, "p/m", 50_000, 12_000);
        let turns = history.iter().filter_map(|m| m.turn_id).max().unwrap_or(0);
        let started = Instant::now();
        let mut sink = 0u64;
        for _ in 0..rounds {
            let messages = assemble(history, turns, &[]);
            let chars: usize = messages.iter().map(message_chars).sum();
            sink += estimator.estimate(1, "p/m", chars + 3_000);
        }
        (started.elapsed() / rounds.max(1), sink)
    }
}

#[cfg(test)]
mod tests {
    use super::bench::{call, result, stored};
    use super::*;

    /// Every tool result follows its call and every call has its result.
    fn assert_paired(messages: &[ChatMessage]) {
        let mut open: Vec<String> = Vec::new();
        for message in messages {
            match message {
                ChatMessage::Tool { call_id, .. } => {
                    let at = open.iter().position(|id| id == call_id);
                    assert!(at.is_some(), "orphan result {call_id}: {messages:?}");
                    open.remove(at.unwrap_or_default());
                }
                other => {
                    assert!(open.is_empty(), "calls without results {open:?}");
                    if let ChatMessage::Assistant { tool_calls, .. } = other {
                        open = tool_calls.iter().map(|c| c.id.clone()).collect();
                    }
                }
            }
        }
        assert!(open.is_empty(), "calls without results at the end {open:?}");
    }

    #[test]
    fn the_current_turn_comes_last_and_other_open_turns_show_only_their_user_message() {
        let history = vec![
            stored(1, 1, ChatMessage::user("delete it")),
            stored(2, 1, call("c1")),
            stored(3, 2, ChatMessage::user("meanwhile")),
            stored(4, 2, ChatMessage::assistant("sure")),
            stored(5, 1, result("c1", "done")),
        ];
        let during = assemble(&history[..4], 2, &[1]);
        assert_eq!(
            during,
            vec![
                ChatMessage::user("delete it"),
                ChatMessage::user("meanwhile"),
                ChatMessage::assistant("sure")
            ]
        );
        let resumed = assemble(&history, 1, &[1]);
        assert_eq!(resumed.len(), 5);
        assert_eq!(resumed[2], ChatMessage::user("delete it"));
        assert!(matches!(resumed[4], ChatMessage::Tool { .. }));
    }

    #[test]
    fn old_tool_results_become_stubs_and_recent_ones_stay_whole() {
        let long = "x".repeat(5_000);
        let mut history = Vec::new();
        for turn in 1..=5 {
            let id = turn * 10;
            let call_id = format!("c{turn}");
            history.push(stored(id, turn, ChatMessage::user("look it up")));
            history.push(stored(id + 1, turn, call(&call_id)));
            history.push(stored(id + 2, turn, result(&call_id, &long)));
            history.push(stored(id + 3, turn, ChatMessage::assistant("found")));
        }
        let sent = assemble(&history, 5, &[]);
        assert_paired(&sent);
        let results: Vec<&String> = sent
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Tool { content, .. } => Some(content),
                _ => None,
            })
            .collect();
        assert_eq!(results.len(), 5);
        for stubbed in &results[..2] {
            assert!(stubbed.contains("call tool_result"), "{stubbed}");
            assert!(stubbed.len() < 500);
        }
        for whole in &results[2..] {
            assert_eq!(whole.len(), 5_000);
        }
    }

    #[test]
    fn the_pairing_check_fills_missing_results_and_drops_orphans() {
        let messages = vec![
            ChatMessage::user("hi"),
            result("stray", "orphan before any call"),
            call("c1"),
            // A crash between the call and its result: nothing stored for c1.
            ChatMessage::user("are you there?"),
            call("c2"),
            result("c2", "ok"),
            result("c2", "a second result"),
            ChatMessage::assistant("done"),
        ];
        let fixed = paired(messages);
        assert_paired(&fixed);
        assert_eq!(fixed.len(), 7);
        assert!(
            matches!(&fixed[2], ChatMessage::Tool { content, is_error: true, .. } if content.contains("No result"))
        );
        assert_eq!(fixed[5], result("c2", "ok"));
    }

    #[test]
    fn reused_call_ids_pair_within_their_own_answer() {
        let messages = vec![
            ChatMessage::user("a"),
            call("call_0"),
            result("call_0", "first"),
            ChatMessage::assistant("one"),
            ChatMessage::user("b"),
            call("call_0"),
            result("call_0", "second"),
        ];
        let fixed = paired(messages.clone());
        assert_eq!(fixed, messages);
    }

    #[test]
    fn estimates_grow_from_the_reported_tokens_and_reset_after_a_shrink() {
        let estimator = Estimator::default();
        assert_eq!(estimator.estimate(1, "p/m", 4_000), 1_000);
        // The provider counted 2,000 tokens for 4,000 characters (a dense language): two
        // characters a token from now on, for this model only.
        assert!(estimator.reported(1, "p/m", 4_000, 2_000).is_some());
        assert_eq!(estimator.estimate(1, "p/m", 4_400), 2_200);
        // A compaction shrank the request: the learned ratio alone until the next report.
        assert_eq!(estimator.estimate(1, "p/m", 2_000), 1_000);
        estimator.reset(1);
        assert_eq!(estimator.estimate(1, "p/m", 4_400), 2_200);
        assert_eq!(estimator.estimate(2, "q/m", 400), 100);
        // The same ratio again moves nothing worth storing.
        assert!(estimator.reported(1, "p/m", 8_000, 4_000).is_none());
        // A server that always reports 12 prompt tokens is not believed.
        assert!(estimator.reported(3, "r/m", 40_000, 12).is_none());
        assert_eq!(estimator.estimate(3, "r/m", 40_400), 10_100);
    }

    #[test]
    fn calibration_follows_the_reports_within_a_tenth() {
        let estimator = Estimator::default();
        // A server counting 3.3 characters a token, requests of varying size.
        for (n, chars) in [3_000usize, 5_000, 7_000, 9_000, 12_000]
            .into_iter()
            .enumerate()
        {
            let tokens = (chars as f64 / 3.3) as u64;
            estimator.reported(n as i64, "p/m", chars, tokens);
        }
        let guess = estimator.estimate(99, "p/m", 20_000);
        let truth = (20_000.0 / 3.3) as u64;
        assert!(guess.abs_diff(truth) * 10 <= truth, "{guess} vs {truth}");
        let row = estimator.calibration("p/m").row("p/m");
        assert_eq!(Calibration::from_row(&row).chars_per_token, 3.3);
    }

    #[test]
    fn a_refusal_naming_its_numbers_corrects_at_once() {
        assert_eq!(
            overflow_numbers(
                "This model's maximum context length is 3,000 tokens. However, your messages resulted in 3,412 tokens. Please reduce the length of the messages."
            ),
            Some((3_000, Some(3_412)))
        );
        assert_eq!(
            overflow_numbers(
                "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (8000 in the messages, 1000 in the completion)."
            ),
            Some((7_192, Some(8_000)))
        );
        assert_eq!(
            overflow_numbers("the request exceeds the available context size (4096 tokens)"),
            Some((4_096, None))
        );
        assert_eq!(overflow_numbers("prompt is too long"), None);
        let estimator = Estimator::default();
        assert_eq!(
            overflow_numbers("prompt is too long: 210000 tokens > 200000 maximum"),
            Some((200_000, Some(210_000)))
        );
        let corrected = estimator.overflowed(1, "p/m", 10_000, Some(3_000), Some(3_412));
        assert_eq!(corrected.prompt_limit, Some(3_000));
        assert!(estimator.estimate(1, "p/m", 10_000) >= 3_412);
        // A larger limit later does not raise it.
        let again = estimator.overflowed(1, "p/m", 10_000, Some(5_000), None);
        assert_eq!(again.prompt_limit, Some(3_000));
        // A refusal without numbers: larger estimates, no limit made up.
        let before = estimator.estimate(7, "q/m", 8_000);
        let guessed = estimator.overflowed(7, "q/m", 8_000, None, None);
        assert_eq!(guessed.prompt_limit, None);
        assert!(estimator.estimate(7, "q/m", 8_000) > before);
    }

    #[test]
    fn the_oldest_turns_leave_the_view_and_the_current_one_stays() {
        let history = vec![
            stored(1, 1, ChatMessage::user("first")),
            stored(2, 1, call("c1")),
            stored(3, 1, result("c1", "ok")),
            stored(4, 1, ChatMessage::assistant("did it")),
            stored(5, 2, ChatMessage::user("second")),
            stored(6, 2, ChatMessage::assistant("fine")),
            stored(7, 3, ChatMessage::user("third")),
        ];
        let order = droppable_turns(&history, 3);
        assert_eq!(order, vec![1, 2]);
        let view = without_oldest(&history, &order, 1);
        let sent = assemble(&view, 3, &[]);
        assert_paired(&sent);
        assert_eq!(sent[0], ChatMessage::user("second"));
        let all_gone = without_oldest(&history, &order, 5);
        assert_eq!(
            assemble(&all_gone, 3, &[]),
            vec![ChatMessage::user("third")]
        );
    }

    /// The check on a 100-turn history, once, so the bench's code stays working; the number
    /// comes from `cargo run --release -p hearth-bench --bin hearth-context-check`.
    #[test]
    fn the_context_check_runs_on_a_long_history() {
        let history = bench::history(100);
        let (_, checksum) = bench::context_check(&history, 1);
        assert!(checksum > 0);
    }
}
