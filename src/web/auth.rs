//! Who may use the page, and the checks every request passes.
//!
//! - **Login:** `hearth web login` (run by the owner on the box) stores the hash of a one-time
//!   code; the login form exchanges it, once and within [`CODE_TTL_MS`], for a session cookie.
//!   The code is looked up first, so a valid one always works; only wrong codes are slowed, per
//!   client address ([`MAX_FAILED_LOGINS`] per [`FAILED_LOGIN_WINDOW`]), so nobody who can
//!   reach the port locks the owner out.
//! - **Cookie:** `HttpOnly; SameSite=Strict; Path=/`, plus `Secure` and the `__Host-` name when
//!   the page is reached over TLS (a reverse proxy); over plain HTTP (an SSH tunnel) the plain
//!   name, since browsers refuse `__Host-` cookies without `Secure`. Nothing needs WebCrypto.
//! - **Host allowlist:** the listen address, `localhost`, `[web] hosts` and IP addresses, for
//!   every route on the listener (checked in `crate::http::listener`); anything else is
//!   421, so a rebinding DNS name that resolves to 127.0.0.1 reaches nothing.
//! - **Changes** are POSTs only, each checked for the same origin (`Sec-Fetch-Site`, else
//!   `Origin`) and for the session's CSRF token (form field `csrf` or header `X-CSRF-Token`).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use sha2::{Digest, Sha256};

use crate::confirmation::CODE_ALPHABET;
use crate::store::{Store, StoreResult};

/// How long a login code works.
pub const CODE_TTL_MS: i64 = 5 * 60 * 1000;
/// Symbols of a login code, shown in groups of four: ~59 bits from an alphabet without
/// look-alikes, typed once from a terminal.
pub const CODE_LEN: usize = 12;
/// Wrong codes accepted per [`FAILED_LOGIN_WINDOW`] before the login form answers 429.
pub const MAX_FAILED_LOGINS: usize = 10;
pub const FAILED_LOGIN_WINDOW: Duration = Duration::from_secs(5 * 60);

/// The cookie over TLS: `__Host-` keeps it to this exact host, path `/`, secure.
pub const SECURE_COOKIE: &str = "__Host-hearth_session";
/// The cookie over plain HTTP (an SSH tunnel, localhost).
pub const PLAIN_COOKIE: &str = "hearth_session";

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn random(alphabet: &[u8], len: usize) -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..len)
        .map(|_| char::from(alphabet[rng.random_range(0..alphabet.len())]))
        .collect()
}

const TOKEN_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// A code as typed: case, spaces and dashes do not matter.
fn normalise_code(typed: &str) -> String {
    typed
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

/// Makes a login code, stores its hash, and returns it as shown (`ABCD-EFGH-JKMN`).
pub async fn mint_login_code(store: &Store, now_ms: i64) -> StoreResult<String> {
    let code = random(CODE_ALPHABET, CODE_LEN);
    store
        .add_web_login_code(&sha256_hex(&code), now_ms, now_ms + CODE_TTL_MS)
        .await?;
    let groups: Vec<&str> = [&code[0..4], &code[4..8], &code[8..12]].into();
    Ok(groups.join("-"))
}

/// A new session: the cookie value (only the browser keeps it) and its CSRF token.
pub struct NewSession {
    pub cookie_value: String,
    pub csrf: String,
}

/// Exchanges a typed code for a session; `None` when the code is unknown, used or expired.
pub async fn exchange_code(
    store: &Store,
    typed: &str,
    now_ms: i64,
    session_hours: u64,
) -> StoreResult<Option<NewSession>> {
    let code = normalise_code(typed);
    if code.len() != CODE_LEN || !store.use_web_login_code(&sha256_hex(&code), now_ms).await? {
        return Ok(None);
    }
    let cookie_value = random(TOKEN_ALPHABET, 43);
    let csrf = random(TOKEN_ALPHABET, 32);
    let hours = i64::try_from(session_hours.max(1)).unwrap_or(24);
    store
        .add_web_session(
            &sha256_hex(&cookie_value),
            &csrf,
            now_ms,
            now_ms.saturating_add(hours * 3_600_000),
        )
        .await?;
    Ok(Some(NewSession { cookie_value, csrf }))
}

/// The `Set-Cookie` value that starts a session.
pub fn session_cookie(value: &str, secure: bool, session_hours: u64) -> String {
    let max_age = session_hours.max(1) * 3600;
    if secure {
        format!(
            "{SECURE_COOKIE}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict; Secure"
        )
    } else {
        format!("{PLAIN_COOKIE}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict")
    }
}

/// The `Set-Cookie` values that end a session under either name.
pub fn clear_cookies() -> [String; 2] {
    [
        format!("{SECURE_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict; Secure"),
        format!("{PLAIN_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"),
    ]
}

/// The session cookie's value from the request, under either name.
pub fn cookie_value(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SECURE_COOKIE || *name == PLAIN_COOKIE)
        .map(|(_, value)| value.to_string())
        .filter(|value| !value.is_empty())
}

