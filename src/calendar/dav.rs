//! The CalDAV and ICS wire protocol on reqwest: PROPFIND, REPORT (sync-collection,
//! calendar-multiget), conditional PUT and DELETE, discovery of a user's collections, and a
//! conditional GET of a feed. Multistatus answers are read with quick-xml by local name, so
//! any namespace prefix a server picks works.

use std::time::Duration;

use hearth_channel::Secret;
use quick_xml::events::Event;
use reqwest::header::{CONTENT_TYPE, ETAG, HeaderMap, IF_MATCH, IF_NONE_MATCH, LAST_MODIFIED};
use reqwest::{Method, StatusCode, Url};

/// Longest a request may take: a briefing must not hang on a slow server.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer read (a feed, a multistatus): more is refused, not truncated.
const MAX_BODY: usize = 16 * 1024 * 1024;
/// Resources asked for in one calendar-multiget.
const MULTIGET_BATCH: usize = 100;

/// What went wrong talking to a calendar server. The URL is named, the password never.
#[derive(Debug, thiserror::Error)]
pub enum DavError {
    #[error("{url} refused the login (HTTP {status})")]
    Unauthorized { url: String, status: u16 },
    #[error("the event changed on the server since it was read (HTTP 412)")]
    PreconditionFailed,
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("cannot reach {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("{url} sent an answer hearth cannot read: {reason}")]
    Protocol { url: String, reason: String },
}

impl DavError {
    /// The HTTP status, when the server answered with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            DavError::Unauthorized { status, .. } | DavError::Status { status, .. } => {
                Some(*status)
            }
            DavError::PreconditionFailed => Some(412),
            _ => None,
        }
    }
}

/// A client for one calendar's server, with its login.
#[derive(Clone)]
pub struct Dav {
    http: reqwest::Client,
    username: Option<String>,
    password: Option<Secret>,
}

/// One `<response>` of a multistatus: its href (absolute URL), its status when given at the
/// response level (a removed member in sync-collection), and the properties found with 200.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Member {
    pub href: String,
    pub status: Option<u16>,
    pub etag: Option<String>,
    pub ctag: Option<String>,
    pub sync_token: Option<String>,
    pub display_name: Option<String>,
    pub calendar_data: Option<String>,
    pub is_calendar: bool,
    pub is_collection: bool,
    /// `current-user-principal` or `calendar-home-set`'s href.
    pub link: Option<String>,
}

/// A multistatus: its members and, for sync-collection, the new token.
#[derive(Debug, Default)]
pub struct Multistatus {
    pub members: Vec<Member>,
    pub sync_token: Option<String>,
}

/// A feed fetched with a conditional GET.
pub enum Feed {
    NotModified,
    Fetched {
        data: String,
        etag: Option<String>,
        last_modified: Option<String>,
    },
}

/// How a write guards against a change made elsewhere.
#[derive(Clone, Debug)]
pub enum Guard {
    /// Create only: `If-None-Match: *`.
    Create,
    /// Change only this version: `If-Match: <etag>`.
    Version(String),
}

