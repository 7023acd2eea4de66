//! Dates and times as people write them, read in the user's timezone.

use chrono::{
    DateTime, Datelike, Duration, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc,
};
use chrono_tz::Tz;

use crate::time::resolve_local;

/// Reads a point in time: RFC 3339 (`2026-11-21T09:30:00+01:00`), `YYYY-MM-DD HH:MM[:SS]` or
/// `YYYY-MM-DDTHH:MM` in `tz`, `YYYY-MM-DD` (midnight in `tz`), `now`, `today`, `tomorrow`,
/// `yesterday` (midnight), and `in N minutes|hours|days|weeks`.
pub fn parse_datetime(text: &str, tz: Tz, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let text = text.trim();
    let lower = text.to_lowercase();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    let today = now.with_timezone(&tz).date_naive();
    match lower.as_str() {
        "now" => return Ok(now),
        "today" => return local_midnight(today, tz),
        "tomorrow" => return local_midnight(today + Duration::days(1), tz),
        "yesterday" => return local_midnight(today - Duration::days(1), tz),
        _ => {}
    }
    if let Some(rest) = lower.strip_prefix("in ") {
        let mut parts = rest.split_whitespace();
        let amount: i64 = parts
            .next()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| bad(text))?;
        let unit = parts.next().ok_or_else(|| bad(text))?;
        let span = match unit.trim_end_matches('s') {
            "minute" | "min" => Duration::minutes(amount),
            "hour" | "hr" | "h" => Duration::hours(amount),
            "day" => Duration::days(amount),
            "week" => Duration::weeks(amount),
            _ => return Err(bad(text)),
        };
        return Ok(now + span);
    }
    for format in [
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(local) = NaiveDateTime::parse_from_str(text, format) {
            return resolve_local(local, tz).ok_or_else(|| bad(text));
        }
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return local_midnight(date, tz);
    }
    Err(bad(text))
}

/// Reads a calendar date: `YYYY-MM-DD`, `today`, `tomorrow`, `yesterday`, or anything
/// [`parse_datetime`] reads (its local date).
pub fn parse_date(text: &str, tz: Tz, now: DateTime<Utc>) -> Result<NaiveDate, String> {
    if let Ok(date) = NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d") {
        return Ok(date);
    }
    parse_datetime(text, tz, now).map(|t| t.with_timezone(&tz).date_naive())
}

fn bad(text: &str) -> String {
    format!(
        "cannot read {text:?} as a date/time; use YYYY-MM-DD, YYYY-MM-DD HH:MM, RFC 3339, today, tomorrow, or 'in 20 minutes'"
    )
}

fn local_midnight(date: NaiveDate, tz: Tz) -> Result<DateTime<Utc>, String> {
    resolve_local(date.and_time(NaiveTime::MIN), tz)
        .ok_or_else(|| format!("{date} has no midnight in {tz}"))
}

/// The instants `[start, end)` of the local day `date`.
pub fn day_range(date: NaiveDate, tz: Tz) -> Result<(DateTime<Utc>, DateTime<Utc>), String> {
    Ok((
        local_midnight(date, tz)?,
        local_midnight(date + Duration::days(1), tz)?,
    ))
}

/// The local week (Monday to Sunday) containing `now`.
pub fn week_range(now: DateTime<Utc>, tz: Tz) -> Result<(DateTime<Utc>, DateTime<Utc>), String> {
    let today = now.with_timezone(&tz).date_naive();
    let monday = today - Duration::days(i64::from(today.weekday().num_days_from_monday()));
    Ok((
        local_midnight(monday, tz)?,
        local_midnight(monday + Duration::days(7), tz)?,
    ))
}

/// An instant in milliseconds shown in `tz` as `YYYY-MM-DD HH:MM`.
pub fn format_local(ms: i64, tz: Tz) -> String {
    match Utc.timestamp_millis_opt(ms) {
        LocalResult::Single(t) => t.with_timezone(&tz).format("%Y-%m-%d %H:%M").to_string(),
        _ => ms.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 28, 22, 30, 0)
            .single()
            .expect("valid")
    }

    #[test]
    fn reads_the_usual_forms_in_the_users_timezone() {
        let berlin: Tz = "Europe/Berlin".parse().expect("tz");
        let t = parse_datetime("2026-11-21 09:30", berlin, now()).expect("local");
        assert_eq!(t.to_rfc3339(), "2026-11-21T08:30:00+00:00");
        let t = parse_datetime("2026-11-21T09:30:00Z", berlin, now()).expect("rfc3339");
        assert_eq!(t.to_rfc3339(), "2026-11-21T09:30:00+00:00");
        let t = parse_datetime("tomorrow", berlin, now()).expect("tomorrow");
        assert_eq!(
            t.to_rfc3339(),
            "2026-03-28T23:00:00+00:00",
            "midnight of the 29th in Berlin (CET)"
        );
        let t = parse_datetime("in 20 minutes", berlin, now()).expect("relative");
        assert_eq!(t - now(), Duration::minutes(20));
        assert!(parse_datetime("next blursday", berlin, now()).is_err());
        assert_eq!(
            parse_date("today", berlin, now())
                .expect("date")
                .to_string(),
            "2026-03-28"
        );
    }

    #[test]
    fn times_that_do_not_exist_move_forward_and_ambiguous_ones_take_the_first() {
        let berlin: Tz = "Europe/Berlin".parse().expect("tz");
        // 2026-03-29 02:30 does not exist in Berlin (clocks jump 02:00 -> 03:00).
        let t = parse_datetime("2026-03-29 02:30", berlin, now()).expect("spring");
        assert_eq!(t.to_rfc3339(), "2026-03-29T01:00:00+00:00");
        // 2026-10-25 02:30 happens twice; the first is still summer time (+02:00).
        let t = parse_datetime("2026-10-25 02:30", berlin, now()).expect("autumn");
        assert_eq!(t.to_rfc3339(), "2026-10-25T00:30:00+00:00");
    }

    #[test]
    fn day_and_week_ranges_follow_local_midnight() {
        let ny: Tz = "America/New_York".parse().expect("tz");
        let (start, end) =
            day_range(NaiveDate::from_ymd_opt(2026, 11, 1).expect("date"), ny).expect("range");
        assert_eq!(
            (end - start).num_hours(),
            25,
            "the day clocks fall back is 25 hours long"
        );
        let (monday, next) = week_range(now(), ny).expect("week");
        assert_eq!(monday.with_timezone(&ny).weekday(), chrono::Weekday::Mon);
        assert_eq!((next - monday).num_days(), 7);
        assert_eq!(format_local(0, ny), "1969-12-31 19:00");
    }
}
