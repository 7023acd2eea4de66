//! `web_search`: the web searched through the owner's search service (`[tools.web_search]`), a
//! SearXNG instance (`GET {base_url}/search?q=…&format=json`) or Brave's Web Search API
//! (`GET {base_url}/res/v1/web/search?q=…` with `X-Subscription-Token`).
//!
//! The request goes through the web tools' fetch (web.rs): addresses vetted before connecting,
//! the connection pinned to them, every redirect checked the same way, size and time limits.
//! The owner wrote the endpoint in the configuration, so its host is added to the private hosts
//! allowed for this request only: a SearXNG on loopback or the LAN works, while every URL a
//! model supplies to the other web tools stays under `tools.allowed_private_hosts`. The model
//! supplies only the words to search for.
//!
//! Results are suggestions the model may fetch next. A result whose URL is not http(s) or
//! names an internal host (a private or loopback address, `localhost`, `.local`, `.internal`,
//! `.lan`, `.home.arpa`, a name without a dot) is dropped and counted: the fetch tools would
//! refuse most of them, and a poisoned index listing such links invites probing the owner's
//! network. Names are not resolved here; the fetch tools resolve and check them when followed.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{self, HeaderValue};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::net::PrivateAllowlist;
use super::typed::{NonEmpty, Within};
use super::web::{CALL_TIMEOUT, Limits, Outgoing, fetch_allowing, html};
use super::{StatefulTool, Tool, ToolContext, ToolError, with_state};
use crate::config::{MAX_SEARCH_RESULTS, SearchBackend, Secret, WebSearchConfig};

/// Longest query accepted: a search, not a document.
const MAX_QUERY_CHARS: usize = 400;
/// Longest snippet passed on per result.
const MAX_SNIPPET_CHARS: usize = 400;

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![with_state(WebSearch(Limits::default()))]
}

/// One result as the model sees it.
#[derive(Clone, Debug, PartialEq)]
struct Hit {
    title: String,
    url: String,
    snippet: String,
    published: Option<String>,
}

/// `web_search`, with the limits its requests keep to.
struct WebSearch(Limits);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum TimeRange {
    Day,
    Week,
    Month,
    Year,
}

/// Search the web and return the best results: title, URL, a short snippet and, when known, the
/// publication date. Read a promising result with fetch_web_page before relying on it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// what to search for, as you would type it into a search engine
    query: NonEmpty,
    /// how many results; default set by the owner (usually 8)
    max_results: Option<Within<1, { MAX_SEARCH_RESULTS as i64 }>>,
    /// only results from the last day, week, month or year
    time_range: Option<TimeRange>,
}

impl StatefulTool for WebSearch {
    const NAME: &'static str = "web_search";
    const GROUP: &'static str = "web";
    const TAGS: &'static str = "search, google, internet, find, lookup, news, sources";
    const TIMEOUT: Option<Duration> = CALL_TIMEOUT;
    type Args = SearchArgs;
    type Output = Value;

