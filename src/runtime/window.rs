//! The conversation window: as much recent history as fits a token budget, estimated at four
//! characters a token, dropping the oldest messages first.

use crate::provider::ChatMessage;
use crate::store::StoredMessage;

/// Characters per token for the estimate; close enough for budgeting across tokenizers.
pub const CHARS_PER_TOKEN: i64 = 4;

/// Picks the messages to send: the whole current turn, then older messages newest first while
/// they fit `budget_tokens`. The current turn comes last even when another turn was written after
/// it started (it waited for an approval). Other turns still open (`unfinished`) contribute only
/// their user messages, since their tool calls have no results yet. The result starts with a
/// user message, so it never opens with a tool result or tool call whose partner was cut off.
pub fn window(
    messages: &[StoredMessage],
    current_turn: i64,
    unfinished: &[i64],
    budget_tokens: usize,
) -> Vec<ChatMessage> {
    let budget = i64::try_from(budget_tokens)
        .unwrap_or(i64::MAX)
        .saturating_mul(CHARS_PER_TOKEN);
    let is_current = |m: &&StoredMessage| m.turn_id == Some(current_turn);
    let open_elsewhere = |m: &&StoredMessage| {
        m.turn_id
            .is_some_and(|t| t != current_turn && unfinished.contains(&t))
            && !matches!(m.message, ChatMessage::User { .. })
    };
    let current: Vec<&StoredMessage> = messages.iter().filter(is_current).collect();
    let earlier: Vec<&StoredMessage> = messages
        .iter()
        .filter(|m| !is_current(m) && !open_elsewhere(m))
        .collect();

    let mut used: i64 = current.iter().map(|m| m.chars).sum();
    let mut start = earlier.len();
    for (index, stored) in earlier.iter().enumerate().rev() {
        if used + stored.chars > budget {
            break;
        }
        used += stored.chars;
        start = index;
    }
    let mut kept: Vec<&StoredMessage> = earlier[start..].to_vec();
    kept.extend(current);
    let first_user = kept
        .iter()
        .position(|m| matches!(m.message, ChatMessage::User { .. }))
        .unwrap_or(kept.len());
    kept[first_user..]
        .iter()
        .map(|stored| stored.message.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ToolCall;

    fn stored(id: i64, turn: i64, message: ChatMessage) -> StoredMessage {
        let chars = crate::store::message_chars(&message) as i64;
        StoredMessage {
            id,
            turn_id: Some(turn),
            message,
            chars,
        }
    }

    #[test]
    fn oldest_messages_go_first_and_the_current_turn_always_stays() {
        let history = vec![
            stored(1, 1, ChatMessage::user("a".repeat(400))),
            stored(2, 1, ChatMessage::assistant("b".repeat(400))),
            stored(3, 2, ChatMessage::user("c".repeat(40))),
            stored(4, 2, ChatMessage::assistant("d".repeat(40))),
            stored(5, 3, ChatMessage::user("e".repeat(4000))),
        ];
        // 1030 tokens = 4120 chars: turn 2 fits beside the current turn 3, turn 1 does not.
        let window = window(&history, 3, &[], 1030);
        assert_eq!(window.len(), 3);
        // Even a budget the current turn alone exceeds keeps the current turn.
        assert_eq!(super::window(&history, 3, &[], 10).len(), 1);
        assert_eq!(window.len(), 3);
        assert_eq!(window[0], ChatMessage::user("c".repeat(40)));
        assert_eq!(window[2], ChatMessage::user("e".repeat(4000)));
    }

    #[test]
    fn never_starts_with_a_tool_result_or_tool_call() {
        let call = ToolCall {
            id: "c1".into(),
            name: "t".into(),
            arguments: "{}".into(),
        };
        let history = vec![
            stored(1, 1, ChatMessage::user("x".repeat(1000))),
            stored(
                2,
                1,
                ChatMessage::Assistant {
                    text: String::new(),
                    tool_calls: vec![call],
                },
            ),
            stored(
                3,
                1,
                ChatMessage::Tool {
                    call_id: "c1".into(),
                    name: "t".into(),
                    content: "ok".into(),
                    is_error: false,
                },
            ),
            stored(4, 1, ChatMessage::assistant("done")),
            stored(5, 2, ChatMessage::user("next")),
        ];
        let window = window(&history, 2, &[], 10);
        assert_eq!(window.first(), Some(&ChatMessage::user("next")));
    }

    #[test]
    fn a_resumed_turn_comes_last_and_other_open_turns_show_only_their_user_message() {
        let call = ToolCall {
            id: "c1".into(),
            name: "delete".into(),
            arguments: "{}".into(),
        };
        let history = vec![
            stored(1, 1, ChatMessage::user("delete it")),
            stored(
                2,
                1,
                ChatMessage::Assistant {
                    text: String::new(),
                    tool_calls: vec![call],
                },
            ),
            stored(3, 2, ChatMessage::user("meanwhile")),
            stored(4, 2, ChatMessage::assistant("sure")),
            stored(
                5,
                1,
                ChatMessage::Tool {
                    call_id: "c1".into(),
                    name: "delete".into(),
                    content: "done".into(),
                    is_error: false,
                },
            ),
        ];
        // Turn 2 runs while turn 1 waits for approval: turn 1's call is hidden.
        let during = window(&history[..4], 2, &[1], 1000);
        assert_eq!(
            during,
            vec![
                ChatMessage::user("delete it"),
                ChatMessage::user("meanwhile"),
                ChatMessage::assistant("sure")
            ]
        );
        // Turn 1 resumes: its messages come last, together.
        let resumed = window(&history, 1, &[1], 1000);
        assert_eq!(resumed.len(), 5);
        assert_eq!(resumed[2], ChatMessage::user("delete it"));
        assert!(matches!(resumed[4], ChatMessage::Tool { .. }));
    }
}
