//! Address ranges, shared by the daemon (which hosts the web tools may reach) and the HTTP
//! channel (which proxies it trusts to name the client).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An address range such as `10.0.0.0/8` or `fd00::/8`; in a config file, a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (addr, prefix) = text
            .split_once('/')
            .ok_or_else(|| format!("{text:?} has no /prefix"))?;
        let network: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("{addr:?} is not an IP address"))?;
        let prefix: u8 = prefix
            .trim()
            .parse()
            .map_err(|_| format!("{prefix:?} is not a prefix length"))?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(format!("prefix /{prefix} is longer than {max}"));
        }
        Ok(Self { network, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl serde::Serialize for Cidr {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Cidr {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(|why| {
            serde::de::Error::custom(format!(
                "`{text}` is not an address range like \"10.0.0.0/8\" or \"192.0.2.7/32\": {why}"
            ))
        })
    }
}

impl Cidr {
    /// The range of one address.
    pub fn host(ip: IpAddr) -> Self {
        let prefix = if ip.is_ipv4() { 32 } else { 128 };
        Self {
            network: ip,
            prefix,
        }
    }

    /// Whether `ip` is in the range (an IPv4-mapped IPv6 address as the IPv4 one).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// IPv4-mapped IPv6 addresses (`::ffff:127.0.0.1`) are judged as the IPv4 address they carry.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("ip")
    }

    #[test]
    fn cidr_parsing_rejects_nonsense() {
        assert!("10.0.0.0/8".parse::<Cidr>().is_ok());
        assert!("fd00::/8".parse::<Cidr>().is_ok());
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert!("banana/8".parse::<Cidr>().is_err());
        assert!("10.0.0.0".parse::<Cidr>().is_err());
        let all: Cidr = "0.0.0.0/0".parse().expect("valid");
        assert!(all.contains(ip("8.8.8.8")));
    }

    #[test]
    fn ranges_contain_their_addresses_mapped_or_not() {
        let lan: Cidr = "192.168.1.0/24".parse().expect("valid");
        assert!(lan.contains(ip("192.168.1.77")));
        assert!(lan.contains(ip("::ffff:192.168.1.77")));
        assert!(!lan.contains(ip("192.168.2.1")));
        assert!(Cidr::host(ip("fd00::5")).contains(ip("fd00::5")));
        assert!(!Cidr::host(ip("fd00::5")).contains(ip("fd00::6")));
        assert_eq!(lan.to_string(), "192.168.1.0/24");
    }

    #[test]
    fn a_config_string_is_a_range_or_an_error_that_says_what_is_expected() {
        #[derive(serde::Deserialize, Debug)]
        struct Section {
            #[allow(dead_code)]
            ranges: Vec<Cidr>,
        }
        let good: Result<Section, _> = serde_json::from_str(r#"{"ranges": ["10.0.0.0/8"]}"#);
        assert!(good.is_ok());
        let bad =
            serde_json::from_str::<Section>(r#"{"ranges": ["10.0.0.0/33"]}"#).expect_err("invalid");
        assert!(
            bad.to_string()
                .contains("`10.0.0.0/33` is not an address range like"),
            "{bad}"
        );
    }
}
