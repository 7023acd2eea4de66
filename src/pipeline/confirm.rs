//! Deciding confirmations: a button press, a reaction with a button's emoji on the prompt, a
//! typed `APPROVE <code>` / `DENY <code>` on channels without buttons, or the expiry timer, and
//! resuming the turn that waited for it.
//!
//! Only the person whose message caused the request (from any of their linked identities), or
//! the owner, may decide; anyone else is told it is not theirs (someone else's reaction does
//! nothing at all). A sender the platform could not verify never decides, nor does one its
//! channel lets only talk ([`Authority::Chat`]: an HTTP token of scope `chat`), whatever form
//! its decision takes. A decision is recorded once (a second press changes nothing). Where the
//! channel can edit, the prompt is edited to show the outcome; elsewhere the outcome is a short
//! follow-up message. Channels that acknowledge presses themselves on receipt
//! get no `answer_press`: what the daemon has to say goes out as a message instead.
//!
//! Typed codes are short enough to type on a phone, bound to the same people as buttons, valid
//! as long as their confirmation is pending, and limited in wrong tries: after
//! [`MAX_WRONG_CODES`] wrong codes typed in a chat, its confirmations waiting for a code are
//! denied and the chat is told.

use std::sync::Arc;
use std::time::Duration;

use hearth_channel::{
    Authority, ButtonPress, Capabilities, Channel, ChatRef, Inbound, InboundKind, InboundSink,
    OutboundMessage, Progress, Sender, TurnEvent,
};
use tokio_util::sync::CancellationToken;

use super::handler::Handler;
use super::sink::InboxSink;
use crate::clock::SharedClock;
use crate::confirmation::{Action, CodeAttempt, Decision, button_data, parse_button_data};
use crate::runtime::turn::ApprovalRoute;
use crate::store::{
    Confirmation, ConfirmationStatus, IdentityStatus, InboxEntry, InboxStatus, NewOutbox,
    OutboxKind, Store, StoreError, TurnStatus,
};

/// Wrong codes a chat may type before its confirmations waiting for a code are denied.
pub const MAX_WRONG_CODES: i64 = 5;

/// The answer to a decision (a press, a typed code, an id) from a sender its channel lets only
/// talk ([`Authority::Chat`]).
pub const CHAT_ONLY: &str = "You may chat from here but not decide confirmations: this client's access is limited to chatting (an HTTP token of scope chat). Decide in your chat app, on the owner's page, or with a token of scope approve.";

/// The sender of expiry events.
pub const SYSTEM_SENDER: &str = "hearth";

/// The synthetic event the expiry timer sends through the inbox, so the decision runs in the
/// conversation's own queue like a press would.
pub fn expiry_event(id: &str, chat: ChatRef) -> Inbound {
    Inbound {
        platform_id: format!("expire:{id}"),
        chat,
        sender: Sender::new(SYSTEM_SENDER),
        kind: InboundKind::Press(ButtonPress {
            press_id: String::new(),
            data: button_data(id, Action::Expire),
            message: None,
        }),
        reply_context: None,
        agent: None,
    }
}

