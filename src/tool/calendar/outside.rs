//! The calendar tools on the owner's outside calendars (`[[calendars]]`, `crate::calendar`):
//! their events merged into listings, each naming its calendar, with the text a stranger could
//! have written (location, description) wrapped as [`Untrusted`]; and writes to a writable
//! CalDAV calendar, which are [`Risk::Outward`] and so wait for the owner's Approve.

use chrono::{DateTime, Duration, Utc};
use futures::future::join_all;
use serde::Serialize;
use serde_json::{Value, json};

use super::{Times, UpdateCalendarEvent, instant, local_date, ms};
use crate::calendar::{self, CalendarError, EventFields, Occurrence, When};
use crate::config::OWN_CALENDAR;
use crate::tool::typed::text;
use crate::tool::untrusted::{Untrusted, strip_invisible};
use crate::tool::{Risk, ToolContext, ToolError};

/// Longest location or description shown; the rest is cut.
const MAX_TEXT: usize = 1_000;
/// Longest title shown.
const MAX_TITLE: usize = 200;

/// The outside calendar a call names, if it names one (not hearth's own).
pub(super) fn named(calendar: Option<&str>) -> Option<&str> {
    calendar
        .map(str::trim)
        .filter(|c| !c.is_empty() && !c.eq_ignore_ascii_case(OWN_CALENDAR))
}

/// A write to an outside calendar acts outside hearth: the owner is asked first.
pub(super) fn risk(calendar: Option<&str>, own: Risk) -> Risk {
    if named(calendar).is_some() {
        Risk::Outward
    } else {
        own
    }
}

/// What the confirmation prompt shows of a calendar write: its `arguments`, and for an outside
/// calendar a line naming the calendar and, for a change or a deletion, the event as hearth last
/// read it (the arguments name it only by uid).
pub(super) async fn prompt(
    ctx: &ToolContext,
    calendar: Option<&str>,
    (uid, instance): (Option<&str>, Option<&str>),
    arguments: String,
) -> String {
    match describe(ctx, calendar, uid, instance).await {
        Some(line) => format!("{arguments}\n{}", crate::text::clip(&line, 500)),
        None => arguments,
    }
}

async fn describe(
    ctx: &ToolContext,
    calendar: Option<&str>,
    uid: Option<&str>,
    instance: Option<&str>,
) -> Option<String> {
    let name = named(calendar)?;
    let Ok(config) = calendar::find(&ctx.config.calendars, name) else {
        return Some(format!("Calendar `{name}` is not configured."));
    };
    let host = reqwest::Url::parse(&config.request_url())
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    let place = format!("Calendar `{}` on {host}", config.name);
    let Some(uid) = uid.map(str::trim).filter(|u| !u.is_empty()) else {
        return Some(format!("{place}."));
    };
    let (tz, now) = (ctx.timezone, ctx.clock.now_ms());
    let instance = match instance.map(|text| instance_of(ctx, text)).transpose() {
        Ok(instance) => instance,
        Err(err) => return Some(format!("{place}: {err}.")),
    };
    Some(
        match calendar::event(&ctx.store, config, uid, instance, tz, now).await {
            Ok(event) => format!(
                "{place}: the event \"{}\" on {}{}.",
                crate::text::clip(&strip_invisible(&event.title), MAX_TITLE),
                calendar::describe(event.start, tz),
                match (event.recurring, instance) {
                    (true, Some(_)) => ", this one instance of a recurring event",
                    (true, None) => ", recurring (the whole series)",
                    (false, _) => "",
                }
            ),
            Err(err) => format!("{place}: {err}."),
        },
    )
}

/// The instance a call names by its start, as listings show it: `YYYY-MM-DD HH:MM` in the
/// owner's zone, or a date for an all-day event.
pub(super) fn instance_of(ctx: &ToolContext, text: &str) -> Result<When, ToolError> {
    let text = text.trim();
    let (tz, now) = (ctx.timezone, ctx.clock.now());
    let bad = |err: String| {
        ToolError::InvalidArguments(format!(
            "`instance_start` `{text}`: {err}; give the instance's start as list_calendar_events shows it"
        ))
    };
    if text.len() == 10 {
        crate::tool::time::parse_date(text, tz, now)
            .map(When::Date)
            .map_err(bad)
    } else {
        crate::tool::time::parse_datetime(text, tz, now)
            .map(When::At)
            .map_err(bad)
    }
}

