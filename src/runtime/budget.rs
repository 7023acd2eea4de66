//! Spending: what each model call costs (the provider's prices times its reported tokens),
//! recorded per call; the `[budget]` caps checked before every model call; the owner warned once
//! per day and month at `warn_at`; and the `/usage` and `/budget` answers.
//!
//! Days and months are counted in `daemon.timezone`. Costs are kept in billionths of a USD so
//! sums are exact.

use hearth_channel::{ChatRef, OutboundMessage};

use super::Runtime;
use crate::config::{ProviderConfig, TranscriptionConfig};
use crate::provider::{ChatResponse, Usage};
use crate::store::{ModelCall, NewOutbox, OutboxKind, Payer, StoreError, UsageBy};
use crate::transcribe::Transcript;

const NANO_PER_USD: f64 = 1e9;

/// The cost of `usage` at `provider`'s prices, in billionths of a USD.
pub fn cost_nusd(provider: Option<&ProviderConfig>, usage: &Usage) -> i64 {
    let Some(p) = provider else { return 0 };
    let cached = usage.cached_input_tokens.min(usage.input_tokens);
    let fresh = usage.input_tokens - cached;
    let cached_price = p
        .price_cached_input_per_mtok
        .unwrap_or(p.price_input_per_mtok);
    // USD per million tokens is a thousand billionths of a USD per token.
    let nano = (fresh as f64 * p.price_input_per_mtok
        + cached as f64 * cached_price
        + usage.output_tokens as f64 * p.price_output_per_mtok)
        * 1_000.0;
    nano.round() as i64
}

/// `nusd` as dollars for people: `$0.0123`, `$4.20`.
pub fn usd(nusd: i64) -> String {
    let dollars = nusd as f64 / NANO_PER_USD;
    if dollars.abs() >= 1.0 {
        return format!("${dollars:.2}");
    }
    // Below a dollar the first digits show: a few thousandths a day still add up.
    let text = format!("{dollars:.6}");
    let trimmed = text.trim_end_matches('0');
    let decimals = trimmed.split('.').nth(1).map_or(0, str::len);
    if decimals < 2 {
        format!("${dollars:.2}")
    } else {
        format!("${trimmed}")
    }
}

fn to_nusd(dollars: f64) -> i64 {
    (dollars * NANO_PER_USD).round() as i64
}

/// Today's date in the daemon's timezone, `YYYY-MM-DD`.
pub fn today(rt: &Runtime) -> String {
    rt.clock
        .now()
        .with_timezone(&rt.timezone)
        .format("%Y-%m-%d")
        .to_string()
}

/// The first and last possible day of `day`'s month (`2026-11-01`, `2026-11-31`): string
/// comparison of dates needs no calendar.
fn month_of(day: &str) -> (String, String) {
    let month = day.get(..7).unwrap_or(day);
    (format!("{month}-01"), format!("{month}-31"))
}

/// Records one model call with its cost, counts it in `/metrics`, and warns the owner when the
/// spending passed `budget.warn_at` of a cap for the first time this day or month.
pub async fn record(
    rt: &Runtime,
    payer: &Payer,
    response: &ChatResponse,
) -> Result<(), StoreError> {
    store_call(rt, &model_call(rt, payer, response)).await
}

/// A model call's record with its cost, for a caller that stores it in a transaction of its
/// own (a turn's last call, with the turn's end); then [`recorded`].
pub fn model_call(rt: &Runtime, payer: &Payer, response: &ChatResponse) -> ModelCall {
    let ChatResponse {
        provider,
        model,
        usage,
        ..
    } = response;
    let cost = cost_nusd(rt.providers.config(provider), usage);
    call_record(rt, payer, provider, model, usage, cost)
}

/// The record of a model call cut short (a cancel, a closed stream, shutdown, a timeout after
/// the first words), with tokens estimated from what was sent and what had arrived: the
/// provider billed it, so it counts like any other call, marked as cut short.
pub fn cut_short_call(
    rt: &Runtime,
    payer: &Payer,
    provider: &str,
    model: &str,
    input_tokens: u64,
    output_tokens: u64,
) -> ModelCall {
    let usage = Usage {
        input_tokens,
        output_tokens,
        cached_input_tokens: 0,
    };
    let cost = cost_nusd(rt.providers.config(provider), &usage);
    ModelCall {
        cut_short: true,
        ..call_record(rt, payer, provider, model, &usage, cost)
    }
}

