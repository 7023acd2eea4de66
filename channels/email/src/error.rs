//! IMAP and SMTP failures mapped to [`ChannelError`] kinds, so the supervisor and the outbox
//! retry the right ones: refused logins stop the channel, network trouble and 4xx replies are
//! retried, permanent 5xx refusals give up on the one message.

use hearth_channel::{ChannelError, error_chain};

/// An IMAP failure: the command, and what went wrong.
pub(crate) fn imap(what: &str, error: async_imap::error::Error) -> ChannelError {
    use async_imap::error::Error;
    let message = format!("imap {what}: {error}");
    match error {
        // A NO to LOGIN is the server refusing the credentials.
        Error::No(_) if what == "login" => ChannelError::auth(format!(
            "{message}: the username or password was refused (an app password may be needed)"
        )),
        Error::Io(_) | Error::ConnectionLost => ChannelError::transient(message),
        Error::Bad(_) | Error::No(_) => ChannelError::transient(message),
        Error::Parse(_) => ChannelError::protocol(message),
        _ => ChannelError::transient(message),
    }
}

/// A command that did not finish in time.
pub(crate) fn timeout(what: &str) -> ChannelError {
    ChannelError::transient(format!("imap {what}: no answer in time"))
}

/// An SMTP failure while sending one message.
pub(crate) fn smtp(error: &lettre::transport::smtp::Error) -> ChannelError {
    let message = format!("smtp: {}", error_chain(error));
    if error.is_permanent() {
        let code = error.status().map(|c| c.to_string()).unwrap_or_default();
        // 535 and friends: the credentials, not this message.
        if code.starts_with("53") {
            return ChannelError::auth(message);
        }
        ChannelError::rejected(message)
    } else if error.is_transient() {
        // A 4xx reply: the server said it did not take the mail.
        ChannelError::transient(message)
    } else {
        // The connection failed or timed out, possibly after the mail's DATA was sent: the
        // server may have taken it. The retry reuses the same Message-ID.
        ChannelError::outcome_unknown(format!("{message} ({OUTCOME_UNKNOWN})"))
    }
}

/// Said of a send that failed where the server may already have taken the mail.
pub(crate) const OUTCOME_UNKNOWN: &str =
    "outcome unknown: the mail may have been delivered; a retry sends it with the same Message-ID";

#[cfg(test)]
mod tests {
    use hearth_channel::ErrorKind;

    use super::*;

    #[test]
    fn refused_logins_stop_and_network_trouble_is_retried() {
        let refused = imap(
            "login",
            async_imap::error::Error::No("[AUTHENTICATIONFAILED]".into()),
        );
        assert_eq!(refused.kind, ErrorKind::Auth);
        let lost = imap("idle", async_imap::error::Error::ConnectionLost);
        assert_eq!(lost.kind, ErrorKind::Transient);
        assert_eq!(timeout("select").kind, ErrorKind::Transient);
    }
}
