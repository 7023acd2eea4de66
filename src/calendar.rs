//! The owner's outside calendars (`[[calendars]]`): CalDAV collections and ICS feeds, read
//! through a per-collection cache and written with ETag guards. The calendar tools
//! (`tool::calendar`) merge them with hearth's own calendar; the map is in
//! `docs/architecture.md`.
//!
//! - Reading asks the server only what changed: the collection's sync token (RFC 6578
//!   sync-collection) or ctag, falling back to a full ETag listing when the server refuses the
//!   token (403, 409, 410, 418 after deletions on Nextcloud, 507); a feed is fetched with
//!   `If-None-Match` / `If-Modified-Since`. A server that cannot be reached answers from the
//!   cache, with a note saying how old it is.
//! - Recurrences are expanded at each read from the cached objects ([`ics::expand`]).
//! - Writes create with `If-None-Match: *` and change or delete with `If-Match` and the ETag
//!   hearth last read: a change made elsewhere meanwhile is a [`CalendarError::Changed`], never
//!   overwritten.

pub mod dav;
pub mod ics;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use hearth_channel::Secret;
use reqwest::Url;

use crate::config::{CalendarConfig, CalendarKind};
use crate::store::calendar_cache::{CalendarCollection, CalendarObject, CalendarSync};
use crate::store::{Store, StoreError};
use dav::{Dav, DavError, Feed, Guard, Member};
pub use ics::{EventFields, Occurrence, When};

/// What went wrong with an outside calendar, worded for the owner.
#[derive(Debug, thiserror::Error)]
pub enum CalendarError {
    #[error("there is no calendar named `{0}` in [[calendars]]")]
    Unknown(String),
    #[error(
        "calendar `{0}` is read-only: set `writable = true` on its [[calendars]] entry (CalDAV only) to change it"
    )]
    ReadOnly(String),
    #[error("calendar `{name}`: {reason}")]
    Secret { name: String, reason: String },
    #[error("calendar `{name}`: {source}")]
    Server {
        name: String,
        #[source]
        source: DavError,
    },
    #[error("calendar `{calendar}` has no event with uid `{uid}` (list the events again)")]
    NoSuchEvent { calendar: String, uid: String },
    #[error(
        "the event changed in calendar `{calendar}` since hearth read it, so nothing was written. The owner asked: {asked}. Now on the server: {now}. Tell the owner both and ask whether to apply the change to this version."
    )]
    Changed {
        calendar: String,
        asked: String,
        now: String,
    },
    #[error("calendar `{calendar}`: {reason}")]
    Refused { calendar: String, reason: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One calendar's events in a range, and what the owner should know about how fresh they are.
#[derive(Debug, Default)]
pub struct Listing {
    pub occurrences: Vec<Occurrence>,
    /// Set when the server could not be reached (the events are the cache's) or some objects
    /// could not be read.
    pub note: Option<String>,
}

/// The calendar named `name` (case-insensitive) among the configured ones.
pub fn find<'a>(
    calendars: &'a [CalendarConfig],
    name: &str,
) -> Result<&'a CalendarConfig, CalendarError> {
    calendars
        .iter()
        .find(|c| c.name.trim().eq_ignore_ascii_case(name.trim()))
        .ok_or_else(|| CalendarError::Unknown(name.trim().to_string()))
}

/// The client for `config`'s server, its password read now so a rotated one is picked up.
fn client(config: &CalendarConfig) -> Result<Dav, CalendarError> {
    let password = match &config.password_env {
        Some(name) => Some(
            Secret::resolve(name).map_err(|reason| CalendarError::Secret {
                name: config.name.clone(),
                reason: format!("password_env: {reason}"),
            })?,
        ),
        None => None,
    };
    Dav::new(config.username.clone(), password).map_err(|source| server(config, source))
}

fn server(config: &CalendarConfig, source: DavError) -> CalendarError {
    CalendarError::Server {
        name: config.name.clone(),
        source,
    }
}

