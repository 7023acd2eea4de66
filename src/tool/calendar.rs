//! The `calendar` tools: the user's events, listed by ranges such as "today" and "this week"
//! that are read in the user's timezone. Each tool is its argument type ([`TypedTool`]); the
//! SQL is in `store::calendar`.

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::common::{bad_date, deleted, not_found, user_id};
use super::time::{day_range, format_local, parse_date, parse_datetime, week_range};
use super::typed::{Count, Limit, NonEmpty, text};
use super::{Risk, Tool, ToolContext, ToolError, TypedTool, typed};
use crate::store::calendar::{EventPatch, EventRow, NewEvent};

mod outside;

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        typed::<AddCalendarEvent>(),
        typed::<ListCalendarEvents>(),
        typed::<UpdateCalendarEvent>(),
        typed::<DeleteCalendarEvent>(),
    ]
}

const DEFAULT_MINUTES: i64 = 60;
/// A year; longer durations are almost certainly a unit mistake.
const MAX_MINUTES: i64 = 366 * 24 * 60;
const GROUP: &str = "calendar";
const LIST_LIMIT: Limit = Limit::new(20, 100);

/// Put an event in the user's calendar. Times are in the user's timezone. Returns its id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddCalendarEvent {
    /// What the event is
    title: NonEmpty,
    /// Start in the user's timezone: YYYY-MM-DD HH:MM, RFC 3339, 'tomorrow', or YYYY-MM-DD for
    /// all-day events
    start: NonEmpty,
    /// End (same formats); for all-day events the last day. Give end or duration_minutes;
    /// default 60 minutes
    end: Option<String>,
    /// Length in minutes, instead of end
    #[schemars(range(min = 0, max = MAX_MINUTES))]
    duration_minutes: Option<i64>,
    location: Option<String>,
    description: Option<String>,
    /// A whole-day event (default false)
    all_day: Option<bool>,
    /// A writable calendar of the owner's (by name, as list_calendar_events shows it); the
    /// owner is asked first. Default: hearth's own calendar
    calendar: Option<String>,
}

impl TypedTool for AddCalendarEvent {
    const NAME: &'static str = "add_calendar_event";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    // A write to the owner's outside calendar (an outward call) asks whatever the autonomy.
    const ALWAYS_CONFIRM: bool = true;
    const TAGS: &'static str = "appointment, meeting, schedule, agenda, create, date";
    type Output = Value;

    fn risk(&self) -> Risk {
        outside::risk(self.calendar.as_deref(), Self::RISK)
    }

    fn prompt(&self, ctx: &ToolContext, arguments: String) -> impl Future<Output = String> + Send {
        outside::prompt(ctx, self.calendar.as_deref(), (None, None), arguments)
    }

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let all_day = self.all_day.unwrap_or(false);
        let times = Times::new(Some(self.start.0), self.end, self.duration_minutes)?;
        let (start_at, end_at) = times.resolve(ctx, all_day, None)?;
        if let Some(name) = outside::named(self.calendar.as_deref()) {
            let fields = outside::fields(
                ctx,
                Some(self.title.0),
                Some((start_at, end_at, all_day)),
                self.location,
                self.description,
            );
            return outside::add(ctx, name, fields).await;
        }
        let user = user_id(ctx)?;
        let event = NewEvent {
            title: self.title.0,
            start_at,
            end_at,
            all_day,
            location: text(self.location),
            description: text(self.description),
        };
        let id = ctx
            .store
            .insert_event(user, &event, ctx.clock.now_ms())
            .await?;
        let event = EventView::new(ctx, fetch(ctx, user, id).await?);
        Ok(json!({"id": id, "event": event}))
    }
}

// Plain comment: a doc comment would replace the field's description.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Range {
    Today,
    Tomorrow,
    ThisWeek,
    #[serde(rename = "next_7_days")]
    Next7Days,
}