    async fn run(&self, args: SearchArgs, ctx: &ToolContext) -> Result<Value, ToolError> {
        let query = args.query.0;
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(ToolError::InvalidArguments(format!(
                "`query` is longer than {MAX_QUERY_CHARS} characters; search for the key words"
            )));
        }
        let time_range = args.time_range;
        let Some(config) = &ctx.config.tools.web_search else {
            return Err(ToolError::Failed(
                "web search is not set up: the owner can add a [tools.web_search] section to \
                 hearth.toml (a SearXNG instance, or a Brave Search API key). Meanwhile, \
                 fetch_web_page can read pages whose address you know."
                    .into(),
            ));
        };
        let wanted = args
            .max_results
            .map_or(config.max_results, |n| u32::try_from(n.0).unwrap_or(1))
            .clamp(1, MAX_SEARCH_RESULTS);
        let base = endpoint(config)?;
        let request = request(config, &base, &query, wanted, time_range)?;
        let mut allowed = ctx.config.tools.allowed_private_hosts.clone();
        if let Some(host) = base.host_str() {
            allowed.push(host.to_string());
        }
        let fetched = fetch_allowing(&PrivateAllowlist::new(&allowed), request, self.0).await?;
        let service = match config.backend {
            SearchBackend::Searxng => "SearXNG",
            SearchBackend::Brave => "Brave Search",
        };
        if !fetched.status.is_success() {
            return Err(ToolError::Failed(status_error(
                config.backend,
                service,
                fetched.status.as_u16(),
                &fetched.body,
            )));
        }
        if fetched.truncated {
            return Err(ToolError::Failed(format!(
                "{service} sent more than {} bytes; that is no search result",
                self.0.max_body
            )));
        }
        let answer: Value = serde_json::from_slice(&fetched.body).map_err(|_| {
            let content_type = fetched.content_type();
            let hint = match config.backend {
                SearchBackend::Searxng => {
                    " (is base_url the SearXNG instance, with `json` in search.formats of its settings.yml?)"
                }
                SearchBackend::Brave => "",
            };
            ToolError::Failed(format!(
                "{service} did not answer JSON (HTTP {}, {}){hint}",
                fetched.status.as_u16(),
                if content_type.is_empty() {
                    "no content type"
                } else {
                    content_type.as_str()
                }
            ))
        })?;
        let hits = match config.backend {
            SearchBackend::Searxng => searxng_hits(&answer),
            SearchBackend::Brave => brave_hits(&answer),
        }
        .ok_or_else(|| {
            ToolError::Failed(format!(
                "{service} answered JSON without a result list; is base_url right?"
            ))
        })?;
        let owner_hosts = PrivateAllowlist::new(&ctx.config.tools.allowed_private_hosts);
        let (kept, internal): (Vec<Hit>, Vec<Hit>) = hits
            .into_iter()
            .partition(|hit| is_public_link(&hit.url, &owner_hosts));
        let results: Vec<Value> = kept
            .iter()
            .take(usize::try_from(wanted).unwrap_or(8))
            .map(|hit| {
                let mut result =
                    json!({"title": hit.title, "url": hit.url, "snippet": hit.snippet});
                if let Some(published) = &hit.published {
                    result["published"] = json!(published);
                }
                result
            })
            .collect();
        let mut out = json!({
            "query": query,
            "service": service,
            "results": results,
        });
        if results.is_empty() {
            out["note"] = json!("no results; try other or fewer words");
        }
        if !internal.is_empty() {
            out["omitted_internal"] = json!(internal.len());
            out["omitted_note"] = json!(
                "results linking to internal addresses (private networks, localhost) were left out"
            );
        }
        Ok(out)
    }
}

/// The configured endpoint, parsed.
fn endpoint(config: &WebSearchConfig) -> Result<Url, ToolError> {
    let base = config.base_url().ok_or_else(|| {
        ToolError::Failed("web search has no base_url configured (hearth check says so)".into())
    })?;
    Url::parse(base).map_err(|e| {
        ToolError::Failed(format!(
            "tools.web_search.base_url {base:?} is not a URL ({e}); hearth check says so"
        ))
    })
}