/// Records a voice message's transcription like a model call (provider `transcription`), at the
/// `[transcription]` prices.
pub async fn record_transcription(
    rt: &Runtime,
    payer: &Payer,
    config: &TranscriptionConfig,
    transcript: &Transcript,
) -> Result<(), StoreError> {
    let cost = transcript.cost_nusd(config);
    let payer = Payer {
        purpose: "transcription",
        ..payer.clone()
    };
    let call = call_record(
        rt,
        &payer,
        "transcription",
        &config.model,
        &transcript.usage,
        cost,
    );
    store_call(rt, &call).await
}

/// Stores a model call on its own, then [`recorded`].
pub async fn store_call(rt: &Runtime, call: &ModelCall) -> Result<(), StoreError> {
    rt.store.record_model_call(call).await?;
    recorded(rt, call).await
}

fn call_record(
    rt: &Runtime,
    payer: &Payer,
    provider: &str,
    model: &str,
    usage: &Usage,
    cost: i64,
) -> ModelCall {
    ModelCall {
        at_ms: rt.clock.now_ms(),
        day: today(rt),
        payer: payer.clone(),
        provider: provider.to_string(),
        model: model.to_string(),
        input_tokens: usage.input_tokens,
        cached_input_tokens: usage.cached_input_tokens,
        output_tokens: usage.output_tokens,
        cost_nusd: cost,
        cut_short: false,
    }
}

/// What follows a stored model call: `/metrics` counts it, and a call that cost something may
/// pass a cap's warning line.
pub async fn recorded(rt: &Runtime, call: &ModelCall) -> Result<(), StoreError> {
    let usage = Usage {
        input_tokens: call.input_tokens,
        cached_input_tokens: call.cached_input_tokens,
        output_tokens: call.output_tokens,
    };
    rt.metrics
        .model_call(&call.provider, &call.model, &usage, call.cost_nusd);
    if call.cost_nusd > 0 {
        warn_if_needed(rt, &call.day, call.payer.channel.as_deref()).await?;
    }
    Ok(())
}

/// The caps in force today, in billionths of a USD.
struct Caps {
    daily: Option<i64>,
    monthly: Option<i64>,
    schedule_daily: Option<i64>,
}

async fn caps(rt: &Runtime, day: &str) -> Result<Caps, StoreError> {
    let budget = &rt.config.budget;
    let daily = match rt.store.daily_cap_for(day).await? {
        Some(cap) => Some(cap),
        None => budget.daily_usd.map(to_nusd),
    };
    Ok(Caps {
        daily,
        monthly: budget.monthly_usd.map(to_nusd),
        schedule_daily: budget.schedule_daily_usd.map(to_nusd),
    })
}

async fn warn_if_needed(rt: &Runtime, day: &str, channel: Option<&str>) -> Result<(), StoreError> {
    let caps = caps(rt, day).await?;
    let (first, last) = month_of(day);
    let warn_at = rt.config.budget.warn_at;
    let periods = [
        (
            caps.daily,
            day.to_string(),
            day.to_string(),
            format!("day:{day}"),
            "today's",
        ),
        (
            caps.monthly,
            first,
            last,
            format!("month:{}", day.get(..7).unwrap_or(day)),
            "this month's",
        ),
    ];
    for (cap, from, to, period, name) in periods {
        let Some(cap) = cap else { continue };
        let spent = rt.store.spent_nusd(&from, &to, None).await?;
        if (spent as f64) < cap as f64 * warn_at {
            continue;
        }
        if !rt
            .store
            .claim_budget_warning(&period, rt.clock.now_ms())
            .await?
        {
            continue;
        }
        let text = format!(
            "💸 {} of {name} budget of {} is spent ({} so far). At the cap, schedules are skipped and chats get a short note instead of an answer. Send /usage for details, /budget to change today's cap.",
            percent(spent, cap),
            usd(cap),
            usd(spent)
        );
        tell_owner(rt, channel, text).await?;
    }
    Ok(())
}