/// Turns confirmations of `channels` whose time is up into expiry events in their
/// conversation's queue.
pub async fn expire_confirmations(
    store: Store,
    clock: SharedClock,
    sink: Arc<InboxSink>,
    channels: Vec<String>,
    shutdown: CancellationToken,
) {
    loop {
        match store.expired_confirmations(clock.now_ms(), &channels).await {
            Ok(expired) => {
                for confirmation in expired {
                    let chat = ChatRef {
                        chat_id: confirmation.chat_id.clone(),
                        thread_id: confirmation.thread_id.clone(),
                    };
                    let event = expiry_event(&confirmation.id, chat);
                    if let Err(err) = sink.deliver(&confirmation.channel, event).await {
                        tracing::warn!(error = %err, "queueing a confirmation expiry failed; will retry");
                    }
                }
            }
            Err(err) => tracing::warn!(error = %err, "reading expired confirmations failed"),
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
            () = shutdown.cancelled() => return,
        }
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
        let caps = channel.capabilities();
        let press = match &event.kind {
            InboundKind::Press(press) if !press.press_id.is_empty() => Some(press),
            _ => None,
        };
        let refuse = |text: &'static str, alert: bool| {
            self.refuse(entry, event, channel.as_ref(), &caps, text, alert)
        };
        let done = || store.finish_inbox(entry.id, InboxStatus::Done, None, now);

        let Some(confirmation) = store.confirmation(&decision.id).await? else {
            return refuse("This request is no longer known.", false).await;
        };
        let mut action = decision.action;
        // A cancel ends the waiting turn whatever else happens to the confirmation meanwhile.
        let cancel_turn = action == Action::Cancel;
        // Decided on the owner's page: the page recorded this very event before queueing it.
        let on_page = self.decided_on_page(entry, event, &decision).await?;
        if action == Action::Expire {
            if now < confirmation.expires_at {
                return done().await;
            }
        } else if on_page {
            if now >= confirmation.expires_at {
                action = Action::Expire;
            }
        } else {
            // A sender the platform could not verify is a stranger, whoever it claims to be.
            if !event.sender.verified {
                tracing::warn!(confirmation = %confirmation.id, by = %event.sender.id, "confirmation decided by an unverified sender refused");
                return refuse("This request isn't yours to decide.", true).await;
            }
            if !self.may_decide(entry, event, &confirmation).await? {
                tracing::info!(confirmation = %confirmation.id, by = %event.sender.id, "confirmation decided by someone else refused");
                return refuse("This request isn't yours to decide.", true).await;
            }
            // A sender its channel lets only talk decides nothing. Its own waiting request it
            // may cancel: that stops its own turn and decides nothing for anyone else.
            let own_cancel = action == Action::Cancel
                && entry.channel == confirmation.channel
                && event.sender.id == confirmation.requester;
            if event.sender.authority != Authority::Full && !own_cancel {
                tracing::warn!(confirmation = %confirmation.id, by = %event.sender.id, "confirmation decided by a sender that may only chat refused");
                return refuse(CHAT_ONLY, true).await;
            }
            if now >= confirmation.expires_at {
                action = Action::Expire;
            }
        }
        if confirmation.status != ConfirmationStatus::Pending {
            return refuse("This request was already decided.", false).await;
        }
        let tool = &confirmation.tool;
        let (status, notice, outcome, follow_up) = match action {
            Action::Approve => (
                ConfirmationStatus::Approved,
                "✅ Approved",
                format!("✅ Approved by {}", who(event)),
                format!("✅ Approved by {}: `{tool}`", who(event)),
            ),
            Action::Deny => (
                ConfirmationStatus::Denied,
                "❌ Denied",
                format!("❌ Denied by {}", who(event)),
                format!("❌ Denied by {}: `{tool}` did not run.", who(event)),
            ),
            Action::Cancel => (
                ConfirmationStatus::Denied,
                "⏹ Cancelled",
                format!("⏹ Cancelled by {}: the turn was stopped", who(event)),
                format!(
                    "⏹ Cancelled by {}: `{tool}` did not run and the turn was stopped.",
                    who(event)
                ),
            ),
            Action::Expire => (
                ConfirmationStatus::Expired,
                "⌛ This request has expired.",
                "⌛ Expired: nobody answered in time, so it did not run.".to_string(),
                format!("⌛ Expired: nobody answered in time, so `{tool}` did not run."),
            ),
        };
        let decided_by = if on_page {
            "web:owner".to_string()
        } else {
            format!("{}:{}", entry.channel, event.sender.id)
        };
        // The outcome (on the prompt, or after it) is stored with the decision and the event's
        // completion, in one transaction.
        let mut replies = self
            .outcomes(entry.id, 0, &confirmation, &outcome, &follow_up)
            .await?;
        // A code typed on a channel that shows each message's own progress (HTTP: the typed
        // code is a turn of its own, which a client waits on) gets the outcome as its answer;
        // in a chat the edited prompt says it.
        if let InboundKind::Message { message_id, .. } = &event.kind
            && caps.progress
        {
            replies.push(NewOutbox {
                inbox_id: Some(entry.id),
                seq: crate::store::to_i64(replies.len()),
                channel: entry.channel.clone(),
                kind: OutboxKind::Send,
                message: OutboundMessage {
                    reply_to: message_id.clone(),
                    reply_context: event.reply_context.clone(),
                    ..OutboundMessage::text(event.chat.clone(), &follow_up)
                },
            });
        }
        if !store
            .decide_confirmation(
                &confirmation.id,
                (status, &decided_by),
                entry.id,
                &replies,
                now,
            )
            .await?
        {
            return refuse("This request was already decided.", false).await;
        }
        tracing::info!(confirmation = %confirmation.id, tool = %confirmation.tool, decision = status.as_str(), "confirmation decided");
        // Before the turn resumes, so a client reading the turn's events sees the decision
        // before the tool runs. (The edited prompt, delivered later, writes it once more with
        // the same key: nothing.)
        self.emit_to_turn(
            confirmation.turn_id,
            TurnEvent::Decided {
                id: confirmation.id.clone(),
                decision: status.as_str().to_string(),
                by: Some(decided_by.clone()),
                text: outcome.to_string(),
                cancelled: Some(cancel_turn),
            },
        )
        .await?;
        self.outbox.notify_one();
        // The presser's own acknowledgement, once the decision is stored: a failed write retries
        // the whole entry, which must not answer the press a second time. Channels that
        // acknowledged on receipt show the outcome above instead.
        if let Some(press) = press
            && !caps.acks_presses_on_receipt
            && let Err(err) = channel
                .answer_press(press, Some(notice), action == Action::Expire)
                .await
        {
            tracing::debug!(error = %err, "answering a button press failed");
        }
        if cancel_turn {
            // Resumed with its cancel already given, the turn settles its waiting calls as
            // cancelled and ends at once, answering "Cancelled" like a `/cancel` of a running
            // turn (once no other call of it waits for a decision).
            let stop = CancellationToken::new();
            stop.cancel();
            return self.resume(confirmation.turn_id, &stop).await;
        }
        self.resume(confirmation.turn_id, cancel).await
    }

    /// Whether the owner decided this on the page: the press comes from
    /// [`crate::confirmation::PAGE_SENDER`] and the page recorded its platform id (a random
    /// nonce) with this confirmation and action before it queued the event.
    async fn decided_on_page(
        &self,
        entry: &InboxEntry,
        event: &Inbound,
        decision: &Decision,
    ) -> Result<bool, StoreError> {
        if event.sender.id != crate::confirmation::PAGE_SENDER || decision.action == Action::Expire
        {
            return Ok(false);
        }
        let recorded = self.rt.store.web_decision(&entry.platform_id).await?;
        Ok(recorded.is_some_and(|(id, action)| {
            id == decision.id && action == crate::confirmation::action_name(decision.action)
        }))
    }

    /// Tells whoever acted why nothing happened, and marks the event handled: a pop-up on the
    /// pressed button, a message where the channel acknowledged the press itself, a reply to a
    /// typed code from someone hearth talks to; a reaction or the expiry timer hear nothing.
    async fn refuse(
        &self,
        entry: &InboxEntry,
        event: &Inbound,
        channel: &dyn Channel,
        caps: &Capabilities,
        text: &str,
        alert: bool,
    ) -> Result<(), StoreError> {
        let store = &self.rt.store;
        let now = self.rt.clock.now_ms();
        // Answered after the entry is marked handled, so a failed write (which retries the
        // entry) cannot answer the press twice.
        let mut answer_press = None;
        let message = match &event.kind {
            InboundKind::Press(press) if !press.press_id.is_empty() => {
                if !caps.acks_presses_on_receipt {
                    answer_press = Some(press);
                    None
                } else {
                    Some(OutboundMessage {
                        reply_to: press.message.as_ref().map(|m| m.message_id.clone()),
                        answers_press: Some(press.press_id.clone()),
                        ..OutboundMessage::text(event.chat.clone(), text)
                    })
                }
            }
            InboundKind::Message { message_id, .. } if self.may_hear(entry, event).await? => {
                Some(OutboundMessage {
                    reply_to: message_id.clone(),
                    reply_context: event.reply_context.clone(),
                    ..OutboundMessage::text(event.chat.clone(), text)
                })
            }
            _ => None,
        };
        let replies: Vec<NewOutbox> = message
            .into_iter()
            .map(|message| NewOutbox {
                inbox_id: Some(entry.id),
                seq: 0,
                channel: entry.channel.clone(),
                kind: OutboxKind::Send,
                message,
            })
            .collect();
        store
            .reply_and_finish_inbox(entry.id, &replies, now)
            .await?;
        self.outbox.notify_one();
        if let Some(press) = answer_press
            && let Err(err) = channel.answer_press(press, Some(text), alert).await
        {
            tracing::debug!(error = %err, "answering a button press failed");
        }
        Ok(())
    }

    /// Whether the sender of `event` may decide `confirmation`: a verified sender whose identity
    /// is allowed (a requester revoked meanwhile may not), and who is the requester, one of the
    /// requester's linked identities, or the owner; for an MCP client's request, in the chat
    /// it was asked in.
    async fn may_decide(
        &self,
        entry: &InboxEntry,
        event: &Inbound,
        confirmation: &Confirmation,
    ) -> Result<bool, StoreError> {
        if !event.sender.verified {
            return Ok(false);
        }
        // An MCP client's request: only a press (or reaction) in the chat it was asked in, never
        // a token's decision by id, which the asking client itself might hold.
        if !confirmation.has_turn()
            && (entry.channel != confirmation.channel || event.chat.chat_id != confirmation.chat_id)
        {
            return Ok(false);
        }
        let Some(decider) = self
            .rt
            .store
            .identity(&entry.channel, &event.sender.id)
            .await?
            .filter(|i| i.status == IdentityStatus::Allowed)
        else {
            return Ok(false);
        };
        let is_requester =
            entry.channel == confirmation.channel && event.sender.id == confirmation.requester;
        // The requester on another of their linked channels is the same person.
        let is_linked = confirmation.user_id == Some(decider.user_id);
        Ok(is_requester || is_linked || decider.is_owner)
    }

    /// Whether hearth answers this sender at all: a verified sender of an allowed identity.
    /// Strangers (and senders the platform could not verify) get no replies to typed codes, so a
    /// forged email gets no answer sent to the address it claims.
    async fn may_hear(&self, entry: &InboxEntry, event: &Inbound) -> Result<bool, StoreError> {
        if !event.sender.verified {
            return Ok(false);
        }
        Ok(self
            .rt
            .store
            .identity(&entry.channel, &event.sender.id)
            .await?
            .is_some_and(|i| i.status == IdentityStatus::Allowed))
    }

    /// What shows a decision, numbered from `seq`: in the prompt's chat, and in the owner's chat
    /// when the prompt was also sent there (`daemon.approvals_to`).
    pub(super) async fn outcomes(
        &self,
        inbox_id: i64,
        seq: i64,
        confirmation: &Confirmation,
        outcome: &str,
        follow_up: &str,
    ) -> Result<Vec<NewOutbox>, StoreError> {
        let places = [
            Some((confirmation.channel.as_str(), confirmation.prompt_outbox_id)),
            confirmation
                .routed_channel
                .as_deref()
                .map(|channel| (channel, confirmation.routed_outbox_id)),
        ];
        let mut replies = Vec::new();
        for (channel, prompt) in places.into_iter().flatten() {
            let Some(prompt) = prompt else { continue };
            let seq = seq + crate::store::to_i64(replies.len());
            if let Some(reply) = self
                .outcome(inbox_id, seq, channel, prompt, outcome, follow_up)
                .await?
            {
                replies.push(reply);
            }
        }
        Ok(replies)
    }

    /// How one chat learns a decision: the prompt (outbox row `prompt` on `channel`) edited to
    /// add `outcome` where the channel can edit (once the prompt is delivered), else a
    /// `follow_up` message quoting the prompt.
    async fn outcome(
        &self,
        inbox_id: i64,
        seq: i64,
        channel: &str,
        prompt: i64,
        outcome: &str,
        follow_up: &str,
    ) -> Result<Option<NewOutbox>, StoreError> {
        let outbox_id = prompt;
        let Some((prompt, target)) = self.rt.store.outbox_message(outbox_id).await? else {
            return Ok(None);
        };
        // A channel another process runs: shown as a follow-up, which every channel can send.
        let caps = self
            .channels
            .get(channel)
            .map(|c| c.capabilities())
            .unwrap_or_default();
        let (kind, message) = if caps.edits {
            // Edited once the prompt is out (see `OutboxKind::Outcome`), buttons gone.
            let message = OutboundMessage {
                chat: prompt.chat.clone(),
                text: outcome.to_string(),
                reply_context: prompt.reply_context.clone(),
                ..OutboundMessage::default()
            };
            (OutboxKind::Outcome { prompt: outbox_id }, message)
        } else {
            let message = OutboundMessage {
                reply_to: target.map(|t| t.message_id),
                reply_context: prompt.reply_context.clone(),
                ..OutboundMessage::text(prompt.chat.clone(), follow_up)
            };
            (OutboxKind::Send, message)
        };
        Ok(Some(NewOutbox {
            inbox_id: Some(inbox_id),
            seq,
            channel: channel.to_string(),
            kind,
            message,
        }))
    }

    /// Where a turn's approval prompts are also sent (`daemon.approvals_to`): the owner's chat,
    /// when the prompt's own chat (`channel`, `chat`) shows no buttons or the turn is a
    /// schedule's run (`schedule`, nobody may be watching), unless that chat is the owner's chat
    /// itself. `None` as well when the route's channel is not running in this process or shows
    /// no buttons either (logged at start): the prompt then waits in its own chat only, and
    /// expires as denied there if nobody answers.
    pub(super) fn approvals_route(
        &self,
        channel: &str,
        event: &Inbound,
        schedule: Option<&str>,
    ) -> Option<ApprovalRoute> {
        let (route_channel, route_chat) = self.rt.config.daemon.approvals_to()?;
        if route_channel == channel && route_chat == event.chat.chat_id {
            return None;
        }
        let shows_buttons = self
            .channels
            .get(channel)
            .is_some_and(|c| c.capabilities().shows_buttons());
        if shows_buttons && schedule.is_none() {
            return None;
        }
        let route = self.channels.get(route_channel)?;
        if !route.capabilities().shows_buttons() {
            return None;
        }
        let origin = match schedule {
            Some(name) => format!("the scheduled run “{name}”"),
            None => requester_label(channel, &event.sender),
        };
        Some(ApprovalRoute {
            channel: route_channel.to_string(),
            chat: ChatRef::new(route_chat),
            origin,
        })
    }

    /// The decision a reaction makes: a reaction on a confirmation prompt with the emoji of one
    /// of its buttons counts as a press of that button. Any other reaction decides nothing.
    pub(super) async fn reaction_decision(
        &self,
        channel: &str,
        event: &Inbound,
    ) -> Result<Option<Decision>, StoreError> {
        let InboundKind::Reaction { message_id, emoji } = &event.kind else {
            return Ok(None);
        };
        let Some((_, prompt)) = self
            .rt
            .store
            .confirmation_by_prompt(channel, &event.chat.chat_id, message_id)
            .await?
        else {
            return Ok(None);
        };
        Ok(prompt
            .buttons
            .iter()
            .find(|b| b.matches_reaction(emoji))
            .and_then(|b| parse_button_data(&b.data))
            .filter(|d| d.action != Action::Expire))
    }

    /// Handles a typed code when the chat has confirmations waiting for one; returns false when
    /// it has none, and the message is an ordinary message. A right code decides like a press
    /// (bound to the same people); a wrong one counts against the chat's limit, and the reply says
    /// how many tries are left, or that the waiting requests were denied.
    pub(super) async fn typed_code(
        &self,
        entry: &InboxEntry,
        event: &Inbound,
        channel: Arc<dyn Channel>,
        attempt: CodeAttempt,
        cancel: &CancellationToken,
    ) -> Result<bool, StoreError> {
        let store = &self.rt.store;
        // A sender its channel lets only talk decides nothing, and its codes are no guesses
        // either (a wrong code counts against the chat's tries, and enough of them deny the
        // waiting requests). Someone hearth talks to hears why; anyone else's message is an
        // ordinary one (a stranger's gets the pairing rules).
        if event.sender.authority != Authority::Full {
            if !self.may_hear(entry, event).await? {
                return Ok(false);
            }
            tracing::warn!(channel = %entry.channel, by = %event.sender.id, "a code typed by a sender that may only chat refused");
            let caps = channel.capabilities();
            return self
                .refuse(entry, event, channel.as_ref(), &caps, CHAT_ONLY, false)
                .await
                .map(|()| true);
        }
        let chat_id = &event.chat.chat_id;
        let pending = store
            .pending_coded_confirmations(&entry.channel, chat_id)
            .await?;
        if let Some(confirmation) = pending
            .iter()
            .find(|c| c.short_code.as_deref() == Some(attempt.code.as_str()))
        {
            let decision = Decision {
                id: confirmation.id.clone(),
                action: attempt.action,
            };
            self.decide(entry, event, channel, decision, cancel).await?;
            return Ok(true);
        }
        // The code of a request decided already (approved, denied, cancelled, expired): its
        // decider hears that, rather than the model reading "approve K7Q2MX" as a message and
        // rather than it counting as a wrong guess.
        if let Some(decided) = store
            .decided_coded_confirmation(&entry.channel, chat_id, &attempt.code)
            .await?
            && self.may_decide(entry, event, &decided).await?
        {
            let text = format!(
                "That request is no longer pending: it was {} already, so nothing changed.",
                decided.status.as_str()
            );
            let caps = channel.capabilities();
            return self
                .refuse(entry, event, channel.as_ref(), &caps, &text, false)
                .await
                .map(|()| true);
        }
        if pending.is_empty() {
            return Ok(false);
        }

        // Only someone who could decide one of the waiting requests uses up the chat's tries:
        // a stranger, a forged email or another member of a group typing codes is not a
        // guess at them, and must not be able to deny the owner's requests. Their message is
        // an ordinary message (a stranger's gets the pairing rules).
        let mut could_decide = false;
        for confirmation in &pending {
            if self.may_decide(entry, event, confirmation).await? {
                could_decide = true;
                break;
            }
        }
        if !could_decide {
            tracing::info!(channel = %entry.channel, by = %event.sender.id, "a code typed by someone who decides none of the waiting requests; not counted");
            return Ok(false);
        }
        let now = self.rt.clock.now_ms();
        let wrong = store
            .count_wrong_code(&entry.channel, chat_id, MAX_WRONG_CODES, now)
            .await?;
        tracing::warn!(channel = %entry.channel, chat = %chat_id, by = %event.sender.id, left = wrong.left, denied = wrong.denied.len(), "wrong confirmation code typed");
        let caps = channel.capabilities();
        let mut replies = Vec::new();
        let mut seq = 0;
        for confirmation in &wrong.denied {
            let tool = &confirmation.tool;
            let outcome = "❌ Denied: too many wrong codes were typed.";
            let follow_up =
                format!("❌ Too many wrong codes: the request to run `{tool}` was denied.");
            let shown = self
                .outcomes(entry.id, seq, confirmation, outcome, &follow_up)
                .await?;
            seq += crate::store::to_i64(shown.len());
            replies.extend(shown);
        }
        // The typist hears back only when hearth talks to them; the denial above reaches the
        // chat either way.
        let note = if wrong.denied.is_empty() {
            Some(format!(
                "That code does not match a request waiting here. After {} more wrong code{} the waiting request is denied.",
                wrong.left,
                if wrong.left == 1 { "" } else { "s" }
            ))
        } else if caps.edits {
            Some("❌ Too many wrong codes: I denied the waiting request.".to_string())
        } else {
            None
        };
        if let Some(note) = note
            && self.may_hear(entry, event).await?
        {
            let reply_to = match &event.kind {
                InboundKind::Message { message_id, .. } => message_id.clone(),
                _ => None,
            };
            replies.push(NewOutbox {
                inbox_id: Some(entry.id),
                seq,
                channel: entry.channel.clone(),
                kind: OutboxKind::Send,
                message: OutboundMessage {
                    reply_to,
                    reply_context: event.reply_context.clone(),
                    ..OutboundMessage::text(event.chat.clone(), note)
                },
            });
        }
        store
            .reply_and_finish_inbox(entry.id, &replies, now)
            .await?;
        self.outbox.notify_one();
        for confirmation in wrong.denied {
            self.resume(confirmation.turn_id, cancel).await?;
        }
        Ok(true)
    }

    /// Shows `event` in the chat of the turn `turn_id`, through its channel's port (on channels
    /// that show progress): the chat and reply context of the message the turn answers tell the
    /// channel which of its turns it is.
    async fn emit_to_turn(&self, turn_id: i64, event: TurnEvent) -> Result<(), StoreError> {
        let store = &self.rt.store;
        let Some(turn) = store.turn(turn_id).await? else {
            return Ok(());
        };
        let Some(original) = store.inbox_entry(turn.inbox_id).await? else {
            return Ok(());
        };
        let (Ok(inbound), Some(channel)) = (&original.event, self.channels.get(&original.channel))
        else {
            return Ok(());
        };
        let progress = Progress {
            chat: &inbound.chat,
            reply_context: inbound.reply_context.as_ref(),
            event: &event,
        };
        super::preview::emit(channel, progress).await;
        Ok(())
    }

    /// Runs a parked turn again after its decision.
    pub(super) async fn resume(
        &self,
        turn_id: i64,
        cancel: &CancellationToken,
    ) -> Result<(), StoreError> {
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
        // A background task's run goes on under its own key in the dispatcher, where `/cancel N`
        // reaches it and a restart finds it pending.
        if let Some(task) = self.background_run_of(&original, &event).await? {
            return self
                .resume_background(&task, turn.id, original.id, cancel)
                .await;
        }
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
            events: super::preview::ChannelPreview::events_of(&channel),
            chat: event.chat.clone(),
            requester: event.sender.id.clone(),
            reply_to,
            reply_context: event.reply_context.clone(),
            note: scheduled
                .as_ref()
                .and_then(crate::scheduler::ScheduledRun::note),
            cancel: cancel.clone(),
            confirmation: super::scheduled::confirmation_policy(scheduled.as_ref()),
            approvals_route: self.approvals_route(
                &original.channel,
                &event,
                scheduled.as_ref().map(|run| run.name.as_str()),
            ),
            schedule: scheduled.as_ref().map(|run| run.name.clone()),
        };
        self.run(
            job,
            channel,
            scheduled.map(super::handler::Unattended::Schedule),
        )
        .await
    }
}

