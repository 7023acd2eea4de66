//! The confirmation vocabulary, without I/O: what a prompt's buttons carry, what a typed code
//! looks like, and how an inbound event is read back as a decision.
//!
//! One parser for every reader: the daemon decides with it, and a channel that wants to know
//! whether a text is a decision (the HTTP API, to answer a client that may not decide with a
//! 403) asks the same functions, so no text reads as a decision to one and not to the other.
//!
//! Button data is `c:<id>:<a|d|x|c>`: approve, deny, the expiry timer's synthetic press, or a
//! cancel of the waiting turn (no button shows it; the HTTP API presses it). It fits Telegram's
//! 64-byte callback data with the 22-character id.

use crate::{Inbound, InboundKind};

/// The symbols of a typed code: no 0/O, 1/I/L look-alikes.
pub const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
/// The length of a typed code.
pub const CODE_LEN: usize = 6;
/// The length of a confirmation id.
pub const ID_LEN: usize = 22;
/// The reaction that stands for Approve where buttons are shown as reactions.
pub const APPROVE_EMOJI: &str = "✅";
/// The reaction that stands for Deny.
pub const DENY_EMOJI: &str = "❌";

/// What a decision does to a pending confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Run the tool.
    Approve,
    /// Do not run it; the turn goes on without it.
    Deny,
    /// The expiry timer: honoured only once the confirmation's time is really up.
    Expire,
    /// Deny, and end the waiting turn as cancelled instead of resuming it (a client's cancel of
    /// the turn, `POST /api/v1/turns/{id}/cancel`).
    Cancel,
}

impl Action {
    /// The action's name, as the owner's page records it (`web_decisions.action`).
    pub fn name(self) -> &'static str {
        match self {
            Action::Approve => "approve",
            Action::Deny => "deny",
            Action::Expire => "expire",
            Action::Cancel => "cancel",
        }
    }

    /// The letter that stands for the action in button data.
    fn letter(self) -> char {
        match self {
            Action::Approve => 'a',
            Action::Deny => 'd',
            Action::Expire => 'x',
            Action::Cancel => 'c',
        }
    }

    fn from_letter(letter: &str) -> Option<Self> {
        match letter {
            "a" => Some(Action::Approve),
            "d" => Some(Action::Deny),
            "x" => Some(Action::Expire),
            "c" => Some(Action::Cancel),
            _ => None,
        }
    }

    /// An action typed as a word (`approve`, `DENY`); expiry is never typed.
    fn from_word(word: &str) -> Option<Self> {
        match word.to_ascii_lowercase().as_str() {
            "approve" => Some(Action::Approve),
            "deny" => Some(Action::Deny),
            _ => None,
        }
    }
}

/// What an inbound event says about a confirmation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The confirmation's id.
    pub id: String,
    /// What to do with it.
    pub action: Action,
}

/// The data of the button that makes `action` on confirmation `id`: `c:<id>:<a|d|x|c>`.
pub fn button_data(id: &str, action: Action) -> String {
    format!("c:{id}:{}", action.letter())
}

/// The decision a confirmation button's data stands for.
pub fn parse_button_data(data: &str) -> Option<Decision> {
    let rest = data.strip_prefix("c:")?;
    let (id, letter) = rest.rsplit_once(':')?;
    Some(Decision {
        id: id.to_string(),
        action: Action::from_letter(letter)?,
    })
}

/// Reads a decision from a button press (`c:<id>:a|d|x|c`) or from a message's text (see
/// [`decision_in_text`]).
pub fn decision_of(event: &Inbound) -> Option<Decision> {
    match &event.kind {
        InboundKind::Press(press) => parse_button_data(&press.data),
        InboundKind::Message { text, .. } => decision_in_text(text),
        _ => None,
    }
}

/// Reads `APPROVE <id>` / `DENY <id>` with the full confirmation id anywhere in a text (prompts
/// before typed codes showed the id, and people answer in sentences).
pub fn decision_in_text(text: &str) -> Option<Decision> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words.windows(2).find_map(|pair| {
        let action = Action::from_word(pair[0].trim_matches(|c: char| !c.is_ascii_alphanumeric()))?;
        let id = pair[1].trim_matches(|c: char| !c.is_ascii_alphanumeric());
        (id.len() == ID_LEN && id.chars().all(|c| c.is_ascii_alphanumeric())).then(|| Decision {
            id: id.to_string(),
            action,
        })
    })
}

/// A typed code: the first line of a message that is not quoted (`>`, as email replies quote)
/// starts with `APPROVE` or `DENY` and a word of [`CODE_LEN`] letters and digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeAttempt {
    /// Approve or deny.
    pub action: Action,
    /// Upper-cased: codes are typed in any case.
    pub code: String,
}

/// Reads a typed code from a message (see [`code_attempt_in`]).
pub fn code_attempt_of(event: &Inbound) -> Option<CodeAttempt> {
    let InboundKind::Message { text, .. } = &event.kind else {
        return None;
    };
    code_attempt_in(text)
}

/// Reads a typed code from a text. Only the first line counts, so "I approve of the budget"
/// further down a message is no attempt, and the quoted prompt in an email reply (which shows
/// both APPROVE and DENY) is skipped. Phones capitalise and punctuate, and people add words
/// ("Approve K7M2QX please"): those still count.
pub fn code_attempt_in(text: &str) -> Option<CodeAttempt> {
    let line = text
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('>'))?;
    let mut words = line
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|w| !w.is_empty());
    let action = Action::from_word(words.next()?)?;
    let code = words.next()?;
    (code.len() == CODE_LEN && code.chars().all(|c| c.is_ascii_alphanumeric())).then(|| {
        CodeAttempt {
            action,
            code: code.to_ascii_uppercase(),
        }
    })
}

