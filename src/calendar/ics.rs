//! iCalendar text: parsed and its recurrences expanded by `calcard` (RRULE, RDATE, EXDATE and
//! RECURRENCE-ID overrides, in the event's own zone, across daylight-saving changes), cut to a
//! range; a feed split into one object per event; and the VEVENT hearth writes to a CalDAV
//! server.

use calcard::common::timezone::Tz as CalTz;
use calcard::icalendar::dates::TimeOrDelta;
use calcard::icalendar::{
    ICalendar, ICalendarComponent, ICalendarComponentType, ICalendarProperty, ICalendarStatus,
    ICalendarValue,
};
use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

/// How many instances one object's recurrences may expand to: a daily series of 50 years. The
/// expansion starts at the series' first instance, so the cap must reach today.
const MAX_INSTANCES: usize = 20_000;

/// When an instance starts or ends: a date for all-day events (an end date is exclusive, as in
/// iCalendar), an instant otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum When {
    Date(NaiveDate),
    At(DateTime<Utc>),
}

/// One instance of an event, as a listing shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occurrence {
    pub uid: String,
    pub title: String,
    pub start: When,
    pub end: When,
    pub location: Option<String>,
    pub description: Option<String>,
    /// Part of a recurring series (so a write changes the whole series).
    pub recurring: bool,
}

impl Occurrence {
    /// The instant the occurrence starts, all-day events at their first local midnight in `tz`.
    pub fn start_instant(&self, tz: Tz) -> DateTime<Utc> {
        instant(self.start, tz)
    }

    /// The instant the occurrence ends (exclusive).
    pub fn end_instant(&self, tz: Tz) -> DateTime<Utc> {
        instant(self.end, tz)
    }
}

/// The first instant of `when` in `tz`: a date's first local midnight (or the first instant of
/// that day when midnight falls in a gap).
pub fn instant(when: When, tz: Tz) -> DateTime<Utc> {
    match when {
        When::At(at) => at,
        When::Date(date) => local_instant(date.and_hms_opt(0, 0, 0).unwrap_or_default(), tz),
    }
}

/// A local time in `tz` as an instant: the earlier of two in a fold; a time in a spring gap is
/// moved forward by the gap (02:30 becomes 03:30), as RFC 5545 says.
fn local_instant(local: NaiveDateTime, tz: Tz) -> DateTime<Utc> {
    for shift in [0, 30, 60, 90, 120] {
        if let Some(at) = tz
            .from_local_datetime(&(local + Duration::minutes(shift)))
            .earliest()
        {
            return at.with_timezone(&Utc);
        }
    }
    Utc.from_utc_datetime(&local)
}

/// Why an object could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IcsError {
    #[error("not an iCalendar object")]
    NotICalendar,
    #[error("no instance of the event starts then (list the events again for its instances)")]
    NoInstance,
}

