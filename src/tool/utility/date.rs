//! Date tools: the current time, the span between two dates, and a date plus an amount — all in
//! the user's timezone unless the call names another.

use chrono::{DateTime, Datelike, Duration, Months, Utc};
use chrono_tz::Tz;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::GROUP;
use crate::time::resolve_local;
use crate::tool::time::parse_datetime;
use crate::tool::{ToolContext, ToolError, TypedTool};

const TIMEZONE_PARAM: &str = "IANA timezone such as Europe/Berlin; default: the user's";

/// Get the current date, time and weekday, in the user's timezone or a given IANA timezone.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GetCurrentDatetime {
    #[schemars(description = TIMEZONE_PARAM)]
    timezone: Option<String>,
}

impl TypedTool for GetCurrentDatetime {
    const NAME: &'static str = "get_current_datetime";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "time, date, today, now, clock, weekday";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let tz = timezone(ctx, self.timezone)?;
        let now = ctx.clock.now().with_timezone(&tz);
        Ok(json!({
            "datetime": now.to_rfc3339(),
            "date": now.format("%Y-%m-%d").to_string(),
            "time": now.format("%H:%M:%S").to_string(),
            "weekday": now.format("%A").to_string(),
            "timezone": tz.name(),
        }))
    }
}

/// The time between two dates or date-times: total days, hours and minutes, a calendar
/// breakdown (years, months, days) and a human sentence. Negative when `end` is before `start`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DateDifference {
    /// YYYY-MM-DD, YYYY-MM-DD HH:MM, RFC 3339, now, today, tomorrow …
    start: String,
    /// same forms as start; default: now
    end: Option<String>,
    #[schemars(description = TIMEZONE_PARAM)]
    timezone: Option<String>,
}

impl TypedTool for DateDifference {
    const NAME: &'static str = "date_difference";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "days, between, until, since, age, countdown, duration";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let tz = timezone(ctx, self.timezone)?;
        let now = ctx.clock.now();
        let start = read_time(&self.start, tz, now)?;
        let end = read_time(self.end.as_deref().unwrap_or("now"), tz, now)?;
        let span = end - start;
        let (earlier, later) = if span < Duration::zero() {
            (end, start)
        } else {
            (start, end)
        };
        let parts = calendar_parts(earlier.with_timezone(&tz), later.with_timezone(&tz));
        let sign = if span < Duration::zero() { -1 } else { 1 };
        let human = human_span(&parts);
        let direction = match sign {
            _ if span.is_zero() => "the same moment".to_string(),
            1 => format!("end is {human} after start"),
            _ => format!("end is {human} before start"),
        };
        Ok(json!({
            "start": start.with_timezone(&tz).to_rfc3339(),
            "end": end.with_timezone(&tz).to_rfc3339(),
            "days": span.num_days(),
            "total_days": round2(span.num_seconds() as f64 / 86_400.0),
            "total_hours": round2(span.num_seconds() as f64 / 3_600.0),
            "total_minutes": span.num_minutes(),
            "weeks": span.num_weeks(),
            "calendar": {
                "years": sign * parts.years,
                "months": sign * parts.months,
                "days": sign * parts.days,
                "hours": sign * parts.hours,
                "minutes": sign * parts.minutes,
            },
            "human": direction,
            "timezone": tz.name(),
        }))
    }
}

#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Unit {
    Minutes,
    Hours,
    Days,
    Weeks,
    Months,
    Years,
}

/// Add (or with a negative amount subtract) minutes, hours, days, weeks, months or years to a
/// date in the user's timezone. Days and longer keep the wall-clock time across daylight-saving
/// changes; months clamp to the month's end (Jan 31 + 1 month = Feb 28/29).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DateAdd {
    /// start: YYYY-MM-DD, YYYY-MM-DD HH:MM, RFC 3339, now, today …; default: now
    date: Option<String>,
    /// how many units; negative to go back
    amount: i64,
    unit: Unit,
    #[schemars(description = TIMEZONE_PARAM)]
    timezone: Option<String>,
}

