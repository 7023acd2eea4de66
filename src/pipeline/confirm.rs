//! Deciding confirmations: a button press, an `APPROVE <id>` / `DENY <id>` reply, or the expiry
//! timer, and resuming the turn that waited for it.
//!
//! Only the person whose message caused the request (from any of their linked identities), or
//! the owner, may decide; anyone else is told it is not theirs. A decision is recorded once (a second press changes nothing), the
//! prompt is edited to show the outcome, and the parked turn runs on.

use std::sync::Arc;

use hearth_channel::{
    ButtonPress, Channel, ChatRef, Inbound, InboundKind, OutboundMessage, Sender,
};
use tokio_util::sync::CancellationToken;

use super::handler::Handler;
use crate::store::{
    ConfirmationStatus, IdentityStatus, InboxEntry, InboxStatus, NewOutbox, OutboxKind, StoreError,
    TurnStatus,
};

/// What an inbound event says about a confirmation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub id: String,
    pub action: Action,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Approve,
    Deny,
    /// The expiry timer: honoured only once the confirmation's time is really up.
    Expire,
}

/// The sender of expiry events.
pub const SYSTEM_SENDER: &str = "hearth";

/// Reads a decision from a button press (`c:<id>:a|d|x`) or a text `APPROVE <id>` / `DENY <id>`.
pub fn decision_of(event: &Inbound) -> Option<Decision> {
    match &event.kind {
        InboundKind::Press(press) => {
            let rest = press.data.strip_prefix("c:")?;
            let (id, action) = rest.rsplit_once(':')?;
            let action = match action {
                "a" => Action::Approve,
                "d" => Action::Deny,
                "x" => Action::Expire,
                _ => return None,
            };
            Some(Decision {
                id: id.to_string(),
                action,
            })
        }
        InboundKind::Message { text, .. } => {
            let words: Vec<&str> = text.split_whitespace().collect();
            words.windows(2).find_map(|pair| {
                let action = match pair[0].to_ascii_lowercase().as_str() {
                    "approve" => Action::Approve,
                    "deny" => Action::Deny,
                    _ => return None,
                };
                let id = pair[1].trim_matches(|c: char| !c.is_ascii_alphanumeric());
                (id.len() == 22 && id.chars().all(|c| c.is_ascii_alphanumeric())).then(|| {
                    Decision {
                        id: id.to_string(),
                        action,
                    }
                })
            })
        }
        _ => None,
    }
}

/// The synthetic event the expiry timer sends through the inbox, so the decision runs in the
/// conversation's own queue like a press would.
pub fn expiry_event(id: &str, chat: ChatRef) -> Inbound {
    Inbound {
        platform_id: format!("expire:{id}"),
        chat,
        sender: Sender::new(SYSTEM_SENDER),
        kind: InboundKind::Press(ButtonPress {
            press_id: String::new(),
            data: format!("c:{id}:x"),
            message: None,
        }),
    }
}

impl Handler {
    pub(super) async fn decide(
        &self,
        entry: &InboxEntry,
        event: &Inbound,
        channel: Arc<dyn Channel>,
        decision: Decision,
        cancel: &CancellationToken,
    ) -> Result<(), StoreError> {
        let store = &self.rt.store;
        let now = self.rt.clock.now_ms();
        let press = match &event.kind {
            InboundKind::Press(press) if !press.press_id.is_empty() => Some(press),
            _ => None,
        };
        let answer = |text: &'static str, alert: bool| {
            let channel = channel.clone();
            async move {
                if let Some(press) = press
                    && let Err(err) = channel.answer_press(press, Some(text), alert).await
                {
                    tracing::debug!(error = %err, "answering a button press failed");
                }
            }
        };
        let done = || store.finish_inbox(entry.id, InboxStatus::Done, None, now);

        let Some(confirmation) = store.confirmation(&decision.id).await? else {
            answer("This request is no longer known.", false).await;
            return done().await;
        };
        let mut action = decision.action;
        if action == Action::Expire {
            if now < confirmation.expires_at {
                return done().await;
            }
        } else {
            let is_requester =
                entry.channel == confirmation.channel && event.sender.id == confirmation.requester;
            // The requester on another of their linked channels is the same person.
            let decider = store
                .identity(&entry.channel, &event.sender.id)
                .await?
                .filter(|i| i.status == IdentityStatus::Allowed);
            let is_linked = decider
                .as_ref()
                .is_some_and(|i| confirmation.user_id == Some(i.user_id));
            let is_owner = decider.as_ref().is_some_and(|i| i.is_owner);
            if !is_requester && !is_linked && !is_owner {
                tracing::info!(confirmation = %confirmation.id, by = %event.sender.id, "confirmation decided by someone else refused");
                answer("This request isn't yours to decide.", true).await;
                return done().await;
            }
            if now >= confirmation.expires_at {
                action = Action::Expire;
            }
        }
        if confirmation.status != ConfirmationStatus::Pending {
            answer("This request was already decided.", false).await;
            return done().await;
        }
        let (status, notice, outcome) = match action {
            Action::Approve => (
                ConfirmationStatus::Approved,
                "✅ Approved",
                format!("✅ Approved by {}", who(event)),
            ),
            Action::Deny => (
                ConfirmationStatus::Denied,
                "❌ Denied",
                format!("❌ Denied by {}", who(event)),
            ),
            Action::Expire => (
                ConfirmationStatus::Expired,
                "⌛ This request has expired.",
                "⌛ Expired: nobody answered in time, so it did not run.".to_string(),
            ),
        };
        let decided_by = format!("{}:{}", entry.channel, event.sender.id);
        if !store
            .decide_confirmation(&confirmation.id, status, &decided_by, now)
            .await?
        {
            answer("This request was already decided.", false).await;
            return done().await;
        }
        answer(notice, action == Action::Expire).await;
        tracing::info!(confirmation = %confirmation.id, tool = %confirmation.tool, decision = status.as_str(), "confirmation decided");