/// The instances of the events in `data` that overlap `[from, to)`, expanded in each event's
/// zone; times without a zone (floating) and all-day dates are read in `tz`, the owner's zone.
/// Cancelled events are left out.
pub fn expand(
    data: &str,
    tz: Tz,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Vec<Occurrence>, IcsError> {
    let calendar = ICalendar::parse(data).map_err(|_| IcsError::NotICalendar)?;
    let expanded = calendar.expand_dates(CalTz::Tz(tz), MAX_INSTANCES);
    let mut out = Vec::new();
    for event in expanded.events {
        let Some(component) = calendar.components.get(event.comp_id as usize) else {
            continue;
        };
        if component.component_type != ICalendarComponentType::VEvent
            || matches!(component.status(), Some(ICalendarStatus::Cancelled))
        {
            continue;
        }
        let end = match event.end {
            TimeOrDelta::Time(end) => end,
            TimeOrDelta::Delta(delta) => event.start + delta,
        };
        let (start, end) = span(component, event.start, end, tz);
        if instant(start, tz) >= to || instant(end, tz) <= from && instant(start, tz) < from {
            continue;
        }
        let recurring = calendar
            .components
            .iter()
            .any(|c| c.is_recurrent_or_override() && c.uid() == component.uid());
        out.push(Occurrence {
            uid: component.uid().unwrap_or_default().to_string(),
            title: text(component, &ICalendarProperty::Summary)
                .unwrap_or_else(|| "(no title)".into()),
            start,
            end,
            location: text(component, &ICalendarProperty::Location),
            description: text(component, &ICalendarProperty::Description),
            recurring,
        });
    }
    Ok(out)
}

/// An expanded instance's start and end as [`When`]s.
fn span(
    component: &ICalendarComponent,
    start: DateTime<CalTz>,
    end: DateTime<CalTz>,
    tz: Tz,
) -> (When, When) {
    if all_day(component) {
        // calcard puts a date at midnight in the default zone (the owner's): the date is the
        // local date, and DTEND stays exclusive.
        let first = start.naive_local().date();
        let after = end.naive_local().date().max(first + Duration::days(1));
        (When::Date(first), When::Date(after))
    } else {
        (When::At(to_utc(start, tz)), When::At(to_utc(end, tz)))
    }
}

/// An instant from calcard: a zoned time as it is, a floating one read in `tz`.
fn to_utc(at: DateTime<CalTz>, tz: Tz) -> DateTime<Utc> {
    if at.timezone().is_floating() {
        local_instant(at.naive_local(), tz)
    } else {
        at.with_timezone(&Utc)
    }
}

/// Whether the component's DTSTART is a date without a time (`VALUE=DATE`).
fn all_day(component: &ICalendarComponent) -> bool {
    component
        .property(&ICalendarProperty::Dtstart)
        .and_then(|entry| entry.values.first())
        .is_some_and(|value| match value {
            ICalendarValue::PartialDateTime(dt) => dt.hour.is_none(),
            _ => false,
        })
}

/// A text property, trimmed; `None` when missing or blank.
fn text(component: &ICalendarComponent, property: &ICalendarProperty) -> Option<String> {
    component
        .property(property)
        .and_then(|entry| entry.values.first())
        .and_then(|value| value.as_text())
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_string)
}

/// A feed split into one iCalendar object per UID (with every VTIMEZONE), so each series
/// expands on its own: calcard's instance cap is per object, and one endless series must not
/// starve the others. Events without a UID are kept together under "".
pub fn split_feed(data: &str) -> Vec<(String, String)> {
    let mut timezones = String::new();
    let mut events: Vec<(String, String)> = Vec::new();
    let mut block: Option<(&str, String)> = None;
    for line in data.lines() {
        let line = line.trim_end_matches('\r');
        if block.is_none() {
            if line.eq_ignore_ascii_case("BEGIN:VEVENT") {
                block = Some(("VEVENT", String::new()));
            } else if line.eq_ignore_ascii_case("BEGIN:VTIMEZONE") {
                block = Some(("VTIMEZONE", String::new()));
            } else {
                continue;
            }
        }
        let Some((kind, text)) = &mut block else {
            continue;
        };
        text.push_str(line);
        text.push_str("\r\n");
        if line.eq_ignore_ascii_case(&format!("END:{kind}")) {
            let (kind, text) = block.take().unwrap_or_default();
            if kind == "VTIMEZONE" {
                timezones.push_str(&text);
            } else {
                let uid = uid_of(&text);
                match events.iter_mut().find(|(u, _)| *u == uid) {
                    Some((_, group)) => group.push_str(&text),
                    None => events.push((uid, text)),
                }
            }
        }
    }
    events
        .into_iter()
        .map(|(uid, body)| {
            let object = format!(
                "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//hearth//feed//EN\r\n{timezones}{body}END:VCALENDAR\r\n"
            );
            (uid, object)
        })
        .collect()
}