/// Whether a text reads as a decision of a confirmation in any form the daemon reads: a typed
/// code or a confirmation id after `approve` / `deny`.
pub fn is_decision_text(text: &str) -> bool {
    code_attempt_in(text).is_some() || decision_in_text(text).is_some()
}

#[cfg(test)]
mod tests {
    use crate::{ButtonPress, ChatRef, Sender};

    use super::*;

    fn press(data: &str) -> Inbound {
        Inbound {
            platform_id: "p".into(),
            chat: ChatRef::new("c"),
            sender: Sender::new("u"),
            kind: InboundKind::Press(ButtonPress {
                press_id: "q".into(),
                data: data.into(),
                message: None,
            }),
            reply_context: None,
            agent: None,
        }
    }

    fn text(text: &str) -> Inbound {
        Inbound::message("p", ChatRef::new("c"), Sender::new("u"), text)
    }

    #[test]
    fn button_data_reads_back_as_its_decision() {
        let id = "abcdefghijklmnopqrstuv";
        for action in [
            Action::Approve,
            Action::Deny,
            Action::Expire,
            Action::Cancel,
        ] {
            let data = button_data(id, action);
            assert!(data.len() <= 64, "Telegram's callback data limit: {data}");
            assert_eq!(
                decision_of(&press(&data)),
                Some(Decision {
                    id: id.into(),
                    action
                })
            );
        }
    }

    #[test]
    fn reads_presses_and_text_replies() {
        let id = "abcdefghijklmnopqrstuv";
        assert_eq!(
            decision_of(&press(&format!("c:{id}:a"))),
            Some(Decision {
                id: id.into(),
                action: Action::Approve
            })
        );
        assert_eq!(
            decision_of(&press(&format!("c:{id}:d"))).map(|d| d.action),
            Some(Action::Deny)
        );
        assert_eq!(
            decision_of(&press(&format!("c:{id}:x"))).map(|d| d.action),
            Some(Action::Expire)
        );
        assert_eq!(decision_of(&press("c:abc:z")), None);
        assert_eq!(decision_of(&press("other")), None);
        assert_eq!(
            decision_of(&text(&format!("ok, APPROVE {id}."))).map(|d| d.action),
            Some(Action::Approve)
        );
        assert_eq!(
            decision_of(&text(&format!("deny `{id}`"))).map(|d| d.action),
            Some(Action::Deny)
        );
        // A history line a chat app sends along (`user: approve <id>`) is read the same way.
        assert_eq!(
            decision_of(&text(&format!("[history]\nuser: \"approve {id}\""))).map(|d| d.id),
            Some(id.to_string())
        );
        assert_eq!(decision_of(&text("I approve of this plan")), None);
    }

    #[test]
    fn reads_typed_codes_from_the_first_unquoted_line_only() {
        let attempt = |t: &str| code_attempt_of(&text(t));
        assert_eq!(
            attempt("APPROVE K7M2QX"),
            Some(CodeAttempt {
                action: Action::Approve,
                code: "K7M2QX".into()
            })
        );
        // Phones lower-case and punctuate; codes are read in any case.
        assert_eq!(
            attempt("  deny: k7m2qx.  ").map(|a| (a.action, a.code)),
            Some((Action::Deny, "K7M2QX".into()))
        );
        assert_eq!(
            attempt("Approve K7M2QX please").map(|a| a.code),
            Some("K7M2QX".into()),
            "extra words after the code"
        );
        // An email reply: the answer on top, the quoted prompt (with both words) below.
        assert_eq!(
            attempt(
                "Deny K7M2QX\n\nOn Monday hearth wrote:\n> Reply APPROVE K7M2QX or DENY K7M2QX"
            )
            .map(|a| a.action),
            Some(Action::Deny)
        );
        assert_eq!(
            attempt("> quoted\napprove K7M2QX").map(|a| a.code),
            Some("K7M2QX".into()),
            "the first unquoted line"
        );
        // Only the quote says APPROVE: that is no answer.
        assert_eq!(
            attempt("> Reply APPROVE K7M2QX or DENY K7M2QX\nthanks!"),
            None
        );
        assert_eq!(attempt("I approve K7M2QX"), None, "not at the start");
        assert_eq!(attempt("approve it"), None, "not a code");
        assert_eq!(attempt("approve K7M2QX7"), None, "too long");
        assert_eq!(code_attempt_of(&press("c:x:a")), None);
    }

    #[test]
    fn every_form_the_daemon_reads_is_a_decision_text() {
        for decision in [
            "approve K7M2QX",
            "approve K7M2QX.",
            "Approve K7M2QX please",
            "> quoted\napprove K7M2QX",
            "ok: approve abcdefghijklmnopqrstuv",
            "please DENY abcdefghijklmnopqrstuv, thanks",
        ] {
            assert!(is_decision_text(decision), "{decision}");
        }
        for other in ["hello", "I approve of this plan", "approve it", "deny"] {
            assert!(!is_decision_text(other), "{other}");
        }
    }

    #[test]
    fn the_code_alphabet_has_no_look_alikes() {
        assert_eq!(CODE_ALPHABET.len(), 31);
        assert!(!CODE_ALPHABET.iter().any(|b| b"0O1IL".contains(b)));
    }
}