/// List the user's events overlapping a range in their timezone: a named range, or start/end.
/// Default: next_7_days.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListCalendarEvents {
    /// today, tomorrow, this_week (Monday to Sunday), next_7_days (from now to the end of the
    /// 7th day)
    range: Option<Range>,
    /// Instead of range: from this date/time (YYYY-MM-DD, YYYY-MM-DD HH:MM …); default now
    start: Option<String>,
    /// Instead of range: until this date/time; a bare date includes that day; default start + 7
    /// days
    end: Option<String>,
    /// Default 20, at most 100
    limit: Option<Count>,
    /// Only this calendar (its name, or "hearth" for hearth's own); default all of them
    calendar: Option<String>,
}

impl ListCalendarEvents {
    /// The instants `[from, to)` a listing covers.
    fn range(&self, ctx: &ToolContext) -> Result<(DateTime<Utc>, DateTime<Utc>), ToolError> {
        let tz = ctx.timezone;
        let now = ctx.clock.now();
        let today = now.with_timezone(&tz).date_naive();
        let start_text = text(self.start.clone());
        let end_text = text(self.end.clone());
        let internal = |msg: String| ToolError::Failed(msg);
        if let Some(range) = self.range {
            if start_text.is_some() || end_text.is_some() {
                return Err(ToolError::InvalidArguments(
                    "give either `range` or `start`/`end`, not both".into(),
                ));
            }
            return match range {
                Range::Today => day_range(today, tz).map_err(internal),
                Range::Tomorrow => day_range(today + Duration::days(1), tz).map_err(internal),
                Range::ThisWeek => week_range(now, tz).map_err(internal),
                Range::Next7Days => {
                    let (_, end) = day_range(today + Duration::days(7), tz).map_err(internal)?;
                    Ok((now, end))
                }
            };
        }
        let from = match &start_text {
            Some(text) => parse_datetime(text, tz, now).map_err(bad_date("start"))?,
            None if end_text.is_none() => {
                let (_, end) = day_range(today + Duration::days(7), tz).map_err(internal)?;
                return Ok((now, end));
            }
            None => now,
        };
        let to = match &end_text {
            // A bare date as the end means "through that day".
            Some(text) if NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok() => {
                let date = parse_date(text, tz, now).map_err(bad_date("end"))?;
                day_range(date, tz).map_err(bad_date("end"))?.1
            }
            Some(text) => parse_datetime(text, tz, now).map_err(bad_date("end"))?,
            None => from + Duration::days(7),
        };
        if to < from {
            return Err(ToolError::InvalidArguments(format!(
                "`end` ({}) is before `start` ({})",
                format_local(ms(to), tz),
                format_local(ms(from), tz)
            )));
        }
        Ok((from, to))
    }
}

impl TypedTool for ListCalendarEvents {
    const NAME: &'static str = "list_calendar_events";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "appointment, meeting, agenda, schedule, today, week, busy, free";
    const LIMIT: Option<Limit> = Some(LIST_LIMIT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user = user_id(ctx)?;
        let (from, to) = self.range(ctx)?;
        let limit = LIST_LIMIT.of(self.limit);
        let only = self
            .calendar
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty());
        let own = only.is_none_or(|c| outside::named(Some(c)).is_none());
        // Each event with the instant it starts, so all calendars merge in one order.
        let mut events: Vec<(i64, Value)> = Vec::new();
        let mut more = false;
        if own {
            let listed = ctx
                .store
                .events_overlapping(user, (ms(from), ms(to)), limit)
                .await?;
            more = listed.more;
            for row in listed.rows {
                let start = row.start_at;
                events.push((start, json!(EventView::new(ctx, row))));
            }
        }
        let mut notes = Vec::new();
        if only.is_none() || !own {
            let (found, noted) = outside::list(ctx, only, (from, to)).await?;
            events.extend(found);
            notes = noted;
        }
        events.sort_by_key(|(start, _)| *start);
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        if events.len() > limit {
            events.truncate(limit);
            more = true;
        }
        let events: Vec<Value> = events.into_iter().map(|(_, event)| event).collect();
        let mut result = json!({
            "from": format_local(ms(from), ctx.timezone),
            "to": format_local(ms(to), ctx.timezone),
            "timezone": ctx.timezone.name(),
            "count": events.len(),
            "more": more,
            "events": events,
        });
        if !notes.is_empty() {
            result["notes"] = json!(notes);
        }
        Ok(result)
    }
}