fn collection_url(config: &CalendarConfig) -> Result<Url, CalendarError> {
    Url::parse(&config.request_url()).map_err(|err| CalendarError::Refused {
        calendar: config.name.clone(),
        reason: format!("`url` is not a URL: {err}"),
    })
}

/// The events of `config`'s calendar overlapping `range`, read through the cache (see the
/// module docs). Fails only when the store does; an unreachable server with nothing cached is
/// an empty listing with a note.
pub async fn read(
    store: &Store,
    config: &CalendarConfig,
    tz: Tz,
    range: (DateTime<Utc>, DateTime<Utc>),
    now_ms: i64,
) -> Result<Listing, CalendarError> {
    let url = config.request_url();
    let cached = store
        .calendar_collection(&config.name)
        .await?
        .filter(|c| c.url == url);
    let mut note = None;
    match refresh(store, config, cached.as_ref(), now_ms).await {
        Ok(sync) => store.save_calendar_sync(&sync).await?,
        Err(CalendarError::Store(err)) => return Err(CalendarError::Store(err)),
        Err(err) => {
            tracing::warn!(calendar = %config.name, error = %err, "calendar not refreshed");
            note = Some(match &cached {
                Some(c) => format!(
                    "{err}. These events are from the copy saved {}.",
                    when_saved(c.fetched_at, now_ms, tz)
                ),
                None => format!("{err}. No saved copy yet, so its events are missing."),
            });
            if cached.is_none() {
                return Ok(Listing {
                    occurrences: Vec::new(),
                    note,
                });
            }
        }
    }
    let mut occurrences = Vec::new();
    let mut unreadable = 0;
    for object in store.calendar_objects(&config.name).await? {
        match ics::expand(&object.data, tz, range) {
            Ok(found) => occurrences.extend(found),
            Err(_) => unreadable += 1,
        }
    }
    if unreadable > 0 {
        let skipped = format!(
            "{unreadable} entries of calendar `{}` could not be read and are left out.",
            config.name
        );
        note = Some(match note {
            Some(n) => format!("{n} {skipped}"),
            None => skipped,
        });
    }
    Ok(Listing { occurrences, note })
}

/// "at 06:10" today, or "on 2026-11-28 at 06:10", in the owner's zone.
fn when_saved(saved_ms: i64, now_ms: i64, tz: Tz) -> String {
    let local = |ms: i64| {
        Utc.timestamp_millis_opt(ms)
            .single()
            .map(|t| t.with_timezone(&tz))
    };
    match (local(saved_ms), local(now_ms)) {
        (Some(saved), Some(now)) if saved.date_naive() == now.date_naive() => {
            format!("today at {}", saved.format("%H:%M"))
        }
        (Some(saved), _) => format!("on {}", saved.format("%Y-%m-%d at %H:%M")),
        _ => "earlier".into(),
    }
}