fn percent(spent: i64, cap: i64) -> String {
    if cap <= 0 {
        return "All".to_string();
    }
    format!("{:.0}%", spent as f64 * 100.0 / cap as f64)
}

/// Queues a message to the owner: on their identity on `channel` when they have one there, else
/// on the first one configured, never on a channel that shows only answers to its own events
/// (there it would reach nobody). The outbox sends it with the turn's reply.
async fn tell_owner(rt: &Runtime, channel: Option<&str>, text: String) -> Result<(), StoreError> {
    let mut owners = rt.config.daemon.owner_identities();
    owners.retain(|(owner_channel, _)| crate::channels::sends_unasked(owner_channel));
    owners.sort_by_key(|(owner_channel, _)| Some(*owner_channel) != channel);
    let Some((owner_channel, user)) = owners.first() else {
        tracing::warn!(%text, "budget warning for nobody: daemon.owner names no identity on a chat channel (hearth check says more)");
        return Ok(());
    };
    let note = NewOutbox {
        inbox_id: None,
        seq: 0,
        channel: owner_channel.to_string(),
        kind: OutboxKind::Send,
        message: OutboundMessage::text(ChatRef::new(*user), text),
    };
    rt.store.enqueue_outbox(&[note], rt.clock.now_ms()).await?;
    Ok(())
}

/// The one line answered instead of calling the model when a cap is reached: the daily or
/// monthly cap for everything, `budget.schedule_daily_usd` for a schedule's run. `None`: go on.
pub async fn cap_reached(
    rt: &Runtime,
    schedule: Option<&str>,
) -> Result<Option<String>, StoreError> {
    let day = today(rt);
    let caps = caps(rt, &day).await?;
    if let Some(cap) = caps.daily {
        let spent = rt.store.spent_nusd(&day, &day, None).await?;
        if spent >= cap {
            return Ok(Some(format!(
                "💸 Today's budget of {} is reached ({} spent), so I did not ask the model. The owner can raise it with /budget <USD> for today, or budget.daily_usd in hearth.toml.",
                usd(cap),
                usd(spent)
            )));
        }
    }
    if let Some(cap) = caps.monthly {
        let (first, last) = month_of(&day);
        let spent = rt.store.spent_nusd(&first, &last, None).await?;
        if spent >= cap {
            return Ok(Some(format!(
                "💸 This month's budget of {} is reached ({} spent), so I did not ask the model. The owner can raise budget.monthly_usd in hearth.toml.",
                usd(cap),
                usd(spent)
            )));
        }
    }
    if let (Some(cap), Some(schedule)) = (caps.schedule_daily, schedule) {
        let spent = rt.store.spent_nusd(&day, &day, Some(schedule)).await?;
        if spent >= cap {
            return Ok(Some(format!(
                "💸 The schedule “{schedule}” reached its daily budget of {} ({} spent today); skipped. Raise budget.schedule_daily_usd in hearth.toml.",
                usd(cap),
                usd(spent)
            )));
        }
    }
    Ok(None)
}

/// `/usage`: today's and this month's calls, tokens and cost, and this month by model. The
/// owner sees everyone's; another user sees their own.
pub async fn usage_text(rt: &Runtime, user: Option<i64>) -> Result<String, StoreError> {
    let day = today(rt);
    let (first, _) = month_of(&day);
    let rows = rt.store.usage_by(UsageBy::Day, &first, user).await?;
    let sum = |rows: &mut dyn Iterator<Item = &crate::store::UsageRow>| {
        rows.fold((0, 0, 0, 0), |(c, i, o, n), r| {
            (
                c + r.calls,
                i + r.input_tokens,
                o + r.output_tokens,
                n + r.cost_nusd,
            )
        })
    };
    let line = |label: &str, (calls, input, output, cost): (i64, i64, i64, i64)| {
        format!(
            "{label}: {calls} model calls, {input} tokens in, {output} out, {}",
            usd(cost)
        )
    };
    let whose = if user.is_some() {
        "Your usage"
    } else {
        "Usage"
    };
    let mut text = format!("{whose} (days in {}):", rt.timezone.name());
    text.push('\n');
    text.push_str(&line(
        "today",
        sum(&mut rows.iter().filter(|r| r.key == day)),
    ));
    text.push('\n');
    text.push_str(&line("this month", sum(&mut rows.iter())));
    let cut = rows.iter().map(|r| r.cut_short).sum::<i64>();
    if cut > 0 {
        text.push_str(&format!(" ({cut} cut short, tokens estimated)"));
    }
    let models = rt.store.usage_by(UsageBy::Model, &first, user).await?;
    for row in models.iter().take(5) {
        text.push_str(&format!(
            "\n· {}: {} calls, {}",
            row.key,
            row.calls,
            usd(row.cost_nusd)
        ));
    }
    if user.is_none() {
        text.push('\n');
        text.push_str(&caps_line(rt, &day).await?);
    }
    Ok(text)
}

