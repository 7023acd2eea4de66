//! The `web` group: `fetch_web_page`, `http_request` and `json_api`.
//!
//! Every request goes through [`fetch`]: only http and https, the host resolved here and every
//! address checked against [`net::is_private`](super::net::is_private) (unless the owner's
//! allowlist admits it) *before* anything connects, the connection pinned to the checked
//! addresses, redirects followed by hand so each hop is checked the same way, at most 5 MB read
//! while streaming, and 30 seconds for the whole exchange.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use std::collections::BTreeMap;

use hearth_channel::error_chain;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::net::{PrivateAllowlist, is_private};
use super::typed::{Within, inline_schema};
use super::{Risk, StatefulTool, Tool, ToolContext, ToolError, with_state};

/// Most bytes of a response body read.
pub const MAX_BODY: usize = 5 * 1024 * 1024;
/// Longest a request may take, redirects included.
pub const TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_REDIRECTS: usize = 5;
const USER_AGENT: &str = concat!("hearth/", env!("CARGO_PKG_VERSION"));

/// How much a request may read and how long it may take; tests shrink them.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_body: usize,
    pub timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body: MAX_BODY,
            timeout: TIMEOUT,
        }
    }
}

pub fn tools() -> Vec<Arc<dyn Tool>> {
    tools_with(Limits::default())
}

fn tools_with(limits: Limits) -> Vec<Arc<dyn Tool>> {
    vec![
        with_state(FetchWebPage(limits)),
        with_state(HttpRequest(limits)),
        with_state(JsonApi(limits)),
    ]
}

const GROUP: &str = "web";
/// How long a web tool's call (`web_search`'s too) may run: the request's own limit, and a
/// little to answer.
pub(super) const CALL_TIMEOUT: Option<Duration> = Some(Duration::from_secs(TIMEOUT.as_secs() + 5));

/// One request to send.
#[derive(Clone, Debug)]
pub(super) struct Outgoing {
    pub(super) method: Method,
    pub(super) url: Url,
    pub(super) headers: HeaderMap,
    pub(super) body: Option<Vec<u8>>,
}

impl Outgoing {
    pub(super) fn get(url: Url) -> Self {
        Self {
            method: Method::GET,
            url,
            headers: HeaderMap::new(),
            body: None,
        }
    }
}

/// What came back, after redirects.
#[derive(Debug)]
pub(super) struct Fetched {
    pub(super) status: StatusCode,
    /// The URL of the last hop.
    pub(super) url: Url,
    pub(super) headers: HeaderMap,
    pub(super) body: Vec<u8>,
    /// The body was longer than the limit and was cut there.
    pub(super) truncated: bool,
}

impl Fetched {
    pub(super) fn content_type(&self) -> String {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase()
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Where a vetted URL may connect.
#[derive(Debug)]
enum Target {
    /// The URL names an address itself.
    Address,
    /// A host name and the addresses it resolved to, all checked.
    Resolved {
        host: String,
        addrs: Vec<SocketAddr>,
    },
}

/// Checks a URL before any connection: its scheme, and every address its host stands for.
async fn vet(url: &Url, allow: &PrivateAllowlist) -> Result<Target, ToolError> {
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(ToolError::InvalidArguments(format!(
                "only http and https URLs can be fetched, not {other}:"
            )));
        }
    }
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| ToolError::InvalidArguments(format!("{url} has no host")))?;
    // The URL parser has already normalised odd IPv4 spellings (0x7f.1, 2130706433).
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return if allow.permits(bare, ip) {
            Ok(Target::Address)
        } else {
            Err(refused(bare, ip))
        };
    }
    let port = url.port_or_known_default().unwrap_or(80);
    let addrs: Vec<SocketAddr> =
        tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::lookup_host((host, port)))
            .await
            .map_err(|_| ToolError::Failed(format!("looking up {host} timed out")))?
            .map_err(|e| ToolError::Failed(format!("cannot resolve {host}: {e}")))?
            .collect();
    if addrs.is_empty() {
        return Err(ToolError::Failed(format!("{host} has no addresses")));
    }
    // Refuse if *any* address is internal: a name with one public and one private address could
    // otherwise be steered to the private one.
    if let Some(bad) = addrs.iter().find(|a| !allow.permits(host, a.ip())) {
        return Err(refused(host, bad.ip()));
    }
    Ok(Target::Resolved {
        host: host.to_string(),
        addrs,
    })
}

fn refused(host: &str, ip: IpAddr) -> ToolError {
    let kind = address_kind(ip);
    let what = if host == ip.to_string() {
        format!("{ip} is a {kind} address")
    } else {
        format!("{host} resolves to {ip}, a {kind} address")
    };
    ToolError::Failed(format!(
        "refused: {what}. The web tools do not reach internal addresses (the owner can allow a \
         host in tools.allowed_private_hosts)"
    ))
}

fn address_kind(ip: IpAddr) -> &'static str {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) if v4.is_loopback() => "loopback",
        IpAddr::V4(v4) if v4.is_link_local() => "link-local",
        IpAddr::V4(v4) if v4.is_private() => "private",
        IpAddr::V6(v6) if v6.is_loopback() => "loopback",
        IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80 => "link-local",
        IpAddr::V6(v6) if (v6.segments()[0] & 0xfe00) == 0xfc00 => "unique-local",
        ip if is_private(ip) => "reserved or special-purpose",
        _ => "public",
    }
}

fn client(target: &Target, timeout: Duration) -> Result<reqwest::Client, ToolError> {
    let mut builder = hearth_channel::http_client::builder()
        .redirect(reqwest::redirect::Policy::none())
        // A proxy would make the vetted address meaningless.
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT.min(timeout))
        .timeout(timeout)
        .user_agent(USER_AGENT);
    if let Target::Resolved { host, addrs } = target {
        // Connect to exactly the addresses that were checked; no second DNS answer.
        builder = builder.resolve_to_addrs(host, addrs);
    }
    builder.build().map_err(|e| {
        ToolError::Failed(format!("cannot build the HTTP client: {}", error_chain(&e)))
    })
}