impl TypedTool for DateAdd {
    const NAME: &'static str = "date_add";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "plus, minus, later, deadline, due, future, past";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let tz = timezone(ctx, self.timezone)?;
        let date = self.date.as_deref().unwrap_or("now");
        let start = read_time(date, tz, ctx.clock.now())?;
        let (amount, unit) = (self.amount, self.unit);
        let out_of_range = || {
            let unit = format!("{unit:?}").to_lowercase();
            ToolError::InvalidArguments(format!("{amount} {unit} is out of range"))
        };
        let local = start.with_timezone(&tz).naive_local();
        let result = match unit {
            Unit::Minutes | Unit::Hours => {
                let per = if matches!(unit, Unit::Hours) { 60 } else { 1 };
                let minutes = amount.checked_mul(per).ok_or_else(out_of_range)?;
                let span = Duration::try_minutes(minutes).ok_or_else(out_of_range)?;
                start.checked_add_signed(span).ok_or_else(out_of_range)?
            }
            Unit::Days | Unit::Weeks => {
                let per = if matches!(unit, Unit::Weeks) { 7 } else { 1 };
                let days = amount.checked_mul(per).ok_or_else(out_of_range)?;
                let span = Duration::try_days(days).ok_or_else(out_of_range)?;
                let moved = local.checked_add_signed(span).ok_or_else(out_of_range)?;
                resolve_local(moved, tz).ok_or_else(out_of_range)?
            }
            Unit::Months | Unit::Years => {
                let per = if matches!(unit, Unit::Years) { 12 } else { 1 };
                let months = amount.checked_mul(per).ok_or_else(out_of_range)?;
                let count =
                    Months::new(u32::try_from(months.unsigned_abs()).map_err(|_| out_of_range())?);
                let moved = if months >= 0 {
                    local.checked_add_months(count)
                } else {
                    local.checked_sub_months(count)
                }
                .ok_or_else(out_of_range)?;
                resolve_local(moved, tz).ok_or_else(out_of_range)?
            }
        };
        let shown = result.with_timezone(&tz);
        Ok(json!({
            "start": start.with_timezone(&tz).to_rfc3339(),
            "result": shown.to_rfc3339(),
            "date": shown.format("%Y-%m-%d").to_string(),
            "time": shown.format("%H:%M").to_string(),
            "weekday": shown.format("%A").to_string(),
            "timezone": tz.name(),
        }))
    }
}

/// The `timezone` argument, or the user's when it is missing or blank.
fn timezone(ctx: &ToolContext, name: Option<String>) -> Result<Tz, ToolError> {
    match name.as_deref().map(str::trim) {
        Some(name) if !name.is_empty() => name.parse::<Tz>().map_err(|_| {
            ToolError::InvalidArguments(format!(
                "unknown timezone {name:?}; use an IANA name like Europe/Berlin"
            ))
        }),
        _ => Ok(ctx.timezone),
    }
}

fn read_time(text: &str, tz: Tz, now: DateTime<Utc>) -> Result<DateTime<Utc>, ToolError> {
    parse_datetime(text, tz, now).map_err(ToolError::InvalidArguments)
}

#[derive(Debug, Default, PartialEq)]
struct Parts {
    years: i64,
    months: i64,
    days: i64,
    hours: i64,
    minutes: i64,
}

/// Whole years, months and days from `from` to `to` (`from <= to`) on the local calendar, then
/// the hours and minutes left over.
fn calendar_parts(from: DateTime<Tz>, to: DateTime<Tz>) -> Parts {
    let (a, b) = (from.naive_local(), to.naive_local());
    let mut months =
        i64::from(b.year() - a.year()) * 12 + i64::from(b.month()) - i64::from(a.month());
    let add = |n: i64| {
        u32::try_from(n)
            .ok()
            .and_then(|n| a.checked_add_months(Months::new(n)))
    };
    while months > 0 && add(months).is_none_or(|t| t > b) {
        months -= 1;
    }
    let anchor = add(months.max(0)).unwrap_or(a);
    let rest = b - anchor;
    let days = rest.num_days();
    let rest = rest - Duration::days(days);
    Parts {
        years: months.max(0) / 12,
        months: months.max(0) % 12,
        days,
        hours: rest.num_hours(),
        minutes: (rest - Duration::hours(rest.num_hours())).num_minutes(),
    }
}

