//! `[weather]`: where the weather tools look when the model names no place, in which units, and
//! which Open-Meteo servers answer (docs: README, "Weather and feeds").

use std::fmt;

use hearth_channel::check_url;
use serde::{Deserialize, Serialize};

use super::{Checks, Section};

/// Open-Meteo's forecast API, which needs no account or key.
pub const OPEN_METEO_URL: &str = "https://api.open-meteo.com";
/// Open-Meteo's geocoding API.
pub const OPEN_METEO_GEOCODING_URL: &str = "https://geocoding-api.open-meteo.com";

/// `[weather]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WeatherConfig {
    /// The owner's place: a name, geocoded once and stored ("Paris", "Springfield, US"), or
    /// `lat,lon` ("48.85,2.35"). Without it the model must name a place.
    pub location: Option<WeatherLocation>,
    pub units: Units,
    /// The forecast API; Open-Meteo's unless self-hosted.
    pub base_url: String,
    /// The geocoding API; Open-Meteo's unless self-hosted.
    pub geocoding_url: String,
}

impl Default for WeatherConfig {
    fn default() -> Self {
        Self {
            location: None,
            units: Units::default(),
            base_url: OPEN_METEO_URL.into(),
            geocoding_url: OPEN_METEO_GEOCODING_URL.into(),
        }
    }
}

/// The units answers are in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Units {
    /// °C, km/h, mm.
    #[default]
    Metric,
    /// °F, mph, inches.
    Imperial,
}

/// A place as the owner or the model names it: coordinates, or a name to geocode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum WeatherLocation {
    Coordinates { latitude: f64, longitude: f64 },
    Place(String),
}

impl WeatherLocation {
    /// `"48.85,2.35"` is coordinates (checked to be on Earth), anything else a place name; an
    /// empty text or a one-letter name (the geocoder finds nothing for those) is an error.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if let Some((lat, lon)) = text.split_once(',')
            && let (Ok(latitude), Ok(longitude)) =
                (lat.trim().parse::<f64>(), lon.trim().parse::<f64>())
        {
            if !(-90.0..=90.0).contains(&latitude) || !(-180.0..=180.0).contains(&longitude) {
                return Err(format!(
                    "`{text}` is not on Earth: latitude is -90 to 90, longitude -180 to 180"
                ));
            }
            return Ok(Self::Coordinates {
                latitude,
                longitude,
            });
        }
        match text.chars().count() {
            0 => Err(
                "must not be empty: a place name like \"Paris\" or `lat,lon` like \"48.85,2.35\""
                    .into(),
            ),
            1 => Err(format!(
                "`{text}` is too short to look up: give a place name or `lat,lon`"
            )),
            _ => Ok(Self::Place(text.to_string())),
        }
    }
}

impl TryFrom<String> for WeatherLocation {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        Self::parse(&text)
    }
}

impl From<WeatherLocation> for String {
    fn from(location: WeatherLocation) -> Self {
        location.to_string()
    }
}

impl fmt::Display for WeatherLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Coordinates {
                latitude,
                longitude,
            } => write!(f, "{latitude},{longitude}"),
            Self::Place(name) => f.write_str(name),
        }
    }
}

impl Section for WeatherConfig {
    fn check(&self, checks: &mut Checks<'_>) {
        for (key, url) in [
            ("base_url", &self.base_url),
            ("geocoding_url", &self.geocoding_url),
        ] {
            if let Err(message) = check_url(url, &["http", "https"]) {
                checks.problem(key, message);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::config::load_from_str;

    #[test]
    fn defaults_are_open_meteo_in_metric_without_a_place() {
        let config = load_from_str("", "hearth.toml", &HashMap::new()).expect("loads");
        assert_eq!(config.weather, WeatherConfig::default());
        assert_eq!(config.weather.base_url, "https://api.open-meteo.com");
        assert_eq!(
            config.weather.geocoding_url,
            "https://geocoding-api.open-meteo.com"
        );
    }

    #[test]
    fn a_location_is_a_place_name_or_coordinates() {
        let text = "[weather]\nlocation = \"48.85, 2.35\"\nunits = \"imperial\"\n";
        let config = load_from_str(text, "hearth.toml", &HashMap::new()).expect("loads");
        assert_eq!(
            config.weather.location,
            Some(WeatherLocation::Coordinates {
                latitude: 48.85,
                longitude: 2.35
            })
        );
        assert_eq!(config.weather.units, Units::Imperial);
        let text = "[weather]\nlocation = \"Paris, FR\"\n";
        let config = load_from_str(text, "hearth.toml", &HashMap::new()).expect("loads");
        assert_eq!(
            config.weather.location,
            Some(WeatherLocation::Place("Paris, FR".into()))
        );
    }

    #[test]
    fn bad_values_are_named_by_key() {
        for (text, key, says) in [
            ("location = \"\"", "weather.location", "must not be empty"),
            ("location = \"91,0\"", "weather.location", "not on Earth"),
            ("units = \"kelvin\"", "weather.units", "kelvin"),
            ("base_url = \"ftp://x\"", "weather.base_url", "scheme"),
            (
                "geocoding_url = \"nope\"",
                "weather.geocoding_url",
                "not a valid URL",
            ),
        ] {
            let errors = load_from_str(
                &format!("[weather]\n{text}\n"),
                "hearth.toml",
                &HashMap::new(),
            )
            .expect_err(text);
            let error = errors.iter().next().expect("one error");
            assert_eq!(error.key, key, "{text}");
            assert!(error.to_string().contains(says), "{text}: {error}");
        }
    }
}
