//! The `calendar` tools: the user's events, listed by ranges such as "today" and "this week"
//! that are read in the user's timezone.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use serde_json::{Value, json};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::common::{
    Bind, Changes, Sql, bad_date, db, delete_owned, id_arg, not_found, opt_text, user_id, write_tx,
};
use super::time::{day_range, format_local, parse_date, parse_datetime, week_range};
use super::{Args, Risk, Tool, ToolContext, ToolError, ToolInfo, list_limit};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    [Op::Add, Op::List, Op::Update, Op::Delete]
        .into_iter()
        .map(|op| Arc::new(CalendarTool::new(op)) as Arc<dyn Tool>)
        .collect()
}

const DEFAULT_MINUTES: i64 = 60;
/// A year; longer durations are almost certainly a unit mistake.
const MAX_MINUTES: i64 = 366 * 24 * 60;
const RANGES: [&str; 4] = ["today", "tomorrow", "this_week", "next_7_days"];

#[derive(Clone, Copy, Debug)]
enum Op {
    Add,
    List,
    Update,
    Delete,
}

struct CalendarTool {
    info: ToolInfo,
    op: Op,
}

fn event_properties() -> serde_json::Map<String, Value> {
    let value = json!({
        "title": {"type": "string", "description": "What the event is"},
        "start": {"type": "string", "description": "Start in the user's timezone: YYYY-MM-DD HH:MM, RFC 3339, 'tomorrow', or YYYY-MM-DD for all-day events"},
        "end": {"type": "string", "description": "End (same formats); for all-day events the last day. Give end or duration_minutes; default 60 minutes"},
        "duration_minutes": {"type": "integer", "minimum": 0, "maximum": MAX_MINUTES, "description": "Length in minutes, instead of end"},
        "location": {"type": "string"},
        "description": {"type": "string"},
        "all_day": {"type": "boolean", "description": "A whole-day event (default false)"}
    });
    match value {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

fn event_id_schema() -> Value {
    json!({"type": "integer", "description": "The event's id"})
}

impl CalendarTool {
    fn new(op: Op) -> Self {
        let info = match op {
            Op::Add => ToolInfo::new(
                "add_calendar_event",
                "calendar",
                "Put an event in the user's calendar. Times are in the user's timezone. Returns its id.",
                json!({
                    "type": "object",
                    "properties": event_properties(),
                    "required": ["title", "start"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Write)
            .tags(&["appointment", "meeting", "schedule", "agenda", "create", "date"]),
            Op::List => ToolInfo::new(
                "list_calendar_events",
                "calendar",
                "List the user's events overlapping a range in their timezone: a named range, or start/end. Default: next_7_days.",
                json!({
                    "type": "object",
                    "properties": {
                        "range": {"type": "string", "enum": RANGES, "description": "today, tomorrow, this_week (Monday to Sunday), next_7_days (from now to the end of the 7th day)"},
                        "start": {"type": "string", "description": "Instead of range: from this date/time (YYYY-MM-DD, YYYY-MM-DD HH:MM …); default now"},
                        "end": {"type": "string", "description": "Instead of range: until this date/time; a bare date includes that day; default start + 7 days"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "Default 20, at most 100"}
                    },
                    "additionalProperties": false
                }),
            )
            .limit("limit", 20, 100)
            .tags(&["appointment", "meeting", "agenda", "schedule", "today", "week", "busy", "free"]),
            Op::Update => {
                let mut properties = event_properties();
                properties.insert("event_id".into(), event_id_schema());
                properties.insert(
                    "start".into(),
                    json!({"type": "string", "description": "New start; without end or duration_minutes the event keeps its length"}),
                );
                ToolInfo::new(
                    "update_calendar_event",
                    "calendar",
                    "Change an event: title, start, end or duration_minutes, location, description (empty string removes), all_day.",
                    json!({
                        "type": "object",
                        "properties": properties,
                        "required": ["event_id"],
                        "additionalProperties": false
                    }),
                )
                .risk(Risk::Write)
                .tags(&["appointment", "meeting", "move", "reschedule", "edit"])
            }
            Op::Delete => ToolInfo::new(
                "delete_calendar_event",
                "calendar",
                "Delete an event from the user's calendar.",
                json!({
                    "type": "object",
                    "properties": {"event_id": event_id_schema()},
                    "required": ["event_id"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Destructive)
            .tags(&["appointment", "meeting", "cancel", "remove"]),
        };
        Self { info, op }
    }
}

#[async_trait]
impl Tool for CalendarTool {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<String, ToolError> {
        let user = user_id(ctx)?;
        let result = match self.op {
            Op::Add => add(ctx, user, &arguments).await?,
            Op::List => list(ctx, user, &arguments, list_limit(&self.info, &arguments)).await?,
            Op::Update => update(ctx, user, &arguments).await?,
            Op::Delete => {
                let id = id_arg(&arguments, "event_id")?;
                let sql =
                    "DELETE FROM calendar_events WHERE id = $1 AND user_id = $2 RETURNING title";
                delete_owned(ctx, user, sql, id, "event", "title").await?
            }
        };
        Ok(result.to_string())
    }
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

fn duration_arg(arguments: &Value) -> Result<Option<Duration>, ToolError> {
    if arguments.get("duration_minutes").is_none() {
        return Ok(None);
    }
    match Args::new(arguments).opt_i64("duration_minutes") {
        Some(m) if (0..=MAX_MINUTES).contains(&m) => Ok(Some(Duration::minutes(m))),
        _ => Err(ToolError::InvalidArguments(format!(
            "`duration_minutes` must be a whole number of minutes from 0 to {MAX_MINUTES}"
        ))),
    }
}

/// The start and end of an event from its arguments. `previous` is the stored (start, end) when
/// updating: a moved start keeps the length. All-day events span local midnights, `end` naming
/// their last day.
fn resolve_times(
    ctx: &ToolContext,
    arguments: &Value,
    all_day: bool,
    previous: Option<(i64, i64)>,
) -> Result<(i64, i64), ToolError> {
    let tz = ctx.timezone;
    let now = ctx.clock.now();
    let end_text = opt_text(arguments, "end");
    let duration = duration_arg(arguments)?;
    if end_text.is_some() && duration.is_some() {
        return Err(ToolError::InvalidArguments(
            "give either `end` or `duration_minutes`, not both".into(),
        ));
    }
    let start_text = opt_text(arguments, "start");
    if all_day {
        let start_date = match (&start_text, previous) {
            (Some(text), _) => parse_date(text, tz, now).map_err(bad_date("start"))?,
            (None, Some((start, _))) => local_date(start, tz),
            (None, None) => return Err(missing_start()),
        };
        let last_day = match (&end_text, duration, previous) {
            (Some(text), _, _) => parse_date(text, tz, now).map_err(bad_date("end"))?,
            (None, Some(d), _) => start_date + Duration::days((d.num_minutes() - 1).max(0) / 1440),
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
    let start = match (&start_text, previous) {
        (Some(text), _) => parse_datetime(text, tz, now).map_err(bad_date("start"))?,
        (None, Some((start, _))) => instant(start),
        (None, None) => return Err(missing_start()),
    };
    let end = match (&end_text, duration, previous) {
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

fn missing_start() -> ToolError {
    ToolError::InvalidArguments("`start` is required and must be a date/time".into())
}

async fn add(ctx: &ToolContext, user: i64, arguments: &Value) -> Result<Value, ToolError> {
    let title = Args::new(arguments).str("title")?.trim().to_string();
    let all_day = Args::new(arguments).opt_bool("all_day").unwrap_or(false);
    let (start, end) = resolve_times(ctx, arguments, all_day, None)?;
    let now = ctx.clock.now_ms();
    let mut tx = write_tx(ctx).await?;
    let row = sqlx::query(
        "INSERT INTO calendar_events (user_id, title, start_at, end_at, all_day, location, description, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING id",
    )
    .bind(user)
    .bind(title)
    .bind(start)
    .bind(end)
    .bind(i64::from(all_day))
    .bind(opt_text(arguments, "location"))
    .bind(opt_text(arguments, "description"))
    .bind(now)
    .fetch_one(&mut *tx)
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    let id: i64 = row.try_get("id").map_err(db)?;
    Ok(json!({"id": id, "event": event_json(ctx, &fetch(ctx, user, id).await?)?}))
}

const EVENT_COLUMNS: &str = "id, title, start_at, end_at, all_day, location, description";

async fn fetch(ctx: &ToolContext, user: i64, id: i64) -> Result<AnyRow, ToolError> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {EVENT_COLUMNS} FROM calendar_events WHERE id = $1 AND user_id = $2"
    )))
    .bind(id)
    .bind(user)
    .fetch_optional(ctx.store.pool())
    .await
    .map_err(db)?
    .ok_or_else(|| not_found("event", id))
}

fn event_json(ctx: &ToolContext, row: &AnyRow) -> Result<Value, ToolError> {
    let tz = ctx.timezone;
    let start: i64 = row.try_get("start_at").map_err(db)?;
    let end: i64 = row.try_get("end_at").map_err(db)?;
    let all_day = row.try_get::<i64, _>("all_day").map_err(db)? != 0;
    let mut value = json!({
        "id": row.try_get::<i64, _>("id").map_err(db)?,
        "title": row.try_get::<String, _>("title").map_err(db)?,
        "all_day": all_day,
    });
    if all_day {
        value["start"] = json!(local_date(start, tz).to_string());
        value["last_day"] = json!(local_date((end - 1).max(start), tz).to_string());
    } else {
        value["start"] = json!(format_local(start, tz));
        value["end"] = json!(format_local(end, tz));
        value["start_iso"] = json!(instant(start).with_timezone(&tz).to_rfc3339());
    }
    for field in ["location", "description"] {
        if let Some(text) = row.try_get::<Option<String>, _>(field).map_err(db)? {
            value[field] = json!(text);
        }
    }
    Ok(value)
}

/// The instants `[from, to)` a listing covers.
fn list_range(
    ctx: &ToolContext,
    arguments: &Value,
) -> Result<(DateTime<Utc>, DateTime<Utc>), ToolError> {
    let tz = ctx.timezone;
    let now = ctx.clock.now();
    let today = now.with_timezone(&tz).date_naive();
    let start_text = opt_text(arguments, "start");
    let end_text = opt_text(arguments, "end");
    let range = opt_text(arguments, "range").map(|r| r.to_lowercase().replace([' ', '-'], "_"));
    let internal = |msg: String| ToolError::Failed(msg);
    if let Some(range) = range {
        if start_text.is_some() || end_text.is_some() {
            return Err(ToolError::InvalidArguments(
                "give either `range` or `start`/`end`, not both".into(),
            ));
        }
        return match range.as_str() {
            "today" => day_range(today, tz).map_err(internal),
            "tomorrow" => day_range(today + Duration::days(1), tz).map_err(internal),
            "this_week" => week_range(now, tz).map_err(internal),
            "next_7_days" => {
                let (_, end) = day_range(today + Duration::days(7), tz).map_err(internal)?;
                Ok((now, end))
            }
            other => Err(ToolError::InvalidArguments(format!(
                "`range` {other:?} is not one of today, tomorrow, this_week, next_7_days"
            ))),
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

async fn list(
    ctx: &ToolContext,
    user: i64,
    arguments: &Value,
    limit: i64,
) -> Result<Value, ToolError> {
    let (from, to) = list_range(ctx, arguments)?;
    let mut query = Sql::new(&format!(
        "SELECT {EVENT_COLUMNS} FROM calendar_events WHERE user_id = "
    ));
    query.bind(Bind::Int(user));
    // Overlapping [from, to): starts before its end and ends after its start; an event of no
    // length counts when it starts inside.
    query.push(" AND start_at < ");
    query.bind(Bind::Int(ms(to)));
    query.push(" AND (end_at > ");
    query.bind(Bind::Int(ms(from)));
    query.push(" OR start_at >= ");
    query.bind(Bind::Int(ms(from)));
    query.push(") ORDER BY start_at, id LIMIT ");
    query.bind(Bind::Int(limit + 1));
    let rows = query.fetch_all(ctx).await?;
    let more = rows.len() as i64 > limit;
    let events = rows
        .iter()
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .map(|row| event_json(ctx, row))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({
        "from": format_local(ms(from), ctx.timezone),
        "to": format_local(ms(to), ctx.timezone),
        "timezone": ctx.timezone.name(),
        "count": events.len(),
        "more": more,
        "events": events,
    }))
}

async fn update(ctx: &ToolContext, user: i64, arguments: &Value) -> Result<Value, ToolError> {
    let id = id_arg(arguments, "event_id")?;
    let row = fetch(ctx, user, id).await?;
    let old_start: i64 = row.try_get("start_at").map_err(db)?;
    let old_end: i64 = row.try_get("end_at").map_err(db)?;
    let old_all_day = row.try_get::<i64, _>("all_day").map_err(db)? != 0;
    let all_day = Args::new(arguments)
        .opt_bool("all_day")
        .unwrap_or(old_all_day);

    let mut changes = Changes::default();
    if arguments.get("title").is_some() {
        let title = Args::new(arguments).str("title")?.trim().to_string();
        changes.set("title", Bind::Text(title));
    }
    let times_change = ["start", "end", "duration_minutes"]
        .iter()
        .any(|k| arguments.get(*k).is_some())
        || all_day != old_all_day;
    if times_change {
        let (start, end) = resolve_times(ctx, arguments, all_day, Some((old_start, old_end)))?;
        changes.set("start_at", Bind::Int(start));
        changes.set("end_at", Bind::Int(end));
        changes.set("all_day", Bind::Int(i64::from(all_day)));
    }
    for field in ["location", "description"] {
        if arguments.get(field).is_some() {
            changes.set(field, Bind::OptText(opt_text(arguments, field)));
        }
    }
    if changes.is_empty() {
        return Err(ToolError::InvalidArguments(
            "nothing to change: give at least one of title, start, end, duration_minutes, location, description, all_day".into(),
        ));
    }
    changes.set("updated_at", Bind::Int(ctx.clock.now_ms()));
    if !changes.apply(ctx, "calendar_events", id, user).await? {
        return Err(not_found("event", id));
    }
    Ok(json!({"updated": id, "event": event_json(ctx, &fetch(ctx, user, id).await?)?}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::tool::test_context;

    async fn ok(ctx: &ToolContext, name: &str, args: Value) -> Value {
        crate::tool::test_calls::ok(tools(), ctx, name, args).await
    }

    async fn err(ctx: &ToolContext, name: &str, args: Value) -> String {
        crate::tool::test_calls::err(tools(), ctx, name, args).await
    }

    async fn count(ctx: &ToolContext) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM calendar_events")
            .fetch_one(ctx.store.pool())
            .await
            .expect("count")
    }

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
                .contains("today, tomorrow")
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

        let user = ctx
            .store
            .allow_identity("test", "u2", None, "config", false, 0)
            .await
            .expect("user");
        let mut other = ctx.clone();
        other.user_id = Some(user.user_id);
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