/// Sends `request`, following up to five redirects, each hop vetted before it connects.
async fn fetch(ctx: &ToolContext, request: Outgoing, limits: Limits) -> Result<Fetched, ToolError> {
    let allow = PrivateAllowlist::new(&ctx.config.tools.allowed_private_hosts);
    fetch_allowing(&allow, request, limits).await
}

/// [`fetch`] with the private hosts given: `web_search` adds the owner's configured search
/// endpoint to the owner's list.
pub(super) async fn fetch_allowing(
    allow: &PrivateAllowlist,
    request: Outgoing,
    limits: Limits,
) -> Result<Fetched, ToolError> {
    let deadline = Instant::now() + limits.timeout;
    tokio::time::timeout(limits.timeout, follow(request, allow, limits, deadline))
        .await
        .map_err(|_| timed_out(limits))?
}

fn timed_out(limits: Limits) -> ToolError {
    ToolError::Failed(format!(
        "the request took longer than {:.1} seconds and was stopped",
        limits.timeout.as_secs_f64()
    ))
}

async fn follow(
    mut request: Outgoing,
    allow: &PrivateAllowlist,
    limits: Limits,
    deadline: Instant,
) -> Result<Fetched, ToolError> {
    let mut hops = 0;
    loop {
        let target = vet(&request.url, allow).await?;
        let remaining = deadline.saturating_duration_since(Instant::now());
        let client = client(&target, remaining.max(Duration::from_millis(1)))?;
        let mut builder = client
            .request(request.method.clone(), request.url.clone())
            .headers(request.headers.clone());
        if let Some(body) = &request.body {
            builder = builder.body(body.clone());
        }
        let mut response = builder.send().await.map_err(|e| {
            if e.is_timeout() {
                return timed_out(limits);
            }
            ToolError::Failed(format!(
                "{} {} failed: {}",
                request.method,
                request.url,
                error_chain(&e.without_url())
            ))
        })?;
        let status = response.status();
        let location = response
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if let (true, Some(location)) = (status.is_redirection(), location) {
            hops += 1;
            if hops > MAX_REDIRECTS {
                return Err(ToolError::Failed(format!(
                    "more than {MAX_REDIRECTS} redirects, last to {location}"
                )));
            }
            let next = request.url.join(&location).map_err(|e| {
                ToolError::Failed(format!("redirect to an invalid URL {location:?}: {e}"))
            })?;
            redirect(&mut request, status, next);
            continue;
        }
        let mut body = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = response.chunk().await.map_err(|e| {
            if e.is_timeout() {
                return timed_out(limits);
            }
            ToolError::Failed(format!(
                "reading the response failed: {}",
                error_chain(&e.without_url())
            ))
        })? {
            let room = limits.max_body - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        return Ok(Fetched {
            status,
            url: request.url,
            headers: response.headers().clone(),
            body,
            truncated,
        });
    }
}

/// Turns `request` into the request for the next hop, as browsers do: 303 (and 301/302 after a
/// POST) become a GET without body; credentials are not sent to another origin.
fn redirect(request: &mut Outgoing, status: StatusCode, next: Url) {
    let to_get = status == StatusCode::SEE_OTHER
        || (matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND)
            && request.method == Method::POST);
    if to_get && request.method != Method::HEAD {
        request.method = Method::GET;
        request.body = None;
        request.headers.remove(header::CONTENT_TYPE);
    }
    if next.origin() != request.url.origin() {
        for name in [
            header::AUTHORIZATION,
            header::COOKIE,
            header::PROXY_AUTHORIZATION,
        ] {
            request.headers.remove(name);
        }
    }
    request.url = next;
}

/// An absolute URL as the model gave it (trimmed); [`vet`] checks its scheme and host.
#[derive(Clone, Debug)]
pub(super) struct WebUrl(Url);

impl<'de> Deserialize<'de> for WebUrl {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let text = text.trim();
        Url::parse(text).map(Self).map_err(|e| {
            serde::de::Error::custom(format!("{text:?} is not a valid absolute URL: {e}"))
        })
    }
}

inline_schema!(WebUrl, as String);

/// The `max_chars` argument of the web tools.
type MaxChars = Within<100, 100_000>;

/// The `max_chars` argument, or the tool's default.
fn max_chars(asked: Option<MaxChars>, default: usize) -> usize {
    asked.map_or(default, Within::get)
}

/// `text` cut to `max` characters; whether it was cut.
fn truncate(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (text[..at].to_string(), true),
        None => (text.to_string(), false),
    }
}

/// Headers a caller may not set: they describe the connection, which hearth owns.
const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
    "proxy-connection",
];

fn request_headers(given: Option<BTreeMap<String, String>>) -> Result<HeaderMap, ToolError> {
    let mut headers = HeaderMap::new();
    for (name, value) in given.unwrap_or_default() {
        let lower = name.to_ascii_lowercase();
        if FORBIDDEN_HEADERS.contains(&lower.as_str()) {
            return Err(ToolError::InvalidArguments(format!(
                "header {name:?} cannot be set; hearth manages it"
            )));
        }
        let name = HeaderName::from_bytes(lower.as_bytes()).map_err(|_| {
            ToolError::InvalidArguments(format!("{name:?} is not a valid header name"))
        })?;
        let value = HeaderValue::from_str(&value).map_err(|_| {
            ToolError::InvalidArguments(format!("the value of header {name} is not valid"))
        })?;
        headers.insert(name, value);
    }
    Ok(headers)
}

/// The response headers worth showing a model.
fn shown_headers(headers: &HeaderMap) -> Map<String, Value> {
    const SHOWN: &[&str] = &[
        "content-type",
        "content-length",
        "location",
        "date",
        "last-modified",
        "etag",
        "cache-control",
        "expires",
        "retry-after",
        "content-language",
        "www-authenticate",
    ];
    headers
        .iter()
        .filter(|(name, _)| {
            SHOWN.contains(&name.as_str()) || name.as_str().starts_with("x-ratelimit")
        })
        .filter_map(|(name, value)| Some((name.to_string(), json!(value.to_str().ok()?))))
        .collect()
}