fn failed(err: CalendarError) -> ToolError {
    match err {
        CalendarError::Unknown(_) | CalendarError::ReadOnly(_) => {
            ToolError::InvalidArguments(err.to_string())
        }
        err => ToolError::Failed(err.to_string()),
    }
}

/// The fields to write, from the tool's arguments: times as `Times::resolve` gave them (local
/// midnights for all-day events, whose end is the day after the last).
pub(super) fn fields(
    ctx: &ToolContext,
    title: Option<String>,
    times: Option<(i64, i64, bool)>,
    location: Option<String>,
    description: Option<String>,
) -> EventFields {
    let tz = ctx.timezone;
    EventFields {
        title,
        times: times.map(|(start, end, all_day)| {
            if all_day {
                (
                    When::Date(local_date(start, tz)),
                    When::Date(local_date(end, tz).max(local_date(start, tz) + Duration::days(1))),
                )
            } else {
                (When::At(instant(start)), When::At(instant(end)))
            }
        }),
        location: location.map(|l| l.trim().to_string()),
        description: description.map(|d| d.trim().to_string()),
    }
}

/// An outside event as the model sees it.
#[derive(Debug, Serialize)]
struct OutsideView {
    calendar: String,
    uid: String,
    title: String,
    all_day: bool,
    start: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    end: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_iso: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_day: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<Untrusted>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<Untrusted>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    recurring: bool,
}

impl OutsideView {
    fn new(ctx: &ToolContext, calendar: &str, o: Occurrence) -> Self {
        let tz = ctx.timezone;
        let source = |what: &str| format!("{what} of an event in calendar {calendar}");
        let mut view = Self {
            calendar: calendar.to_string(),
            uid: o.uid,
            title: crate::text::clip(&strip_invisible(&o.title), MAX_TITLE),
            all_day: false,
            start: String::new(),
            end: None,
            start_iso: None,
            last_day: None,
            location: o
                .location
                .map(|t| Untrusted::new(source("location"), &t, MAX_TEXT)),
            description: o
                .description
                .map(|t| Untrusted::new(source("description"), &t, MAX_TEXT)),
            recurring: o.recurring,
        };
        match (o.start, o.end) {
            (When::Date(first), end) => {
                view.all_day = true;
                view.start = first.to_string();
                let last = match end {
                    When::Date(after) => (after - Duration::days(1)).max(first),
                    When::At(_) => first,
                };
                view.last_day = Some(last.to_string());
            }
            (When::At(start), end) => {
                let local = start.with_timezone(&tz);
                view.start = local.format("%Y-%m-%d %H:%M").to_string();
                view.start_iso = Some(local.to_rfc3339());
                view.end = Some(calendar::describe(end, tz));
            }
        }
        view
    }
}

/// The outside calendars' events overlapping `range` (every calendar, or the one named), each
/// with the instant it starts for the merge, and the notes of calendars read from the cache
/// or not at all.
pub(super) async fn list(
    ctx: &ToolContext,
    only: Option<&str>,
    range: (DateTime<Utc>, DateTime<Utc>),
) -> Result<(Vec<(i64, Value)>, Vec<String>), ToolError> {
    let all = &ctx.config.calendars;
    let chosen: Vec<_> = match only {
        Some(name) => vec![calendar::find(all, name).map_err(failed)?],
        None => all.iter().collect(),
    };
    let now = ctx.clock.now_ms();
    let tz = ctx.timezone;
    let read = chosen
        .iter()
        .map(|config| calendar::read(&ctx.store, config, tz, range, now));
    let mut events = Vec::new();
    let mut notes = Vec::new();
    for (config, listing) in chosen.iter().zip(join_all(read).await) {
        let listing = listing.map_err(failed)?;
        notes.extend(listing.note);
        for o in listing.occurrences {
            let start = ms(o.start_instant(tz));
            events.push((start, json!(OutsideView::new(ctx, &config.name, o))));
        }
    }
    Ok((events, notes))
}

/// `add_calendar_event` on an outside calendar.
pub(super) async fn add(
    ctx: &ToolContext,
    name: &str,
    fields: EventFields,
) -> Result<Value, ToolError> {
    let config = calendar::find(&ctx.config.calendars, name).map_err(failed)?;
    let uid = calendar::create(&ctx.store, config, &fields, ctx.clock.now())
        .await
        .map_err(failed)?;
    Ok(json!({
        "calendar": config.name,
        "uid": uid,
        "added": summary(ctx, &fields),
    }))
}