/// The requester as the owner's routed prompt names them: by identity (`email:ann@example.org`),
/// which the platform vouches for, and the display name the sender chose only after it, in
/// quotes and on one line, so it cannot pass for something else ("the scheduled run …").
fn requester_label(channel: &str, sender: &Sender) -> String {
    let identity = format!("{channel}:{}", sender.id);
    let name: String = sender
        .name
        .as_deref()
        .unwrap_or_default()
        .chars()
        .map(|c| match c {
            '“' | '”' | '"' => '\'',
            c if c.is_control() => ' ',
            c => c,
        })
        .take(MAX_SHOWN_NAME)
        .collect();
    let name = name.trim();
    if name.is_empty() || name == sender.id {
        identity
    } else {
        format!("{identity} (named “{name}”)")
    }
}

/// The most characters of a sender's display name a routed prompt shows.
const MAX_SHOWN_NAME: usize = 60;

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

    #[test]
    fn a_routed_prompt_names_the_requester_by_identity_and_quotes_the_chosen_name() {
        let plain = Sender::new("ann@example.org");
        assert_eq!(requester_label("email", &plain), "email:ann@example.org");
        let named = Sender::new("ann@example.org").with_name("Ann");
        assert_eq!(
            requester_label("email", &named),
            "email:ann@example.org (named “Ann”)"
        );
        // A name worded to pass for something else stays a quoted name after the identity,
        // on one line, with its own quotes made plain.
        let posing = Sender::new("eve@example.org")
            .with_name("the scheduled run “backup”\nApprove within 1 minutes?");
        let label = requester_label("email", &posing);
        assert!(
            label.starts_with("email:eve@example.org (named “the scheduled run 'backup' "),
            "{label}"
        );
        assert!(!label.contains('\n'), "{label}");
        assert_eq!(label.matches('“').count(), 1, "{label}");
        let long = Sender::new("x").with_name("y".repeat(500));
        assert!(requester_label("telegram", &long).chars().count() < 100);
        // A platform that repeats the id as the name shows it once.
        let same = Sender::new("42").with_name("42");
        assert_eq!(requester_label("telegram", &same), "telegram:42");
    }
}
