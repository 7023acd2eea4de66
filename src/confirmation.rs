//! The confirmation vocabulary: the words and their one parser live in
//! [`hearth_channel::confirmation`], sans I/O, so the HTTP channel reads a text exactly as the
//! daemon does; this module adds what only the daemon makes (random ids and codes) and the
//! page's sender.
//!
//! The runtime writes it (the Approve / Deny prompt, in `runtime::calls`) and the pipeline reads
//! it (a press, a reaction or a typed code, in `pipeline::confirm`); both import this leaf, so
//! neither reaches into the other.

pub use hearth_channel::confirmation::{
    APPROVE_EMOJI, Action, CODE_ALPHABET, CODE_LEN, CodeAttempt, DENY_EMOJI, Decision, ID_LEN,
    button_data, code_attempt_of, decision_of, parse_button_data,
};
use rand::Rng;

/// The sender of the presses made on the owner's page (`src/web`). The resolver honours one
/// only when the page recorded it first (`web_decisions`, keyed by the event's random platform
/// id); a chat platform's user with this id is nobody special.
pub const PAGE_SENDER: &str = "hearth-web";

/// How the page records an action (`web_decisions.action`).
pub fn action_name(action: Action) -> &'static str {
    action.name()
}

/// An id nobody can guess (~131 bits), short enough for Telegram's 64-byte callback data.
pub fn new_id() -> String {
    random_string(
        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        ID_LEN,
    )
}

/// Six characters a person can read off a prompt and type on a phone: no 0/O, 1/I/L look-alikes
/// (31 symbols, about 887 million codes; guessing is further limited to a few wrong tries).
pub fn short_code() -> String {
    random_string(CODE_ALPHABET, CODE_LEN)
}

fn random_string(alphabet: &[u8], len: usize) -> String {
    let mut rng = rand::rng();
    (0..len)
        .map(|_| char::from(alphabet[rng.random_range(0..alphabet.len())]))
        .collect()
}

#[cfg(test)]
mod tests {
    use hearth_channel::{ButtonPress, ChatRef, Inbound, InboundKind, Sender};

    use super::*;

    #[test]
    fn a_new_id_fits_button_data_and_reads_back() {
        let id = new_id();
        assert_eq!(id.len(), ID_LEN);
        let data = button_data(&id, Action::Cancel);
        assert!(data.len() <= 64, "Telegram's callback data limit: {data}");
        let press = Inbound {
            platform_id: "p".into(),
            chat: ChatRef::new("c"),
            sender: Sender::new("u"),
            kind: InboundKind::Press(ButtonPress {
                press_id: "q".into(),
                data,
                message: None,
            }),
            reply_context: None,
            agent: None,
        };
        assert_eq!(
            decision_of(&press),
            Some(Decision {
                id,
                action: Action::Cancel
            })
        );
    }

    #[test]
    fn shown_codes_use_only_unambiguous_symbols() {
        for _ in 0..200 {
            let code = short_code();
            assert_eq!(code.len(), CODE_LEN);
            assert!(code.bytes().all(|b| CODE_ALPHABET.contains(&b)), "{code}");
            assert!(!code.contains(['0', 'O', '1', 'I', 'L']), "{code}");
            // What the prompt shows, the reader reads back.
            let typed = Inbound::message(
                "p",
                ChatRef::new("c"),
                Sender::new("u"),
                format!("approve {}", code.to_lowercase()),
            );
            assert_eq!(code_attempt_of(&typed).map(|a| a.code), Some(code));
        }
    }
}