/// The UID line of a VEVENT block, unfolded.
fn uid_of(block: &str) -> String {
    let mut lines = block.split("\r\n").peekable();
    while let Some(line) = lines.next() {
        let Some(rest) = line
            .get(..4)
            .filter(|head| head.eq_ignore_ascii_case("UID:"))
            .and_then(|_| line.get(4..))
        else {
            continue;
        };
        let mut uid = rest.to_string();
        while let Some(next) = lines.peek().and_then(|l| l.strip_prefix([' ', '\t'])) {
            uid.push_str(next);
            lines.next();
        }
        return uid.trim().to_string();
    }
    String::new()
}

/// An event hearth writes: a new one, or the fields of an existing one to change.
#[derive(Clone, Debug, Default)]
pub struct EventFields {
    pub title: Option<String>,
    /// Start and (exclusive) end, both dates or both instants.
    pub times: Option<(When, When)>,
    /// `Some("")` removes it.
    pub location: Option<String>,
    /// `Some("")` removes it.
    pub description: Option<String>,
}

/// A new VCALENDAR with one VEVENT.
pub fn new_event(uid: &str, fields: &EventFields, now: DateTime<Utc>) -> String {
    let mut lines = vec![
        "BEGIN:VCALENDAR".to_string(),
        "VERSION:2.0".into(),
        "PRODID:-//hearth//calendar//EN".into(),
        "BEGIN:VEVENT".into(),
        format!("UID:{}", escape(uid)),
        format!("DTSTAMP:{}", now.format("%Y%m%dT%H%M%SZ")),
    ];
    lines.extend(field_lines(fields));
    lines.push("END:VEVENT".into());
    lines.push("END:VCALENDAR".into());
    fold(&lines)
}

/// `data` with the master VEVENT's fields replaced as `fields` says (DTSTAMP renewed, SEQUENCE
/// raised); every other property and component kept as the server sent it.
pub fn update_event(
    data: &str,
    fields: &EventFields,
    now: DateTime<Utc>,
) -> Result<String, IcsError> {
    let mut calendar = ICalendar::parse(data).map_err(|_| IcsError::NotICalendar)?;
    let index = calendar
        .components
        .iter()
        .position(|c| {
            c.component_type == ICalendarComponentType::VEvent && !c.is_recurrence_override()
        })
        .ok_or(IcsError::NotICalendar)?;
    let (uid, sequence) = {
        let master = &calendar.components[index];
        (master.uid().map(str::to_owned), sequence(master))
    };
    apply(&mut calendar.components[index], fields, now)?;
    // SEQUENCE raised on the series and, to the same number, on its overrides that had the
    // series' number: readers (calcard among them) pair an override with its series by it.
    let raised = entries(&[format!("SEQUENCE:{}", sequence.unwrap_or(0) + 1)])?;
    for (i, component) in calendar.components.iter_mut().enumerate() {
        let same = i == index
            || (component.is_recurrence_override()
                && component.uid().map(str::to_owned) == uid
                && self::sequence(component) == sequence);
        if same {
            component
                .entries
                .retain(|e| e.name != ICalendarProperty::Sequence);
            component.entries.extend(raised.clone());
        }
    }
    write(&calendar)
}

/// The component's SEQUENCE, if it has one.
fn sequence(component: &ICalendarComponent) -> Option<i64> {
    component
        .property(&ICalendarProperty::Sequence)
        .and_then(|e| e.values.first())
        .and_then(|v| v.as_integer())
}

