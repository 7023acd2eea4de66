//! Turns one inbox entry into its reply: who is asking, which command or agent, and the turn.

use std::sync::Arc;

use hearth_channel::{Channel, Inbound, InboundKind, OutboundMessage, TurnEvent};
use rand::Rng;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::Channels;
use super::attachments;
use super::dispatcher::Dispatcher;
use super::preview::ChannelPreview;
use crate::provider::{ChatMessage, ContentPart};
use crate::router::{
    Command, Parsed, Reason, Situation, agents_text, help_text, parse_command, switched_note,
    within_sticky,
};
use crate::runtime::Runtime;
use crate::runtime::budget;
use crate::runtime::turn::{ConfirmationPolicy, TurnJob, run_turn};
use crate::scheduler::ScheduledRun;
use crate::store::{
    Conversation, Identity, IdentityStatus, InboxEntry, InboxStatus, NewOutbox, OutboxKind,
    PairingRequest, PairingStatus, Payer, StoreError,
};

/// How long a pairing code stays valid.
const PAIRING_TTL_MS: i64 = 60 * 60 * 1000;
/// Codes one unknown sender can get per day; after that they hear nothing.
const PAIRING_CODES_PER_DAY: usize = 3;

/// A message from an allowed sender being handled: what arrived, from whom, on which channel,
/// and what stops its turn.
struct Incoming<'a> {
    entry: &'a InboxEntry,
    event: &'a Inbound,
    identity: &'a Identity,
    channel: Arc<dyn Channel>,
    /// The platform id of the message, quoted by the reply.
    message_id: Option<String>,
    /// Cancelled by `/cancel` or shutdown.
    cancel: &'a CancellationToken,
    /// Asked by `/cancel` which turn to stop.
    dispatcher: &'a Dispatcher,
}

pub struct Handler {
    pub rt: Arc<Runtime>,
    pub channels: Channels,
    /// Woken whenever replies are committed to the outbox.
    pub outbox: Arc<tokio::sync::Notify>,
    pub shutdown: CancellationToken,
    /// The daemon's background tasks, which shutdown waits for: the compactions a turn asks for.
    pub tasks: TaskTracker,
    /// Scheduled runs' answers the delivery worker has yet to report on.
    pub answers: super::AnswersOnTheirWay,
    /// Woken when a turn ends: the background task runner starts the tasks it was waiting for.
    pub background_wake: Arc<tokio::sync::Notify>,
}

/// A turn nobody is watching, and what its end is recorded on.
pub(super) enum Unattended {
    /// A schedule's run.
    Schedule(ScheduledRun),
    /// Background task N's run.
    Background(i64),
}

