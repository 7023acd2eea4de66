//! The server machinery both fakes share: listening, recording, scripting, answering.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;
use tokio::sync::watch;

use crate::net::Served;
use crate::reply::{Reply, ReplyBody};

/// A request refused the way the real API would refuse it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    pub status: u16,
    pub message: String,
}

impl Rejection {
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self {
            status: 400,
            message: message.into(),
        }
    }
}

/// The wire format of one API: where it listens, how it checks requests, how it answers.
/// Implemented by [`crate::OpenAiApi`] and [`crate::AnthropicApi`].
pub trait Api: Send + Sync + 'static {
    /// The request path, e.g. `/v1/chat/completions`.
    const PATH: &'static str;
    /// Appended to `http://127.0.0.1:PORT` to make `base_url()`.
    const BASE_SUFFIX: &'static str;

    /// Checks the headers every request of the API needs (the key, a version header).
    fn check_headers(headers: &HeaderMap, api_key: Option<&str>) -> Result<(), Rejection>;
    /// Checks headers and body as the real API would.
    fn check(headers: &HeaderMap, body: &Value, api_key: Option<&str>) -> Result<(), Rejection>;
    /// The answer to `GET /v1/models` listing `models`.
    fn models(models: &[String]) -> Value;
    /// The error body for `status` and `message`.
    fn error_body(status: u16, message: &str) -> Value;
    /// A plain JSON answer.
    fn answer(reply: &Reply, request: &Value, id: u64) -> Value;
    /// A streamed answer as complete SSE event texts (each ending in a blank line).
    fn events(reply: &Reply, request: &Value, id: u64) -> Vec<String>;
    /// An error event in the middle of a stream.
    fn stream_error(error_type: &str, message: &str) -> String;
}

/// One request as the fake received it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub headers: HeaderMap,
    /// The JSON body (`Value::Null` if it was not JSON).
    pub body: Value,
}

impl RecordedRequest {
    /// A header's value, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

type Responder = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

struct Shared {
    script: Mutex<VecDeque<Reply>>,
    responder: Mutex<Responder>,
    requests: Mutex<Vec<RecordedRequest>>,
    api_key: Mutex<Option<String>>,
    models: Mutex<Vec<String>>,
    count: watch::Sender<usize>,
    next_id: Mutex<u64>,
    /// Set by [`FakeLlm::set_context_window`].
    context_window: Mutex<Option<u64>>,
}

/// Locks a mutex even if a test panicked while holding it: the data is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running fake server of API `A`; use the aliases [`crate::FakeOpenAi`] and
/// [`crate::FakeAnthropic`]. Stops when dropped.
pub struct FakeLlm<A: Api> {
    shared: Arc<Shared>,
    served: Served,
    api: PhantomData<A>,
}

impl<A: Api> FakeLlm<A> {
    /// Starts the server on a free port of 127.0.0.1.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared {
            script: Mutex::new(VecDeque::new()),
            responder: Mutex::new(Arc::new(|_: &Value| Reply::text("ok"))),
            requests: Mutex::new(Vec::new()),
            api_key: Mutex::new(None),
            models: Mutex::new(vec!["fake-model".into()]),
            count: watch::channel(0).0,
            next_id: Mutex::new(0),
            context_window: Mutex::new(None),
        });
        let app = Router::new()
            .route(A::PATH, post(handle::<A>))
            .route("/v1/models", get(list_models::<A>))
            .with_state(shared.clone());
        Self {
            shared,
            served: Served::start(app).await,
            api: PhantomData,
        }
    }

    /// The base URL to configure a provider with.
    pub fn base_url(&self) -> String {
        format!("http://{}{}", self.served.addr(), A::BASE_SUFFIX)
    }

    /// Queues a reply; queued replies are used in order, one per request.
    pub fn push(&self, reply: Reply) {
        lock(&self.shared.script).push_back(reply);
    }

    /// Decides the reply from the request body whenever the queue is empty.
    pub fn set_responder(&self, responder: impl Fn(&Value) -> Reply + Send + Sync + 'static) {
        *lock(&self.shared.responder) = Arc::new(responder);
    }

    /// Gives the fake model a context window of `tokens`: from now on it counts each request's
    /// tokens (its JSON body at four characters a token), reports that count as the prompt
    /// tokens of its answers, and refuses a request over the window with HTTP 400 and the API's
    /// "maximum context length" error, as real servers do.
    pub fn set_context_window(&self, tokens: u64) {
        *lock(&self.shared.context_window) = Some(tokens);
    }

    /// The tokens the fake counts for a request body (see [`FakeLlm::set_context_window`]).
    pub fn count_tokens(body: &Value) -> u64 {
        (body.to_string().len() / 4) as u64
    }

    /// Makes the server refuse (401) requests that do not carry this API key.
    pub fn require_api_key(&self, key: impl Into<String>) {
        *lock(&self.shared.api_key) = Some(key.into());
    }

    /// The model ids `GET /v1/models` lists (default: `fake-model`). Model list requests are
    /// not recorded: tests count the chat requests.
    pub fn set_models(&self, models: &[&str]) {
        *lock(&self.shared.models) = models.iter().map(|m| m.to_string()).collect();
    }

    /// Every request body received, in order (rejected ones included).
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.shared.requests)
            .iter()
            .map(|r| r.body.clone())
            .collect()
    }

    /// Every request with its headers, in order.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The body of the most recent request.
    pub fn last_request(&self) -> Option<Value> {
        lock(&self.shared.requests).last().map(|r| r.body.clone())
    }

    /// How many requests arrived so far.
    pub fn request_count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    /// Waits until at least `n` requests arrived and returns all bodies; panics after `timeout`.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<Value> {
        let mut count = self.shared.count.subscribe();
        let reached = tokio::time::timeout(timeout, count.wait_for(|c| *c >= n)).await;
        if !matches!(reached, Ok(Ok(_))) {
            panic!(
                "expected {n} requests within {timeout:?}, got {}",
                self.request_count()
            );
        }
        self.requests()
    }
}