/// `data` with one instance of the recurring event `uid`, the one starting at `instance`,
/// changed as `fields` says: its override (RECURRENCE-ID) changed when it has one, else a new
/// override added beside the series, RECURRENCE-ID written as the series' DTSTART is (same zone
/// or UTC or date). The series itself and every other instance stay as they are.
pub fn update_instance(
    data: &str,
    uid: &str,
    instance: When,
    fields: &EventFields,
    tz: Tz,
    now: DateTime<Utc>,
) -> Result<String, IcsError> {
    let mut calendar = ICalendar::parse(data).map_err(|_| IcsError::NotICalendar)?;
    let expanded = calendar.expand_dates(CalTz::Tz(tz), MAX_INSTANCES);
    let found = expanded.events.iter().find_map(|event| {
        let component = calendar.components.get(event.comp_id as usize)?;
        if component.component_type != ICalendarComponentType::VEvent
            || component.uid() != Some(uid)
        {
            return None;
        }
        let end = match event.end {
            TimeOrDelta::Time(end) => end,
            TimeOrDelta::Delta(delta) => event.start + delta,
        };
        let (start, end) = span(component, event.start, end, tz);
        same_start(start, instance).then_some((event.comp_id as usize, start, end))
    });
    let (index, start, end) = found.ok_or(IcsError::NoInstance)?;
    let component = calendar
        .components
        .get_mut(index)
        .ok_or(IcsError::NoInstance)?;
    if component.is_recurrence_override() {
        apply(component, fields, now)?;
        return write(&calendar);
    }
    let mut dtstart = String::new();
    if let Some(entry) = component.property(&ICalendarProperty::Dtstart) {
        entry
            .write_to(&mut dtstart)
            .map_err(|_| IcsError::NotICalendar)?;
    }
    let mut instance = component.clone();
    instance.entries.retain(|e| {
        !matches!(
            e.name,
            ICalendarProperty::Rrule
                | ICalendarProperty::Rdate
                | ICalendarProperty::Exdate
                | ICalendarProperty::Exrule
                | ICalendarProperty::Dtstart
                | ICalendarProperty::Dtend
                | ICalendarProperty::Duration
                | ICalendarProperty::RecurrenceId
        )
    });
    instance
        .entries
        .extend(entries(&[recurrence_id(&dtstart, start, tz)])?);
    let mut fields = fields.clone();
    fields.times.get_or_insert((start, end));
    apply(&mut instance, &fields, now)?;
    let id = u32::try_from(calendar.components.len()).map_err(|_| IcsError::NotICalendar)?;
    calendar.components.push(instance);
    calendar
        .components
        .first_mut()
        .ok_or(IcsError::NotICalendar)?
        .component_ids
        .push(id);
    write(&calendar)
}

/// Whether an instance starting at `start` is the one the owner named: the same day, or the
/// same minute (listings show minutes).
fn same_start(start: When, named: When) -> bool {
    match (start, named) {
        (When::Date(a), When::Date(b)) => a == b,
        (When::At(a), When::At(b)) => a.timestamp() / 60 == b.timestamp() / 60,
        _ => false,
    }
}

/// The RECURRENCE-ID of the instance originally starting at `start`, in the form of the
/// series' `dtstart` line: a date, UTC, a time in the same TZID, or floating in `tz`. A TZID
/// hearth cannot name (a Windows zone) gets the UTC form, which names the same instant.
fn recurrence_id(dtstart: &str, start: When, tz: Tz) -> String {
    let line = dtstart.replace("\r\n ", "");
    let (head, value) = line.trim_end().split_once(':').unwrap_or(("DTSTART", ""));
    let params = head.strip_prefix("DTSTART").unwrap_or_default();
    let tzid = params
        .split(';')
        .find_map(|p| p.strip_prefix("TZID="))
        .map(|z| z.trim_matches('"'));
    let utc = |at: DateTime<Utc>| format!("RECURRENCE-ID:{}", at.format("%Y%m%dT%H%M%SZ"));
    match start {
        When::Date(date) => format!("RECURRENCE-ID;VALUE=DATE:{}", date.format("%Y%m%d")),
        When::At(at) if value.ends_with('Z') => utc(at),
        When::At(at) => match tzid {
            Some(name) => match name.parse::<Tz>() {
                Ok(zone) => format!(
                    "RECURRENCE-ID;TZID={name}:{}",
                    at.with_timezone(&zone).format("%Y%m%dT%H%M%S")
                ),
                Err(_) => utc(at),
            },
            None => format!(
                "RECURRENCE-ID:{}",
                at.with_timezone(&tz).format("%Y%m%dT%H%M%S")
            ),
        },
    }
}