impl Handler {
    /// Handles an inbox entry to the end (or until shutdown suspends it). Store errors are
    /// returned so the dispatcher can try again; everything else is answered or recorded.
    #[tracing::instrument(name = "entry", skip_all, fields(inbox_id = id))]
    pub async fn handle(
        &self,
        id: i64,
        stored: Option<InboxEntry>,
        cancel: &CancellationToken,
        dispatcher: &Dispatcher,
    ) -> Result<(), StoreError> {
        let store = &self.rt.store;
        let entry = match stored {
            Some(entry) => entry,
            None => match store.inbox_entry(id).await? {
                Some(entry) => entry,
                None => return Ok(()),
            },
        };
        if entry.status != InboxStatus::Pending {
            return Ok(());
        }
        let now = self.rt.clock.now_ms();
        let event = match &entry.event {
            Ok(event) => event.clone(),
            Err(reason) => {
                tracing::error!(inbox_id = id, %reason, "stored inbound event cannot be read");
                return store
                    .finish_inbox(id, InboxStatus::Failed, Some(reason), now)
                    .await;
            }
        };
        let Some(channel) = self.channels.get(&entry.channel).cloned() else {
            // Another process's channel (a schedule the daemon fired for `hearth chat`, say):
            // left pending for the process that runs it.
            tracing::debug!(inbox_id = id, channel = %entry.channel, "inbound event for a channel this process does not run; left pending");
            return Ok(());
        };

        // The rarer paths below are boxed: a future is as large as its largest path, and every
        // conversation in flight holds one (the common path, a message, is 11 KB of 15).

        // Decisions carry their own rule (requester or owner), checked before the allowlist so a
        // stranger's press is answered "not yours" rather than with a pairing code.
        if let Some(decision) = crate::confirmation::decision_of(&event) {
            return Box::pin(self.decide(&entry, &event, channel, decision, cancel)).await;
        }
        // A reaction with a button's emoji on a prompt (Matrix), or a typed code on a channel
        // without buttons, decides the same way.
        if let Some(decision) = self.reaction_decision(&entry.channel, &event).await? {
            return Box::pin(self.decide(&entry, &event, channel, decision, cancel)).await;
        }
        if let Some(attempt) = crate::confirmation::code_attempt_of(&event)
            && Box::pin(self.typed_code(&entry, &event, channel.clone(), attempt, cancel)).await?
        {
            return Ok(());
        }

        // A background task's run: the stored task says what to do and for whom.
        if let Some(task) = self.background_run_of(&entry, &event).await? {
            return Box::pin(self.background(&entry, &event, channel, task, cancel)).await;
        }
        // A schedule's synthetic message: trusted (the owner set it up), answered by its agent.
        if event.sender.id == crate::scheduler::SENDER_ID
            && let Some(run) = store.scheduled_run_for_inbox(id).await?
        {
            return Box::pin(self.scheduled(&entry, &event, channel, run, cancel)).await;
        }

        // A sender the platform could not verify (an email that failed the configured
        // authentication check) is a stranger, whatever identity it claims.
        let claimed = if event.sender.verified {
            store
                .identity_or_domain(&entry.channel, &event.sender.id, now)
                .await?
        } else {
            None
        };
        let identity = match claimed {
            Some(identity) if identity.status == IdentityStatus::Allowed => identity,
            Some(_) => {
                tracing::info!(channel = %entry.channel, sender = %event.sender.id, "message from a revoked identity ignored");
                return store
                    .finish_inbox(id, InboxStatus::Done, Some("sender revoked"), now)
                    .await;
            }
            None => return self.pairing(&entry, &event).await,
        };

        match &event.kind {
            InboundKind::Message {
                text,
                attachments: files,
                message_id,
                ..
            } => {
                // Files are fetched only now, from someone hearth serves.
                let files = attachments::fetch(&self.rt, id, channel.as_ref(), files).await?;
                // Voice is turned into text once, before the turn starts (a resumed turn has it).
                let payer = Payer {
                    purpose: "transcription",
                    user_id: Some(identity.user_id),
                    channel: Some(entry.channel.clone()),
                    ..Payer::default()
                };
                let transcribed =
                    attachments::transcribe_voice(&self.rt, id, text, &files, &payer).await;
                let (text, files) = match transcribed {
                    Ok(transcribed) => transcribed,
                    Err(answer) => {
                        return self
                            .reply(&entry, &event, message_id.clone(), &answer)
                            .await;
                    }
                };
                let content = attachments::user_content(&text, &files);
                let incoming = Incoming {
                    entry: &entry,
                    event: &event,
                    identity: &identity,
                    channel,
                    message_id: message_id.clone(),
                    cancel,
                    dispatcher,
                };
                self.message(&incoming, &text, content).await
            }
            InboundKind::Press(press) => {
                // No confirmation is waiting for this button (anymore). A channel that
                // acknowledged the press on receipt needs nothing more. Answered once the entry
                // is marked handled, so a retried write cannot answer twice.
                store.finish_inbox(id, InboxStatus::Done, None, now).await?;
                if !channel.capabilities().acks_presses_on_receipt
                    && let Err(err) = channel
                        .answer_press(press, Some("This button is no longer active."), false)
                        .await
                {
                    tracing::debug!(error = %err, "answering a stale button press failed");
                }
                Ok(())
            }
            // Reactions that decide nothing, edits, and kinds a newer adapter may add.
            _ => store.finish_inbox(id, InboxStatus::Done, None, now).await,
        }
    }

