//! Which network addresses the web tools may reach (SSRF protection).
//!
//! A model can be talked into fetching `http://169.254.169.254/` or the owner's router admin
//! page. The web tools therefore refuse loopback, private, link-local, unique-local and other
//! special addresses — after DNS resolution and again on every redirect — unless the owner listed
//! the host or range in `tools.allowed_private_hosts`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use hearth_channel::net::Cidr;
use hearth_channel::net::canonical;

/// Whether `ip` is anything but an ordinary public unicast address.
pub fn is_private(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => is_private_v6(v6),
    }
}

fn is_private_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

fn is_private_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (first & 0xffc0) == 0xfe80 // link local fe80::/10
        || (first & 0xffc0) == 0xfec0 // site local (deprecated) fec0::/10
        || first == 0x2001 && ip.segments()[1] == 0x0db8 // documentation
        || first == 0x0064 && ip.segments()[1] == 0xff9b // NAT64, may reach IPv4 private space
}

/// The owner's exceptions: host names and address ranges the web tools may reach even though
/// they are private.
#[derive(Clone, Debug, Default)]
pub struct PrivateAllowlist {
    hosts: Vec<String>,
    ranges: Vec<Cidr>,
}

impl PrivateAllowlist {
    /// Entries are host names, single addresses or CIDR ranges; unparseable ranges are skipped
    /// (`hearth check` reports them).
    pub fn new(entries: &[String]) -> Self {
        let mut list = Self::default();
        for entry in entries {
            let entry = entry.trim().to_ascii_lowercase();
            if entry.contains('/') {
                if let Ok(range) = entry.parse() {
                    list.ranges.push(range);
                }
            } else if let Ok(ip) = entry.trim_matches(['[', ']']).parse::<IpAddr>() {
                list.ranges.push(Cidr::host(ip));
            } else if !entry.is_empty() {
                list.hosts.push(entry);
            }
        }
        list
    }

    /// Whether a connection to `ip`, reached through the name `host`, is allowed.
    pub fn permits(&self, host: &str, ip: IpAddr) -> bool {
        if !is_private(ip) {
            return true;
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.hosts.contains(&host) || self.ranges.iter().any(|r| r.contains(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("test address")
    }

    #[test]
    fn special_addresses_are_private_and_public_ones_are_not() {
        for private in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
        ] {
            assert!(is_private(ip(private)), "{private}");
        }
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "2606:4700:4700::1111",
        ] {
            assert!(!is_private(ip(public)), "{public}");
        }
    }

    #[test]
    fn the_allowlist_admits_named_hosts_and_ranges_only() {
        let list = PrivateAllowlist::new(&[
            "nas.local".into(),
            "192.168.1.0/24".into(),
            "127.0.0.1".into(),
        ]);
        assert!(list.permits("nas.local", ip("10.1.2.3")));
        assert!(list.permits("NAS.local.", ip("10.1.2.3")));
        assert!(list.permits("printer", ip("192.168.1.77")));
        assert!(!list.permits("printer", ip("192.168.2.77")));
        assert!(list.permits("localhost", ip("127.0.0.1")));
        assert!(!list.permits("localhost", ip("127.0.0.2")));
        assert!(list.permits("example.org", ip("1.1.1.1")));
    }
}
