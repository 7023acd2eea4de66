//! A fake feed server: documents served over HTTP under `/NAME`, each with an ETag and a
//! Last-Modified date, answering a matching `If-None-Match` or `If-Modified-Since` with 304 and
//! no body as real servers do. The fixtures (an RSS 2.0 feed, an Atom feed, a JSON Feed and a
//! broken one) are small files in `testkit/fixtures/feeds/`. Every request is recorded with its
//! conditional headers and the status it got. It stops when dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::net::Served;

pub const RSS: &str = include_str!("../fixtures/feeds/rss.xml");
pub const ATOM: &str = include_str!("../fixtures/feeds/atom.xml");
pub const JSON_FEED: &str = include_str!("../fixtures/feeds/feed.json");
/// An RSS document cut off in the middle.
pub const MALFORMED: &str = include_str!("../fixtures/feeds/malformed.xml");

const LAST_MODIFIED: &str = "Sat, 28 Nov 2026 10:00:00 GMT";

/// One request as the server saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedRequest {
    pub path: String,
    pub if_none_match: Option<String>,
    pub if_modified_since: Option<String>,
    pub status: u16,
}

struct Document {
    body: Bytes,
    content_type: String,
    version: u32,
    /// Answered instead of the document.
    status: Option<u16>,
}

#[derive(Default)]
struct Inner {
    documents: HashMap<String, Document>,
    requests: Vec<FeedRequest>,
}

pub struct FakeFeeds {
    served: Served,
    inner: Arc<Mutex<Inner>>,
}

impl FakeFeeds {
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = Router::new()
            .route("/{name}", get(serve))
            .with_state(inner.clone());
        Self {
            served: Served::start(app).await,
            inner,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The URL of the document `name`.
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/{name}", self.served.addr())
    }

    /// Serves `body` as `name` (a new version, so a new ETag).
    pub fn set(&self, name: &str, body: impl Into<Bytes>, content_type: &str) {
        let mut inner = self.lock();
        let version = inner.documents.get(name).map_or(1, |d| d.version + 1);
        inner.documents.insert(
            name.to_string(),
            Document {
                body: body.into(),
                content_type: content_type.to_string(),
                version,
                status: None,
            },
        );
    }

    /// Answers `name` with `status` and no body from now on.
    pub fn fail(&self, name: &str, status: u16) {
        let mut inner = self.lock();
        match inner.documents.get_mut(name) {
            Some(document) => document.status = Some(status),
            None => {
                inner.documents.insert(
                    name.to_string(),
                    Document {
                        body: Bytes::new(),
                        content_type: "text/plain".into(),
                        version: 1,
                        status: Some(status),
                    },
                );
            }
        }
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<FeedRequest> {
        self.lock().requests.clone()
    }
}

async fn serve(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let if_none_match = text(header::IF_NONE_MATCH);
    let if_modified_since = text(header::IF_MODIFIED_SINCE);
    let mut inner = inner.lock().unwrap_or_else(|p| p.into_inner());
    let (status, response) = match inner.documents.get(&name) {
        None => (404, StatusCode::NOT_FOUND.into_response()),
        Some(Document {
            status: Some(status),
            ..
        }) => (
            *status,
            StatusCode::from_u16(*status)
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
                .into_response(),
        ),
        Some(document) => {
            let etag = format!("\"v{}\"", document.version);
            let fresh = if_none_match.as_deref() == Some(etag.as_str())
                || (if_none_match.is_none()
                    && document.version == 1
                    && if_modified_since.as_deref() == Some(LAST_MODIFIED));
            if fresh {
                (
                    304,
                    (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response(),
                )
            } else {
                (
                    200,
                    (
                        [
                            (header::CONTENT_TYPE, document.content_type.clone()),
                            (header::ETAG, etag),
                            (header::LAST_MODIFIED, LAST_MODIFIED.to_string()),
                        ],
                        document.body.clone(),
                    )
                        .into_response(),
                )
            }
        }
    };
    inner.requests.push(FeedRequest {
        path: name,
        if_none_match,
        if_modified_since,
        status,
    });
    response
}