    /// A message from an allowed sender: a resumed turn, a command, or a new turn of the agent
    /// it is routed to.
    async fn message(
        &self,
        incoming: &Incoming<'_>,
        text: &str,
        content: Vec<ContentPart>,
    ) -> Result<(), StoreError> {
        let (entry, event) = (incoming.entry, incoming.event);
        let rt = &self.rt;
        let store = &rt.store;
        let now = rt.clock.now_ms();
        let conversation = store.conversation(&entry.channel, &event.chat, now).await?;

        // A turn that was under way when the daemon stopped (or when a try failed): resume it
        // as it was. A fresh entry has none (and turns.inbox_id is unique, so a wrong guess
        // fails the insert, and the retry finds the turn).
        let earlier = if entry.fresh {
            None
        } else {
            store.turn_for_inbox(entry.id).await?
        };
        if let Some(turn) = earlier {
            let agents = rt.agents();
            let agent = agents
                .get(&turn.agent_id)
                .or_else(|| agents.get(&rt.config.router.default_agent))
                .cloned();
            let Some(agent) = agent else {
                return self
                    .answer(
                        incoming,
                        "⚠️ The agent of this conversation no longer exists.",
                    )
                    .await;
            };
            tracing::info!(
                inbox_id = entry.id,
                turn = turn.id,
                "resuming an interrupted turn"
            );
            let job = self.job(incoming, &conversation, turn, agent, None);
            return self.run(job, incoming.channel.clone(), None).await;
        }

        let agents = rt.agents();
        let command = match parse_command(text, &agents.set) {
            Some(Parsed::Command(command)) => Some(command),
            // A bare `@finance` switches like `/agent finance`.
            Some(Parsed::Mention { agent, text: rest }) if rest.trim().is_empty() => {
                Some(Command::Agent(Some(agent)))
            }
            Some(Parsed::Mention { .. }) | None => None,
        };
        if let Some(command) = command {
            return self.command(incoming, &conversation, command).await;
        }

        let default_agent = rt.config.router.default_agent.clone();
        let routing = agents.router.decide_addressed(
            text,
            event.agent.as_deref(),
            Situation {
                current_agent: conversation.current_agent.as_deref(),
                pinned: conversation.agent_pinned,
                recent: within_sticky(
                    conversation.last_active_at,
                    now,
                    rt.config.router.sticky_minutes,
                ),
                default_agent: &default_agent,
            },
        );
        tracing::debug!(agent = %routing.decision.agent, reason = ?routing.decision.reason, "routed");
        // A typed `@id` is left out of what the agent reads; an agent the client asked for
        // apart from the text leaves the text (and its files) as they are.
        let content = if routing.decision.reason == Reason::Mention && routing.text != text {
            attachments::user_content(routing.text, &[])
        } else {
            content
        };
        let (agent_id, pinned) = (routing.decision.agent.clone(), routing.pin);
        let Some(agent) = agents
            .get(&agent_id)
            .or_else(|| agents.get(&default_agent))
            .cloned()
        else {
            let text = format!(
                "⚠️ No agent `{agent_id}` and no default agent `{default_agent}` in the agents file."
            );
            return self.answer(incoming, &text).await;
        };
        let note = (agent.id != routing.previous && !incoming.channel.capabilities().progress)
            .then(|| switched_note(&agent));
        let vision = rt
            .providers
            .config(&agent.provider)
            .is_some_and(|p| p.vision);
        let user_message = ChatMessage::User {
            content: attachments::for_model(content, vision),
        };
        let turn = store
            .start_turn(
                entry.id,
                &conversation,
                Some(incoming.identity.user_id),
                (&agent.id, agents.version(&agent.id)),
                Some(pinned),
                &user_message,
                now,
            )
            .await?;
        let (reason, keywords) = match &routing.decision.reason {
            Reason::Keywords { hits } => ("keywords", hits.clone()),
            Reason::Mention => ("mention", Vec::new()),
            Reason::Pinned => ("pinned", Vec::new()),
            Reason::Sticky => ("sticky", Vec::new()),
            Reason::Default => ("default", Vec::new()),
        };
        let job = self.job(incoming, &conversation, turn, agent, note);
        job.emit(TurnEvent::AgentSelected {
            agent: job.agent.id.clone(),
            name: job.agent.name.clone(),
            reason: reason.to_string(),
            keywords,
        })
        .await;
        self.run(job, incoming.channel.clone(), None).await
    }

