//! `[web]`: the owner's page.

use serde::{Deserialize, Serialize};

use super::{Checks, Section};

/// `[web]`: the owner's page (src/web) on `daemon.http_listen`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebConfig {
    /// More names the page may be reached by, besides the listen address and `localhost`: a
    /// reverse proxy's or Tailscale's host name (`hearth.example.org`, `box.tailnet.ts.net`),
    /// with or without a port. Requests for any other `Host` get 421, so a DNS name that an
    /// attacker points at 127.0.0.1 (DNS rebinding) reaches nothing.
    pub hosts: Vec<String>,
    /// How long a login lasts, in hours (`hearth web logout --all` ends every session sooner).
    pub session_hours: u64,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            hosts: Vec::new(),
            session_hours: 24 * 7,
        }
    }
}

impl Section for WebConfig {
    // Any host name is one the owner may put a proxy under, and any session length one they may
    // want: serde's types are the whole check.
    fn check(&self, _checks: &mut Checks<'_>) {}
}
