//! The bodies of the Discord fuzz targets in `fuzz/`, also run on their corpora by
//! the tests below. Not part of the channel API.

use std::collections::HashSet;

use hearth_channel::fuzzing::check_plan;
use hearth_channel::{Capabilities, Inbound, InboundKind, Measure};
use serenity::model::application::Interaction;
use serenity::model::event::{Event, GatewayEvent};
use serenity::model::id::{GuildId, UserId};

use crate::format::MAX_MESSAGE_LEN;
use crate::inbound::{self, Rules, Verdict, history_page};

/// Who the fuzzed events are judged by: the bot 4242, user 1 allowed, role 2 allowed, channel 3
/// answered without a mention.
fn rules() -> Rules {
    Rules {
        me: UserId::new(4242),
        allowed_users: HashSet::from([1]),
        allowed_roles: HashSet::from([2]),
        channels: HashSet::from([3]),
    }
}

/// `data` as one gateway payload, decoded as serenity's shard decodes it and handled as the
/// receive loop handles messages, edits and button presses. Nothing may panic.
pub fn gateway(data: &[u8]) {
    let Ok(GatewayEvent::Dispatch(_, event)) =
        serde_json::from_str::<GatewayEvent>(&String::from_utf8_lossy(data))
    else {
        return;
    };
    let rules = rules();
    match event {
        Event::MessageCreate(created) if rules.screen(&created.message) != Verdict::Ignore => {
            check_event(&inbound::message(&rules, &created.message));
        }
        Event::MessageUpdate(update) => {
            if let Some(event) = rules.edit(&update) {
                check_event(&event);
            }
        }
        Event::InteractionCreate(created) => {
            if let Interaction::Component(press) = created.interaction {
                check_event(&inbound::press(&press));
            }
        }
        _ => {}
    }
}

/// `data` as the body of a channel history read (`GET /channels/{id}/messages`), handled as the
/// backfill handles it in a DM and in a server channel. Nothing may panic, and every message
/// read keeps the id it was listed under.
pub fn rest_messages(data: &[u8]) {
    let Ok(page) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Ok(messages) = history_page(3, &page) else {
        return;
    };
    let rules = rules();
    let mut previous = 0;
    for (id, message) in messages {
        assert!(id >= previous, "history out of order");
        previous = id;
        let Some(mut message) = message else {
            continue;
        };
        assert_eq!(message.id.get(), id);
        for guild in [None, Some(GuildId::new(5))] {
            message.guild_id = guild;
            if rules.screen(&message) != Verdict::Ignore {
                check_event(&inbound::message(&rules, &message));
            }
        }
    }
}

/// What every event must be: without the bot's mention in its text, storable as the inbox
/// stores it.
fn check_event(event: &Inbound) {
    if let InboundKind::Message { text, .. } | InboundKind::Edit { text, .. } = &event.kind {
        assert!(!text.contains("<@4242>") && !text.contains("<@!4242>"));
    }
    hearth_channel::fuzzing::check_stored(event);
}

/// `data` as a reply's Markdown, planned at Discord's limit and rendered as the adapter sends it:
/// the checks of [`check_plan`], with the content sent within the limit.
pub fn outbound_plan(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let capabilities = Capabilities {
        max_message_len: Some(MAX_MESSAGE_LEN),
        measure: Measure::Chars,
        ..Capabilities::default()
    };
    check_plan(&text, &capabilities, |part| {
        match crate::outbound::fits(part) {
            Ok(content) => content.chars().count(),
            Err(error) => panic!("a planned part is refused: {error}"),
        }
    });
}

/// The fuzz targets' corpora (`fuzz/corpus/`, fixed crashes kept there as `regression-*`) as
/// regression tests: every input the fuzzer kept must still pass the target's checks.
#[cfg(test)]
mod tests {
    use hearth_channel::fuzzing::replay;
    #[test]
    fn discord_gateway_corpus() {
        replay("discord_gateway", super::gateway);
    }

    #[test]
    fn discord_rest_message_corpus() {
        replay("discord_rest", super::rest_messages);
    }

    #[test]
    fn outbound_plan_corpus_at_discords_limit() {
        replay("outbound_plan", super::outbound_plan);
    }
}