/// Change an event: title, start, end or duration_minutes, location, description (empty string
/// removes), all_day.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdateCalendarEvent {
    /// The id of an event in hearth's own calendar
    event_id: Option<i64>,
    /// The calendar of an outside event (with uid); the owner is asked first
    calendar: Option<String>,
    /// The uid of an outside event, as list_calendar_events shows it (with calendar)
    uid: Option<String>,
    /// For a recurring outside event: the start of the one instance to change, as
    /// list_calendar_events shows it; without it a change applies to the whole series
    instance_start: Option<String>,
    /// What the event is
    title: Option<NonEmpty>,
    /// New start; without end or duration_minutes the event keeps its length
    start: Option<String>,
    /// End (same formats); for all-day events the last day. Give end or duration_minutes;
    /// default 60 minutes
    end: Option<String>,
    /// Length in minutes, instead of end
    #[schemars(range(min = 0, max = MAX_MINUTES))]
    duration_minutes: Option<i64>,
    location: Option<String>,
    description: Option<String>,
    /// A whole-day event (default false)
    all_day: Option<bool>,
}

impl TypedTool for UpdateCalendarEvent {
    const NAME: &'static str = "update_calendar_event";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    // A write to the owner's outside calendar (an outward call) asks whatever the autonomy.
    const ALWAYS_CONFIRM: bool = true;
    const TAGS: &'static str = "appointment, meeting, move, reschedule, edit";
    type Output = Value;

    fn risk(&self) -> Risk {
        outside::risk(self.calendar.as_deref(), Self::RISK)
    }

    fn prompt(&self, ctx: &ToolContext, arguments: String) -> impl Future<Output = String> + Send {
        outside::prompt(
            ctx,
            self.calendar.as_deref(),
            (self.uid.as_deref(), self.instance_start.as_deref()),
            arguments,
        )
    }

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        if let Some(name) = outside::named(self.calendar.as_deref()).map(str::to_string) {
            return outside::update(ctx, &name, self).await;
        }
        if self.instance_start.is_some() {
            return Err(ToolError::InvalidArguments(
                "instance_start is for a recurring event of an outside calendar (with calendar and uid)".into(),
            ));
        }
        let (user, id) = (user_id(ctx)?, own_id(self.event_id)?);
        let old = fetch(ctx, user, id).await?;
        let old_all_day = old.all_day != 0;
        let all_day = self.all_day.unwrap_or(old_all_day);
        let times_change = self.start.is_some()
            || self.end.is_some()
            || self.duration_minutes.is_some()
            || all_day != old_all_day;
        let times = if times_change {
            let times = Times::new(self.start, self.end, self.duration_minutes)?;
            let (start, end) = times.resolve(ctx, all_day, Some((old.start_at, old.end_at)))?;
            Some((start, end, all_day))
        } else {
            None
        };
        let patch = EventPatch {
            title: self.title.map(|title| title.0),
            times,
            location: self.location.map(|location| text(Some(location))),
            description: self.description.map(|description| text(Some(description))),
        };
        if patch.is_empty() {
            return Err(ToolError::InvalidArguments(
                "nothing to change: give at least one of title, start, end, duration_minutes, location, description, all_day".into(),
            ));
        }
        let now = ctx.clock.now_ms();
        if !ctx.store.update_event(user, id, patch, now).await? {
            return Err(not_found("event", id));
        }
        let event = EventView::new(ctx, fetch(ctx, user, id).await?);
        Ok(json!({"updated": id, "event": event}))
    }
}

/// Delete an event from the user's calendar.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteCalendarEvent {
    /// The id of an event in hearth's own calendar
    event_id: Option<i64>,
    /// The calendar of an outside event (with uid); the owner is asked first
    calendar: Option<String>,
    /// The uid of an outside event, as list_calendar_events shows it; a recurring event is
    /// deleted with its whole series
    uid: Option<String>,
}