fn looks_like_html(content_type: &str, body: &[u8]) -> bool {
    if content_type.contains("html") {
        return true;
    }
    let start = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    let start = start.trim_start();
    content_type.is_empty() && (start.starts_with("<!doctype html") || start.starts_with("<html"))
}

fn is_text(content_type: &str) -> bool {
    content_type.is_empty()
        || content_type.starts_with("text/")
        || [
            "json",
            "xml",
            "javascript",
            "csv",
            "yaml",
            "x-www-form-urlencoded",
        ]
        .iter()
        .any(|t| content_type.contains(t))
}

/// `fetch_web_page`, with the limits its requests keep to.
struct FetchWebPage(Limits);

/// Fetch a public web page and return its title and readable text (scripts, styles and
/// navigation removed). Plain-text and JSON pages are returned as they are.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PageArgs {
    /// http or https URL
    url: WebUrl,
    /// longest text returned; default 20000
    max_chars: Option<MaxChars>,
}

impl StatefulTool for FetchWebPage {
    const NAME: &'static str = "fetch_web_page";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "browse, website, read, article, url, download, scrape";
    const TIMEOUT: Option<Duration> = CALL_TIMEOUT;
    type Args = PageArgs;
    type Output = Value;

    async fn run(&self, args: PageArgs, ctx: &ToolContext) -> Result<Value, ToolError> {
        let limits = self.0;
        let max = max_chars(args.max_chars, 20_000);
        let mut request = Outgoing::get(args.url.0);
        request.headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"),
        );
        let fetched = fetch(ctx, request, limits).await?;
        let content_type = fetched.content_type();
        let (title, text) = if looks_like_html(&content_type, &fetched.body) {
            let html = fetched.text();
            (html::title(&html), html::to_text(&html))
        } else if is_text(&content_type) {
            (None, fetched.text())
        } else {
            return Err(ToolError::Failed(format!(
                "{} is {content_type}, not a text page",
                fetched.url
            )));
        };
        let (text, cut) = truncate(&text, max);
        let mut out = json!({
            "url": fetched.url.as_str(),
            "status": fetched.status.as_u16(),
            "title": title,
            "content_type": content_type,
            "text": text,
            "truncated": cut || fetched.truncated,
        });
        if fetched.truncated {
            out["note"] = json!(format!(
                "the page is larger than {} bytes; only the start was read",
                limits.max_body
            ));
        }
        Ok(out)
    }
}

/// `http_request`, with the limits its requests keep to: any method; GET and HEAD are safe, the
/// rest act on the outside world.
struct HttpRequest(Limits);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
enum AnyMethod {
    #[default]
    Get,
    Head,
    Post,
    Put,
    Patch,
    Delete,
    Options,
}

impl AnyMethod {
    fn method(self) -> Method {
        match self {
            AnyMethod::Get => Method::GET,
            AnyMethod::Head => Method::HEAD,
            AnyMethod::Post => Method::POST,
            AnyMethod::Put => Method::PUT,
            AnyMethod::Patch => Method::PATCH,
            AnyMethod::Delete => Method::DELETE,
            AnyMethod::Options => Method::OPTIONS,
        }
    }
}

/// GET and HEAD read; every other method acts outside.
fn method_risk(method: &Method) -> Risk {
    if matches!(*method, Method::GET | Method::HEAD) {
        Risk::Safe
    } else {
        Risk::Outward
    }
}

/// Send an HTTP request to a public URL and return the status, main headers and body text. GET
/// and HEAD only read; other methods change things elsewhere and may need the user's approval.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RequestArgs {
    /// default GET
    method: Option<AnyMethod>,
    /// http or https URL
    url: WebUrl,
    /// request headers, e.g. {"Authorization": "Bearer …"}
    headers: Option<BTreeMap<String, String>>,
    /// request body (set Content-Type in headers)
    body: Option<String>,
    /// longest body text returned; default 10000
    max_chars: Option<MaxChars>,
}

impl StatefulTool for HttpRequest {
    const NAME: &'static str = "http_request";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Outward;
    const TAGS: &'static str = "api, rest, webhook, post, curl, endpoint";
    const TIMEOUT: Option<Duration> = CALL_TIMEOUT;
    type Args = RequestArgs;
    type Output = Value;

    fn risk(&self, args: &RequestArgs) -> Risk {
        method_risk(&args.method.unwrap_or_default().method())
    }

    async fn run(&self, args: RequestArgs, ctx: &ToolContext) -> Result<Value, ToolError> {
        let method = args.method.unwrap_or_default().method();
        let url = args.url.0;
        let headers = request_headers(args.headers)?;
        let body = args.body.map(String::into_bytes);
        if body.is_some() && matches!(method, Method::GET | Method::HEAD) {
            return Err(ToolError::InvalidArguments(format!(
                "{method} requests have no body; use POST, PUT or PATCH"
            )));
        }
        let max = max_chars(args.max_chars, 10_000);
        let fetched = fetch(
            ctx,
            Outgoing {
                method,
                url,
                headers,
                body,
            },
            self.0,
        )
        .await?;
        let (body, cut) = truncate(&fetched.text(), max);
        let binary = !is_text(&fetched.content_type()) && !fetched.body.is_empty();
        Ok(json!({
            "status": fetched.status.as_u16(),
            "ok": fetched.status.is_success(),
            "url": fetched.url.as_str(),
            "headers": shown_headers(&fetched.headers),
            "body": if binary { Value::Null } else { json!(body) },
            "body_bytes": fetched.body.len(),
            "truncated": (cut && !binary) || fetched.truncated,
        }))
    }
}

/// `json_api`, with the limits its requests keep to: GET or POST JSON and pick out part of the
/// answer.
struct JsonApi(Limits);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
enum ApiMethod {
    #[default]
    Get,
    Post,
}

