//! When a schedule fires: cron expressions (seconds field first) evaluated in a named IANA
//! timezone, in local wall-clock time, with each occurrence converted to an instant on its own.
//!
//! Why not tokio-cron-scheduler: it keeps jobs in memory only and computes a timezone job's UTC
//! offset once, so after a daylight-saving change its jobs fire an hour off (its issue #107).
//! hearth keeps schedules in its database and uses the `cron` crate only to enumerate local
//! wall-clock times, which it turns into instants here with the zone's rules for that day:
//!
//! - a local time that does not exist (spring forward, e.g. 02:30 in Berlin on the last Sunday
//!   of March) fires once, at the first valid instant after it (03:00);
//! - a local time that happens twice (fall back) fires once, at its first occurrence.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;

use crate::time::resolve_local;

/// A parsed cron expression.
#[derive(Clone, Debug)]
pub struct CronExpr(::cron::Schedule);

/// Occurrences looked at before giving up: a per-second expression over a one-hour gap is 3,600
/// local times that all map to the same instant, so this leaves plenty of room.
const MAX_STEPS: usize = 100_000;

impl CronExpr {
    /// Parses `expression` in the `cron` crate's dialect: second minute hour day-of-month month
    /// day-of-week [year]. The error is one line and says how to fix the usual mistakes.
    pub fn parse(expression: &str) -> Result<Self, String> {
        ::cron::Schedule::from_str(expression.trim())
            .map(Self)
            .map_err(|err| {
                let hint = if expression.split_whitespace().count() == 5 {
                    format!("the seconds field comes first: try `0 {}`", expression.trim())
                } else {
                    "fields: second minute hour day-of-month month day-of-week [year], e.g. `0 30 7 * * Mon-Fri`".to_string()
                };
                let reason = err.to_string().lines().last().unwrap_or("").trim().to_string();
                if reason.is_empty() || reason == "^" {
                    format!("invalid cron expression `{expression}` ({hint})")
                } else {
                    format!("invalid cron expression `{expression}`: {reason} ({hint})")
                }
            })
    }

    /// The first fire strictly after `after`, or `None` when the expression has no more (a
    /// year field in the past).
    pub fn next_after(&self, after: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        // Walk local wall-clock times. The cron crate evaluates in whatever zone it is given;
        // giving it UTC makes it a plain calendar with no gaps or repeats, which is exactly the
        // local wall clock. Each local time is then placed on the real timeline for its day.
        let local_now = after.with_timezone(&tz).naive_local();
        let start = Utc.from_utc_datetime(&local_now);
        self.0
            .after(&start)
            .take(MAX_STEPS)
            .filter_map(|wall| resolve_local(wall.naive_utc(), tz))
            .find(|instant| *instant > after)
    }

    /// Every fire in `(after, until]`, oldest first, at most `limit` of them.
    pub fn between(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        tz: Tz,
        limit: usize,
    ) -> Vec<DateTime<Utc>> {
        let mut fires = Vec::new();
        let mut cursor = after;
        while fires.len() < limit {
            match self.next_after(cursor, tz) {
                Some(next) if next <= until => {
                    fires.push(next);
                    cursor = next;
                }
                _ => break,
            }
        }
        fires
    }
}

/// The usual shapes of a daily cron expression in words, for `hearth schedule list`:
/// `0 30 7 * * Mon-Fri` is "weekdays at 07:30", `0 0 8 * * *` "every day at 08:00",
/// `0 0 9 * * Sat,Sun` "Saturdays and Sundays at 09:00". Anything else (steps, several hours,
/// days of the month, numbered weekdays, whose numbering readers get wrong) is `None`: the
/// expression itself is then shown alone.
pub fn describe_cron(expression: &str) -> Option<String> {
    let fields: Vec<&str> = expression.split_whitespace().collect();
    let [second, minute, hour, day, month, weekday, rest @ ..] = fields.as_slice() else {
        return None;
    };
    let any = |field: &str| field == "*" || field == "?";
    if *second != "0" || !any(day) || !any(month) || !rest.iter().all(|year| any(year)) {
        return None;
    }
    let minute: u32 = minute.parse().ok().filter(|m| *m < 60)?;
    let hour: u32 = hour.parse().ok().filter(|h| *h < 24)?;
    let days = if any(weekday) {
        "every day".to_string()
    } else if weekday.eq_ignore_ascii_case("mon-fri") {
        "weekdays".to_string()
    } else {
        let names: Vec<&str> = weekday
            .split(',')
            .map(day_name)
            .collect::<Option<Vec<_>>>()?;
        match names.as_slice() {
            [one] => (*one).to_string(),
            [first @ .., last] => format!("{} and {last}", first.join(", ")),
            [] => return None,
        }
    };
    Some(format!("{days} at {hour:02}:{minute:02}"))
}