impl TypedTool for DeleteCalendarEvent {
    const NAME: &'static str = "delete_calendar_event";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Destructive;
    // A write to the owner's outside calendar (an outward call) asks whatever the autonomy.
    const ALWAYS_CONFIRM: bool = true;
    const TAGS: &'static str = "appointment, meeting, cancel, remove";
    type Output = Value;

    fn risk(&self) -> Risk {
        outside::risk(self.calendar.as_deref(), Self::RISK)
    }

    fn prompt(&self, ctx: &ToolContext, arguments: String) -> impl Future<Output = String> + Send {
        outside::prompt(
            ctx,
            self.calendar.as_deref(),
            (self.uid.as_deref(), None),
            arguments,
        )
    }

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        if let Some(name) = outside::named(self.calendar.as_deref()) {
            return outside::delete(ctx, name, self.uid).await;
        }
        let (user, id) = (user_id(ctx)?, own_id(self.event_id)?);
        let title = ctx.store.delete_event(user, id).await?;
        deleted("event", id, "title", title)
    }
}

/// An event as the model sees it: local times, or the first and last day of an all-day event.
#[derive(Debug, Serialize)]
struct EventView {
    /// Always hearth's own: outside events are `outside::OutsideView`s.
    calendar: &'static str,
    id: i64,
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
    location: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
}

impl EventView {
    fn new(ctx: &ToolContext, row: EventRow) -> Self {
        let tz = ctx.timezone;
        let (start, end) = (row.start_at, row.end_at);
        let all_day = row.all_day != 0;
        let mut view = Self {
            calendar: crate::config::OWN_CALENDAR,
            id: row.id,
            title: row.title,
            all_day,
            start: format_local(start, tz),
            end: None,
            start_iso: None,
            last_day: None,
            location: row.location,
            description: row.description,
        };
        if all_day {
            view.start = local_date(start, tz).to_string();
            view.last_day = Some(local_date((end - 1).max(start), tz).to_string());
        } else {
            view.end = Some(format_local(end, tz));
            view.start_iso = Some(instant(start).with_timezone(&tz).to_rfc3339());
        }
        view
    }
}

async fn fetch(ctx: &ToolContext, user: i64, id: i64) -> Result<EventRow, ToolError> {
    ctx.store
        .event(user, id)
        .await?
        .ok_or_else(|| not_found("event", id))
}

/// When an event is, as the model gave it: start, and end or a length.
struct Times {
    start: Option<String>,
    end: Option<String>,
    duration: Option<Duration>,
}

impl Times {
    fn new(
        start: Option<String>,
        end: Option<String>,
        minutes: Option<i64>,
    ) -> Result<Self, ToolError> {
        let duration = match minutes {
            None => None,
            Some(m) if (0..=MAX_MINUTES).contains(&m) => Some(Duration::minutes(m)),
            Some(_) => {
                return Err(ToolError::InvalidArguments(format!(
                    "`duration_minutes` must be a whole number of minutes from 0 to {MAX_MINUTES}"
                )));
            }
        };
        let (start, end) = (text(start), text(end));
        if end.is_some() && duration.is_some() {
            return Err(ToolError::InvalidArguments(
                "give either `end` or `duration_minutes`, not both".into(),
            ));
        }
        Ok(Self {
            start,
            end,
            duration,
        })
    }