async fn list_models<A: Api>(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let api_key = lock(&shared.api_key).clone();
    if let Err(rejection) = A::check_headers(&headers, api_key.as_deref()) {
        return error_response::<A>(rejection.status, &rejection.message);
    }
    let models = lock(&shared.models).clone();
    axum::Json(A::models(&models)).into_response()
}

async fn handle<A: Api>(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let parsed = serde_json::from_slice::<Value>(&raw);
    let body = parsed.as_ref().map_or(Value::Null, Clone::clone);
    lock(&shared.requests).push(RecordedRequest {
        headers: headers.clone(),
        body: body.clone(),
    });
    shared.count.send_modify(|c| *c += 1);

    if let Err(err) = &parsed {
        return error_response::<A>(400, &format!("could not parse the JSON body: {err}"));
    }
    let api_key = lock(&shared.api_key).clone();
    if let Err(rejection) = A::check(&headers, &body, api_key.as_deref()) {
        return error_response::<A>(rejection.status, &rejection.message);
    }
    let window = *lock(&shared.context_window);
    let counted = window.map(|_| FakeLlm::<A>::count_tokens(&body));
    if let (Some(window), Some(tokens)) = (window, counted)
        && tokens > window
    {
        let message = format!(
            "This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."
        );
        return error_response::<A>(400, &message);
    }
    let mut reply = {
        let scripted = lock(&shared.script).pop_front();
        match scripted {
            Some(reply) => reply,
            None => {
                let responder = lock(&shared.responder).clone();
                responder(&body)
            }
        }
    };
    if let Some(tokens) = counted {
        reply.usage.0 = tokens;
    }
    let id = {
        let mut next = lock(&shared.next_id);
        *next += 1;
        *next
    };
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut response = match &reply.body {
        ReplyBody::Error { status, message } => error_response::<A>(*status, message),
        ReplyBody::Raw {
            status,
            content_type,
            body,
        } => (
            status_code(*status),
            [(header::CONTENT_TYPE, content_type.clone())],
            body.clone(),
        )
            .into_response(),
        ReplyBody::Answer { .. } => {
            if body.get("stream") == Some(&Value::Bool(true)) && reply.streamed {
                stream_response(&reply, A::events(&reply, &body, id), A::stream_error)
            } else {
                axum::Json(A::answer(&reply, &body, id)).into_response()
            }
        }
    };
    if let Some(value) = &reply.retry_after
        && let Ok(value) = HeaderValue::from_str(value)
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

fn status_code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

fn error_response<A: Api>(status: u16, message: &str) -> Response {
    (
        status_code(status),
        axum::Json(A::error_body(status, message)),
    )
        .into_response()
}

fn stream_response(
    reply: &Reply,
    mut events: Vec<String>,
    stream_error: fn(&str, &str) -> String,
) -> Response {
    if let Some((kind, message)) = &reply.stream_error {
        // Keep the opening event, then fail the way the API does mid-stream.
        events.truncate(1);
        events.push(stream_error(kind, message));
    }
    let cut = reply.cut_after.is_some();
    if let Some(n) = reply.cut_after {
        events.truncate(n);
    }
    let chunks: Vec<Vec<u8>> = match reply.chunk_bytes {
        Some(size) => events
            .concat()
            .into_bytes()
            .chunks(size)
            .map(<[u8]>::to_vec)
            .collect(),
        None => events.into_iter().map(String::into_bytes).collect(),
    };
    let mut items: Vec<Result<Bytes, std::io::Error>> =
        chunks.into_iter().map(|c| Ok(Bytes::from(c))).collect();
    if cut {
        // A body error makes hyper drop the connection without finishing the chunked body,
        // which the client sees as a broken stream.
        items.push(Err(std::io::Error::other("stream cut by the test")));
    }
    let pace = reply.pace;
    let stream = futures::StreamExt::then(
        futures::stream::iter(items.into_iter().enumerate()),
        move |(index, item)| async move {
            if index > 0 && !pace.is_zero() {
                tokio::time::sleep(pace).await;
            }
            item
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
