use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use chrono_tz::Europe::Berlin;

use super::{
    EventFields, IcsError, Occurrence, When, expand, new_event, split_feed, update_event,
    update_instance,
};

const WEEKLY: &str = "BEGIN:VCALENDAR\r
VERSION:2.0\r
PRODID:-//test//EN\r
BEGIN:VTIMEZONE\r
TZID:Europe/Berlin\r
BEGIN:DAYLIGHT\r
TZOFFSETFROM:+0100\r
TZOFFSETTO:+0200\r
DTSTART:19700329T020000\r
RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU\r
END:DAYLIGHT\r
BEGIN:STANDARD\r
TZOFFSETFROM:+0200\r
TZOFFSETTO:+0100\r
DTSTART:19701025T030000\r
RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU\r
END:STANDARD\r
END:VTIMEZONE\r
BEGIN:VEVENT\r
UID:weekly-1\r
DTSTAMP:20261001T000000Z\r
DTSTART;TZID=Europe/Berlin:20261012T090000\r
DTEND;TZID=Europe/Berlin:20261012T093000\r
RRULE:FREQ=WEEKLY\r
EXDATE;TZID=Europe/Berlin:20261019T090000\r
SUMMARY:Standup\r
END:VEVENT\r
BEGIN:VEVENT\r
UID:weekly-1\r
DTSTAMP:20261001T000000Z\r
RECURRENCE-ID;TZID=Europe/Berlin:20261102T090000\r
DTSTART;TZID=Europe/Berlin:20261102T113000\r
DTEND;TZID=Europe/Berlin:20261102T120000\r
SUMMARY:Standup (moved)\r
END:VEVENT\r
END:VCALENDAR\r
";

fn utc(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, m, d, h, min, 0)
        .single()
        .expect("a valid time")
}

fn berlin(o: &Occurrence) -> String {
    match o.start {
        When::At(at) => at
            .with_timezone(&Berlin)
            .format("%Y-%m-%d %H:%M")
            .to_string(),
        When::Date(d) => d.to_string(),
    }
}

#[test]
fn a_weekly_series_keeps_its_local_time_across_october_and_honours_exdate_and_moves() {
    let range = (utc(2026, 10, 10, 0, 0), utc(2026, 11, 10, 0, 0));
    let mut got = expand(WEEKLY, Berlin, range).expect("parses");
    got.sort_by_key(|o| o.start);
    let starts: Vec<String> = got
        .iter()
        .map(|o| format!("{} {}", berlin(o), o.title))
        .collect();
    assert_eq!(
        starts,
        [
            "2026-10-12 09:00 Standup",
            // 19 October is cancelled (EXDATE).
            "2026-10-26 09:00 Standup",
            "2026-11-02 11:30 Standup (moved)",
            "2026-11-09 09:00 Standup",
        ]
    );
    // 09:00 is 07:00 UTC in summer time and 08:00 UTC after the last Sunday of October.
    assert_eq!(got[0].start, When::At(utc(2026, 10, 12, 7, 0)));
    assert_eq!(got[1].start, When::At(utc(2026, 10, 26, 8, 0)));
    assert!(got.iter().all(|o| o.recurring && o.uid == "weekly-1"));
}

#[test]
fn an_all_day_event_stays_on_its_dates_whatever_the_zone() {
    let data = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:trip\r\nDTSTART;VALUE=DATE:20261130\r\nDTEND;VALUE=DATE:20261202\r\nSUMMARY:Trip\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
    let tokyo = chrono_tz::Asia::Tokyo;
    let got = expand(
        data,
        tokyo,
        (utc(2026, 11, 1, 0, 0), utc(2026, 12, 31, 0, 0)),
    )
    .expect("test value");
    assert_eq!(got.len(), 1);
    let day = |d| When::Date(NaiveDate::from_ymd_opt(2026, 11, d).expect("test value"));
    assert_eq!(got[0].start, day(30));
    assert_eq!(
        got[0].end,
        When::Date(NaiveDate::from_ymd_opt(2026, 12, 2).expect("test value"))
    );
    // Outside its days it is not listed: the day after its exclusive end.
    let after = expand(
        data,
        tokyo,
        (utc(2026, 12, 2, 0, 0), utc(2026, 12, 3, 0, 0)),
    )
    .expect("test value");
    assert!(after.is_empty(), "{after:?}");
}

#[test]
fn an_outlook_zone_name_and_a_cancelled_event_are_understood() {
    let data = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:a\r\nDTSTART;TZID=W. Europe Standard Time:20261201T100000\r\nDTEND;TZID=W. Europe Standard Time:20261201T110000\r\nSUMMARY:Review\r\nEND:VEVENT\r\nBEGIN:VEVENT\r\nUID:b\r\nSTATUS:CANCELLED\r\nDTSTART:20261201T120000Z\r\nSUMMARY:Gone\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
    let got = expand(
        data,
        chrono_tz::UTC,
        (utc(2026, 12, 1, 0, 0), utc(2026, 12, 2, 0, 0)),
    )
    .expect("test value");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].start, When::At(utc(2026, 12, 1, 9, 0)));
}

#[test]
fn text_that_is_not_icalendar_is_an_error_not_a_panic() {
    for bad in [
        "",
        "hello",
        "BEGIN:VCARD\r\nEND:VCARD\r\n",
        "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART:garbage\r\n",
    ] {
        match expand(bad, Berlin, (utc(2026, 1, 1, 0, 0), utc(2027, 1, 1, 0, 0))) {
            Err(err) => assert_eq!(err, IcsError::NotICalendar, "{bad:?}"),
            Ok(events) => assert!(events.is_empty(), "{bad:?}: {events:?}"),
        }
    }
}