    /// The turn that answers `incoming` in `conversation`.
    fn job(
        &self,
        incoming: &Incoming<'_>,
        conversation: &Conversation,
        turn: crate::store::Turn,
        agent: crate::agent::AgentDef,
        note: Option<String>,
    ) -> TurnJob {
        let (entry, event) = (incoming.entry, incoming.event);
        TurnJob {
            turn,
            session: conversation.session,
            agent,
            channel_name: entry.channel.clone(),
            capabilities: incoming.channel.capabilities(),
            preview: ChannelPreview::of(&incoming.channel),
            events: ChannelPreview::events_of(&incoming.channel),
            chat: event.chat.clone(),
            requester: event.sender.id.clone(),
            reply_to: incoming.message_id.clone(),
            reply_context: event.reply_context.clone(),
            note,
            cancel: incoming.cancel.clone(),
            confirmation: ConfirmationPolicy::Ask,
            approvals_route: self.approvals_route(&entry.channel, event, None),
            schedule: None,
        }
    }

    /// Runs a turn, showing "typing…" in `channel` meanwhile; for an unattended run (a
    /// schedule's, a background task's), records how the run ended.
    pub(super) async fn run(
        &self,
        job: TurnJob,
        channel: Arc<dyn Channel>,
        unattended: Option<Unattended>,
    ) -> Result<(), StoreError> {
        let typing = self.keep_typing(channel, job.chat.clone());
        let turn_id = job.turn.id;
        let result = run_turn(&self.rt, job, &self.shutdown).await;
        typing.cancel();
        match (&result, unattended) {
            (Ok(outcome), Some(Unattended::Schedule(run))) => {
                self.finish_scheduled(&run, turn_id, *outcome).await?;
            }
            (Ok(outcome), Some(Unattended::Background(task))) => {
                self.finish_background(task, turn_id, *outcome).await?;
            }
            _ => {}
        }
        self.outbox.notify_one();
        // The turn may have started a background task, or be the answer one waits for.
        self.background_wake.notify_one();
        // Summaries of older turns, once the reply is on its way.
        crate::runtime::compact::start_wanted(&self.rt, &self.tasks, &self.shutdown);
        result.map(|_| ())
    }

    /// Shows "typing…" until the returned token is cancelled, renewed as often as the channel
    /// says its indicator lasts; nothing where the platform has none.
    fn keep_typing(
        &self,
        channel: Arc<dyn Channel>,
        chat: hearth_channel::ChatRef,
    ) -> CancellationToken {
        let stop = self.shutdown.child_token();
        let Some(interval) = channel.capabilities().typing_interval else {
            return stop;
        };
        let token = stop.clone();
        // Inside the entry's span: the indicator belongs to the turn that asked for it.
        tokio::spawn(
            async move {
                loop {
                    if let Err(err) = channel.typing(&chat).await {
                        tracing::debug!(error = %err, "typing indicator failed");
                    }
                    tokio::select! {
                        () = tokio::time::sleep(interval) => {}
                        () = token.cancelled() => return,
                    }
                }
            }
            .instrument(tracing::info_span!("typing")),
        );
        stop
    }

