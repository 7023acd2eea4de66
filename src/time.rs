//! Wall-clock time in a named zone: the one parser of IANA zone names and the one rule for a
//! local time that does not exist or happens twice. Beside [`crate::clock`], below the rooms that
//! speak it (config, scheduler, tools), so none of them reaches up into another for it.

use chrono::{DateTime, Duration, LocalResult, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

/// Parses an IANA timezone name, with an error that gives an example.
pub fn parse_timezone(name: &str) -> Result<Tz, String> {
    name.trim().parse::<Tz>().map_err(|_| {
        format!("unknown timezone `{name}`: expected an IANA name like `Europe/Berlin` or `UTC`")
    })
}

/// A local wall-clock time as an instant: an ambiguous time (autumn) is the first occurrence, a
/// time that does not exist (spring) the first valid instant after it.
pub fn resolve_local(local: NaiveDateTime, tz: Tz) -> Option<DateTime<Utc>> {
    match tz.from_local_datetime(&local) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(first, _) => Some(first.with_timezone(&Utc)),
        LocalResult::None => (1..=180)
            .map(|m| local + Duration::minutes(m))
            .find_map(|later| tz.from_local_datetime(&later).earliest())
            .map(|t| t.with_timezone(&Utc)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    #[test]
    fn zone_names_parse_and_a_typo_gets_an_example() {
        assert_eq!(parse_timezone(" UTC ").expect("utc"), chrono_tz::UTC);
        let err = parse_timezone("Europe/Berln").expect_err("typo");
        assert!(err.contains("like `Europe/Berlin`"), "{err}");
    }

    #[test]
    fn a_missing_local_time_moves_forward_and_a_doubled_one_takes_the_first() {
        let berlin = parse_timezone("Europe/Berlin").expect("zone");
        let at = |d: u32, m: u32, h: u32, min: u32| {
            let naive = NaiveDate::from_ymd_opt(2026, m, d)
                .and_then(|date| date.and_hms_opt(h, min, 0))
                .expect("valid date");
            resolve_local(naive, berlin)
                .expect("resolvable")
                .to_rfc3339()
        };
        assert_eq!(at(29, 3, 2, 30), "2026-03-29T01:00:00+00:00");
        assert_eq!(at(25, 10, 2, 30), "2026-10-25T00:30:00+00:00");
    }
}