/// The search request for the backend.
fn request(
    config: &WebSearchConfig,
    base: &Url,
    query: &str,
    wanted: u32,
    time_range: Option<TimeRange>,
) -> Result<Outgoing, ToolError> {
    let path = match config.backend {
        SearchBackend::Searxng => "search",
        SearchBackend::Brave => "res/v1/web/search",
    };
    let mut url = base.clone();
    let joined = format!("{}/{path}", url.path().trim_end_matches('/'));
    url.set_path(&joined);
    url.set_query(None);
    {
        let mut pairs = url.query_pairs_mut();
        pairs.append_pair("q", query);
        match config.backend {
            SearchBackend::Searxng => {
                pairs.append_pair("format", "json");
                if let Some(range) = time_range {
                    let name = match range {
                        TimeRange::Day => "day",
                        TimeRange::Week => "week",
                        TimeRange::Month => "month",
                        TimeRange::Year => "year",
                    };
                    pairs.append_pair("time_range", name);
                }
            }
            SearchBackend::Brave => {
                pairs.append_pair("count", &wanted.to_string());
                // Plain snippets: no <strong> markup around the matched words.
                pairs.append_pair("text_decorations", "false");
                if let Some(range) = time_range {
                    let freshness = match range {
                        TimeRange::Day => "pd",
                        TimeRange::Week => "pw",
                        TimeRange::Month => "pm",
                        TimeRange::Year => "py",
                    };
                    pairs.append_pair("freshness", freshness);
                }
            }
        }
    }
    let mut request = Outgoing::get(url);
    request
        .headers
        .insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    if config.backend == SearchBackend::Brave {
        let variable = config.api_key_env.as_deref().ok_or_else(|| {
            ToolError::Failed(
                "Brave Search needs tools.web_search.api_key_env (hearth check says so)".into(),
            )
        })?;
        let token = Secret::resolve(variable).map_err(|problem| {
            ToolError::Failed(format!("the Brave Search token ({variable}): {problem}"))
        })?;
        let mut value = HeaderValue::from_str(token.expose()).map_err(|_| {
            ToolError::Failed(format!(
                "the Brave Search token in {variable} is not a valid header value"
            ))
        })?;
        value.set_sensitive(true);
        request.headers.insert("x-subscription-token", value);
    }
    Ok(request)
}

/// One line on a failed search: what the service said, and what helps.
fn status_error(backend: SearchBackend, service: &str, status: u16, body: &[u8]) -> String {
    let json: Value = serde_json::from_slice(body).unwrap_or_default();
    // Brave: {"type":"ErrorResponse","error":{"code":"SUBSCRIPTION_TOKEN_INVALID","detail":…}}
    let detail = json
        .pointer("/error/detail")
        .or_else(|| json.pointer("/error/message"))
        .or_else(|| json.get("message"))
        .and_then(Value::as_str)
        .map(|d| format!(": {d}"))
        .unwrap_or_default();
    let code = json.pointer("/error/code").and_then(Value::as_str);
    let reason = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let what = format!("{service} answered HTTP {status} {reason}")
        .trim_end()
        .to_string();
    match (backend, status) {
        (SearchBackend::Brave, 401 | 403) => {
            format!("{what}{detail}: the subscription token was refused; the owner should check it")
        }
        (SearchBackend::Brave, 422)
            if code.is_some_and(|c| c.starts_with("SUBSCRIPTION_TOKEN")) =>
        {
            format!("{what}{detail}: the subscription token was refused; the owner should check it")
        }
        (SearchBackend::Searxng, 403) => format!(
            "{what}: the instance refuses JSON; the owner must add `json` to search.formats in its settings.yml"
        ),
        (_, 429) => format!("{what}{detail}: too many searches; wait a little before the next"),
        (_, 500..=599) => {
            format!("{what}{detail}: the search service has trouble; try again later")
        }
        _ => format!("{what}{detail}"),
    }
}

/// SearXNG's `results`: `{"title", "url", "content", "publishedDate"}`.
fn searxng_hits(answer: &Value) -> Option<Vec<Hit>> {
    let results = answer.get("results")?.as_array()?;
    Some(
        results
            .iter()
            .filter_map(|r| {
                Some(Hit {
                    title: clean(r.get("title")?.as_str().unwrap_or_default()),
                    url: r.get("url")?.as_str()?.to_string(),
                    snippet: clean(r.get("content").and_then(Value::as_str).unwrap_or_default()),
                    published: r
                        .get("publishedDate")
                        .and_then(Value::as_str)
                        .filter(|d| !d.is_empty())
                        .map(str::to_string),
                })
            })
            .collect(),
    )
}