/// Asks the server what changed since `cached` and returns the cache's update.
async fn refresh(
    store: &Store,
    config: &CalendarConfig,
    cached: Option<&CalendarCollection>,
    now_ms: i64,
) -> Result<CalendarSync, CalendarError> {
    let dav = client(config)?;
    let url = collection_url(config)?;
    let mut collection = CalendarCollection {
        name: config.name.clone(),
        url: config.request_url(),
        fetched_at: now_ms,
        ..Default::default()
    };
    if config.kind() == CalendarKind::Ics {
        let (etag, modified) = cached.map_or((None, None), |c| {
            (c.etag.as_deref(), c.last_modified.as_deref())
        });
        return match dav.feed(&url, etag, modified).await {
            Ok(Feed::NotModified) => Ok(unchanged(cached, collection)),
            Ok(Feed::Fetched {
                data,
                etag,
                last_modified,
            }) => {
                if !data.trim_start().starts_with("BEGIN:VCALENDAR") {
                    // A login page or an error page in place of the feed: keep what was saved.
                    return Err(server(
                        config,
                        DavError::Protocol {
                            url: url.to_string(),
                            reason: "the answer is not an iCalendar feed".into(),
                        },
                    ));
                }
                collection.etag = etag;
                collection.last_modified = last_modified;
                let changed = ics::split_feed(&data)
                    .into_iter()
                    .map(|(uid, data)| CalendarObject {
                        href: format!("uid:{uid}"),
                        etag: None,
                        data,
                    })
                    .collect();
                Ok(CalendarSync {
                    collection,
                    replace_all: true,
                    changed,
                    removed: Vec::new(),
                })
            }
            Err(err) => Err(server(config, err)),
        };
    }
    let markers = dav.markers(&url).await.map_err(|e| server(config, e))?;
    collection.ctag = markers.ctag.clone();
    collection.sync_token = markers.sync_token.clone();
    if let Some(c) = cached {
        let same_token = markers.sync_token.is_some() && markers.sync_token == c.sync_token;
        let same_ctag = markers.ctag.is_some() && markers.ctag == c.ctag;
        if same_token || same_ctag {
            return Ok(unchanged(cached, collection));
        }
    }
    let objects = match cached {
        Some(_) => store.calendar_objects(&config.name).await?,
        None => Vec::new(),
    };
    if let (Some(old), Some(_)) = (
        cached.and_then(|c| c.sync_token.as_deref()),
        &markers.sync_token,
    ) {
        match dav.sync_collection(&url, old).await {
            Ok(found) => {
                let (removed, changed): (Vec<Member>, Vec<Member>) = found
                    .members
                    .into_iter()
                    .filter(|m| !m.is_collection)
                    .partition(|m| m.status == Some(404));
                let hrefs: Vec<String> = changed.into_iter().map(|m| m.href).collect();
                let fetched = dav
                    .multiget(&url, &hrefs)
                    .await
                    .map_err(|e| server(config, e))?;
                if let Some(token) = found.sync_token {
                    collection.sync_token = Some(token);
                }
                return Ok(CalendarSync {
                    collection,
                    replace_all: false,
                    changed: fetched.into_iter().filter_map(object).collect(),
                    removed: removed.into_iter().map(|m| m.href).collect(),
                });
            }
            // The token is no longer honoured (or the server fails on it): list everything.
            Err(err)
                if matches!(err.status(), Some(403 | 409 | 410 | 418 | 507))
                    || matches!(err, DavError::Protocol { .. }) =>
            {
                tracing::info!(calendar = %config.name, error = %err, "sync token refused; listing the whole calendar");
            }
            Err(err) => return Err(server(config, err)),
        }
    }
    let listed = dav.list_etags(&url).await.map_err(|e| server(config, e))?;
    let stale: Vec<String> = listed
        .iter()
        .filter(|m| {
            !objects
                .iter()
                .any(|o| o.href == m.href && o.etag.is_some() && o.etag == m.etag)
        })
        .map(|m| m.href.clone())
        .collect();
    let removed = objects
        .iter()
        .filter(|o| !listed.iter().any(|m| m.href == o.href))
        .map(|o| o.href.clone())
        .collect();
    let fetched = if stale.is_empty() {
        Vec::new()
    } else {
        dav.multiget(&url, &stale)
            .await
            .map_err(|e| server(config, e))?
    };
    Ok(CalendarSync {
        collection,
        replace_all: cached.is_none(),
        changed: fetched.into_iter().filter_map(object).collect(),
        removed,
    })
}

/// A cache update that only records the answer's time (and keeps the markers).
fn unchanged(cached: Option<&CalendarCollection>, fresh: CalendarCollection) -> CalendarSync {
    let collection = match cached {
        Some(c) => CalendarCollection {
            fetched_at: fresh.fetched_at,
            etag: fresh.etag.or_else(|| c.etag.clone()),
            last_modified: fresh.last_modified.or_else(|| c.last_modified.clone()),
            ..c.clone()
        },
        None => fresh,
    };
    CalendarSync {
        collection,
        ..Default::default()
    }
}

fn object(member: Member) -> Option<CalendarObject> {
    Some(CalendarObject {
        data: member.calendar_data?,
        href: member.href,
        etag: member.etag,
    })
}