#[test]
fn a_feed_splits_per_uid_with_its_timezones() {
    let parts = split_feed(WEEKLY);
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].0, "weekly-1");
    assert!(parts[0].1.contains("BEGIN:VTIMEZONE"));
    assert_eq!(parts[0].1.matches("BEGIN:VEVENT").count(), 2);
    let two = WEEKLY.replace(
        "END:VCALENDAR",
        "BEGIN:VEVENT\r\nUID:other\r\n folded\r\nDTSTART:20261201T100000Z\r\nEND:VEVENT\r\nEND:VCALENDAR",
    );
    let parts = split_feed(&two);
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[1].0, "otherfolded");
}

#[test]
fn a_written_event_reads_back_and_an_update_keeps_the_rest() {
    let now = utc(2026, 11, 29, 12, 0);
    let fields = EventFields {
        title: Some("Lunch; with Anna, Bob".into()),
        times: Some((
            When::At(utc(2026, 12, 1, 11, 0)),
            When::At(utc(2026, 12, 1, 12, 0)),
        )),
        location: Some("Café".into()),
        description: None,
    };
    let data = new_event("uid-1", &fields, now);
    let range = (utc(2026, 12, 1, 0, 0), utc(2026, 12, 2, 0, 0));
    let got = expand(&data, Berlin, range).expect("test value");
    assert_eq!(got[0].title, "Lunch; with Anna, Bob");
    assert_eq!(got[0].location.as_deref(), Some("Café"));
    let change = EventFields {
        title: None,
        times: Some((
            When::At(utc(2026, 12, 1, 13, 0)),
            When::At(utc(2026, 12, 1, 14, 0)),
        )),
        location: Some(String::new()),
        description: Some("bring cake".into()),
    };
    let updated = update_event(&data, &change, now).expect("test value");
    let got = expand(&updated, Berlin, range).expect("test value");
    assert_eq!(got.len(), 1, "{updated}");
    assert_eq!(got[0].title, "Lunch; with Anna, Bob");
    assert_eq!(got[0].start, When::At(utc(2026, 12, 1, 13, 0)));
    assert_eq!(got[0].location, None);
    assert_eq!(got[0].description.as_deref(), Some("bring cake"));
    assert!(updated.contains("SEQUENCE:1"), "{updated}");
}

#[test]
fn one_instance_moves_into_an_override_and_the_series_stays() {
    let now = utc(2026, 10, 20, 8, 0);
    let month = (utc(2026, 10, 1, 0, 0), utc(2026, 11, 10, 0, 0));
    let starts = |data: &str| -> Vec<String> {
        expand(data, Berlin, month)
            .expect("parses")
            .iter()
            .map(|o| format!("{} {}", berlin(o), o.title))
            .collect()
    };
    // The instance of Monday 26 October, 09:00 (after the clocks went back), to 10:00.
    let moved = update_instance(
        WEEKLY,
        "weekly-1",
        When::At(utc(2026, 10, 26, 8, 0)),
        &EventFields {
            times: Some((
                When::At(utc(2026, 10, 26, 9, 0)),
                When::At(utc(2026, 10, 26, 9, 30)),
            )),
            ..EventFields::default()
        },
        Berlin,
        now,
    )
    .expect("an override");
    assert!(
        moved.contains("RECURRENCE-ID;TZID=Europe/Berlin:20261026T090000"),
        "the override names the instance as the series' DTSTART is written: {moved}"
    );
    assert_eq!(
        starts(&moved),
        [
            "2026-10-12 09:00 Standup",
            "2026-10-26 10:00 Standup",
            "2026-11-02 11:30 Standup (moved)",
            "2026-11-09 09:00 Standup",
        ]
    );
    assert_eq!(moved.matches("RRULE:FREQ=WEEKLY").count(), 1, "{moved}");

    // An instance already moved is changed in its own override, not overridden twice.
    let renamed = update_instance(
        &moved,
        "weekly-1",
        When::At(utc(2026, 11, 2, 10, 30)),
        &EventFields {
            title: Some("Standup in room 2".into()),
            ..EventFields::default()
        },
        Berlin,
        now,
    )
    .expect("the override changed");
    assert_eq!(renamed.matches("RECURRENCE-ID").count(), 2, "{renamed}");
    assert!(
        starts(&renamed).contains(&"2026-11-02 11:30 Standup in room 2".to_string()),
        "{:?}",
        starts(&renamed)
    );

    // A change to the whole series keeps its overrides paired with it (SEQUENCE raised on
    // all of them alike): still four instances, the moved ones where they were.
    let series = update_event(
        &renamed,
        &EventFields {
            title: Some("Team standup".into()),
            ..EventFields::default()
        },
        now,
    )
    .expect("the series changed");
    assert_eq!(
        starts(&series),
        [
            "2026-10-12 09:00 Team standup",
            "2026-10-26 10:00 Standup",
            "2026-11-02 11:30 Standup in room 2",
            "2026-11-09 09:00 Team standup",
        ]
    );

    // An instance that is not there (a cancelled one, a wrong time) is refused.
    for missing in [utc(2026, 10, 19, 7, 0), utc(2026, 10, 26, 8, 15)] {
        assert_eq!(
            update_instance(
                WEEKLY,
                "weekly-1",
                When::At(missing),
                &EventFields::default(),
                Berlin,
                now
            ),
            Err(IcsError::NoInstance)
        );
    }
}