        // Show the outcome on the prompt and remove its buttons, in the same transaction that
        // marks this event handled.
        let mut edits = Vec::new();
        if let Some(outbox_id) = confirmation.prompt_outbox_id
            && let Some((prompt, Some(target))) = store.outbox_message(outbox_id).await?
        {
            edits.push(NewOutbox {
                inbox_id: Some(entry.id),
                seq: 0,
                channel: confirmation.channel.clone(),
                kind: OutboxKind::Edit {
                    target: target.clone(),
                },
                message: OutboundMessage {
                    chat: target.chat,
                    text: format!("{}\n\n{outcome}", prompt.text),
                    ..OutboundMessage::default()
                },
            });
        }
        store.reply_and_finish_inbox(entry.id, &edits, now).await?;
        self.outbox.notify_one();
        self.resume(confirmation.turn_id, cancel).await
    }

    /// Runs a parked turn again after its decision.
    async fn resume(&self, turn_id: i64, cancel: &CancellationToken) -> Result<(), StoreError> {
        let store = &self.rt.store;
        let Some(turn) = store.turn(turn_id).await? else {
            return Ok(());
        };
        if turn.status != TurnStatus::Suspended {
            return Ok(());
        }
        // Another call of the same turn may still wait for its own decision.
        let mut still_waiting = false;
        for call in store.open_tool_calls(turn.id).await? {
            if call.status == crate::store::ToolCallStatus::Waiting
                && store
                    .confirmation_for_call(call.id)
                    .await?
                    .is_some_and(|c| c.status == ConfirmationStatus::Pending)
            {
                still_waiting = true;
                break;
            }
        }
        if still_waiting {
            return Ok(());
        }
        let Some(original) = store.inbox_entry(turn.inbox_id).await? else {
            return Ok(());
        };
        let Ok(event) = original.event.clone() else {
            return Ok(());
        };
        let Some(channel) = self.channels.get(&original.channel).cloned() else {
            return Ok(());
        };
        let Some(conversation) = store.conversation_by_id(turn.conversation_id).await? else {
            return Ok(());
        };
        let agents = self.rt.agents();
        let agent = agents
            .get(&turn.agent_id)
            .or_else(|| agents.get(&self.rt.config.router.default_agent))
            .cloned();
        let Some(agent) = agent else { return Ok(()) };
        let session = store
            .turn_session(turn.id)
            .await?
            .unwrap_or(conversation.session);
        store.resume_turn(turn.id).await?;
        let reply_to = match &event.kind {
            InboundKind::Message { message_id, .. } => message_id.clone(),
            _ => None,
        };
        let scheduled = store.scheduled_run_for_inbox(turn.inbox_id).await?;
        let mut turn = turn;
        turn.status = TurnStatus::Running;
        let job = crate::runtime::turn::TurnJob {
            turn,
            session,
            agent,
            channel_name: original.channel.clone(),
            capabilities: channel.capabilities(),
            preview: super::preview::ChannelPreview::of(&channel),
            chat: event.chat.clone(),
            requester: event.sender.id.clone(),
            reply_to,
            note: None,
            cancel: cancel.clone(),
            confirmation: super::scheduled::confirmation_policy(scheduled.as_ref()),
        };
        self.run(job, channel, scheduled).await
    }
}

fn who(event: &Inbound) -> String {
    event
        .sender
        .name
        .clone()
        .unwrap_or_else(|| event.sender.id.clone())
}

#[cfg(test)]
mod tests {
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
        }
    }

    fn text(text: &str) -> Inbound {
        Inbound {
            kind: InboundKind::Message {
                text: text.into(),
                attachments: Vec::new(),
                message_id: None,
                reply_to: None,
            },
            ..press("")
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
        assert_eq!(decision_of(&text("I approve of this plan")), None);
    }
}
