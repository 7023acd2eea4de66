//! Values that have a type of their own, parsed once at load: a time zone is a [`Tz`], a listen
//! address a [`SocketAddr`]. A bad one is refused with the key it sits at, like any value of the
//! wrong type, and the program never parses it again.

use std::net::SocketAddr;

use chrono_tz::Tz;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serializer};

use crate::time::parse_timezone;

/// `#[serde(with = "zone")]`: an IANA zone name in the file.
pub(super) mod zone {
    use super::*;

    pub fn serialize<S: Serializer>(zone: &Tz, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(zone.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Tz, D::Error> {
        parse_timezone(&String::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

/// `#[serde(with = "optional_zone")]`: an IANA zone name, or the key left out.
pub(super) mod optional_zone {
    use super::*;

    pub fn serialize<S: Serializer>(zone: &Option<Tz>, serializer: S) -> Result<S::Ok, S::Error> {
        match zone {
            Some(zone) => serializer.serialize_some(zone.name()),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Tz>, D::Error> {
        super::zone::deserialize(deserializer).map(Some)
    }
}

/// `#[serde(with = "listen")]`: an IP and port to listen on, or `""` for none.
pub(super) mod listen {
    use super::*;

    pub fn serialize<S: Serializer>(
        listen: &Option<SocketAddr>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match listen {
            Some(addr) => serializer.collect_str(addr),
            None => serializer.serialize_str(""),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<SocketAddr>, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.is_empty() {
            return Ok(None);
        }
        text.parse().map(Some).map_err(|_| {
            D::Error::custom(format!(
                "`{text}` is not a socket address: expected an IP and port like `127.0.0.1:8787`, or \"\" to disable the HTTP server"
            ))
        })
    }
}