/// The hash under which a cookie's session is stored.
pub fn session_key(cookie_value: &str) -> String {
    sha256_hex(cookie_value)
}

/// Whether the page is reached over TLS: through a reverse proxy that says so, or as an
/// `https://` origin. Only decides the cookie's `Secure` flag and name.
pub fn over_tls(headers: &HeaderMap) -> bool {
    let header_is = |name: &str, prefix: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().starts_with(prefix))
    };
    header_is("x-forwarded-proto", "https") || header_is("origin", "https://")
}

/// The names the listener answers to: the listen address, `localhost`, `127.0.0.1` and `[::1]`
/// on the listening port, `[web] hosts` (an entry without a port matches any port), and any IP
/// address (a client that connects by address, e.g. from a Docker bridge or the LAN with
/// `http_public`). A rebinding attack needs a name of its own, so an address is never one.
#[derive(Clone, Debug)]
pub struct HostAllowlist {
    exact: Vec<String>,
    any_port: Vec<String>,
}

impl HostAllowlist {
    pub fn new(listen: &str, port: u16, extra: &[String]) -> Self {
        let mut exact = vec![
            listen.to_ascii_lowercase(),
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ];
        let mut any_port = Vec::new();
        for host in extra {
            let host = host.trim().to_ascii_lowercase();
            let has_port = host
                .rsplit_once(':')
                .is_some_and(|(_, p)| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
                && !host.ends_with(']');
            if has_port {
                exact.push(host);
            } else if !host.is_empty() {
                any_port.push(host);
            }
        }
        Self { exact, any_port }
    }

    /// Whether a `Host` header names this page.
    pub fn allows(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        if self.exact.contains(&host) {
            return true;
        }
        let name = match host.rsplit_once(':') {
            Some((name, port))
                if !host.ends_with(']') && port.chars().all(|c| c.is_ascii_digit()) =>
            {
                name
            }
            _ => host.as_str(),
        };
        let literal = name
            .strip_prefix('[')
            .and_then(|n| n.strip_suffix(']'))
            .unwrap_or(name);
        // `1.2.3.4`, `[::1]`: never a name an attacker's DNS can point here.
        let address = literal.parse::<std::net::IpAddr>().is_ok()
            && literal.contains(':') == name.starts_with('[');
        address || self.any_port.iter().any(|h| h == name)
    }
}

/// Why a change was refused; each is a 403.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    CrossSite,
    BadCsrf,
}

impl axum::response::IntoResponse for Refusal {
    fn into_response(self) -> axum::response::Response {
        (StatusCode::FORBIDDEN, self.message()).into_response()
    }
}

impl Refusal {
    pub fn message(&self) -> &'static str {
        match self {
            Refusal::CrossSite => "refused: this request did not come from hearth's own page",
            Refusal::BadCsrf => {
                "refused: the page's form token is missing or stale; reload the page"
            }
        }
    }
}