impl Dav {
    pub fn new(username: Option<String>, password: Option<Secret>) -> Result<Self, DavError> {
        let http = hearth_channel::http_client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|err| DavError::Unreachable {
                url: String::new(),
                reason: err.to_string(),
            })?;
        Ok(Self {
            http,
            username,
            password,
        })
    }

    fn request(&self, method: Method, url: &Url) -> reqwest::RequestBuilder {
        let request = self.http.request(method, url.clone());
        match &self.username {
            Some(user) => request.basic_auth(user, self.password.as_ref().map(Secret::expose)),
            None => request,
        }
    }

    /// Sends `request` and reads the body, mapping failures to [`DavError`]s; `ok` says which
    /// statuses are answers.
    async fn send(
        &self,
        url: &Url,
        request: reqwest::RequestBuilder,
        ok: impl Fn(StatusCode) -> bool,
    ) -> Result<(StatusCode, HeaderMap, String), DavError> {
        let shown = url.to_string();
        let mut response = request.send().await.map_err(|err| DavError::Unreachable {
            url: shown.clone(),
            reason: reason(&err),
        })?;
        let status = response.status();
        if matches!(status.as_u16(), 401 | 403) && !ok(status) {
            return Err(DavError::Unauthorized {
                url: shown,
                status: status.as_u16(),
            });
        }
        if status == StatusCode::PRECONDITION_FAILED {
            return Err(DavError::PreconditionFailed);
        }
        if !ok(status) {
            return Err(DavError::Status {
                url: shown,
                status: status.as_u16(),
            });
        }
        let headers = response.headers().clone();
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| DavError::Unreachable {
                url: shown.clone(),
                reason: reason(&err),
            })?
        {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(DavError::Protocol {
                    url: shown,
                    reason: format!("the answer is larger than {} MiB", MAX_BODY >> 20),
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok((status, headers, String::from_utf8_lossy(&body).into_owned()))
    }

    /// A PROPFIND of `props` (XML elements, namespaces `d:`, `c:` (CalDAV), `cs:`).
    pub async fn propfind(
        &self,
        url: &Url,
        depth: u8,
        props: &str,
    ) -> Result<Multistatus, DavError> {
        let body = format!(
            r#"<?xml version="1.0" encoding="utf-8"?><d:propfind xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav" xmlns:cs="http://calendarserver.org/ns/"><d:prop>{props}</d:prop></d:propfind>"#
        );
        self.report_like(
            Method::from_bytes(b"PROPFIND").expect("a valid method"),
            url,
            depth,
            body,
        )
        .await
    }

    async fn report_like(
        &self,
        method: Method,
        url: &Url,
        depth: u8,
        body: String,
    ) -> Result<Multistatus, DavError> {
        let request = self
            .request(method, url)
            .header("Depth", depth.to_string())
            .header(CONTENT_TYPE, "application/xml; charset=utf-8")
            .body(body);
        let (_, _, text) = self
            .send(url, request, |s| s == StatusCode::MULTI_STATUS)
            .await?;
        parse_multistatus(&text, url).map_err(|reason| DavError::Protocol {
            url: url.to_string(),
            reason,
        })
    }

    /// A REPORT with `body` (a sync-collection or calendar-multiget).
    pub async fn report(
        &self,
        url: &Url,
        depth: u8,
        body: String,
    ) -> Result<Multistatus, DavError> {
        let method = Method::from_bytes(b"REPORT").expect("a valid method");
        self.report_like(method, url, depth, body).await
    }

    /// The collection's ctag and sync token.
    pub async fn markers(&self, url: &Url) -> Result<Member, DavError> {
        let found = self
            .propfind(url, 0, "<cs:getctag/><d:sync-token/><d:resourcetype/>")
            .await?;
        Ok(found.members.into_iter().next().unwrap_or_default())
    }

    /// What changed since `token` (RFC 6578): members with their new ETags, and removed ones
    /// (status 404).
    pub async fn sync_collection(&self, url: &Url, token: &str) -> Result<Multistatus, DavError> {
        let body = format!(
            r#"<?xml version="1.0" encoding="utf-8"?><d:sync-collection xmlns:d="DAV:"><d:sync-token>{}</d:sync-token><d:sync-level>1</d:sync-level><d:prop><d:getetag/></d:prop></d:sync-collection>"#,
            xml_escape(token)
        );
        self.report(url, 1, body).await
    }

    /// Every calendar object in the collection with its ETag.
    pub async fn list_etags(&self, url: &Url) -> Result<Vec<Member>, DavError> {
        let found = self
            .propfind(url, 1, "<d:getetag/><d:resourcetype/>")
            .await?;
        Ok(found
            .members
            .into_iter()
            .filter(|m| !m.is_collection && !same_path(&m.href, url.as_str()))
            .collect())
    }

    /// The objects at `hrefs` with their data and ETags.
    pub async fn multiget(&self, url: &Url, hrefs: &[String]) -> Result<Vec<Member>, DavError> {
        let mut out = Vec::new();
        for batch in hrefs.chunks(MULTIGET_BATCH) {
            let list: String = batch
                .iter()
                .map(|href| {
                    let path = Url::parse(href).map_or(href.clone(), |u| u.path().to_string());
                    format!("<d:href>{}</d:href>", xml_escape(&path))
                })
                .collect();
            let body = format!(
                r#"<?xml version="1.0" encoding="utf-8"?><c:calendar-multiget xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav"><d:prop><d:getetag/><c:calendar-data/></d:prop>{list}</c:calendar-multiget>"#
            );
            let found = self.report(url, 1, body).await?;
            out.extend(
                found
                    .members
                    .into_iter()
                    .filter(|m| m.calendar_data.is_some()),
            );
        }
        Ok(out)
    }

    /// One object's data and ETag.
    pub async fn get(&self, url: &Url) -> Result<(String, Option<String>), DavError> {
        let request = self.request(Method::GET, url);
        let (_, headers, body) = self.send(url, request, |s| s.is_success()).await?;
        Ok((body, header(&headers, ETAG)))
    }

    /// Writes `data` at `url` under `guard`; the new ETag when the server gives one.
    pub async fn put(
        &self,
        url: &Url,
        data: String,
        guard: &Guard,
    ) -> Result<Option<String>, DavError> {
        let request = self
            .request(Method::PUT, url)
            .header(CONTENT_TYPE, "text/calendar; charset=utf-8")
            .body(data);
        let request = match guard {
            Guard::Create => request.header(IF_NONE_MATCH, "*"),
            Guard::Version(etag) => request.header(IF_MATCH, etag.as_str()),
        };
        let (_, headers, _) = self.send(url, request, |s| s.is_success()).await?;
        Ok(header(&headers, ETAG))
    }

    /// Deletes the object at `url` if it is still at version `etag`.
    pub async fn delete(&self, url: &Url, etag: &str) -> Result<(), DavError> {
        let request = self.request(Method::DELETE, url).header(IF_MATCH, etag);
        self.send(url, request, |s| s.is_success()).await?;
        Ok(())
    }

    /// A feed, unless it is unchanged since `etag` / `last_modified`.
    pub async fn feed(
        &self,
        url: &Url,
        etag: Option<&str>,
        last_modified: Option<&str>,
    ) -> Result<Feed, DavError> {
        let mut request = self.request(Method::GET, url);
        if let Some(etag) = etag {
            request = request.header(IF_NONE_MATCH, etag);
        }
        if let Some(date) = last_modified {
            request = request.header(reqwest::header::IF_MODIFIED_SINCE, date);
        }
        let (status, headers, data) = self
            .send(url, request, |s| {
                s.is_success() || s == StatusCode::NOT_MODIFIED
            })
            .await?;
        if status == StatusCode::NOT_MODIFIED {
            return Ok(Feed::NotModified);
        }
        Ok(Feed::Fetched {
            data,
            etag: header(&headers, ETAG),
            last_modified: header(&headers, LAST_MODIFIED),
        })
    }

    /// The calendar collections of the account at `base` (RFC 6764 discovery:
    /// `/.well-known/caldav`, then `current-user-principal`, then `calendar-home-set`), or
    /// `base` itself when it is a calendar.
    pub async fn discover(&self, base: &Url) -> Result<Vec<Member>, DavError> {
        let here = self
            .propfind(base, 0, "<d:resourcetype/><d:displayname/>")
            .await;
        if let Ok(found) = &here
            && let Some(member) = found.members.iter().find(|m| m.is_calendar)
        {
            return Ok(vec![member.clone()]);
        }
        let principal_prop = "<d:current-user-principal/>";
        let mut principal = match self.propfind(base, 0, principal_prop).await {
            Ok(found) => found.members.into_iter().find_map(|m| m.link),
            Err(err @ DavError::Unauthorized { .. }) => return Err(err),
            Err(_) => None,
        };
        if principal.is_none() {
            let known = base
                .join("/.well-known/caldav")
                .map_err(|err| DavError::Protocol {
                    url: base.to_string(),
                    reason: err.to_string(),
                })?;
            principal = self
                .propfind(&known, 0, principal_prop)
                .await?
                .members
                .into_iter()
                .find_map(|m| m.link);
        }
        let principal = principal.ok_or_else(|| DavError::Protocol {
            url: base.to_string(),
            reason: "no current-user-principal: give the calendar collection's own URL".into(),
        })?;
        let principal = slash(resolve(base, &principal)?);
        let home = self
            .propfind(&principal, 0, "<c:calendar-home-set/>")
            .await?
            .members
            .into_iter()
            .find_map(|m| m.link)
            .ok_or_else(|| DavError::Protocol {
                url: principal.to_string(),
                reason: "no calendar-home-set".into(),
            })?;
        let home = slash(resolve(&principal, &home)?);
        let found = self
            .propfind(&home, 1, "<d:resourcetype/><d:displayname/>")
            .await?;
        Ok(found
            .members
            .into_iter()
            .filter(|m| m.is_calendar)
            .collect())
    }
}

/// `href` resolved against `base`.
pub fn resolve(base: &Url, href: &str) -> Result<Url, DavError> {
    base.join(href).map_err(|err| DavError::Protocol {
        url: base.to_string(),
        reason: format!("bad href {href:?}: {err}"),
    })
}

/// The URL with a trailing slash (collections need one on some servers).
fn slash(mut url: Url) -> Url {
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    url
}

/// Whether two URLs name the same path, ignoring a trailing slash.
fn same_path(a: &str, b: &str) -> bool {
    let path = |s: &str| {
        Url::parse(s).map_or(s.to_string(), |u| {
            u.path().trim_end_matches('/').to_string()
        })
    };
    path(a) == path(b)
}

fn header(headers: &HeaderMap, name: reqwest::header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .filter(|v| !v.is_empty())
}

/// A transport error's cause, without the URL reqwest repeats (the caller names it).
fn reason(err: &reqwest::Error) -> String {
    let mut text = if err.is_timeout() {
        "timed out".to_string()
    } else if err.is_connect() {
        "connection failed".to_string()
    } else {
        "request failed".to_string()
    };
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Reads a multistatus by local names; hrefs are resolved against `base`.
pub fn parse_multistatus(text: &str, base: &Url) -> Result<Multistatus, String> {
    let mut reader = quick_xml::Reader::from_str(text);
    let mut out = Multistatus::default();
    // The open elements' local names, and the text of the innermost.
    let mut path: Vec<String> = Vec::new();
    let mut buffer = String::new();
    let mut member = Member::default();
    // Properties of the current propstat, kept only when its status is 200.
    let mut props = Member::default();
    let mut propstat_status: Option<u16> = None;
    let mut saw_multistatus = false;
    loop {
        let event = reader
            .read_event()
            .map_err(|err| format!("not XML: {err}"))?;
        match event {
            Event::Start(e) => {
                let name = e.local_name().as_ref().to_string();
                if name == "multistatus" {
                    saw_multistatus = true;
                }
                path.push(name);
                buffer.clear();
            }
            Event::Empty(e) => {
                let name = e.local_name().as_ref().to_string();
                if path.last().is_some_and(|p| p == "resourcetype") {
                    match name.as_str() {
                        "calendar" => props.is_calendar = true,
                        "collection" => props.is_collection = true,
                        _ => {}
                    }
                }
            }
            Event::Text(e) => buffer.push_str(&e.xml10_content()),
            Event::CData(e) => buffer.push_str(&e.xml10_content()),
            Event::GeneralRef(e) => {
                if let Ok(Some(c)) = e.resolve_char_ref() {
                    buffer.push(c);
                } else if let Some(text) = quick_xml::escape::resolve_xml_entity(&e.xml10_content())
                {
                    buffer.push_str(text);
                }
            }
            Event::End(_) => {
                let Some(name) = path.pop() else {
                    return Err("unbalanced XML".into());
                };
                let parent = path.last().map(String::as_str).unwrap_or("");
                let value = buffer.trim().to_string();
                match (name.as_str(), parent) {
                    ("href", "response") => {
                        member.href =
                            resolve(base, &value).map_or(value.clone(), |u| u.to_string());
                    }
                    ("href", "current-user-principal" | "calendar-home-set") => {
                        props.link = Some(value.clone());
                    }
                    ("status", "response") => member.status = status_code(&value),
                    ("status", "propstat") => propstat_status = status_code(&value),
                    ("sync-token", "multistatus") => {
                        out.sync_token = Some(value.clone()).filter(|t| !t.is_empty());
                    }
                    (prop, "prop") => {
                        let value = Some(value.clone()).filter(|t| !t.is_empty());
                        match prop {
                            "getetag" => props.etag = value,
                            "getctag" => props.ctag = value,
                            "sync-token" => props.sync_token = value,
                            "displayname" => props.display_name = value,
                            // Not trimmed: the object as the server sent it.
                            "calendar-data" => {
                                props.calendar_data =
                                    Some(buffer.clone()).filter(|t| !t.trim().is_empty());
                            }
                            _ => {}
                        }
                    }
                    ("calendar" | "collection", "resourcetype") => {
                        // `<c:calendar></c:calendar>` rather than an empty element.
                        if name == "calendar" {
                            props.is_calendar = true;
                        } else {
                            props.is_collection = true;
                        }
                    }
                    ("propstat", _) => {
                        if propstat_status.is_none_or(|s| s == 200) {
                            merge(&mut member, std::mem::take(&mut props));
                        }
                        props = Member::default();
                        propstat_status = None;
                    }
                    ("response", _) => out.members.push(std::mem::take(&mut member)),
                    _ => {}
                }
                buffer.clear();
            }
            Event::Eof if path.is_empty() => break,
            Event::Eof => return Err("the answer ends in the middle".into()),
            _ => {}
        }
    }
    if !saw_multistatus {
        return Err("no multistatus element".into());
    }
    Ok(out)
}

/// Properties of a 200 propstat into the member.
fn merge(member: &mut Member, props: Member) {
    member.etag = member.etag.take().or(props.etag);
    member.ctag = member.ctag.take().or(props.ctag);
    member.sync_token = member.sync_token.take().or(props.sync_token);
    member.display_name = member.display_name.take().or(props.display_name);
    member.calendar_data = member.calendar_data.take().or(props.calendar_data);
    member.link = member.link.take().or(props.link);
    member.is_calendar |= props.is_calendar;
    member.is_collection |= props.is_collection;
}

/// `HTTP/1.1 404 Not Found` → 404.
fn status_code(text: &str) -> Option<u16> {
    text.split_whitespace().nth(1).and_then(|s| s.parse().ok())
}

#[cfg(test)]
mod tests {
    use reqwest::Url;

    use super::parse_multistatus;

    #[test]
    fn a_multistatus_reads_with_any_prefix_and_drops_missing_properties() {
        let base = Url::parse("https://dav.example.com/cal/me/work/").expect("test value");
        let xml = r#"<?xml version="1.0"?>
<D:multistatus xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav">
 <D:response><D:href>/cal/me/work/a%20b.ics</D:href>
  <D:propstat><D:prop><D:getetag>"e1"</D:getetag><C:calendar-data><![CDATA[BEGIN:VCALENDAR
END:VCALENDAR
]]></C:calendar-data></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>
  <D:propstat><D:prop><D:displayname/></D:prop><D:status>HTTP/1.1 404 Not Found</D:status></D:propstat>
 </D:response>
 <D:response><D:href>/cal/me/work/gone.ics</D:href><D:status>HTTP/1.1 404 Not Found</D:status></D:response>
 <D:response><D:href>/cal/me/work/</D:href><D:propstat><D:prop><D:resourcetype><D:collection/><C:calendar/></D:resourcetype><D:displayname>Work &amp; more</D:displayname></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>
 <D:sync-token>http://x/sync/2</D:sync-token>
</D:multistatus>"#;
        let found = parse_multistatus(xml, &base).expect("test value");
        assert_eq!(found.members.len(), 3);
        let first = &found.members[0];
        assert_eq!(first.href, "https://dav.example.com/cal/me/work/a%20b.ics");
        assert_eq!(first.etag.as_deref(), Some("\"e1\""));
        assert!(
            first
                .calendar_data
                .as_deref()
                .expect("test value")
                .starts_with("BEGIN:VCALENDAR")
        );
        assert_eq!(found.members[1].status, Some(404));
        assert!(found.members[2].is_calendar);
        assert_eq!(
            found.members[2].display_name.as_deref(),
            Some("Work & more")
        );
        assert_eq!(found.sync_token.as_deref(), Some("http://x/sync/2"));
    }

    #[test]
    fn an_answer_that_is_not_a_multistatus_is_an_error() {
        let base = Url::parse("https://dav.example.com/").expect("test value");
        for bad in [
            "",
            "<html><body>login</body></html>",
            "<d:multistatus xmlns:d=\"DAV:\"><d:response>",
            "\u{0}\u{1}",
        ] {
            assert!(parse_multistatus(bad, &base).is_err(), "{bad:?}");
        }
    }
}