    /// The start and end of the event. `previous` is the stored (start, end) when updating: a
    /// moved start keeps the length. All-day events span local midnights, `end` naming their
    /// last day.
    fn resolve(
        &self,
        ctx: &ToolContext,
        all_day: bool,
        previous: Option<(i64, i64)>,
    ) -> Result<(i64, i64), ToolError> {
        let tz = ctx.timezone;
        let now = ctx.clock.now();
        let (start_text, end_text, duration) = (&self.start, &self.end, self.duration);
        if all_day {
            let start_date = match (start_text, previous) {
                (Some(text), _) => parse_date(text, tz, now).map_err(bad_date("start"))?,
                (None, Some((start, _))) => local_date(start, tz),
                (None, None) => return Err(missing_start()),
            };
            let last_day = match (end_text, duration, previous) {
                (Some(text), _, _) => parse_date(text, tz, now).map_err(bad_date("end"))?,
                (None, Some(d), _) => {
                    start_date + Duration::days((d.num_minutes() - 1).max(0) / 1440)
                }
                (None, None, Some((start, end))) if start_text.is_some() => {
                    // Moved: keep the number of days.
                    let days = (local_date(end, tz) - local_date(start, tz)).num_days() - 1;
                    start_date + Duration::days(days.max(0))
                }
                (None, None, Some((_, end))) => local_date(end - 1, tz).max(start_date),
                (None, None, None) => start_date,
            };
            if last_day < start_date {
                return Err(ToolError::InvalidArguments(format!(
                    "the event ends ({last_day}) before it starts ({start_date})"
                )));
            }
            let (start, _) = day_range(start_date, tz).map_err(bad_date("start"))?;
            let (_, end) = day_range(last_day, tz).map_err(bad_date("end"))?;
            return Ok((ms(start), ms(end)));
        }
        let start = match (start_text, previous) {
            (Some(text), _) => parse_datetime(text, tz, now).map_err(bad_date("start"))?,
            (None, Some((start, _))) => instant(start),
            (None, None) => return Err(missing_start()),
        };
        let end = match (end_text, duration, previous) {
            (Some(text), _, _) => parse_datetime(text, tz, now).map_err(bad_date("end"))?,
            (None, Some(d), _) => start + d,
            (None, None, Some((old_start, old_end))) => {
                start + Duration::milliseconds(old_end - old_start)
            }
            (None, None, None) => start + Duration::minutes(DEFAULT_MINUTES),
        };
        if end < start {
            return Err(ToolError::InvalidArguments(format!(
                "the event ends ({}) before it starts ({})",
                format_local(ms(end), tz),
                format_local(ms(start), tz)
            )));
        }
        Ok((ms(start), ms(end)))
    }
}

/// The id of an own event, which the write tools need when no outside calendar is named.
fn own_id(id: Option<i64>) -> Result<i64, ToolError> {
    id.ok_or_else(|| {
        ToolError::InvalidArguments(
            "give `event_id` for an event of hearth's own calendar, or `calendar` and `uid` for an outside one".into(),
        )
    })
}

fn missing_start() -> ToolError {
    ToolError::InvalidArguments("`start` is required and must be a date/time".into())
}

fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