/// The same-origin check of a POST: `Sec-Fetch-Site: same-origin` where the browser sends it,
/// else an `Origin` equal to this host's. A request with neither is refused (every browser
/// that can show the page sends one of them on a POST).
pub fn same_origin(headers: &HeaderMap) -> Result<(), Refusal> {
    let get = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return if site == "same-origin" {
            Ok(())
        } else {
            Err(Refusal::CrossSite)
        };
    }
    let (Some(origin), Some(host)) = (get(header::ORIGIN), get(header::HOST)) else {
        return Err(Refusal::CrossSite);
    };
    let origin = origin.to_ascii_lowercase();
    let host = host.to_ascii_lowercase();
    if origin == format!("http://{host}") || origin == format!("https://{host}") {
        Ok(())
    } else {
        Err(Refusal::CrossSite)
    }
}

/// Compares the CSRF token of a POST with the session's, in time independent of where they
/// first differ.
pub fn csrf_matches(expected: &str, given: Option<&str>) -> bool {
    let Some(given) = given else { return false };
    expected.len() == given.len()
        && expected
            .bytes()
            .zip(given.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// Counts wrong login codes per client address in a sliding window: an address gets
/// [`MAX_FAILED_LOGINS`] wrong codes per window, then its wrong codes are answered 429. A code
/// is looked up before this is asked, so a right one works from anywhere; guessing one is
/// hopeless anyway (about 59 bits, single use, five minutes).
#[derive(Debug, Default)]
pub struct LoginThrottle {
    failures: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

impl LoginThrottle {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, VecDeque<Instant>>> {
        // Lists of instants: a panic elsewhere cannot leave them half-written.
        self.failures.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `address` may have another wrong code counted now.
    pub fn open(&self, address: IpAddr) -> bool {
        self.open_at(address, Instant::now())
    }

    fn open_at(&self, address: IpAddr, now: Instant) -> bool {
        let mut failures = self.lock();
        failures.retain(|_, times| {
            while times
                .front()
                .is_some_and(|at| now.duration_since(*at) >= FAILED_LOGIN_WINDOW)
            {
                times.pop_front();
            }
            !times.is_empty()
        });
        failures
            .get(&address)
            .is_none_or(|times| times.len() < MAX_FAILED_LOGINS)
    }

    /// Notes a wrong code from `address`; true when that was its last one before the lockout.
    pub fn failed(&self, address: IpAddr) -> bool {
        self.failed_at(address, Instant::now())
    }

    fn failed_at(&self, address: IpAddr, now: Instant) -> bool {
        let mut failures = self.lock();
        let times = failures.entry(address).or_default();
        times.push_back(now);
        times.len() >= MAX_FAILED_LOGINS
    }
}

/// The headers every page response carries: a CSP that allows only this origin's scripts,
/// styles and connections and no framing, no sniffing, no referrer, no caching.
pub fn security_headers(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        ),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).expect("header"));
        }
        map
    }

    #[test]
    fn hosts_outside_the_allowlist_are_refused() {
        let hosts = HostAllowlist::new(
            "0.0.0.0:8787",
            8787,
            &["hearth.example.org".into(), "box.ts.net:9000".into()],
        );
        for ok in [
            "localhost:8787",
            "127.0.0.1:8787",
            "[::1]:8787",
            "LOCALHOST:8787",
            "hearth.example.org",
            "hearth.example.org:443",
            "box.ts.net:9000",
            "192.168.1.5:8787",
            "172.17.0.1",
            "[fd00::5]:8787",
        ] {
            assert!(hosts.allows(ok), "{ok}");
        }
        for refused in [
            "evil.example:8787",
            "localhost:9999",
            "box.ts.net",
            "box.ts.net:9001",
            "",
            "hearth.example.org.evil.example",
            "192.168.1.5.evil.example:8787",
            "fd00::5",
        ] {
            assert!(!hosts.allows(refused), "{refused}");
        }
    }

    #[test]
    fn posts_must_come_from_the_same_origin() {
        assert_eq!(
            same_origin(&headers(&[("sec-fetch-site", "same-origin")])),
            Ok(())
        );
        assert_eq!(
            same_origin(&headers(&[("sec-fetch-site", "cross-site")])),
            Err(Refusal::CrossSite)
        );
        assert_eq!(
            same_origin(&headers(&[("sec-fetch-site", "same-site")])),
            Err(Refusal::CrossSite)
        );
        assert_eq!(
            same_origin(&headers(&[
                ("origin", "http://localhost:8787"),
                ("host", "localhost:8787")
            ])),
            Ok(())
        );
        assert_eq!(
            same_origin(&headers(&[
                ("origin", "http://evil.example"),
                ("host", "localhost:8787")
            ])),
            Err(Refusal::CrossSite)
        );
        assert_eq!(
            same_origin(&headers(&[("host", "localhost:8787")])),
            Err(Refusal::CrossSite)
        );
    }

    #[test]
    fn cookies_over_tls_are_host_bound_and_plain_http_gets_a_plain_name() {
        let secure = session_cookie("v", true, 1);
        assert!(secure.starts_with("__Host-hearth_session=v; Path=/;"));
        assert!(
            secure.contains("HttpOnly")
                && secure.contains("SameSite=Strict")
                && secure.contains("Secure")
        );
        let plain = session_cookie("v", false, 1);
        assert!(plain.starts_with("hearth_session=v;") && !plain.contains("Secure"));
        assert_eq!(
            cookie_value(&headers(&[("cookie", "a=b; hearth_session=xyz")])).as_deref(),
            Some("xyz")
        );
        assert_eq!(
            cookie_value(&headers(&[("cookie", "hearth_session=")])),
            None
        );
        assert!(over_tls(&headers(&[("x-forwarded-proto", "https")])));
        assert!(!over_tls(&headers(&[("origin", "http://localhost:1")])));
    }

    #[test]
    fn codes_are_read_in_any_case_with_or_without_dashes() {
        assert_eq!(normalise_code(" abcd-efgh jkmn "), "ABCDEFGHJKMN");
        assert!(csrf_matches("abc", Some("abc")));
        assert!(!csrf_matches("abc", Some("abd")));
        assert!(!csrf_matches("abc", Some("ab")));
        assert!(!csrf_matches("abc", None));
    }

    #[test]
    fn wrong_codes_are_throttled_per_address_for_a_window() {
        let throttle = LoginThrottle::default();
        let guesser: IpAddr = [10, 0, 0, 9].into();
        let owner: IpAddr = [127, 0, 0, 1].into();
        let start = Instant::now();
        for n in 1..=MAX_FAILED_LOGINS {
            assert!(throttle.open_at(guesser, start));
            assert_eq!(throttle.failed_at(guesser, start), n == MAX_FAILED_LOGINS);
        }
        assert!(!throttle.open_at(guesser, start));
        assert!(
            throttle.open_at(owner, start),
            "another address is not held"
        );
        assert!(throttle.open_at(guesser, start + FAILED_LOGIN_WINDOW));
        assert!(throttle.lock().is_empty(), "old failures are forgotten");
    }

    #[tokio::test]
    async fn a_minted_code_logs_in_once() {
        let (store, _dir) = crate::store::test_support::temp_store().await;
        let code = mint_login_code(&store, 1_000).await.expect("mint");
        assert_eq!(code.len(), CODE_LEN + 2, "{code}");
        let session = exchange_code(&store, &code.to_lowercase(), 2_000, 1)
            .await
            .expect("exchange")
            .expect("a session");
        let csrf = store
            .web_session(&session_key(&session.cookie_value), 3_000)
            .await
            .expect("read");
        assert_eq!(csrf, Some(session.csrf));
        assert!(
            exchange_code(&store, &code, 2_500, 1)
                .await
                .expect("again")
                .is_none(),
            "single use"
        );
        let late = mint_login_code(&store, 1_000).await.expect("mint");
        assert!(
            exchange_code(&store, &late, 1_000 + CODE_TTL_MS, 1)
                .await
                .expect("late")
                .is_none(),
            "expired"
        );
    }
}