/// A writable CalDAV calendar, or why it is not one.
fn writable(config: &CalendarConfig) -> Result<(), CalendarError> {
    if config.writable && config.kind() == CalendarKind::CalDav {
        Ok(())
    } else {
        Err(CalendarError::ReadOnly(config.name.clone()))
    }
}

/// Creates an event in `config`'s calendar; its uid.
pub async fn create(
    store: &Store,
    config: &CalendarConfig,
    fields: &EventFields,
    now: DateTime<Utc>,
) -> Result<String, CalendarError> {
    writable(config)?;
    let dav = client(config)?;
    let uid = format!("{}@hearth", random_id());
    let url = dav::resolve(&collection_url(config)?, &format!("{uid}.ics"))
        .map_err(|e| server(config, e))?;
    let data = ics::new_event(&uid, fields, now);
    let etag = dav
        .put(&url, data.clone(), &Guard::Create)
        .await
        .map_err(|e| server(config, e))?;
    remember(store, config, url, etag, data).await?;
    Ok(uid)
}

fn random_id() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..4)
        .map(|_| format!("{:08x}", rng.random::<u32>()))
        .collect()
}

/// The cached object holding the event `uid` (the version hearth last read), reading the
/// calendar once more when it is not cached yet.
async fn cached_object(
    store: &Store,
    config: &CalendarConfig,
    uid: &str,
    tz: Tz,
    now_ms: i64,
) -> Result<CalendarObject, CalendarError> {
    let find = |objects: Vec<CalendarObject>| {
        objects.into_iter().find(|o| {
            o.data.contains(uid)
                && calcard::icalendar::ICalendar::parse(&o.data)
                    .is_ok_and(|c| c.uids().any(|u| u == uid))
        })
    };
    if let Some(found) = find(store.calendar_objects(&config.name).await?) {
        return Ok(found);
    }
    let now = Utc
        .timestamp_millis_opt(now_ms)
        .single()
        .unwrap_or_default();
    read(store, config, tz, (now, now), now_ms).await?;
    find(store.calendar_objects(&config.name).await?).ok_or_else(|| CalendarError::NoSuchEvent {
        calendar: config.name.clone(),
        uid: uid.to_string(),
    })
}

/// The event `uid` as hearth last read it: its instance starting at `instance` (else its
/// first), and whether it recurs.
pub async fn event(
    store: &Store,
    config: &CalendarConfig,
    uid: &str,
    instance: Option<When>,
    tz: Tz,
    now_ms: i64,
) -> Result<Occurrence, CalendarError> {
    let object = cached_object(store, config, uid, tz, now_ms).await?;
    occurrence(&object.data, uid, instance, tz).ok_or_else(|| match instance {
        Some(_) => CalendarError::Refused {
            calendar: config.name.clone(),
            reason: ics::IcsError::NoInstance.to_string(),
        },
        None => CalendarError::NoSuchEvent {
            calendar: config.name.clone(),
            uid: uid.to_string(),
        },
    })
}

/// The instance of `uid` in `data` starting at `instance` (the same minute), else its first.
fn occurrence(data: &str, uid: &str, instance: Option<When>, tz: Tz) -> Option<Occurrence> {
    let always = (DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC);
    let minute = |w: When| match w {
        When::At(at) => When::At(at - chrono::Duration::seconds(at.timestamp().rem_euclid(60))),
        date => date,
    };
    ics::expand(data, tz, always)
        .ok()?
        .into_iter()
        .find(|o| o.uid == uid && instance.is_none_or(|at| minute(o.start) == minute(at)))
}