async fn caps_line(rt: &Runtime, day: &str) -> Result<String, StoreError> {
    let caps = caps(rt, day).await?;
    let show = |cap: Option<i64>| cap.map_or_else(|| "none".to_string(), usd);
    Ok(format!(
        "Caps: today {}, this month {}, each schedule {} a day.",
        show(caps.daily),
        show(caps.monthly),
        show(caps.schedule_daily)
    ))
}

/// `/budget [USD]` from the owner: shows today's spending and caps, or sets today's cap.
pub async fn budget_command(rt: &Runtime, argument: &str) -> Result<String, StoreError> {
    let day = today(rt);
    let argument = argument.trim().trim_start_matches('$');
    if argument.is_empty() {
        let spent = rt.store.spent_nusd(&day, &day, None).await?;
        return Ok(format!(
            "Spent today: {}. {}\nSend /budget <USD> to set today's cap, e.g. /budget 5.",
            usd(spent),
            caps_line(rt, &day).await?
        ));
    }
    match argument.parse::<f64>() {
        Ok(dollars) if dollars.is_finite() && dollars >= 0.0 => {
            rt.store
                .set_daily_cap(&day, to_nusd(dollars), rt.clock.now_ms())
                .await?;
            Ok(format!(
                "Today's cap is now {} (until midnight, {}); budget.daily_usd applies again tomorrow.",
                usd(to_nusd(dollars)),
                rt.timezone.name()
            ))
        }
        _ => Ok(format!(
            "“{argument}” is not an amount in USD. Send /budget to see today's spending, or /budget 5 to allow $5 today."
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn priced(input: f64, output: f64, cached: Option<f64>) -> ProviderConfig {
        let kind = crate::config::ProviderKind::Openai;
        ProviderConfig {
            price_input_per_mtok: input,
            price_output_per_mtok: output,
            price_cached_input_per_mtok: cached,
            ..ProviderConfig::new("p", kind, "http://127.0.0.1:9/v1", "m")
        }
    }

    #[test]
    fn cost_is_tokens_times_price_per_million() {
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 500_000,
            cached_input_tokens: 0,
        };
        // $3 in, $15 out per million: $3 + $7.50.
        assert_eq!(
            cost_nusd(Some(&priced(3.0, 15.0, None)), &usage),
            10_500_000_000
        );
        // 12 tokens at $0.15 per million: 1.8 millionths of a dollar.
        let small = Usage {
            input_tokens: 12,
            output_tokens: 0,
            cached_input_tokens: 0,
        };
        assert_eq!(cost_nusd(Some(&priced(0.15, 0.6, None)), &small), 1_800);
        // Cached tokens at their own price, the input price when none is set.
        let cached = Usage {
            input_tokens: 1_000,
            output_tokens: 0,
            cached_input_tokens: 400,
        };
        assert_eq!(
            cost_nusd(Some(&priced(1.0, 0.0, Some(0.1))), &cached),
            600_000 + 40_000
        );
        assert_eq!(cost_nusd(Some(&priced(1.0, 0.0, None)), &cached), 1_000_000);
        assert_eq!(cost_nusd(None, &cached), 0);
        assert_eq!(usd(10_500_000_000), "$10.50");
        assert_eq!(usd(1_800), "$0.000002");
        assert_eq!(usd(12_300_000), "$0.0123");
        assert_eq!(usd(500_000_000), "$0.50");
        assert_eq!(usd(0), "$0.00");
        assert_eq!(
            month_of("2026-02-14"),
            ("2026-02-01".into(), "2026-02-31".into())
        );
    }
}