impl ApiMethod {
    fn method(self) -> Method {
        match self {
            ApiMethod::Get => Method::GET,
            ApiMethod::Post => Method::POST,
        }
    }
}

/// Call a JSON API (GET, or POST with a JSON body) and return the parsed response, or only the
/// part at `path`. POST changes things elsewhere and may need the user's approval.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ApiArgs {
    /// http or https URL
    url: WebUrl,
    /// default GET
    method: Option<ApiMethod>,
    /// JSON body for POST
    body: Option<Value>,
    /// extra request headers
    headers: Option<BTreeMap<String, String>>,
    /// part to return: JSON pointer /data/0/name or dotted data[0].name
    path: Option<String>,
    /// longest result text; default 20000
    max_chars: Option<MaxChars>,
}

impl StatefulTool for JsonApi {
    const NAME: &'static str = "json_api";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Outward;
    const TAGS: &'static str = "api, rest, json, endpoint, query";
    const TIMEOUT: Option<Duration> = CALL_TIMEOUT;
    type Args = ApiArgs;
    type Output = Value;

    fn risk(&self, args: &ApiArgs) -> Risk {
        method_risk(&args.method.unwrap_or_default().method())
    }

    async fn run(&self, args: ApiArgs, ctx: &ToolContext) -> Result<Value, ToolError> {
        let method = args.method.unwrap_or_default().method();
        let url = args.url.0;
        let mut headers = request_headers(args.headers)?;
        headers
            .entry(header::ACCEPT)
            .or_insert(HeaderValue::from_static("application/json"));
        let body = match (args.body, &method) {
            (None, _) => None,
            (Some(_), &Method::GET) => {
                return Err(ToolError::InvalidArguments(
                    "GET requests have no body; use method POST".into(),
                ));
            }
            (Some(body), _) => {
                headers
                    .entry(header::CONTENT_TYPE)
                    .or_insert(HeaderValue::from_static("application/json"));
                Some(body.to_string().into_bytes())
            }
        };
        let max = max_chars(args.max_chars, 20_000);
        let fetched = fetch(
            ctx,
            Outgoing {
                method,
                url,
                headers,
                body,
            },
            self.0,
        )
        .await?;
        if fetched.truncated {
            return Err(ToolError::Failed(format!(
                "the response is larger than {} bytes",
                self.0.max_body
            )));
        }
        let parsed: Value = serde_json::from_slice(&fetched.body).map_err(|e| {
            let (start, _) = truncate(&fetched.text(), 200);
            ToolError::Failed(format!(
                "HTTP {}: the response is not JSON ({e}); it starts: {start}",
                fetched.status.as_u16()
            ))
        })?;
        let path = args.path.as_deref().unwrap_or("");
        let data = extract(&parsed, path).map_err(ToolError::Failed)?;
        let text = data.to_string();
        let mut out = json!({
            "status": fetched.status.as_u16(),
            "ok": fetched.status.is_success(),
            "url": fetched.url.as_str(),
        });
        if !path.is_empty() {
            out["path"] = json!(path);
        }
        match truncate(&text, max) {
            (_, false) => out["data"] = data.clone(),
            (cut, true) => {
                out["data_text"] = json!(cut);
                out["truncated"] = json!(true);
                out["note"] = json!("the data is longer than max_chars; use `path` to pick a part");
            }
        }
        Ok(out)
    }
}

/// The part of `value` at `path`: a JSON pointer (`/items/0/name`) or dotted (`items[0].name`,
/// `items.0.name`, a leading `$.` allowed). Empty, `/`, `.` or `$` is the whole value.
fn extract<'a>(value: &'a Value, path: &str) -> Result<&'a Value, String> {
    let path = path.trim();
    let segments: Vec<String> = if let Some(pointer) = path.strip_prefix('/') {
        if pointer.is_empty() {
            Vec::new()
        } else {
            pointer
                .split('/')
                .map(|s| s.replace("~1", "/").replace("~0", "~"))
                .collect()
        }
    } else {
        let dotted = path.trim_start_matches('$').trim_start_matches('.');
        dotted
            .replace('[', ".")
            .replace(']', "")
            .split('.')
            .filter(|s| !s.is_empty())
            .map(|s| s.trim_matches(['"', '\'']).to_string())
            .collect()
    };
    let mut current = value;
    for (i, segment) in segments.iter().enumerate() {
        let next = match current {
            Value::Object(map) => map.get(segment),
            Value::Array(items) => segment.parse::<usize>().ok().and_then(|n| items.get(n)),
            _ => None,
        };
        current = match next {
            Some(next) => next,
            None => {
                let at = if i == 0 {
                    "the top level".to_string()
                } else {
                    format!("/{}", segments[..i].join("/"))
                };
                let there = match current {
                    Value::Object(map) => format!(
                        "an object with keys {}",
                        map.keys().take(30).cloned().collect::<Vec<_>>().join(", ")
                    ),
                    Value::Array(items) => format!("an array of {} items", items.len()),
                    other => format!("the value {}", truncate(&other.to_string(), 80).0),
                };
                return Err(format!(
                    "path {path:?}: no {segment:?} at {at}, which is {there}"
                ));
            }
        };
    }
    Ok(current)
}

/// A careful, small HTML-to-text extractor: enough for articles and documentation, never a
/// browser. Linear in the page size.
pub(super) mod html {
    use std::borrow::Cow;

    /// Elements dropped with everything inside them.
    const SKIP: &[&str] = &[
        "script", "style", "noscript", "template", "svg", "nav", "footer", "aside", "head",
        "iframe", "object", "canvas", "select", "button", "math",
    ];
    /// Elements whose content is raw text: their end is the first `</name`.
    const RAW: &[&str] = &["script", "style", "template", "noscript"];
    /// Elements that start a new paragraph.
    const PARAGRAPH: &[&str] = &[
        "p",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "table",
        "blockquote",
        "pre",
        "section",
        "article",
        "main",
        "ul",
        "ol",
        "dl",
        "figure",
        "header",
        "form",
        "details",
    ];
    /// Elements that start a new line.
    const LINE: &[&str] = &[
        "br",
        "div",
        "li",
        "tr",
        "dt",
        "dd",
        "hr",
        "figcaption",
        "address",
        "summary",
        "caption",
        "tbody",
        "thead",
    ];

