//! A fake web search service for the `web_search` tool's tests, speaking two real JSON APIs on
//! one port: SearXNG's (`GET /search?q=…&format=json`, refused with 403 without
//! `format=json`, as an instance whose `search.formats` lacks `json` does) and Brave's Web
//! Search API (`GET /res/v1/web/search?q=…&count=…` with an `X-Subscription-Token` header,
//! refused with Brave's 422 `SUBSCRIPTION_TOKEN_INVALID` error otherwise).
//!
//! It answers from a FIFO script of [`SearchReply`]s, then with the results set by
//! [`FakeSearch::set_results`]; every request is recorded. It stops when dropped.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::net::Served;

/// One result as both APIs list it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchResult {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

impl SearchResult {
    pub fn new(title: &str, url: &str, snippet: &str) -> Self {
        Self {
            title: title.into(),
            url: url.into(),
            snippet: snippet.into(),
        }
    }
}

/// What the fake answers to one request.
#[derive(Clone, Debug)]
pub enum SearchReply {
    /// These results, in the API's JSON.
    Results(Vec<SearchResult>),
    /// Anything else: a status, a content type and a body, as given.
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
}

impl SearchReply {
    pub fn raw(status: u16, content_type: &str, body: &str) -> Self {
        Self::Raw {
            status,
            content_type: content_type.into(),
            body: body.into(),
        }
    }
}

/// One request as the fake received it.
#[derive(Clone, Debug)]
pub struct SearchRequest {
    pub path: String,
    pub query: BTreeMap<String, String>,
    pub headers: HeaderMap,
}

impl SearchRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<SearchReply>>,
    results: Mutex<Vec<SearchResult>>,
    token: Mutex<Option<String>>,
    requests: Mutex<Vec<SearchRequest>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running fake search service on 127.0.0.1.
pub struct FakeSearch {
    shared: Arc<Shared>,
    served: Served,
}

impl FakeSearch {
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .route("/search", get(searxng))
            .route("/res/v1/web/search", get(brave))
            .with_state(shared.clone());
        Self {
            shared,
            served: Served::start(app).await,
        }
    }

    /// `http://127.0.0.1:PORT`: the `base_url` for either backend.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.served.addr())
    }

    /// The results answered whenever the script is empty.
    pub fn set_results(&self, results: Vec<SearchResult>) {
        *lock(&self.shared.results) = results;
    }

    /// Queues a reply for the next request.
    pub fn push(&self, reply: SearchReply) {
        lock(&self.shared.script).push_back(reply);
    }

    /// Makes the Brave endpoint refuse requests without this subscription token.
    pub fn require_token(&self, token: &str) {
        *lock(&self.shared.token) = Some(token.into());
    }

    pub fn requests(&self) -> Vec<SearchRequest> {
        lock(&self.shared.requests).clone()
    }
}

fn record(shared: &Shared, path: &str, query: &BTreeMap<String, String>, headers: &HeaderMap) {
    lock(&shared.requests).push(SearchRequest {
        path: path.into(),
        query: query.clone(),
        headers: headers.clone(),
    });
}

/// The next scripted reply, or the standing results.
fn next(shared: &Shared) -> SearchReply {
    lock(&shared.script)
        .pop_front()
        .unwrap_or_else(|| SearchReply::Results(lock(&shared.results).clone()))
}

fn raw(status: u16, content_type: &str, body: String) -> Response {
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, content_type.to_string())],
        body,
    )
        .into_response()
}

async fn searxng(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    record(&shared, "/search", &query, &headers);
    if query.get("format").map(String::as_str) != Some("json") {
        // What an instance answers for a format not in its search.formats.
        return raw(
            403,
            "text/html; charset=utf-8",
            "<html><body>403 Forbidden</body></html>".into(),
        );
    }
    let results = match next(&shared) {
        SearchReply::Raw {
            status,
            content_type,
            body,
        } => return raw(status, &content_type, body),
        SearchReply::Results(results) => results,
    };
    let listed: Vec<Value> = results
        .iter()
        .enumerate()
        .map(|(index, r)| {
            json!({
                "url": r.url,
                "title": r.title,
                "content": r.snippet,
                "engine": "duckduckgo",
                "parsed_url": parsed_url(&r.url),
                "template": "default.html",
                "engines": ["duckduckgo", "brave"],
                "positions": [index + 1],
                "publishedDate": null,
                "score": 2.0 / (index as f64 + 1.0),
                "category": "general",
            })
        })
        .collect();
    axum::Json(json!({
        "query": query.get("q").cloned().unwrap_or_default(),
        "number_of_results": 0,
        "results": listed,
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": [],
        "unresponsive_engines": [["google", "timeout"]],
    }))
    .into_response()
}

/// SearXNG's `parsed_url`: the six parts of Python's `urlparse`.
fn parsed_url(url: &str) -> Value {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (host, path) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
    json!([scheme, host, format!("/{path}"), "", "", ""])
}

async fn brave(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    record(&shared, "/res/v1/web/search", &query, &headers);
    let required = lock(&shared.token).clone();
    let sent = headers
        .get("x-subscription-token")
        .and_then(|v| v.to_str().ok());
    if let Some(token) = required
        && sent != Some(token.as_str())
    {
        let body = json!({
            "type": "ErrorResponse",
            "error": {
                "id": "5a9b8e0c-0000-4000-8000-000000000000",
                "status": 422,
                "code": "SUBSCRIPTION_TOKEN_INVALID",
                "detail": "The provided subscription token is invalid.",
                "meta": {"component": "authentication"},
            },
            "time": 1_700_000_000,
        });
        return raw(422, "application/json", body.to_string());
    }
    let results = match next(&shared) {
        SearchReply::Raw {
            status,
            content_type,
            body,
        } => return raw(status, &content_type, body),
        SearchReply::Results(results) => results,
    };
    let count: usize = query
        .get("count")
        .and_then(|c| c.parse().ok())
        .unwrap_or(20);
    // Brave marks the matched words unless asked not to.
    let decorate = query.get("text_decorations").map(String::as_str) != Some("false");
    let listed: Vec<Value> = results
        .iter()
        .take(count)
        .map(|r| {
            let host = r
                .url
                .split_once("://")
                .map_or("", |(_, rest)| rest.split('/').next().unwrap_or(""));
            let description = if decorate {
                format!("<strong>{}</strong>", r.snippet)
            } else {
                r.snippet.clone()
            };
            json!({
                "title": r.title,
                "url": r.url,
                "is_source_local": false,
                "is_source_both": false,
                "description": description,
                "page_age": "2024-05-01T00:00:00",
                "profile": {"name": host, "url": r.url, "long_name": host, "img": ""},
                "language": "en",
                "family_friendly": true,
                "type": "search_result",
                "subtype": "generic",
                "is_live": false,
                "meta_url": {"scheme": "https", "netloc": host, "hostname": host, "favicon": "", "path": ""},
                "age": "May 1, 2024",
            })
        })
        .collect();
    axum::Json(json!({
        "query": {
            "original": query.get("q").cloned().unwrap_or_default(),
            "show_strict_warning": false,
            "is_navigational": false,
            "spellcheck_off": true,
            "country": "us",
            "bad_results": false,
            "should_fallback": false,
            "more_results_available": true,
        },
        "mixed": {"type": "mixed", "main": [{"type": "web", "index": 0, "all": true}], "top": [], "side": []},
        "type": "search",
        "web": {"type": "search", "results": listed, "family_friendly": true},
    }))
    .into_response()
}