/// `Mon` (any case, or `Monday`) as "Mondays".
fn day_name(word: &str) -> Option<&'static str> {
    let word = word.to_ascii_lowercase();
    let names = [
        ("mon", "Mondays"),
        ("tue", "Tuesdays"),
        ("wed", "Wednesdays"),
        ("thu", "Thursdays"),
        ("fri", "Fridays"),
        ("sat", "Saturdays"),
        ("sun", "Sundays"),
    ];
    names
        .iter()
        .find(|(short, _)| word.len() >= 3 && word.starts_with(short))
        .map(|(_, name)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_timezone;
    use chrono::NaiveDate;

    fn tz(name: &str) -> Tz {
        parse_timezone(name).expect("known zone")
    }

    fn local(tz: Tz, y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
        let naive = NaiveDate::from_ymd_opt(y, m, d)
            .and_then(|date| date.and_hms_opt(h, min, 0))
            .expect("valid date");
        resolve_local(naive, tz).expect("resolvable")
    }

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("rfc3339")
            .with_timezone(&Utc)
    }

    fn fires(expr: &str, zone: &str, from: &str, to: &str) -> Vec<String> {
        let expr = CronExpr::parse(expr).expect("valid cron");
        expr.between(utc(from), utc(to), tz(zone), 1000)
            .iter()
            .map(|t| t.to_rfc3339())
            .collect()
    }

    #[test]
    fn weekday_mornings_over_two_weeks_fire_at_local_time() {
        let berlin = tz("Europe/Berlin");
        let all = CronExpr::parse("0 30 7 * * Mon-Fri")
            .expect("valid")
            .between(
                utc("2026-03-20T00:00:00Z"),
                utc("2026-04-03T00:00:00Z"),
                berlin,
                100,
            );
        // Fri 20th .. Thu 2nd April: 20, 23-27, 30, 31, 1, 2 = 10 weekdays.
        assert_eq!(all.len(), 10, "{all:?}");
        for fire in &all {
            let local = fire.with_timezone(&berlin);
            assert_eq!(local.format("%H:%M:%S").to_string(), "07:30:00", "{fire}");
            assert!(!matches!(
                chrono::Datelike::weekday(&local),
                chrono::Weekday::Sat | chrono::Weekday::Sun
            ));
        }
        // Across the change on 29 March the UTC time moves from 06:30 to 05:30.
        assert_eq!(all[0].to_rfc3339(), "2026-03-20T06:30:00+00:00");
        assert_eq!(all[6].to_rfc3339(), "2026-03-30T05:30:00+00:00");
    }

    #[test]
    fn a_time_missing_on_the_spring_forward_day_fires_once_at_the_first_valid_instant() {
        // Berlin, 29 March 2026: 02:00 CET jumps to 03:00 CEST.
        assert_eq!(
            fires(
                "0 30 2 * * *",
                "Europe/Berlin",
                "2026-03-27T12:00:00Z",
                "2026-03-31T12:00:00Z"
            ),
            vec![
                "2026-03-28T01:30:00+00:00", // 02:30 CET
                "2026-03-29T01:00:00+00:00", // 03:00 CEST, the first instant after the gap
                "2026-03-30T00:30:00+00:00", // 02:30 CEST
                "2026-03-31T00:30:00+00:00",
            ]
        );
        // New York, 8 March 2026: 02:00 EST jumps to 03:00 EDT.
        assert_eq!(
            fires(
                "0 30 2 * * *",
                "America/New_York",
                "2026-03-07T12:00:00Z",
                "2026-03-09T12:00:00Z"
            ),
            vec!["2026-03-08T07:00:00+00:00", "2026-03-09T06:30:00+00:00"]
        );
    }

    #[test]
    fn every_minute_inside_the_gap_collapses_to_one_fire() {
        // 02:00..02:59 do not exist; all of them map to 03:00 and fire once together.
        let got = fires(
            "0 * 2 * * *",
            "Europe/Berlin",
            "2026-03-29T00:00:00Z",
            "2026-03-29T03:00:00Z",
        );
        assert_eq!(got, vec!["2026-03-29T01:00:00+00:00"]);
    }

    #[test]
    fn a_time_repeated_on_the_fall_back_day_fires_once_at_its_first_occurrence() {
        // New York, 1 November 2026: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
        assert_eq!(
            fires(
                "0 30 1 * * *",
                "America/New_York",
                "2026-10-31T12:00:00Z",
                "2026-11-03T12:00:00Z"
            ),
            vec![
                "2026-11-01T05:30:00+00:00", // 01:30 EDT; 01:30 EST (06:30Z) does not fire
                "2026-11-02T06:30:00+00:00",
                "2026-11-03T06:30:00+00:00",
            ]
        );
        // Berlin, 25 October 2026: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
        assert_eq!(
            fires(
                "0 30 2 * * *",
                "Europe/Berlin",
                "2026-10-24T12:00:00Z",
                "2026-10-26T12:00:00Z"
            ),
            vec!["2026-10-25T00:30:00+00:00", "2026-10-26T01:30:00+00:00"]
        );
    }

    #[test]
    fn asking_from_inside_the_repeated_hour_does_not_fire_again() {
        // 06:10Z is 01:10 EST, the second pass through 01:xx; the 01:30 fire is already done.
        let expr = CronExpr::parse("0 30 1 * * *").expect("valid");
        let next = expr
            .next_after(utc("2026-11-01T06:10:00Z"), tz("America/New_York"))
            .expect("next");
        assert_eq!(next.to_rfc3339(), "2026-11-02T06:30:00+00:00");
    }

    #[test]
    fn daily_fires_keep_local_time_over_several_days() {
        let ny = tz("America/New_York");
        let all = CronExpr::parse("0 0 9 * * *").expect("valid").between(
            local(ny, 2026, 10, 30, 0, 0),
            local(ny, 2026, 11, 4, 0, 0),
            ny,
            100,
        );
        let shown: Vec<String> = all
            .iter()
            .map(|t| t.with_timezone(&ny).format("%m-%d %H:%M").to_string())
            .collect();
        assert_eq!(
            shown,
            vec![
                "10-30 09:00",
                "10-31 09:00",
                "11-01 09:00",
                "11-02 09:00",
                "11-03 09:00"
            ]
        );
        assert_eq!((all[3] - all[2]).num_hours(), 24);
        assert_eq!(
            (all[2] - all[1]).num_hours(),
            25,
            "the fall-back day is longer"
        );
    }

    #[test]
    fn bad_expressions_and_zones_get_readable_errors() {
        let err = CronExpr::parse("30 7 * * *").expect_err("five fields");
        assert!(err.contains("try `0 30 7 * * *`"), "{err}");
        let err = CronExpr::parse("every morning").expect_err("words");
        assert!(err.contains("e.g. `0 30 7 * * Mon-Fri`"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        assert!(parse_timezone("Europe/Berln").is_err());
        assert!(parse_timezone("UTC").is_ok());
    }

    #[test]
    fn daily_expressions_read_in_words_and_others_do_not() {
        assert_eq!(
            describe_cron("0 30 7 * * Mon-Fri").as_deref(),
            Some("weekdays at 07:30")
        );
        assert_eq!(
            describe_cron("0 0 8 * * *").as_deref(),
            Some("every day at 08:00")
        );
        assert_eq!(
            describe_cron("0 5 21 * * Sat,sun").as_deref(),
            Some("Saturdays and Sundays at 21:05")
        );
        assert_eq!(
            describe_cron("0 0 9 * * Mon,Wed,Fri").as_deref(),
            Some("Mondays, Wednesdays and Fridays at 09:00")
        );
        for other in [
            "0 */5 * * * *",
            "0 0 8 1 * *",
            "0 0 8 * * 1-5",
            "0 0 8,20 * * *",
            "x",
        ] {
            assert_eq!(describe_cron(other), None, "{other}");
        }
    }
}