/// Changes the event `uid` as `fields` says (only its instance starting at `instance`, when
/// given: a RECURRENCE-ID override in the same resource), if it is still the version hearth
/// read.
pub async fn update(
    store: &Store,
    config: &CalendarConfig,
    uid: &str,
    instance: Option<When>,
    fields: &EventFields,
    tz: Tz,
    now_ms: i64,
) -> Result<(), CalendarError> {
    writable(config)?;
    let dav = client(config)?;
    let object = cached_object(store, config, uid, tz, now_ms).await?;
    let now = Utc
        .timestamp_millis_opt(now_ms)
        .single()
        .unwrap_or_default();
    let data = match instance {
        None => ics::update_event(&object.data, fields, now),
        Some(at) => ics::update_instance(&object.data, uid, at, fields, tz, now),
    }
    .map_err(|err| CalendarError::Refused {
        calendar: config.name.clone(),
        reason: format!("the saved event cannot be changed: {err}"),
    })?;
    let url = Url::parse(&object.href).map_err(|err| CalendarError::Refused {
        calendar: config.name.clone(),
        reason: format!("bad saved href: {err}"),
    })?;
    let guard = Guard::Version(object.etag.clone().unwrap_or_default());
    match dav.put(&url, data.clone(), &guard).await {
        Ok(etag) => remember(store, config, url, etag, data).await,
        Err(DavError::PreconditionFailed) => {
            let asked = asked(fields, instance, tz);
            Err(changed(
                &dav,
                store,
                config,
                &url,
                (uid, instance),
                asked,
                tz,
                now_ms,
            )
            .await)
        }
        Err(err) => Err(server(config, err)),
    }
}

/// What the owner asked a change to do, for the report of a 412.
fn asked(fields: &EventFields, instance: Option<When>, tz: Tz) -> String {
    let mut parts = Vec::new();
    if let Some(title) = &fields.title {
        parts.push(format!("title \"{title}\""));
    }
    if let Some((start, end)) = fields.times {
        parts.push(format!("{} to {}", describe(start, tz), describe(end, tz)));
    }
    for (name, value) in [
        ("location", &fields.location),
        ("description", &fields.description),
    ] {
        match value.as_deref() {
            Some("") => parts.push(format!("no {name}")),
            Some(text) => parts.push(format!("{name} \"{text}\"")),
            None => {}
        }
    }
    let what = parts.join(", ");
    match instance {
        Some(at) => format!("the instance of {} changed to {what}", describe(at, tz)),
        None => format!("the event changed to {what}"),
    }
}

/// Deletes the event `uid` (the whole series when it recurs), if it is still the version
/// hearth read.
pub async fn delete(
    store: &Store,
    config: &CalendarConfig,
    uid: &str,
    tz: Tz,
    now_ms: i64,
) -> Result<(), CalendarError> {
    writable(config)?;
    let dav = client(config)?;
    let object = cached_object(store, config, uid, tz, now_ms).await?;
    let url = Url::parse(&object.href).map_err(|err| CalendarError::Refused {
        calendar: config.name.clone(),
        reason: format!("bad saved href: {err}"),
    })?;
    match dav
        .delete(&url, object.etag.as_deref().unwrap_or("*"))
        .await
    {
        Ok(()) => {
            store
                .delete_calendar_object(&config.name, &object.href)
                .await?;
            Ok(())
        }
        Err(DavError::PreconditionFailed) => {
            let asked = "the event deleted".to_string();
            Err(changed(&dav, store, config, &url, (uid, None), asked, tz, now_ms).await)
        }
        Err(err) => Err(server(config, err)),
    }
}

/// Keeps what hearth wrote as the cached version when the server named its ETag; without one
/// the cached copy is dropped, so the next write reads the calendar again instead of sending a
/// stale ETag.
async fn remember(
    store: &Store,
    config: &CalendarConfig,
    url: Url,
    etag: Option<String>,
    data: String,
) -> Result<(), CalendarError> {
    let href = url.to_string();
    match etag {
        Some(etag) => {
            let object = CalendarObject {
                href,
                etag: Some(etag),
                data,
            };
            store.put_calendar_object(&config.name, &object).await?;
        }
        None => store.delete_calendar_object(&config.name, &href).await?,
    }
    Ok(())
}