/// Brave's `web.results`: `{"title", "url", "description", "page_age", "age"}`. A search
/// without web results may leave out `web` altogether.
fn brave_hits(answer: &Value) -> Option<Vec<Hit>> {
    if answer.get("type").and_then(Value::as_str) != Some("search") {
        return None;
    }
    let Some(results) = answer.pointer("/web/results") else {
        return Some(Vec::new());
    };
    Some(
        results
            .as_array()?
            .iter()
            .filter_map(|r| {
                Some(Hit {
                    title: clean(r.get("title")?.as_str().unwrap_or_default()),
                    url: r.get("url")?.as_str()?.to_string(),
                    snippet: clean(
                        r.get("description")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                    ),
                    published: r
                        .get("page_age")
                        .or_else(|| r.get("age"))
                        .and_then(Value::as_str)
                        .map(str::to_string),
                })
            })
            .collect(),
    )
}

/// Text without markup (`<strong>`, entities), on one line, cut to a snippet's length.
fn clean(text: &str) -> String {
    let plain = html::to_text(text);
    let collapsed = plain.split_whitespace().collect::<Vec<_>>().join(" ");
    match collapsed.char_indices().nth(MAX_SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}…", &collapsed[..cut]),
        None => collapsed,
    }
}

/// Whether `link` is an http(s) URL to a host that is not obviously internal. An address is
/// judged like the fetch tools judge it (the owner's `allowed_private_hosts` included); a name
/// by its shape only.
fn is_public_link(link: &str, owner_hosts: &PrivateAllowlist) -> bool {
    let Ok(url) = Url::parse(link) else {
        return false;
    };
    if !matches!(url.scheme(), "http" | "https") {
        return false;
    }
    let Some(host) = url.host_str() else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return owner_hosts.permits(bare, ip);
    }
    let name = bare.trim_end_matches('.').to_ascii_lowercase();
    name.contains('.')
        && ![
            ".localhost",
            ".local",
            ".internal",
            ".lan",
            ".home.arpa",
            ".intranet",
        ]
        .iter()
        .any(|suffix| name.ends_with(suffix))
}

#[cfg(test)]
mod tests {
    use hearth_testkit::search::{FakeSearch, SearchReply, SearchResult};

    use super::*;

    /// A variable every test process has, standing in for the token's variable: setting one
    /// would race with other tests' threads.
    const TOKEN_VARIABLE: &str = "PATH";

    fn token() -> String {
        std::env::var(TOKEN_VARIABLE).expect("PATH is set")
    }

    async fn context(search: Option<WebSearchConfig>) -> (ToolContext, tempfile::TempDir) {
        let (mut ctx, dir) = crate::tool::test_context().await;
        let mut config = (*ctx.config).clone();
        config.tools.web_search = search;
        ctx.config = Arc::new(config);
        (ctx, dir)
    }

    fn searxng(base_url: &str) -> Option<WebSearchConfig> {
        Some(WebSearchConfig {
            backend: SearchBackend::Searxng,
            base_url: Some(base_url.into()),
            api_key_env: None,
            max_results: 8,
        })
    }

    fn brave(base_url: &str) -> Option<WebSearchConfig> {
        Some(WebSearchConfig {
            backend: SearchBackend::Brave,
            base_url: Some(base_url.into()),
            api_key_env: Some(TOKEN_VARIABLE.into()),
            max_results: 8,
        })
    }

    async fn search(ctx: &ToolContext, arguments: Value) -> Result<Value, ToolError> {
        let out = with_state(WebSearch(Limits::default()))
            .call(ctx, arguments)
            .await?;
        Ok(serde_json::from_str(&out).expect("json result"))
    }