/// The properties of `lines`, parsed as one VEVENT's.
fn entries(lines: &[String]) -> Result<Vec<calcard::icalendar::ICalendarEntry>, IcsError> {
    let snippet = fold(
        &[
            vec!["BEGIN:VCALENDAR".to_string(), "BEGIN:VEVENT".into()],
            lines.to_vec(),
            vec!["END:VEVENT".into(), "END:VCALENDAR".into()],
        ]
        .concat(),
    );
    let parsed = ICalendar::parse(&snippet).map_err(|_| IcsError::NotICalendar)?;
    Ok(parsed
        .components
        .into_iter()
        .find(|c| c.component_type == ICalendarComponentType::VEvent)
        .map(|c| c.entries)
        .unwrap_or_default())
}

/// `component` with `fields` written over its own and DTSTAMP renewed. SEQUENCE is left to
/// the caller: an override keeps its series' number, by which readers pair them.
fn apply(
    component: &mut ICalendarComponent,
    fields: &EventFields,
    now: DateTime<Utc>,
) -> Result<(), IcsError> {
    let mut lines = vec![format!("DTSTAMP:{}", now.format("%Y%m%dT%H%M%SZ"))];
    lines.extend(field_lines(fields));
    let new_entries = entries(&lines)?;
    let mut replaced: Vec<ICalendarProperty> = new_entries.iter().map(|e| e.name.clone()).collect();
    if fields.times.is_some() {
        replaced.push(ICalendarProperty::Dtend);
        replaced.push(ICalendarProperty::Duration);
    }
    if fields.location.as_deref() == Some("") {
        replaced.push(ICalendarProperty::Location);
    }
    if fields.description.as_deref() == Some("") {
        replaced.push(ICalendarProperty::Description);
    }
    component.entries.retain(|e| !replaced.contains(&e.name));
    component.entries.extend(new_entries);
    Ok(())
}

fn write(calendar: &ICalendar) -> Result<String, IcsError> {
    let mut out = String::new();
    calendar
        .write_to(&mut out)
        .map_err(|_| IcsError::NotICalendar)?;
    Ok(out)
}

/// The lines of the fields that are set (an empty location or description writes nothing).
fn field_lines(fields: &EventFields) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(title) = &fields.title {
        lines.push(format!("SUMMARY:{}", escape(title)));
    }
    if let Some((start, end)) = fields.times {
        lines.push(format!("DTSTART{}", value(start)));
        lines.push(format!("DTEND{}", value(end)));
    }
    for (name, text) in [
        ("LOCATION", &fields.location),
        ("DESCRIPTION", &fields.description),
    ] {
        if let Some(text) = text.as_deref().filter(|t| !t.is_empty()) {
            lines.push(format!("{name}:{}", escape(text)));
        }
    }
    lines
}

/// `;VALUE=DATE:20261130` or `:20261130T090000Z`.
fn value(when: When) -> String {
    match when {
        When::Date(date) => format!(";VALUE=DATE:{}", date.format("%Y%m%d")),
        When::At(at) => format!(":{}", at.format("%Y%m%dT%H%M%SZ")),
    }
}

/// A TEXT value escaped (RFC 5545 3.3.11).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\;"),
            ',' => out.push_str("\\,"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// Lines joined with CRLF, each folded at 75 octets without splitting a character.
fn fold(lines: &[String]) -> String {
    let mut out = String::new();
    for line in lines {
        let mut width = 0;
        for c in line.chars() {
            if width + c.len_utf8() > 75 {
                out.push_str("\r\n ");
                width = 1;
            }
            out.push(c);
            width += c.len_utf8();
        }
        out.push_str("\r\n");
    }
    out
}

#[cfg(test)]
mod tests;