    /// A chat command (`/help`, `/agent`, `/cancel` …), answered in one message.
    async fn command(
        &self,
        incoming: &Incoming<'_>,
        conversation: &Conversation,
        command: Command,
    ) -> Result<(), StoreError> {
        let (entry, event, identity) = (incoming.entry, incoming.event, incoming.identity);
        let rt = &self.rt;
        let store = &rt.store;
        let now = rt.clock.now_ms();
        let agents = rt.agents();
        let current = conversation
            .current_agent
            .clone()
            .unwrap_or_else(|| rt.config.router.default_agent.clone());
        let text = match command {
            Command::Help => help_text(&agents.set),
            Command::Agents => agents_text(&agents.set, Some(&current)),
            Command::Agent(None) => agents_text(&agents.set, Some(&current)),
            Command::Agent(Some(id)) if id == "auto" => {
                store
                    .set_conversation_agent(
                        conversation.id,
                        conversation.current_agent.as_deref(),
                        false,
                        now,
                    )
                    .await?;
                "Automatic agent selection is back on: keywords pick the agent again.".to_string()
            }
            Command::Agent(Some(id)) => match agents.get(&id) {
                Some(agent) => {
                    store
                        .set_conversation_agent(conversation.id, Some(&agent.id), true, now)
                        .await?;
                    format!(
                        "{}\nThis conversation stays with {} until you send /agent auto or /reset.",
                        switched_note(agent),
                        agent.name
                    )
                }
                None => format!(
                    "There is no agent `{id}`.\n\n{}",
                    agents_text(&agents.set, Some(&current))
                ),
            },
            Command::New => {
                store.new_session(conversation.id, false, now).await?;
                "🆕 New conversation: I have set the earlier messages aside.".to_string()
            }
            Command::Reset => {
                store.new_session(conversation.id, true, now).await?;
                "🔄 Reset: earlier messages set aside and back to the default agent.".to_string()
            }
            Command::Whoami => {
                let role = if identity.is_owner {
                    "the owner"
                } else {
                    "an allowed user"
                };
                let agent = agents
                    .get(&current)
                    .map(switched_note)
                    .unwrap_or(current.clone());
                // One line, so the terminal's one-line-per-reply stays true.
                let linked: Vec<String> = store
                    .identities_of_user(identity.user_id)
                    .await?
                    .into_iter()
                    .filter(|i| i.id != identity.id)
                    .map(|i| match i.status {
                        IdentityStatus::Allowed => format!("{}:{}", i.channel, i.platform_user_id),
                        IdentityStatus::Revoked => {
                            format!("{}:{} (revoked)", i.channel, i.platform_user_id)
                        }
                    })
                    .collect();
                let linked = if linked.is_empty() {
                    "none".to_string()
                } else {
                    linked.join(", ")
                };
                let (_, permission, autonomy) = store.user_settings(identity.user_id).await?;
                let permission = permission.unwrap_or_else(|| {
                    let default = if identity.is_owner { "admin" } else { "write" };
                    format!("{default} (the default)")
                });
                let autonomy = autonomy.unwrap_or_else(|| {
                    let default = format!("{:?}", rt.config.tools.autonomy).to_lowercase();
                    format!("{default} (the default)")
                });
                format!(
                    "You are {}:{} ({role}, user #{}); linked identities: {linked}. Permission: {permission}; autonomy: {autonomy}. This conversation is #{} with {agent}.",
                    entry.channel, event.sender.id, identity.user_id, conversation.id
                )
            }
            Command::Tasks => {
                let whose = (!identity.is_owner).then_some(identity.user_id);
                super::background::tasks_text(rt, whose).await?
            }
            Command::CancelTask(id) => {
                super::background::cancel_text(self, identity, id, incoming.dispatcher).await?
            }
            Command::Cancel => {
                if incoming.dispatcher.took_cancel(entry.id) {
                    // The stopped turn already says "Cancelled"; one message is enough.
                    return store
                        .finish_inbox(entry.id, InboxStatus::Done, None, now)
                        .await;
                }
                "Nothing is running.".to_string()
            }
            Command::Usage => {
                let whose = (!identity.is_owner).then_some(identity.user_id);
                budget::usage_text(rt, whose).await?
            }
            Command::Budget(amount) if identity.is_owner => {
                budget::budget_command(rt, amount.as_deref().unwrap_or_default()).await?
            }
            Command::Budget(_) => {
                "Only the owner sees and sets the budget; /usage shows what you used.".to_string()
            }
            Command::Compact(focus) => {
                let history = crate::store::HistoryKey {
                    conversation_id: conversation.id,
                    session: conversation.session,
                    user_id: Some(identity.user_id),
                };
                crate::runtime::compact::compact_command(rt, history, &current, focus.as_deref())
                    .await?
            }
            Command::Plan => match store.latest_plan(conversation.id).await? {
                Some(plan) => crate::runtime::plan::render_full(&plan),
                None => "No plan in this conversation yet: I keep one when a request takes several steps.".to_string(),
            },
            Command::Unknown(name) => {
                format!("Unknown command /{name}. Send /help to see what I understand.")
            }
        };
        self.answer(incoming, &text).await
    }