    fn failure(result: Result<Value, ToolError>) -> String {
        match result {
            Err(ToolError::Failed(message)) => message,
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    fn poisoned_results() -> Vec<SearchResult> {
        vec![
            SearchResult::new(
                "Rust &amp; SQLite",
                "https://example.org/rust-sqlite",
                "How to use <b>SQLite</b> from Rust",
            ),
            SearchResult::new("Router admin", "http://192.168.1.1/admin", "log in"),
            SearchResult::new("Metadata", "http://169.254.169.254/latest/", "cloud"),
            SearchResult::new("Local", "http://localhost:8080/", "dev server"),
            SearchResult::new("NAS", "http://nas.local/share", "files"),
            SearchResult::new("Intranet", "http://wiki/", "bare name"),
            SearchResult::new("Script", "javascript:alert(1)", "no"),
            SearchResult::new("Docs", "https://docs.example.com/a", "the second good one"),
        ]
    }

    #[tokio::test]
    async fn searxng_results_are_listed_and_internal_links_left_out() {
        let fake = FakeSearch::start().await;
        fake.set_results(poisoned_results());
        // The instance is on loopback and tools.allowed_private_hosts is empty: the owner
        // configured it, so it is reached.
        let (ctx, _dir) = context(searxng(&fake.base_url())).await;
        let out = search(&ctx, json!({"query": "rust sqlite", "time_range": "month"}))
            .await
            .expect("search works");
        let urls: Vec<&str> = out["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| r["url"].as_str().expect("url"))
            .collect();
        assert_eq!(
            urls,
            [
                "https://example.org/rust-sqlite",
                "https://docs.example.com/a"
            ]
        );
        assert_eq!(out["results"][0]["title"], "Rust & SQLite");
        assert_eq!(out["results"][0]["snippet"], "How to use SQLite from Rust");
        assert_eq!(out["omitted_internal"], 6, "{out}");
        assert_eq!(out["service"], "SearXNG");
        let request = &fake.requests()[0];
        assert_eq!(request.path, "/search");
        assert_eq!(request.query["q"], "rust sqlite");
        assert_eq!(request.query["format"], "json");
        assert_eq!(request.query["time_range"], "month");

        // Two results asked for: two given, even though the instance sent more.
        fake.set_results(vec![
            SearchResult::new("a", "https://a.example/", ""),
            SearchResult::new("b", "https://b.example/", ""),
            SearchResult::new("c", "https://c.example/", ""),
        ]);
        let out = search(&ctx, json!({"query": "x", "max_results": 2}))
            .await
            .expect("search works");
        assert_eq!(out["results"].as_array().map(Vec::len), Some(2));
        assert!(out.get("omitted_internal").is_none());
    }

    #[tokio::test]
    async fn the_configured_endpoint_is_reached_but_the_same_url_from_the_model_is_refused() {
        let fake = FakeSearch::start().await;
        let (ctx, _dir) = context(searxng(&fake.base_url())).await;
        search(&ctx, json!({"query": "x"}))
            .await
            .expect("the owner's instance");
        let fetch = super::super::web::tools()
            .into_iter()
            .find(|t| t.info().name == "fetch_web_page")
            .expect("fetch_web_page");
        let err = fetch
            .call(
                &ctx,
                json!({"url": format!("{}/search?q=x&format=json", fake.base_url())}),
            )
            .await
            .expect_err("a model-supplied loopback URL");
        assert!(err.to_string().contains("refused"), "{err}");
        assert_eq!(fake.requests().len(), 1, "only the search reached the fake");
    }

    #[tokio::test]
    async fn brave_gets_the_token_and_gives_plain_snippets() {
        let fake = FakeSearch::start().await;
        fake.require_token(&token());
        fake.set_results(poisoned_results());
        let (ctx, _dir) = context(brave(&fake.base_url())).await;
        let out = search(
            &ctx,
            json!({"query": "rust sqlite", "time_range": "week", "max_results": 3}),
        )
        .await
        .expect("search works");
        assert_eq!(out["service"], "Brave Search");
        let results = out["results"].as_array().expect("results");
        assert_eq!(results.len(), 1, "{out}");
        assert_eq!(results[0]["snippet"], "How to use SQLite from Rust");
        assert_eq!(results[0]["published"], "2024-05-01T00:00:00");
        let request = &fake.requests()[0];
        assert_eq!(request.path, "/res/v1/web/search");
        assert_eq!(request.query["count"], "3");
        assert_eq!(request.query["freshness"], "pw");
        assert_eq!(
            request.header("x-subscription-token"),
            Some(token().as_str())
        );
        assert_eq!(request.header("accept"), Some("application/json"));
    }

    #[tokio::test]
    async fn a_refused_brave_token_is_named_without_echoing_it() {
        let fake = FakeSearch::start().await;
        fake.require_token("another-token");
        let (ctx, _dir) = context(brave(&fake.base_url())).await;
        let message = failure(search(&ctx, json!({"query": "x"})).await);
        assert!(
            message.starts_with("Brave Search answered HTTP 422 Unprocessable Entity: The provided subscription token is invalid.")
                && message.contains("token was refused"),
            "{message}"
        );
        assert!(!message.contains(&token()), "{message}");
    }

    #[tokio::test]
    async fn bad_answers_get_one_clear_line() {
        let fake = FakeSearch::start().await;
        let (ctx, _dir) = context(searxng(&fake.base_url())).await;
        let cases = [
            (
                SearchReply::raw(502, "text/html", "<html>Bad Gateway</html>"),
                "SearXNG answered HTTP 502 Bad Gateway: the search service has trouble; try again later",
            ),
            (
                SearchReply::raw(503, "application/json", r#"{"message":"engines down"}"#),
                "HTTP 503 Service Unavailable: engines down",
            ),
            (
                SearchReply::raw(200, "text/html", "<!doctype html><title>SearXNG</title>"),
                "SearXNG did not answer JSON (HTTP 200, text/html) (is base_url the SearXNG instance, with `json` in search.formats",
            ),
            (
                SearchReply::raw(403, "text/html", "Forbidden"),
                "add `json` to search.formats",
            ),
            (
                SearchReply::raw(200, "application/json", r#"{"hits":[]}"#),
                "without a result list",
            ),
            (
                SearchReply::raw(429, "application/json", "{}"),
                "too many searches",
            ),
        ];
        for (reply, expected) in cases {
            fake.push(reply);
            let message = failure(search(&ctx, json!({"query": "x"})).await);
            assert!(message.contains(expected), "{expected:?} in {message:?}");
            assert!(!message.contains('\n'), "{message}");
        }
        // Nothing listening where the owner pointed it.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr");
        let (ctx, _dir) = context(searxng(&format!("http://{closed}"))).await;
        let message = failure(search(&ctx, json!({"query": "x"})).await);
        assert!(message.contains("failed"), "{message}");
    }

    #[tokio::test]
    async fn without_a_section_search_says_it_is_not_set_up_and_bad_arguments_are_named() {
        let (ctx, _dir) = context(None).await;
        let message = failure(search(&ctx, json!({"query": "x"})).await);
        assert!(message.contains("[tools.web_search]"), "{message}");
        for (arguments, expected) in [
            (
                json!({"query": "  "}),
                "`query`: must be a non-empty string",
            ),
            (json!({"query": "x".repeat(401)}), "longer than 400"),
            (
                json!({"query": "x", "time_range": "decade"}),
                "`time_range`: unknown variant `decade`",
            ),
            (
                json!({"query": "x", "max_results": 0}),
                "`max_results`: must be from 1",
            ),
            (json!({"query": "x", "page": 2}), "unknown field `page`"),
        ] {
            match search(&ctx, arguments).await {
                Err(ToolError::InvalidArguments(message)) => {
                    assert!(message.contains(expected), "{message}");
                }
                other => panic!("expected invalid arguments, got {other:?}"),
            }
        }
    }

    #[test]
    fn links_to_internal_hosts_are_recognised_by_address_and_shape() {
        let none = PrivateAllowlist::default();
        for public in [
            "https://example.org/a",
            "http://93.184.216.34/",
            "https://[2606:4700:4700::1111]/",
        ] {
            assert!(is_public_link(public, &none), "{public}");
        }
        for internal in [
            "http://10.1.2.3/",
            "http://[::1]/",
            "http://[fd00::1]/",
            "http://printer/",
            "http://router.lan/",
            "http://box.home.arpa/",
            "http://api.internal/",
            "http://x.localhost/",
            "ftp://example.org/",
            "file:///etc/passwd",
            "not a url",
        ] {
            assert!(!is_public_link(internal, &none), "{internal}");
        }
        let owner = PrivateAllowlist::new(&["192.168.1.0/24".to_string()]);
        assert!(is_public_link("http://192.168.1.20/", &owner));
    }
}
