//! Tokens: made once, kept only as a SHA-256, given in `Authorization: Bearer` and nowhere
//! else; failed attempts slow the address they come from.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
/// meanwhile its requests get 429 with `Retry-After`, whatever token they carry.
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

    /// A successful authentication clears the address's record.
    pub(crate) fn succeeded(&self, address: IpAddr) {
        lock(&self.addresses).remove(&address);
    }
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
        limiter.succeeded(address);
        assert_eq!(limiter.wait(address, start), None);
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