    /// Answers the message with one reply quoting it, and marks the entry done.
    async fn answer(&self, incoming: &Incoming<'_>, text: &str) -> Result<(), StoreError> {
        let reply_to = incoming.message_id.clone();
        self.reply(incoming.entry, incoming.event, reply_to, text)
            .await
    }

    /// Answers the entry with one message and marks it done, in one transaction.
    async fn reply(
        &self,
        entry: &InboxEntry,
        event: &Inbound,
        reply_to: Option<String>,
        text: &str,
    ) -> Result<(), StoreError> {
        let reply = NewOutbox {
            inbox_id: Some(entry.id),
            seq: 0,
            channel: entry.channel.clone(),
            kind: OutboxKind::Send,
            message: OutboundMessage {
                reply_to,
                reply_context: event.reply_context.clone(),
                ..OutboundMessage::text(event.chat.clone(), text)
            },
        };
        self.rt
            .store
            .reply_and_finish_inbox(entry.id, &[reply], self.rt.clock.now_ms())
            .await?;
        self.outbox.notify_one();
        Ok(())
    }

    /// An unknown sender gets one pairing code (a few per day at most) and nothing else.
    async fn pairing(&self, entry: &InboxEntry, event: &Inbound) -> Result<(), StoreError> {
        let store = &self.rt.store;
        let now = self.rt.clock.now_ms();
        if !event.sender.verified {
            // A code sent to an address nobody proved would reach whoever owns it, and approving
            // it could not make the next message verified: nothing to offer.
            tracing::warn!(channel = %entry.channel, sender = %event.sender.id, "message from an unverified sender ignored");
            return store
                .finish_inbox(entry.id, InboxStatus::Done, Some("unverified sender"), now)
                .await;
        }
        let recent = store
            .pairings_of(&entry.channel, &event.sender.id, now - 24 * 60 * 60 * 1000)
            .await?;
        let has_open = recent.iter().any(|p| p.is_open(now));
        let is_message = matches!(event.kind, InboundKind::Message { .. });
        if has_open || recent.len() >= PAIRING_CODES_PER_DAY || !is_message {
            tracing::info!(channel = %entry.channel, sender = %event.sender.id, "message from an unknown sender ignored");
            return store
                .finish_inbox(entry.id, InboxStatus::Done, Some("unknown sender"), now)
                .await;
        }
        let code = pairing_code();
        store
            .create_pairing(&PairingRequest {
                code: code.clone(),
                channel: entry.channel.clone(),
                platform_user_id: event.sender.id.clone(),
                display_name: event.sender.name.clone(),
                chat_id: event.chat.chat_id.clone(),
                status: PairingStatus::Pending,
                created_at: now,
                expires_at: now + PAIRING_TTL_MS,
            })
            .await?;
        let silent = self
            .channels
            .get(&entry.channel)
            .is_some_and(|channel| channel.capabilities().silent_with_strangers);
        if silent {
            // The owner sees the request in `hearth pair list`; the sender hears nothing.
            tracing::info!(channel = %entry.channel, sender = %event.sender.id, %code, "pairing request recorded for an unknown sender (not answered on this channel)");
            return store
                .finish_inbox(entry.id, InboxStatus::Done, Some("pairing requested"), now)
                .await;
        }
        tracing::info!(channel = %entry.channel, sender = %event.sender.id, %code, "pairing code issued to an unknown sender");
        let text = format!(
            "👋 Hi! I only talk to people my owner has approved.\nYour pairing code is {code}. \
             Send it to my owner, who can approve you with: hearth pair approve {code}\n(The code expires in 1 hour.)"
        );
        self.reply(entry, event, None, &text).await
    }
}

/// Eight characters from the confirmation codes' alphabet, which has no look-alikes (no 0/O,
/// 1/I/L): the owner types it from what the stranger sends.
pub fn pairing_code() -> String {
    use hearth_channel::confirmation::CODE_ALPHABET;
    let mut rng = rand::rng();
    (0..8)
        .map(|_| char::from(CODE_ALPHABET[rng.random_range(0..CODE_ALPHABET.len())]))
        .collect()
}
