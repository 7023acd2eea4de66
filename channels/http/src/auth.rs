//! Tokens: made once, kept only as a SHA-256, given in `Authorization: Bearer` and nowhere
//! else; failed attempts slow the address they come from, never a valid token.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use hearth_channel::net::Cidr;
use rand::Rng;
use sha2::{Digest, Sha256};

use crate::lock;

/// The prefix of every token, so a leaked one is recognisable in logs and scanners.
const TOKEN_PREFIX: &str = "hth_";

/// A new token: the prefix and 40 random letters and digits (about 238 bits).
pub fn new_token() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut rng = rand::rng();
    let random: String = (0..40)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect();
    format!("{TOKEN_PREFIX}{random}")
}

/// The SHA-256 of `token`, in lowercase hex: what is stored and looked up. The lookup is by
/// this hash (an index, not a comparison of secrets), so timing says nothing about a token.
pub fn hash_token(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        // Writing to a String cannot fail.
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// Failed attempts an address gets before it is slowed down.
const FREE_FAILURES: u32 = 5;
/// The longest an address waits between attempts.
const MAX_WAIT: Duration = Duration::from_secs(300);
/// Failures older than this are forgotten.
const MEMORY: Duration = Duration::from_secs(15 * 60);

/// Failed authentications per client address. After [`FREE_FAILURES`] each further failure
/// doubles the wait before the address may try again (1 s, 2 s, 4 s … up to 5 minutes);
/// meanwhile its failing requests get 429 with `Retry-After`. A valid token is looked up first
/// and never waits: many clients can share an address (a reverse proxy, a tunnel), and one
/// sending junk must not lock the others out. A success does not clear the record either, so a
/// holder of one token cannot reset the count between guesses at another.
#[derive(Default)]
pub(crate) struct Limiter {
    addresses: Mutex<HashMap<IpAddr, Failures>>,
}

struct Failures {
    count: u32,
    last: Instant,
    blocked_until: Option<Instant>,
}

impl Limiter {
    /// How long `address` must still wait, if it is slowed down.
    pub(crate) fn wait(&self, address: IpAddr, now: Instant) -> Option<Duration> {
        let addresses = lock(&self.addresses);
        let until = addresses.get(&address)?.blocked_until?;
        (until > now).then(|| until - now)
    }

    /// Notes a failed attempt from `address`.
    pub(crate) fn failed(&self, address: IpAddr, now: Instant) {
        let mut addresses = lock(&self.addresses);
        addresses.retain(|_, f| now.duration_since(f.last) < MEMORY);
        let failures = addresses.entry(address).or_insert(Failures {
            count: 0,
            last: now,
            blocked_until: None,
        });
        failures.count += 1;
        failures.last = now;
        if failures.count > FREE_FAILURES {
            let doublings = (failures.count - FREE_FAILURES - 1).min(16);
            let wait = Duration::from_secs(1u64 << doublings).min(MAX_WAIT);
            failures.blocked_until = Some(now + wait);
        }
    }
}

/// The address a request comes from: its peer; or, when the peer is one of the `trusted`
/// proxies, the address their `X-Forwarded-For` names. Each proxy appends the address it got
/// the request from, so the list is read from the right, past the trusted proxies; what a
/// client wrote itself (on the left) is never believed.
pub(crate) fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &[Cidr]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|range| range.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    let hops: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .collect();
    let mut client = peer;
    for hop in hops.iter().rev() {
        let hop = hop.trim();
        // A bare address, or one with a port (`192.0.2.7:4711`, `[2001:db8::7]:4711`).
        let Some(ip) = hop
            .parse::<IpAddr>()
            .ok()
            .or_else(|| hop.parse::<std::net::SocketAddr>().ok().map(|a| a.ip()))
        else {
            // Not an address (`unknown`, garbage): the last hop that is one stands.
            break;
        };
        client = ip;
        if !is_trusted(ip) {
            break;
        }
    }
    client
}

/// Query parameters that look like a credential: a request carrying one is refused, so that a
/// token never ends up in URLs, proxy logs and browser history.
pub(crate) fn credential_in_query(query: &str) -> bool {
    query.split('&').any(|pair| {
        let name = pair
            .split('=')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        matches!(
            name.as_str(),
            "token" | "access_token" | "api_key" | "apikey" | "key" | "auth" | "bearer"
        ) || pair.contains(TOKEN_PREFIX)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_hashed_to_hex() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert!(a.starts_with("hth_") && a.len() == 44, "{a}");
        assert_eq!(
            hash_token("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn an_address_is_slowed_after_five_failures_and_doubles() {
        let limiter = Limiter::default();
        let address: IpAddr = [127, 0, 0, 1].into();
        let start = Instant::now();
        for _ in 0..FREE_FAILURES {
            limiter.failed(address, start);
        }
        assert_eq!(limiter.wait(address, start), None);
        limiter.failed(address, start);
        assert_eq!(limiter.wait(address, start), Some(Duration::from_secs(1)));
        limiter.failed(address, start);
        assert_eq!(limiter.wait(address, start), Some(Duration::from_secs(2)));
        assert_eq!(limiter.wait(address, start + Duration::from_secs(3)), None);
        let other: IpAddr = [10, 0, 0, 1].into();
        assert_eq!(limiter.wait(other, start), None, "per address");
        // Failures are forgotten after a while.
        let later = start + MEMORY + Duration::from_secs(1);
        limiter.failed(other, later);
        assert!(!lock(&limiter.addresses).contains_key(&address));
    }

    #[test]
    fn forwarded_for_counts_only_from_trusted_proxies_and_is_read_from_the_right() {
        let ip = |text: &str| text.parse::<IpAddr>().expect("ip");
        let trusted: Vec<Cidr> = vec!["172.17.0.0/16".parse().expect("range")];
        let headers = |values: &[&str]| {
            let mut map = HeaderMap::new();
            for value in values {
                map.append("x-forwarded-for", value.parse().expect("value"));
            }
            map
        };
        // The client wrote a left part of its own; the proxy appended the real address.
        let forwarded = headers(&["6.6.6.6, 203.0.113.9"]);
        assert_eq!(
            client_address(ip("172.17.0.2"), &forwarded, &trusted),
            ip("203.0.113.9")
        );
        // From a peer that is no trusted proxy, the header is ignored.
        assert_eq!(
            client_address(ip("198.51.100.4"), &forwarded, &trusted),
            ip("198.51.100.4")
        );
        // Without trusted proxies (the default) too.
        assert_eq!(
            client_address(ip("172.17.0.2"), &forwarded, &[]),
            ip("172.17.0.2")
        );
        // Two proxies in a row, headers split over lines, ports, and garbage.
        let chain = headers(&["203.0.113.9:4711", "172.17.0.9"]);
        assert_eq!(
            client_address(ip("172.17.0.2"), &chain, &trusted),
            ip("203.0.113.9")
        );
        let garbage = headers(&["unknown"]);
        assert_eq!(
            client_address(ip("172.17.0.2"), &garbage, &trusted),
            ip("172.17.0.2")
        );
        assert_eq!(
            client_address(ip("172.17.0.2"), &headers(&[]), &trusted),
            ip("172.17.0.2")
        );
    }

    #[test]
    fn credentials_in_the_query_are_spotted() {
        assert!(credential_in_query("token=abc"));
        assert!(credential_in_query("a=1&access_token=x"));
        assert!(credential_in_query("x=hth_abcdef"));
        assert!(!credential_in_query("after=3"));
        assert!(!credential_in_query(""));
    }
}