fn human_span(parts: &Parts) -> String {
    let pieces: Vec<String> = [
        (parts.years, "year"),
        (parts.months, "month"),
        (parts.days, "day"),
        (parts.hours, "hour"),
        (parts.minutes, "minute"),
    ]
    .iter()
    .filter(|(n, _)| *n != 0)
    .map(|(n, unit)| format!("{n} {unit}{}", if *n == 1 { "" } else { "s" }))
    .collect();
    match pieces.as_slice() {
        [] => "less than a minute".into(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// A context at 2026-03-28 22:30 UTC (23:30 in Berlin, the night before summer time).
    async fn berlin() -> (ToolContext, tempfile::TempDir) {
        let (mut ctx, dir) = crate::tool::test_context().await;
        let now = Utc
            .with_ymd_and_hms(2026, 3, 28, 22, 30, 0)
            .single()
            .expect("valid");
        ctx.clock = crate::clock::ManualClock::new(now);
        ctx.timezone = "Europe/Berlin".parse().expect("tz");
        (ctx, dir)
    }

    async fn call(ctx: &ToolContext, name: &str, arguments: Value) -> Result<Value, ToolError> {
        super::super::call_in(ctx, name, arguments).await
    }

    #[tokio::test]
    async fn current_datetime_is_in_the_users_timezone_or_a_named_one() {
        let (ctx, _dir) = berlin().await;
        let out = call(&ctx, "get_current_datetime", json!({}))
            .await
            .expect("ok");
        assert_eq!(out["date"], "2026-03-28");
        assert_eq!(out["time"], "23:30:00");
        assert_eq!(out["weekday"], "Saturday");
        assert_eq!(out["timezone"], "Europe/Berlin");
        let out = call(
            &ctx,
            "get_current_datetime",
            json!({"timezone": "Asia/Tokyo"}),
        )
        .await
        .expect("ok");
        assert_eq!(out["date"], "2026-03-29");
        assert_eq!(out["time"], "07:30:00");
        let err = call(
            &ctx,
            "get_current_datetime",
            json!({"timezone": "Mars/Olympus"}),
        )
        .await
        .expect_err("bad tz");
        assert!(err.to_string().contains("unknown timezone"));
    }

    #[tokio::test]
    async fn differences_count_days_hours_and_calendar_parts() {
        let (ctx, _dir) = berlin().await;
        let out = call(
            &ctx,
            "date_difference",
            json!({"start": "2026-01-31", "end": "2026-03-02 06:15"}),
        )
        .await
        .expect("ok");
        assert_eq!(out["days"], 30);
        assert_eq!(out["calendar"]["months"], 1);
        assert_eq!(
            out["calendar"]["days"], 2,
            "Jan 31 + 1 month = Feb 28, then 2 days"
        );
        assert_eq!(out["calendar"]["hours"], 6);
        assert_eq!(out["calendar"]["minutes"], 15);
        assert_eq!(
            out["human"],
            "end is 1 month, 2 days, 6 hours and 15 minutes after start"
        );

        // Across the spring change: local midnight to midnight is one day of 23 hours.
        let out = call(
            &ctx,
            "date_difference",
            json!({"start": "2026-03-29", "end": "2026-03-30"}),
        )
        .await
        .expect("ok");
        assert_eq!(out["total_hours"], 23.0);
        assert_eq!(out["calendar"]["days"], 1);

        let out = call(
            &ctx,
            "date_difference",
            json!({"start": "2026-12-28 23:30"}),
        )
        .await
        .expect("ok");
        assert_eq!(out["days"], -275);
        assert_eq!(out["calendar"]["months"], -9);
        assert_eq!(out["human"], "end is 9 months before start");

        let err = call(
            &ctx,
            "date_difference",
            json!({"start": "the day after never"}),
        )
        .await
        .expect_err("bad");
        assert!(matches!(err, ToolError::InvalidArguments(m) if m.contains("cannot read")));
        assert!(call(&ctx, "date_difference", json!({})).await.is_err());
    }

    #[tokio::test]
    async fn adding_keeps_wall_time_for_days_and_clamps_months() {
        let (ctx, _dir) = berlin().await;
        // Sat 23:30 + 1 day crosses the change to summer time and stays at 23:30 local.
        let out = call(&ctx, "date_add", json!({"amount": 1, "unit": "days"}))
            .await
            .expect("ok");
        assert_eq!(out["result"], "2026-03-29T23:30:00+02:00");
        assert_eq!(out["weekday"], "Sunday");
        // Whereas 24 hours is 24 real hours.
        let out = call(&ctx, "date_add", json!({"amount": 24, "unit": "hours"}))
            .await
            .expect("ok");
        assert_eq!(out["result"], "2026-03-30T00:30:00+02:00");
        let out = call(
            &ctx,
            "date_add",
            json!({"date": "2026-01-31", "amount": 1, "unit": "months"}),
        )
        .await
        .expect("ok");
        assert_eq!(out["date"], "2026-02-28");
        let out = call(
            &ctx,
            "date_add",
            json!({"date": "2026-03-10 09:00", "amount": -2, "unit": "weeks"}),
        )
        .await
        .expect("ok");
        assert_eq!(out["result"], "2026-02-24T09:00:00+01:00");
        let out = call(
            &ctx,
            "date_add",
            json!({"date": "2024-02-29", "amount": 1, "unit": "years", "timezone": "UTC"}),
        )
        .await
        .expect("ok");
        assert_eq!(out["date"], "2025-02-28");
        let out = call(&ctx, "date_add", json!({"amount": -90, "unit": "minutes"}))
            .await
            .expect("ok");
        assert_eq!(out["time"], "22:00");

        let err = call(&ctx, "date_add", json!({"amount": 1, "unit": "fortnights"}))
            .await
            .expect_err("unit");
        assert!(
            err.to_string()
                .contains("`unit`: unknown variant `fortnights`"),
            "{err}"
        );
        let err = call(
            &ctx,
            "date_add",
            json!({"amount": i64::MAX, "unit": "years"}),
        )
        .await
        .expect_err("range");
        assert!(err.to_string().contains("out of range"));
        let err = call(&ctx, "date_add", json!({"unit": "days"}))
            .await
            .expect_err("amount");
        assert!(err.to_string().contains("missing field `amount`"), "{err}");
    }

    #[test]
    fn human_spans_read_naturally() {
        assert_eq!(human_span(&Parts::default()), "less than a minute");
        let parts = Parts {
            days: 1,
            ..Parts::default()
        };
        assert_eq!(human_span(&parts), "1 day");
    }
}