fn instant(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

fn local_date(ms: i64, tz: Tz) -> NaiveDate {
    instant(ms).with_timezone(&tz).date_naive()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::tool::test_context;

    crate::tool::test_calls::family_calls!(tools, "calendar_events");

    fn titles(listed: &Value) -> Vec<String> {
        listed["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| e["title"].as_str().expect("title").to_string())
            .collect()
    }

    /// A Berlin user on Wednesday 2026-11-18 at 10:00 local time (09:00 UTC).
    async fn berlin() -> (ToolContext, tempfile::TempDir) {
        let (mut ctx, dir) = test_context().await;
        ctx.clock = ManualClock::new(
            Utc.with_ymd_and_hms(2026, 11, 18, 9, 0, 0)
                .single()
                .expect("time"),
        );
        ctx.timezone = "Europe/Berlin".parse().expect("tz");
        (ctx, dir)
    }

    #[tokio::test]
    async fn named_ranges_follow_the_users_midnight() {
        let (ctx, _dir) = berlin().await;
        for (title, start) in [
            ("late yesterday", "2026-11-17 23:30"),
            ("early today", "2026-11-18 00:15"),
            ("late today", "2026-11-18 23:30"),
            ("early tomorrow", "2026-11-19 00:15"),
            ("sunday", "2026-11-22 12:00"),
            ("next monday", "2026-11-23 09:00"),
        ] {
            ok(
                &ctx,
                "add_calendar_event",
                json!({"title": title, "start": start, "duration_minutes": 20}),
            )
            .await;
        }
        let today = ok(&ctx, "list_calendar_events", json!({"range": "today"})).await;
        assert_eq!(titles(&today), ["early today", "late today"]);
        assert_eq!(today["from"], "2026-11-18 00:00");
        assert_eq!(today["timezone"], "Europe/Berlin");
        let tomorrow = ok(&ctx, "list_calendar_events", json!({"range": "tomorrow"})).await;
        assert_eq!(titles(&tomorrow), ["early tomorrow"]);
        let week = ok(&ctx, "list_calendar_events", json!({"range": "this_week"})).await;
        assert_eq!(
            titles(&week),
            [
                "late yesterday",
                "early today",
                "late today",
                "early tomorrow",
                "sunday"
            ]
        );
        let next = ok(&ctx, "list_calendar_events", json!({})).await;
        assert_eq!(
            titles(&next),
            ["late today", "early tomorrow", "sunday", "next monday"],
            "default: from now"
        );
        let explicit = ok(
            &ctx,
            "list_calendar_events",
            json!({"start": "2026-11-19", "end": "2026-11-22"}),
        )
        .await;
        assert_eq!(
            titles(&explicit),
            ["early tomorrow", "sunday"],
            "a bare end date includes that day"
        );
        let limited = ok(
            &ctx,
            "list_calendar_events",
            json!({"range": "this_week", "limit": 2}),
        )
        .await;
        assert_eq!(
            (limited["count"].clone(), limited["more"].clone()),
            (json!(2), json!(true))
        );
        assert_eq!(today["events"][0]["start"], "2026-11-18 00:15");
        assert_eq!(today["events"][0]["end"], "2026-11-18 00:35");
        assert_eq!(today["events"][0]["start_iso"], "2026-11-18T00:15:00+01:00");
    }

    #[tokio::test]
    async fn overlapping_and_all_day_events_are_listed() {
        let (ctx, _dir) = berlin().await;
        ok(
            &ctx,
            "add_calendar_event",
            json!({"title": "overnight", "start": "2026-11-17 22:00", "end": "2026-11-18 02:00"}),
        )
        .await;
        let trip = ok(&ctx, "add_calendar_event", json!({"title": "trip", "start": "2026-11-18", "end": "2026-11-20", "all_day": true, "location": "Hamburg"})).await;
        assert_eq!(trip["event"]["start"], "2026-11-18");
        assert_eq!(trip["event"]["last_day"], "2026-11-20");
        assert_eq!(trip["event"]["location"], "Hamburg");
        ok(
            &ctx,
            "add_calendar_event",
            json!({"title": "holiday", "start": "tomorrow", "all_day": true}),
        )
        .await;
        let today = ok(&ctx, "list_calendar_events", json!({"range": "today"})).await;
        assert_eq!(titles(&today), ["overnight", "trip"]);
        let tomorrow = ok(&ctx, "list_calendar_events", json!({"range": "tomorrow"})).await;
        assert_eq!(titles(&tomorrow), ["trip", "holiday"]);
        let after = ok(&ctx, "list_calendar_events", json!({"start": "2026-11-21"})).await;
        assert_eq!(after["count"], 0);
    }

    #[tokio::test]
    async fn bad_times_are_refused_and_store_nothing() {
        let (ctx, _dir) = berlin().await;
        let message = err(
            &ctx,
            "add_calendar_event",
            json!({"title": "x", "start": "half past nine"}),
        )
        .await;
        assert!(
            message.contains("`start`") && message.contains("YYYY-MM-DD HH:MM"),
            "{message}"
        );
        let message = err(
            &ctx,
            "add_calendar_event",
            json!({"title": "x", "start": "2026-11-18 10:00", "end": "2026-11-18 09:00"}),
        )
        .await;
        assert!(message.contains("before it starts"), "{message}");
        let message = err(&ctx, "add_calendar_event", json!({"title": "x", "start": "2026-11-18 10:00", "end": "2026-11-18 11:00", "duration_minutes": 5})).await;
        assert!(message.contains("not both"), "{message}");
        let message = err(
            &ctx,
            "add_calendar_event",
            json!({"title": "x", "start": "2026-11-18", "end": "2026-11-17", "all_day": true}),
        )
        .await;
        assert!(message.contains("before it starts"), "{message}");
        assert!(
            err(
                &ctx,
                "add_calendar_event",
                json!({"title": "", "start": "today"})
            )
            .await
            .contains("`title`")
        );
        assert!(
            err(&ctx, "add_calendar_event", json!({"title": "x"}))
                .await
                .contains("`start`")
        );
        assert!(
            err(
                &ctx,
                "add_calendar_event",
                json!({"title": "x", "start": "today", "duration_minutes": -5})
            )
            .await
            .contains("duration_minutes")
        );
        assert_eq!(count(&ctx).await, 0);
        assert!(
            err(&ctx, "list_calendar_events", json!({"range": "yesteryear"}))
                .await
                .contains("`range`: unknown variant `yesteryear`")
        );
        assert!(
            err(
                &ctx,
                "list_calendar_events",
                json!({"range": "today", "start": "2026-11-18"})
            )
            .await
            .contains("not both")
        );
        assert!(
            err(
                &ctx,
                "list_calendar_events",
                json!({"start": "2026-11-18", "end": "2026-11-01"})
            )
            .await
            .contains("before")
        );
    }

    #[tokio::test]
    async fn update_moves_keeping_length_and_delete_is_per_user() {
        let (ctx, _dir) = berlin().await;
        let added = ok(
            &ctx,
            "add_calendar_event",
            json!({"title": "Dentist", "start": "2026-11-18 14:00", "duration_minutes": 45}),
        )
        .await;
        let id = added["id"].as_i64().expect("id");
        let moved = ok(
            &ctx,
            "update_calendar_event",
            json!({"event_id": id, "start": "2026-11-19 09:00", "location": "Praxis"}),
        )
        .await;
        assert_eq!(moved["event"]["start"], "2026-11-19 09:00");
        assert_eq!(moved["event"]["end"], "2026-11-19 09:45");
        assert_eq!(moved["event"]["location"], "Praxis");
        let longer = ok(
            &ctx,
            "update_calendar_event",
            json!({"event_id": id, "end": "2026-11-19 11:00", "location": ""}),
        )
        .await;
        assert_eq!(longer["event"]["end"], "2026-11-19 11:00");
        assert!(longer["event"].get("location").is_none());
        let message = err(
            &ctx,
            "update_calendar_event",
            json!({"event_id": id, "end": "2026-11-19 08:00"}),
        )
        .await;
        assert!(message.contains("before it starts"), "{message}");
        let whole = ok(
            &ctx,
            "update_calendar_event",
            json!({"event_id": id, "all_day": true}),
        )
        .await;
        assert_eq!(whole["event"]["start"], "2026-11-19");
        assert_eq!(whole["event"]["last_day"], "2026-11-19");
        assert!(
            err(&ctx, "update_calendar_event", json!({"event_id": id}))
                .await
                .contains("nothing to change")
        );
        assert_eq!(
            err(
                &ctx,
                "update_calendar_event",
                json!({"event_id": 9, "title": "x"})
            )
            .await,
            "event 9 not found"
        );

        let other = crate::tool::other_user(&ctx).await;
        assert_eq!(
            err(&other, "delete_calendar_event", json!({"event_id": id})).await,
            format!("event {id} not found")
        );
        assert_eq!(
            ok(
                &other,
                "list_calendar_events",
                json!({"range": "this_week"})
            )
            .await["count"],
            0
        );
        assert_eq!(
            ok(&ctx, "delete_calendar_event", json!({"event_id": id})).await["title"],
            "Dentist"
        );
        assert_eq!(count(&ctx).await, 0);
        assert_eq!(tools()[3].info().risk, Risk::Destructive);
    }
}