/// The report of a 412: what the owner asked and what the server holds now (the instance
/// asked about, else the event's first), and the cache refreshed so the owner's next decision
/// is about that version.
#[allow(clippy::too_many_arguments)]
async fn changed(
    dav: &Dav,
    store: &Store,
    config: &CalendarConfig,
    url: &Url,
    (uid, instance): (&str, Option<When>),
    asked: String,
    tz: Tz,
    now_ms: i64,
) -> CalendarError {
    let now = match dav.get(url).await {
        Ok((data, _)) => {
            let shown =
                occurrence(&data, uid, instance, tz).or_else(|| occurrence(&data, uid, None, tz));
            match shown {
                Some(o) => format!("\"{}\" at {}", o.title, describe(o.start, tz)),
                None => "a version hearth cannot read".into(),
            }
        }
        Err(DavError::Status { status: 404, .. }) => "nothing: it was deleted".into(),
        Err(err) => format!("unknown ({err})"),
    };
    let day = Utc
        .timestamp_millis_opt(now_ms)
        .single()
        .unwrap_or_default();
    // Refreshed so that a retry the owner approves is about the version now on the server.
    if let Err(err) = read(store, config, tz, (day, day), now_ms).await {
        tracing::warn!(calendar = %config.name, error = %err, "cache not refreshed after a 412");
    }
    CalendarError::Changed {
        calendar: config.name.clone(),
        asked,
        now,
    }
}

/// A start as the owner reads it: a date, or a local time with the zone's name.
pub fn describe(when: When, tz: Tz) -> String {
    match when {
        When::Date(date) => date.to_string(),
        When::At(at) => at.with_timezone(&tz).format("%Y-%m-%d %H:%M").to_string(),
    }
}

/// `hearth doctor`'s check of one calendar: a CalDAV URL's collections (so the owner can copy
/// the right one), or a feed's event count; on a refused login, the fix for the provider.
pub async fn doctor(config: &CalendarConfig) -> Result<String, String> {
    let dav = client(config).map_err(|err| err.to_string())?;
    let url = collection_url(config).map_err(|err| err.to_string())?;
    let fail = |err: DavError| match err {
        DavError::Unauthorized { .. } => format!("{err} — fix: {}", login_fix(&url)),
        err => err.to_string(),
    };
    if config.kind() == CalendarKind::Ics {
        return match dav.feed(&url, None, None).await.map_err(fail)? {
            Feed::Fetched { data, .. } if data.trim_start().starts_with("BEGIN:VCALENDAR") => Ok(
                format!("ICS feed with {} event(s)", ics::split_feed(&data).len()),
            ),
            _ => Err(format!("{url} did not answer with an iCalendar feed")),
        };
    }
    let found = dav.discover(&url).await.map_err(fail)?;
    if found.is_empty() {
        return Err(format!("no calendar collections found at {url}"));
    }
    let configured = config.request_url();
    let listed: Vec<String> = found
        .iter()
        .map(|m| {
            let name = m.display_name.as_deref().unwrap_or("(no name)");
            let mark = if m.href == configured {
                " ← this entry"
            } else {
                ""
            };
            format!("{name} {}{mark}", m.href)
        })
        .collect();
    let text = format!("{} collection(s): {}", found.len(), listed.join("; "));
    if found.iter().any(|m| m.href == configured) {
        Ok(text)
    } else {
        Err(format!(
            "{text} — fix: set `url` to one of these collections"
        ))
    }
}

/// What to do about a refused login, by provider (the host of the URL).
fn login_fix(url: &Url) -> &'static str {
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    if host.contains("icloud.com") {
        "iCloud needs an app-specific password (account.apple.com → Sign-In and Security); resetting the Apple ID password revokes every one of them"
    } else if host.contains("google") {
        "Google's CalDAV takes OAuth only, which hearth does not do: use the calendar's secret address in iCal format as a read-only `url` instead"
    } else if host.contains("fastmail") {
        "Fastmail needs an app password with CalDAV access (Settings → Privacy & Security → App passwords)"
    } else {
        "check `username` and the password in `password_env`; Nextcloud with two-factor login needs an app password (Settings → Security → Devices & sessions)"
    }
}