/// `update_calendar_event` on an outside calendar.
pub(super) async fn update(
    ctx: &ToolContext,
    name: &str,
    args: UpdateCalendarEvent,
) -> Result<Value, ToolError> {
    let config = calendar::find(&ctx.config.calendars, name).map_err(failed)?;
    let uid = required_uid(args.uid.as_deref())?;
    let (tz, now) = (ctx.timezone, ctx.clock.now_ms());
    let instance = args
        .instance_start
        .as_deref()
        .map(|text| instance_of(ctx, text))
        .transpose()?;
    let old = calendar::event(&ctx.store, config, uid, instance, tz, now)
        .await
        .map_err(failed)?;
    if instance.is_some() && !old.recurring {
        return Err(ToolError::InvalidArguments(format!(
            "`{}` does not recur: leave out instance_start to change it",
            old.title
        )));
    }
    let old_all_day = matches!(old.start, When::Date(_));
    let all_day = args.all_day.unwrap_or(old_all_day);
    let times_change = args.start.is_some()
        || args.end.is_some()
        || args.duration_minutes.is_some()
        || all_day != old_all_day;
    if times_change && old.recurring && instance.is_none() {
        return Err(ToolError::InvalidArguments(format!(
            "`{}` is a recurring event: moving it here would move the whole series. To move one instance give instance_start, its start as list_calendar_events shows it.",
            old.title
        )));
    }
    let times = if times_change {
        let times = Times::new(args.start, args.end, args.duration_minutes)?;
        let previous = (ms(old.start_instant(tz)), ms(old.end_instant(tz)));
        let (start, end) = times.resolve(ctx, all_day, Some(previous))?;
        Some((start, end, all_day))
    } else {
        None
    };
    let fields = fields(
        ctx,
        args.title.map(|t| t.0),
        times,
        args.location.map(|l| text(Some(l)).unwrap_or_default()),
        args.description.map(|d| text(Some(d)).unwrap_or_default()),
    );
    if fields.title.is_none()
        && fields.times.is_none()
        && fields.location.is_none()
        && fields.description.is_none()
    {
        return Err(ToolError::InvalidArguments(
            "nothing to change: give at least one of title, start, end, duration_minutes, location, description, all_day".into(),
        ));
    }
    calendar::update(&ctx.store, config, uid, instance, &fields, tz, now)
        .await
        .map_err(failed)?;
    Ok(json!({
        "calendar": config.name,
        "updated": uid,
        "instance": instance.map(|at| calendar::describe(at, tz)),
        "was": strip_invisible(&old.title),
        "changed": summary(ctx, &fields),
    }))
}

/// `delete_calendar_event` on an outside calendar.
pub(super) async fn delete(
    ctx: &ToolContext,
    name: &str,
    uid: Option<String>,
) -> Result<Value, ToolError> {
    let config = calendar::find(&ctx.config.calendars, name).map_err(failed)?;
    let uid = required_uid(uid.as_deref())?;
    let (tz, now) = (ctx.timezone, ctx.clock.now_ms());
    let old = calendar::event(&ctx.store, config, uid, None, tz, now)
        .await
        .map_err(failed)?;
    calendar::delete(&ctx.store, config, uid, tz, now)
        .await
        .map_err(failed)?;
    Ok(json!({
        "calendar": config.name,
        "deleted": uid,
        "title": strip_invisible(&old.title),
        "series": old.recurring,
    }))
}

fn required_uid(uid: Option<&str>) -> Result<&str, ToolError> {
    uid.map(str::trim).filter(|u| !u.is_empty()).ok_or_else(|| {
        ToolError::InvalidArguments(
            "give `uid` (from list_calendar_events) with `calendar` to change an outside event"
                .into(),
        )
    })
}

/// The written fields as the owner reads them.
fn summary(ctx: &ToolContext, fields: &EventFields) -> Value {
    let tz = ctx.timezone;
    let mut out = json!({});
    if let Some(title) = &fields.title {
        out["title"] = json!(title);
    }
    if let Some((start, end)) = fields.times {
        out["start"] = json!(calendar::describe(start, tz));
        out["end"] = json!(match end {
            When::Date(after) => (after - Duration::days(1)).to_string(),
            at => calendar::describe(at, tz),
        });
    }
    if let Some(location) = &fields.location {
        out["location"] = json!(location);
    }
    if let Some(description) = &fields.description {
        out["description"] = json!(description);
    }
    out
}

#[cfg(test)]
mod tests;