    /// The document's `<title>`, whitespace collapsed.
    pub fn title(html: &str) -> Option<String> {
        let lower = html.to_ascii_lowercase();
        let start = lower.find("<title")?;
        let open_end = start + lower[start..].find('>')? + 1;
        let close = open_end + lower[open_end..].find("</title")?;
        let title = collapse(&decode(&html[open_end..close]));
        (!title.is_empty()).then_some(title)
    }

    /// The readable text of the document's body.
    pub fn to_text(html: &str) -> String {
        // ASCII lower-casing keeps byte offsets, so `lower` and `html` index alike.
        let lower = html.to_ascii_lowercase();
        let bytes = html.as_bytes();
        let mut out = String::with_capacity(html.len() / 3);
        let mut text_start = 0;
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'<' {
                i += 1;
                continue;
            }
            push_text(&mut out, &html[text_start..i]);
            if lower[i..].starts_with("<!--") {
                i = lower[i + 4..]
                    .find("-->")
                    .map_or(bytes.len(), |e| i + 4 + e + 3);
                text_start = i;
                continue;
            }
            let mut j = i + 1;
            let closing = bytes.get(j) == Some(&b'/');
            if closing {
                j += 1;
            }
            let name_start = j;
            while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'-') {
                j += 1;
            }
            let name = &lower[name_start..j];
            let declaration = matches!(bytes.get(i + 1), Some(b'!' | b'?'));
            if name.is_empty() && !declaration && !closing {
                // A lone `<` in text ("a < b"): keep it as text.
                text_start = i;
                i += 1;
                continue;
            }
            let end = tag_end(bytes, j);
            let self_closing = end >= 2 && bytes[end - 2] == b'/';
            i = end;
            text_start = end;
            if declaration {
                continue;
            }
            if !closing && !self_closing && SKIP.contains(&name) {
                i = skip_element(&lower, end, name);
                text_start = i;
                out.push(' ');
                continue;
            }
            if PARAGRAPH.contains(&name) {
                out.push_str("\n\n");
            } else if LINE.contains(&name) {
                if !out.trim_end_matches(' ').ends_with('\n') {
                    out.push('\n');
                }
                if name == "li" && !closing {
                    out.push_str("- ");
                }
            } else if matches!(name, "td" | "th") && !closing {
                out.push_str(" | ");
            }
        }
        push_text(&mut out, &html[text_start..]);
        tidy(&out)
    }

    /// The index just past the `>` closing a tag whose name ends at `from`; quotes respected.
    fn tag_end(bytes: &[u8], from: usize) -> usize {
        let mut quote = None;
        for (k, &b) in bytes.iter().enumerate().skip(from) {
            match (quote, b) {
                (Some(q), _) if b == q => quote = None,
                (Some(_), _) => {}
                (None, b'"' | b'\'') => quote = Some(b),
                (None, b'>') => return k + 1,
                _ => {}
            }
        }
        bytes.len()
    }

    /// The index past the end tag of the element `name` whose content starts at `from`;
    /// nested elements of the same name are counted.
    fn skip_element(lower: &str, from: usize, name: &str) -> usize {
        let open = format!("<{name}");
        let close = format!("</{name}");
        let bytes = lower.as_bytes();
        let boundary = |at: usize| {
            bytes
                .get(at)
                .is_none_or(|b| b.is_ascii_whitespace() || *b == b'>' || *b == b'/')
        };
        let raw = RAW.contains(&name);
        let mut depth = 1usize;
        let mut pos = from;
        // The next opening tag is remembered so nested searches stay linear.
        let mut next_open: Option<usize> = None;
        loop {
            let Some(c) = lower[pos..].find(&close).map(|c| pos + c) else {
                return lower.len();
            };
            if !raw && next_open.is_none_or(|o| o < pos) {
                next_open = lower[pos..].find(&open).map(|o| pos + o);
            }
            match next_open {
                Some(o) if !raw && o < c => {
                    if boundary(o + open.len()) && !bytes[o..tag_end(bytes, o)].ends_with(b"/>") {
                        depth += 1;
                    }
                    pos = o + open.len();
                    next_open = None;
                }
                _ => {
                    pos = c + close.len();
                    if boundary(pos) {
                        depth -= 1;
                        if depth == 0 {
                            return tag_end(bytes, pos);
                        }
                    }
                }
            }
        }
    }

    /// Appends a run of text: entities decoded, whitespace collapsed to single spaces.
    fn push_text(out: &mut String, raw: &str) {
        if raw.is_empty() {
            return;
        }
        let text = decode(raw);
        for (k, word) in text.split_whitespace().enumerate() {
            let needs_space = k > 0 || text.starts_with(char::is_whitespace);
            if needs_space && !out.ends_with(char::is_whitespace) {
                out.push(' ');
            }
            out.push_str(word);
        }
        if text.ends_with(char::is_whitespace) && !out.ends_with(char::is_whitespace) {
            out.push(' ');
        }
    }

    /// Lines trimmed, at most one blank line in a row, no blank start or end.
    fn tidy(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut blank = 0;
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() {
                blank += 1;
                continue;
            }
            if !out.is_empty() {
                out.push_str(if blank > 0 { "\n\n" } else { "\n" });
            }
            blank = 0;
            out.push_str(line);
        }
        out
    }

    fn collapse(text: &str) -> String {
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// Decodes character references: numeric ones and the common named ones. Unknown ones stay.
    pub fn decode(text: &str) -> Cow<'_, str> {
        if !text.contains('&') {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(amp) = rest.find('&') {
            out.push_str(&rest[..amp]);
            rest = &rest[amp..];
            let semi = rest[1..].find(';').map(|s| s + 1).filter(|s| *s <= 10);
            let decoded = semi.and_then(|s| entity(&rest[1..s]).map(|c| (c, s)));
            match decoded {
                Some((c, s)) => {
                    out.push(c);
                    rest = &rest[s + 1..];
                }
                None => {
                    out.push('&');
                    rest = &rest[1..];
                }
            }
        }
        out.push_str(rest);
        Cow::Owned(out)
    }

    fn entity(name: &str) -> Option<char> {
        if let Some(number) = name.strip_prefix('#') {
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            return char::from_u32(code).filter(|c| *c != '\0');
        }
        Some(match name {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            "nbsp" => ' ',
            "ndash" => '–',
            "mdash" => '—',
            "hellip" => '…',
            "lsquo" => '‘',
            "rsquo" => '’',
            "ldquo" => '“',
            "rdquo" => '”',
            "laquo" => '«',
            "raquo" => '»',
            "copy" => '©',
            "reg" => '®',
            "trade" => '™',
            "euro" => '€',
            "pound" => '£',
            "yen" => '¥',
            "cent" => '¢',
            "deg" => '°',
            "middot" => '·',
            "bull" => '•',
            "times" => '×',
            "divide" => '÷',
            "sect" => '§',
            "para" => '¶',
            "auml" => 'ä',
            "ouml" => 'ö',
            "uuml" => 'ü',
            "Auml" => 'Ä',
            "Ouml" => 'Ö',
            "Uuml" => 'Ü',
            "szlig" => 'ß',
            "eacute" => 'é',
            "egrave" => 'è',
            "aacute" => 'á',
            "agrave" => 'à',
            "ccedil" => 'ç',
            "ntilde" => 'ñ',
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::Router;
    use axum::response::{Html, Redirect};
    use axum::routing::{any, get};

    use super::*;

    const PAGE: &str = r#"<!DOCTYPE html>
<html><head><title>Hearth &amp; Home</title>
<style>body { color: red; }</style>
<script>var secret = "<p>not text</p>";</script></head>
<body>
<nav><ul><li>Home</li><li><nav>Inner</nav>Menu</li></ul></nav>
<h1>Welcome&nbsp;home</h1>
<p>First <b>bold</b> paragraph &mdash; with 3 &lt; 4 and a < b.</p>
<!-- a comment <p>hidden</p> -->
<div data-x="a > b">Second line</div>
<ul><li>one</li><li>two</li></ul>
<footer>Copyright</footer>
</body></html>"#;

    async fn server() -> String {
        let app = Router::new()
            .route("/page", get(|| async { Html(PAGE) }))
            .route("/big", get(|| async { "x".repeat(300_000) }))
            .route(
                "/json",
                get(|| async {
                    axum::Json(json!({"data": {"items": [{"name": "a"}, {"name": "b"}], "total": 2}}))
                }),
            )
            .route(
                "/image",
                get(|| async { ([(header::CONTENT_TYPE, "image/png")], vec![0u8; 16]) }),
            )
            .route(
                "/to-private",
                get(|| async { Redirect::temporary("http://10.0.0.1/secret") }),
            )
            .route(
                "/to-metadata",
                get(|| async { Redirect::to("http://169.254.169.254/latest/meta-data/") }),
            )
            .route("/to-page", get(|| async { Redirect::permanent("/page") }))
            .route("/loop", get(|| async { Redirect::temporary("/loop") }))
            .route("/after-post", any(|| async { Redirect::to("/echo") }))
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    "late"
                }),
            )
            .route(
                "/echo",
                any(
                    |method: axum::http::Method, headers: axum::http::HeaderMap, body: String| async move {
                        axum::Json(json!({
                            "method": method.as_str(),
                            "body": body,
                            "content_type": headers.get("content-type").and_then(|v| v.to_str().ok()),
                            "token": headers.get("x-token").and_then(|v| v.to_str().ok()),
                        }))
                    },
                ),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            // The server lives as long as the test's runtime.
            let _ = axum::serve(listener, app).await;
        });
        format!("http://{addr}")
    }

    /// A bare listener that counts connection attempts: proof that a refused URL was never
    /// dialled.
    async fn counting_listener() -> (u16, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let count = Arc::new(AtomicUsize::new(0));
        let seen = count.clone();
        tokio::spawn(async move {
            while listener.accept().await.is_ok() {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        });
        (port, count)
    }

    async fn context(allowed: &[&str]) -> (ToolContext, tempfile::TempDir) {
        let (mut ctx, dir) = crate::tool::test_context().await;
        let mut config = (*ctx.config).clone();
        config.tools.allowed_private_hosts = allowed.iter().map(|h| h.to_string()).collect();
        ctx.config = Arc::new(config);
        (ctx, dir)
    }

    async fn fetch_page(ctx: &ToolContext, arguments: Value) -> Result<Value, ToolError> {
        let out = with_state(FetchWebPage(Limits::default()))
            .call(ctx, arguments)
            .await?;
        Ok(serde_json::from_str(&out).expect("json result"))
    }

    fn refused_message(result: Result<Value, ToolError>) -> String {
        match result {
            Err(ToolError::Failed(message)) => message,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn internal_addresses_are_refused_before_connecting() {
        let (port, attempts) = counting_listener().await;
        let (ctx, _dir) = context(&[]).await;
        let cases = [
            (
                format!("http://127.0.0.1:{port}/"),
                "127.0.0.1 is a loopback address",
            ),
            (format!("http://localhost:{port}/"), "localhost resolves to"),
            (format!("http://[::1]:{port}/"), "::1 is a loopback address"),
            (format!("http://[::ffff:127.0.0.1]:{port}/"), "loopback"),
            (
                format!("http://2130706433:{port}/"),
                "127.0.0.1 is a loopback address",
            ),
            (
                "http://10.0.0.1/".to_string(),
                "10.0.0.1 is a private address",
            ),
            (
                "http://169.254.169.254/latest/meta-data/".to_string(),
                "169.254.169.254 is a link-local address",
            ),
            ("https://192.168.1.1/admin".to_string(), "private address"),
            ("http://[fd00::1]/".to_string(), "unique-local address"),
            ("http://0.0.0.0/".to_string(), "special-purpose address"),
        ];
        for (url, expected) in cases {
            let message = refused_message(fetch_page(&ctx, json!({"url": url})).await);
            assert!(message.starts_with("refused: "), "{url}: {message}");
            assert!(message.contains(expected), "{url}: {message}");
            assert!(message.contains("allowed_private_hosts"), "{message}");
            for tool in tools() {
                let err = tool
                    .call(&ctx, json!({"url": url}))
                    .await
                    .expect_err("refused");
                assert!(
                    err.to_string().contains("refused"),
                    "{}: {err}",
                    tool.info().name
                );
            }
        }
        assert_eq!(attempts.load(Ordering::SeqCst), 0, "nothing was dialled");
    }

    #[tokio::test]
    async fn only_http_and_https() {
        let (ctx, _dir) = context(&[]).await;
        for url in ["file:///etc/passwd", "ftp://example.org/x", "gopher://x/"] {
            let err = fetch_page(&ctx, json!({"url": url}))
                .await
                .expect_err("scheme");
            assert!(err.to_string().contains("only http and https"), "{err}");
        }
        let err = fetch_page(&ctx, json!({"url": "not a url"}))
            .await
            .expect_err("parse");
        assert!(err.to_string().contains("not a valid absolute URL"));
    }

    #[tokio::test]
    async fn a_redirect_to_an_internal_address_is_refused() {
        let base = server().await;
        let (ctx, _dir) = context(&["127.0.0.1"]).await;
        let message =
            refused_message(fetch_page(&ctx, json!({"url": format!("{base}/to-private")})).await);
        assert!(
            message.contains("10.0.0.1 is a private address"),
            "{message}"
        );
        let message =
            refused_message(fetch_page(&ctx, json!({"url": format!("{base}/to-metadata")})).await);
        assert!(
            message.contains("169.254.169.254 is a link-local address"),
            "{message}"
        );
        let err = fetch_page(&ctx, json!({"url": format!("{base}/loop")}))
            .await
            .expect_err("loop");
        assert!(err.to_string().contains("more than 5 redirects"), "{err}");
    }

    #[tokio::test]
    async fn an_allowed_local_page_becomes_readable_text() {
        let base = server().await;
        let (ctx, _dir) = context(&["127.0.0.1"]).await;
        let out = fetch_page(&ctx, json!({"url": format!("{base}/to-page")}))
            .await
            .expect("fetched");
        assert_eq!(out["status"], 200);
        assert_eq!(
            out["url"],
            format!("{base}/page"),
            "the redirect was followed"
        );
        assert_eq!(out["title"], "Hearth & Home");
        let text = out["text"].as_str().expect("text");
        assert_eq!(
            text,
            "Welcome home\n\nFirst bold paragraph — with 3 < 4 and a < b.\n\nSecond line\n\n- one\n- two"
        );
        assert_eq!(out["truncated"], false);

        let out = fetch_page(
            &ctx,
            json!({"url": format!("{base}/big"), "max_chars": 1000}),
        )
        .await
        .expect("fetched");
        assert_eq!(out["text"].as_str().map(str::len), Some(1000));
        assert_eq!(out["truncated"], true);

        let err = fetch_page(&ctx, json!({"url": format!("{base}/image")}))
            .await
            .expect_err("binary");
        assert!(
            err.to_string().contains("image/png, not a text page"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn bodies_are_cut_at_the_size_limit_and_slow_servers_time_out() {
        let base = server().await;
        let (ctx, _dir) = context(&["127.0.0.1"]).await;
        let small = Limits {
            max_body: 10_000,
            timeout: Duration::from_millis(300),
        };
        let out = with_state(FetchWebPage(small))
            .call(
                &ctx,
                json!({"url": format!("{base}/big"), "max_chars": 100_000}),
            )
            .await
            .expect("fetched");
        let out: Value = serde_json::from_str(&out).expect("json");
        assert_eq!(out["text"].as_str().map(str::len), Some(10_000));
        assert_eq!(out["truncated"], true);
        assert!(
            out["note"]
                .as_str()
                .is_some_and(|n| n.contains("larger than 10000 bytes"))
        );

        let err = with_state(JsonApi(small))
            .call(&ctx, json!({"url": format!("{base}/big")}))
            .await
            .expect_err("too big for JSON");
        assert!(err.to_string().contains("larger than 10000 bytes"), "{err}");

        let err = with_state(FetchWebPage(small))
            .call(&ctx, json!({"url": format!("{base}/slow")}))
            .await
            .expect_err("slow");
        assert!(err.to_string().contains("took longer than"), "{err}");
    }

    #[tokio::test]
    async fn json_api_extracts_paths() {
        let base = server().await;
        let (ctx, _dir) = context(&["127.0.0.1"]).await;
        let api = with_state(JsonApi(Limits::default()));
        let call = |arguments: Value| {
            let api = &api;
            let ctx = &ctx;
            async move {
                api.call(ctx, arguments)
                    .await
                    .map(|out| serde_json::from_str::<Value>(&out).expect("json"))
            }
        };
        let url = format!("{base}/json");
        let out = call(json!({"url": url, "path": "/data/items/1/name"}))
            .await
            .expect("ok");
        assert_eq!(out["data"], "b");
        let out = call(json!({"url": url, "path": "data.items[0].name"}))
            .await
            .expect("ok");
        assert_eq!(out["data"], "a");
        let out = call(json!({"url": url})).await.expect("ok");
        assert_eq!(out["data"]["data"]["total"], 2);
        let err = call(json!({"url": url, "path": "data.nope"}))
            .await
            .expect_err("path");
        assert!(
            err.to_string()
                .contains("no \"nope\" at /data, which is an object with keys items, total"),
            "{err}"
        );
        let err = call(json!({"url": url, "path": "/data/items/7"}))
            .await
            .expect_err("index");
        assert!(err.to_string().contains("an array of 2 items"), "{err}");
        let err = call(json!({"url": format!("{base}/page")}))
            .await
            .expect_err("html");
        assert!(err.to_string().contains("not JSON"), "{err}");

        let out = call(json!({"url": format!("{base}/echo"), "method": "POST", "body": {"x": 1}}))
            .await
            .expect("post");
        assert_eq!(out["data"]["method"], "POST");
        assert_eq!(out["data"]["body"], "{\"x\":1}");
        assert_eq!(out["data"]["content_type"], "application/json");
        let err = call(json!({"url": url, "body": {"x": 1}}))
            .await
            .expect_err("GET body");
        assert!(err.to_string().contains("no body"));
    }

    #[tokio::test]
    async fn http_request_sends_methods_headers_and_bodies() {
        let base = server().await;
        let (ctx, _dir) = context(&["127.0.0.1"]).await;
        let tool = with_state(HttpRequest(Limits::default()));
        let out = tool
            .call(
                &ctx,
                json!({"method": "PUT", "url": format!("{base}/echo"), "body": "hello",
                       "headers": {"X-Token": "t1", "Content-Type": "text/plain"}}),
            )
            .await
            .expect("put");
        let out: Value = serde_json::from_str(&out).expect("json");
        assert_eq!(out["status"], 200);
        assert_eq!(out["ok"], true);
        assert_eq!(out["headers"]["content-type"], "application/json");
        let echoed: Value =
            serde_json::from_str(out["body"].as_str().expect("body")).expect("echo");
        assert_eq!(echoed["method"], "PUT");
        assert_eq!(echoed["body"], "hello");
        assert_eq!(echoed["token"], "t1");

        // A 303 after a POST continues as a GET without the body.
        let out = tool
            .call(
                &ctx,
                json!({"method": "POST", "url": format!("{base}/after-post"), "body": "x"}),
            )
            .await
            .expect("post");
        let out: Value = serde_json::from_str(&out).expect("json");
        let echoed: Value =
            serde_json::from_str(out["body"].as_str().expect("body")).expect("echo");
        assert_eq!(
            (echoed["method"].as_str(), echoed["body"].as_str()),
            (Some("GET"), Some(""))
        );

        let out = tool
            .call(
                &ctx,
                json!({"method": "HEAD", "url": format!("{base}/page")}),
            )
            .await
            .expect("head");
        assert!(out.contains("\"body_bytes\":0"), "{out}");

        let err = tool
            .call(
                &ctx,
                json!({"url": format!("{base}/echo"), "headers": {"Host": "evil"}}),
            )
            .await
            .expect_err("host header");
        assert!(err.to_string().contains("cannot be set"));
        let err = tool
            .call(&ctx, json!({"url": format!("{base}/echo"), "body": "x"}))
            .await
            .expect_err("GET body");
        assert!(err.to_string().contains("no body"));
        let err = tool
            .call(
                &ctx,
                json!({"method": "TRACE", "url": format!("{base}/echo")}),
            )
            .await
            .expect_err("method");
        assert!(
            err.to_string()
                .contains("`method`: unknown variant `TRACE`"),
            "{err}"
        );
        let err = tool
            .call(&ctx, json!({"url": "not a url"}))
            .await
            .expect_err("url");
        assert!(
            err.to_string()
                .contains("`url`: \"not a url\" is not a valid absolute URL"),
            "{err}"
        );
        let err = tool
            .call(
                &ctx,
                json!({"url": format!("{base}/echo"), "headers": {"X-Count": 3}}),
            )
            .await
            .expect_err("header value");
        assert!(err.to_string().contains("`headers.X-Count`"), "{err}");
    }

    #[test]
    fn reads_are_safe_and_everything_else_is_outward() {
        let http = with_state(HttpRequest(Limits::default()));
        assert_eq!(http.info().risk, Risk::Outward);
        let url = "https://example.com/";
        assert_eq!(http.risk(&json!({"url": url})), Risk::Safe);
        assert_eq!(http.risk(&json!({"url": url, "method": "GET"})), Risk::Safe);
        assert_eq!(
            http.risk(&json!({"url": url, "method": "HEAD"})),
            Risk::Safe
        );
        // A method the model made up (or any call that does not parse) counts as outward.
        for method in ["POST", "PUT", "PATCH", "DELETE", "OPTIONS", "BREW", "get"] {
            assert_eq!(
                http.risk(&json!({"url": url, "method": method})),
                Risk::Outward,
                "{method}"
            );
        }
        let api = with_state(JsonApi(Limits::default()));
        assert_eq!(api.risk(&json!({"url": url})), Risk::Safe);
        assert_eq!(
            api.risk(&json!({"url": url, "method": "POST"})),
            Risk::Outward
        );
        let page = with_state(FetchWebPage(Limits::default()));
        assert_eq!(page.risk(&json!({"url": url})), Risk::Safe);
    }

    #[test]
    fn html_extraction_handles_the_awkward_parts() {
        assert_eq!(html::title("<TITLE>\n A  b </title>"), Some("A b".into()));
        assert_eq!(html::title("<p>no title</p>"), None);
        assert_eq!(
            html::to_text("<svg><svg></svg><text>x</text></svg>after<br/>line"),
            "after\nline"
        );
        assert_eq!(html::to_text("a<img src='x>y'>b"), "ab");
        assert_eq!(
            html::to_text("<table><tr><td>1</td><td>2</td></tr></table>"),
            "| 1 | 2"
        );
        assert_eq!(html::to_text("<script>never closed"), "");
        assert_eq!(
            html::to_text("x &#x41;&#66;&bogus; &amp"),
            "x AB&bogus; &amp"
        );
        assert_eq!(html::to_text("<navbar>kept</navbar>"), "kept");
    }

    #[test]
    fn paths_accept_pointers_and_dots() {
        let value = json!({"a": {"b/c": [10, {"d": true}]}});
        assert_eq!(extract(&value, "/a/b~1c/1/d"), Ok(&json!(true)));
        assert_eq!(extract(&value, "$.a"), Ok(&value["a"]));
        assert_eq!(extract(&value, ""), Ok(&value));
        assert!(extract(&value, "a.x").is_err());
    }
}
