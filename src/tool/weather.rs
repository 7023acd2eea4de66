//! The `weather` group: `get_weather` (now, today, the next hours' rain) and `get_forecast`
//! (up to seven days), from Open-Meteo (`[weather]`; docs: README, "Weather and feeds").
//!
//! One forecast request answers both tools: current conditions, 12 hours of rain and seven
//! days, in the configured units, cached for 15 minutes per (latitude, longitude, units) on
//! hearth's clock. A place name is geocoded once and stored (`store::weather`). The servers are
//! the owner's configuration, so their hosts are allowed past the web tools' private-address
//! refusal for these requests only (as `web_search` does with its endpoint); the requests go
//! through the web tools' fetch (its client, limits, redirect checks). When Open-Meteo fails
//! (a 5xx, a 429, `{"error": true, "reason": …}`), the result carries a one-line note instead
//! of the weather and the turn goes on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use reqwest::Url;
use reqwest::header::{self, HeaderValue};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::net::PrivateAllowlist;
use super::typed::Within;
use super::web::{Limits, Outgoing, fetch_allowing};
use super::{StatefulTool, Tool, ToolContext, ToolError, with_state};
use crate::config::{Units, WeatherConfig, WeatherLocation};
use crate::store::weather::WeatherPlace;

const GROUP: &str = "weather";
/// What Open-Meteo's licence (CC BY 4.0) asks of every answer.
pub const CREDIT: &str = "Weather data by Open-Meteo.com";
/// How long one forecast answers for its place.
pub const CACHE_FOR: Duration = Duration::from_secs(15 * 60);
/// Hours of rain `get_weather` looks ahead.
const NEXT_HOURS: usize = 12;
/// Open-Meteo's answers are a few kilobytes; a megabyte is no forecast.
const LIMITS: Limits = Limits {
    max_body: 1024 * 1024,
    timeout: Duration::from_secs(15),
};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    let weather = Arc::new(Weather::default());
    vec![
        with_state(GetWeather(weather.clone())),
        with_state(GetForecast(weather)),
    ]
}

/// The WMO weather interpretation codes Open-Meteo uses, in words.
const WMO_CODES: &[(i64, &str)] = &[
    (0, "clear sky"),
    (1, "mainly clear"),
    (2, "partly cloudy"),
    (3, "overcast"),
    (45, "fog"),
    (48, "depositing rime fog"),
    (51, "light drizzle"),
    (53, "moderate drizzle"),
    (55, "dense drizzle"),
    (56, "light freezing drizzle"),
    (57, "dense freezing drizzle"),
    (61, "slight rain"),
    (63, "moderate rain"),
    (65, "heavy rain"),
    (66, "light freezing rain"),
    (67, "heavy freezing rain"),
    (71, "slight snowfall"),
    (73, "moderate snowfall"),
    (75, "heavy snowfall"),
    (77, "snow grains"),
    (80, "slight rain showers"),
    (81, "moderate rain showers"),
    (82, "violent rain showers"),
    (85, "slight snow showers"),
    (86, "heavy snow showers"),
    (95, "thunderstorm"),
    (96, "thunderstorm with slight hail"),
    (99, "thunderstorm with heavy hail"),
];

/// A WMO code in words; a code outside the table reads "code N".
pub fn conditions(code: i64) -> String {
    WMO_CODES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or_else(|| format!("code {code}"), |(_, words)| (*words).to_string())
}

/// The unit labels of `units`: temperature, wind speed, precipitation.
fn labels(units: Units) -> (&'static str, &'static str, &'static str) {
    match units {
        Units::Metric => ("°C", "km/h", "mm"),
        Units::Imperial => ("°F", "mph", "in"),
    }
}

/// The forecast answer, the part the tools read.
#[derive(Clone, Debug, Default, Deserialize)]
struct Forecast {
    current: Option<Current>,
    hourly: Option<Hourly>,
    daily: Option<Daily>,
}

#[derive(Clone, Debug, Deserialize)]
struct Current {
    time: String,
    temperature_2m: Option<f64>,
    apparent_temperature: Option<f64>,
    precipitation: Option<f64>,
    weather_code: Option<i64>,
    wind_speed_10m: Option<f64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct Hourly {
    #[serde(default)]
    time: Vec<String>,
    #[serde(default)]
    precipitation_probability: Vec<Option<f64>>,
    #[serde(default)]
    precipitation: Vec<Option<f64>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct Daily {
    #[serde(default)]
    time: Vec<String>,
    #[serde(default)]
    weather_code: Vec<Option<i64>>,
    #[serde(default)]
    temperature_2m_max: Vec<Option<f64>>,
    #[serde(default)]
    temperature_2m_min: Vec<Option<f64>>,
    #[serde(default)]
    precipitation_sum: Vec<Option<f64>>,
    #[serde(default)]
    precipitation_probability_max: Vec<Option<f64>>,
    #[serde(default)]
    wind_speed_10m_max: Vec<Option<f64>>,
}

/// Open-Meteo's error body: `{"error": true, "reason": "…"}`.
#[derive(Debug, Deserialize)]
struct ApiError {
    error: bool,
    #[serde(default)]
    reason: String,
}

/// One geocoder match.
#[derive(Debug, Deserialize)]
struct GeocodedPlace {
    name: String,
    latitude: f64,
    longitude: f64,
    admin1: Option<String>,
    country: Option<String>,
    country_code: Option<String>,
    timezone: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Geocoded {
    #[serde(default)]
    results: Vec<GeocodedPlace>,
}

/// Where a forecast is for.
#[derive(Clone, Debug)]
struct Spot {
    label: String,
    latitude: f64,
    longitude: f64,
}

/// The cache's key: coordinates to four decimals (about 10 m) and the units.
type CacheKey = (i64, i64, Units);

/// A forecast and when it was fetched.
type Cached = (DateTime<Utc>, Arc<Forecast>);

/// The state both tools share: the forecasts of the last 15 minutes.
#[derive(Debug, Default)]
struct Weather {
    cache: Mutex<HashMap<CacheKey, Cached>>,
}

/// What a request to Open-Meteo gave: the answer, or the one line that says why not.
type Answer<T> = Result<T, String>;

impl Weather {
    fn cached(&self, key: CacheKey, now: DateTime<Utc>) -> Option<Arc<Forecast>> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let (at, forecast) = cache.get(&key)?;
        let age = now.signed_duration_since(*at);
        (age >= chrono::Duration::zero()
            && age < chrono::Duration::from_std(CACHE_FOR).unwrap_or(chrono::Duration::MAX))
        .then(|| forecast.clone())
    }

    /// The forecast for `spot`: from the cache when it is younger than 15 minutes, else one
    /// request.
    async fn forecast(&self, ctx: &ToolContext, spot: &Spot) -> Answer<Arc<Forecast>> {
        let config = &ctx.config.weather;
        let key = (
            (spot.latitude * 1e4).round() as i64,
            (spot.longitude * 1e4).round() as i64,
            config.units,
        );
        let now = ctx.clock.now();
        if let Some(forecast) = self.cached(key, now) {
            return Ok(forecast);
        }
        let mut query = vec![
            ("latitude", spot.latitude.to_string()),
            ("longitude", spot.longitude.to_string()),
            (
                "current",
                "temperature_2m,apparent_temperature,precipitation,weather_code,wind_speed_10m"
                    .into(),
            ),
            ("hourly", "precipitation_probability,precipitation".into()),
            (
                "daily",
                "weather_code,temperature_2m_max,temperature_2m_min,precipitation_sum,\
                 precipitation_probability_max,wind_speed_10m_max"
                    .into(),
            ),
            ("forecast_days", "7".into()),
            // Daily values need a zone: the place's own.
            ("timezone", "auto".into()),
        ];
        if config.units == Units::Imperial {
            query.extend([
                ("temperature_unit", "fahrenheit".to_string()),
                ("wind_speed_unit", "mph".to_string()),
                ("precipitation_unit", "inch".to_string()),
            ]);
        }
        let body = get(ctx, &config.base_url, "/v1/forecast", &query).await?;
        let forecast: Forecast = serde_json::from_slice(&body).map_err(|_| {
            "Open-Meteo's forecast could not be read; no weather this time".to_string()
        })?;
        let forecast = Arc::new(forecast);
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        // Old entries go as new ones come, so the map holds only the places asked about lately.
        cache.retain(|_, (at, _)| {
            now.signed_duration_since(*at)
                < chrono::Duration::from_std(CACHE_FOR).unwrap_or(chrono::Duration::MAX)
        });
        cache.insert(key, (now, forecast.clone()));
        Ok(forecast)
    }
}

/// The place a call is about: the model's `location`, else `[weather] location`. A name is
/// looked up in the store first and geocoded only the first time.
async fn spot(ctx: &ToolContext, asked: Option<&str>) -> Result<Answer<Spot>, ToolError> {
    let location = match asked.map(str::trim).filter(|a| !a.is_empty()) {
        Some(text) => WeatherLocation::parse(text)
            .map_err(|e| ToolError::InvalidArguments(format!("`location`: {e}")))?,
        None => ctx.config.weather.location.clone().ok_or_else(|| {
            ToolError::InvalidArguments(
                "no place: give `location` (a town, or lat,lon); the owner can set \
                 [weather] location in hearth.toml"
                    .into(),
            )
        })?,
    };
    let name = match location {
        WeatherLocation::Coordinates {
            latitude,
            longitude,
        } => {
            return Ok(Ok(Spot {
                label: format!("{latitude},{longitude}"),
                latitude,
                longitude,
            }));
        }
        WeatherLocation::Place(name) => name,
    };
    let place = match ctx.store.weather_place(&name).await? {
        Some(place) => place,
        None => match geocode(ctx, &name).await? {
            Ok(place) => {
                ctx.store
                    .save_weather_place(&name, &place, ctx.clock.now_ms())
                    .await?;
                place
            }
            Err(note) => return Ok(Err(note)),
        },
    };
    let label = [
        Some(place.name.clone()),
        place.admin1.clone(),
        place.country.clone(),
    ]
    .into_iter()
    .flatten()
    .filter(|part| !part.is_empty())
    .collect::<Vec<_>>()
    .join(", ");
    Ok(Ok(Spot {
        label,
        latitude: place.latitude,
        longitude: place.longitude,
    }))
}

/// Asks the geocoder for `name` ("Springfield, US" searches in that country); a name it does
/// not know is the model's to fix.
async fn geocode(ctx: &ToolContext, name: &str) -> Result<Answer<WeatherPlace>, ToolError> {
    let mut query = vec![
        ("count", "5".to_string()),
        ("language", "en".to_string()),
        ("format", "json".to_string()),
    ];
    let search = match name.rsplit_once(',') {
        Some((town, code))
            if code.trim().len() == 2 && code.trim().chars().all(|c| c.is_ascii_alphabetic()) =>
        {
            query.push(("countryCode", code.trim().to_ascii_uppercase()));
            town.trim()
        }
        _ => name.trim(),
    };
    query.push(("name", search.to_string()));
    let body = match get(ctx, &ctx.config.weather.geocoding_url, "/v1/search", &query).await {
        Ok(body) => body,
        Err(note) => return Ok(Err(note)),
    };
    let Ok(found) = serde_json::from_slice::<Geocoded>(&body) else {
        return Ok(Err(
            "Open-Meteo's geocoder answered something unreadable; no weather this time".into(),
        ));
    };
    let Some(first) = found.results.into_iter().next() else {
        return Err(ToolError::Failed(format!(
            "no place called {name:?} was found; try a larger town nearby, add the country \
             code (\"Springfield, US\"), or give lat,lon"
        )));
    };
    Ok(Ok(WeatherPlace {
        name: first.name,
        admin1: first.admin1,
        country: first.country_code.or(first.country),
        latitude: first.latitude,
        longitude: first.longitude,
        timezone: first.timezone,
    }))
}

/// One GET to the owner's Open-Meteo server at `base` + `path`; the body of a 200, or the
/// one-line note a failure becomes.
async fn get(
    ctx: &ToolContext,
    base: &str,
    path: &str,
    query: &[(&str, String)],
) -> Result<Vec<u8>, String> {
    let mut url = Url::parse(&format!("{}{path}", base.trim_end_matches('/')))
        .map_err(|e| format!("the weather service's address {base:?} is not valid: {e}"))?;
    url.query_pairs_mut()
        .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
    let mut allowed = ctx.config.tools.allowed_private_hosts.clone();
    if let Some(host) = url.host_str() {
        allowed.push(host.to_string());
    }
    let mut request = Outgoing::get(url);
    request
        .headers
        .insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    let fetched = fetch_allowing(&PrivateAllowlist::new(&allowed), request, LIMITS)
        .await
        .map_err(|e| format!("Open-Meteo could not be reached ({e}); no weather this time"))?;
    let status = fetched.status.as_u16();
    if fetched.status.is_success() && !fetched.truncated {
        return Ok(fetched.body);
    }
    let reason = serde_json::from_slice::<ApiError>(&fetched.body)
        .ok()
        .filter(|e| e.error)
        .map(|e| e.reason.lines().next().unwrap_or_default().to_string());
    Err(match (status, reason) {
        (429, _) => "Open-Meteo's request limit is reached (HTTP 429); it frees up within the \
                     hour, no weather this time"
            .to_string(),
        (_, Some(reason)) => format!("Open-Meteo refused the request: {reason}"),
        (500.., _) => format!("Open-Meteo is unavailable (HTTP {status}); no weather this time"),
        _ if fetched.truncated => "Open-Meteo's answer was too large to be a forecast".into(),
        _ => format!("Open-Meteo answered HTTP {status}; no weather this time"),
    })
}

/// `value` with its unit, one decimal; "unknown" when Open-Meteo gave none.
fn measure(value: Option<f64>, unit: &str) -> String {
    value.map_or_else(|| "unknown".into(), |v| format!("{v:.1} {unit}"))
}

fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "unknown".into(), |v| format!("{v:.0}%"))
}

fn at<T: Copy>(values: &[Option<T>], i: usize) -> Option<T> {
    values.get(i).copied().flatten()
}

/// Day `i` of the forecast as the tools show it.
fn day(daily: &Daily, i: usize, units: Units) -> Value {
    let (temperature, speed, rain) = labels(units);
    let date = daily.time.get(i).cloned().unwrap_or_default();
    let weekday = NaiveDate::parse_from_str(&date, "%Y-%m-%d")
        .map(|d| d.format("%A").to_string())
        .unwrap_or_default();
    json!({
        "date": date,
        "weekday": weekday,
        "conditions": at(&daily.weather_code, i).map(conditions),
        "high": measure(at(&daily.temperature_2m_max, i), temperature),
        "low": measure(at(&daily.temperature_2m_min, i), temperature),
        "precipitation_probability": percent(at(&daily.precipitation_probability_max, i)),
        "precipitation": measure(at(&daily.precipitation_sum, i), rain),
        "wind_max": measure(at(&daily.wind_speed_10m_max, i), speed),
    })
}

/// The answer when Open-Meteo could not give one: the place and the one-line note.
fn note_only(place: Option<&Spot>, note: String) -> Value {
    json!({
        "place": place.map(|s| s.label.clone()),
        "note": note,
        "credit": CREDIT,
    })
}

/// `get_weather`, sharing the forecast cache with `get_forecast`.
struct GetWeather(Arc<Weather>);

/// The weather now and for the rest of today: current conditions, temperature and wind,
/// today's high, low and precipitation, and the chance of rain hour by hour for the next 12
/// hours. Without `location` it is the owner's configured place.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WeatherArgs {
    /// a town ("Paris", "Springfield, US") or "lat,lon"; default the owner's place
    location: Option<String>,
}

impl StatefulTool for GetWeather {
    const NAME: &'static str = "get_weather";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "weather, temperature, rain, umbrella, forecast, today, outside";
    const TIMEOUT: Option<Duration> = Some(Duration::from_secs(35));
    type Args = WeatherArgs;
    type Output = Value;

    async fn run(&self, args: WeatherArgs, ctx: &ToolContext) -> Result<Value, ToolError> {
        let spot = match spot(ctx, args.location.as_deref()).await? {
            Ok(spot) => spot,
            Err(note) => return Ok(note_only(None, note)),
        };
        let forecast = match self.0.forecast(ctx, &spot).await {
            Ok(forecast) => forecast,
            Err(note) => return Ok(note_only(Some(&spot), note)),
        };
        Ok(current(&spot, &forecast, &ctx.config.weather))
    }
}

/// `get_weather`'s answer from a forecast.
fn current(spot: &Spot, forecast: &Forecast, config: &WeatherConfig) -> Value {
    let (temperature, speed, rain) = labels(config.units);
    let now = forecast.current.as_ref().map(|c| {
        json!({
            "time": c.time,
            "conditions": c.weather_code.map(conditions),
            "temperature": measure(c.temperature_2m, temperature),
            "feels_like": measure(c.apparent_temperature, temperature),
            "precipitation": measure(c.precipitation, rain),
            "wind": measure(c.wind_speed_10m, speed),
        })
    });
    let today = forecast
        .daily
        .as_ref()
        .filter(|d| !d.time.is_empty())
        .map(|d| day(d, 0, config.units));
    // The hours from the current one on; Open-Meteo's hourly list starts at midnight.
    let hourly = forecast.hourly.clone().unwrap_or_default();
    let this_hour = forecast
        .current
        .as_ref()
        .and_then(|c| c.time.get(..13))
        .unwrap_or("");
    let start = hourly
        .time
        .iter()
        .position(|t| t.as_str() >= this_hour)
        .unwrap_or(0);
    let hours: Vec<Value> = (start..hourly.time.len())
        .take(NEXT_HOURS)
        .map(|i| {
            json!({
                "time": hourly.time[i].get(11..16).unwrap_or(&hourly.time[i]),
                "precipitation_probability": percent(at(&hourly.precipitation_probability, i)),
                "precipitation": measure(at(&hourly.precipitation, i), rain),
            })
        })
        .collect();
    let wet = (start..hourly.time.len()).take(NEXT_HOURS).find(|&i| {
        at(&hourly.precipitation_probability, i).is_some_and(|p| p >= 50.0)
            || at(&hourly.precipitation, i).is_some_and(|p| p > 0.0)
    });
    let rain_ahead = match wet {
        Some(i) => format!(
            "rain likely from {} ({})",
            hourly.time[i].get(11..16).unwrap_or(&hourly.time[i]),
            percent(at(&hourly.precipitation_probability, i))
        ),
        None => format!("no rain expected in the next {NEXT_HOURS} hours"),
    };
    json!({
        "place": spot.label,
        "now": now,
        "today": today,
        "rain_ahead": rain_ahead,
        "next_hours": hours,
        "credit": CREDIT,
    })
}

/// `get_forecast`, sharing the forecast cache with `get_weather`.
struct GetForecast(Arc<Weather>);

/// The forecast day by day, up to 7 days from today: conditions, high and low, chance of
/// precipitation and the strongest wind. Without `location` it is the owner's configured place.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ForecastArgs {
    /// a town ("Paris", "Springfield, US") or "lat,lon"; default the owner's place
    location: Option<String>,
    /// how many days from today; default 3
    days: Option<Within<1, 7>>,
}

impl StatefulTool for GetForecast {
    const NAME: &'static str = "get_forecast";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "weather, forecast, week, weekend, tomorrow, rain, temperature";
    const TIMEOUT: Option<Duration> = Some(Duration::from_secs(35));
    type Args = ForecastArgs;
    type Output = Value;

    async fn run(&self, args: ForecastArgs, ctx: &ToolContext) -> Result<Value, ToolError> {
        let days = args.days.map_or(3, |d| usize::try_from(d.0).unwrap_or(3));
        let spot = match spot(ctx, args.location.as_deref()).await? {
            Ok(spot) => spot,
            Err(note) => return Ok(note_only(None, note)),
        };
        let forecast = match self.0.forecast(ctx, &spot).await {
            Ok(forecast) => forecast,
            Err(note) => return Ok(note_only(Some(&spot), note)),
        };
        let daily = forecast.daily.clone().unwrap_or_default();
        let list: Vec<Value> = (0..daily.time.len().min(days))
            .map(|i| day(&daily, i, ctx.config.weather.units))
            .collect();
        Ok(json!({
            "place": spot.label,
            "days": list,
            "credit": CREDIT,
        }))
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use hearth_testkit::weather::{FakeOpenMeteo, ForecastMode};
    use serde_json::json;

    use super::*;
    use crate::clock::ManualClock;
    use crate::config::Config;
    use crate::tool::test_calls::{call, ok};

    /// A context whose `[weather]` points at `fake`, at 08:00 UTC on 2026-11-29.
    async fn context(
        fake: &FakeOpenMeteo,
        units: Units,
        location: Option<&str>,
    ) -> (ToolContext, Arc<ManualClock>, tempfile::TempDir) {
        let (mut ctx, dir) = crate::tool::test_context().await;
        let clock = ManualClock::new(
            chrono::Utc
                .with_ymd_and_hms(2026, 11, 29, 8, 0, 0)
                .single()
                .expect("a time"),
        );
        ctx.clock = clock.clone();
        let mut config: Config = (*ctx.config).clone();
        config.weather = WeatherConfig {
            location: location.map(|l| WeatherLocation::parse(l).expect("a location")),
            units,
            base_url: fake.url(),
            geocoding_url: fake.url(),
        };
        ctx.config = Arc::new(config);
        (ctx, clock, dir)
    }

    #[tokio::test]
    async fn a_place_name_is_geocoded_once_and_kept() {
        let fake = FakeOpenMeteo::start().await;
        let (ctx, clock, _dir) = context(&fake, Units::Metric, Some("Paris")).await;
        let family = tools();
        let now = ok(family.clone(), &ctx, "get_weather", json!({})).await;
        assert_eq!(now["place"], "Paris, Île-de-France, FR", "{now}");
        assert_eq!(now["credit"], "Weather data by Open-Meteo.com");
        clock.advance(Duration::from_secs(3600));
        ok(family, &ctx, "get_forecast", json!({})).await;
        // Another daemon start (fresh tools, no cache) still finds the place in the store.
        ok(tools(), &ctx, "get_weather", json!({"location": "paris"})).await;
        let searches = fake.searches();
        assert_eq!(searches.len(), 1, "{searches:?}");
        assert_eq!(searches[0]["name"], "Paris");
        assert_eq!(fake.forecasts().len(), 3);
        let asked = &fake.forecasts()[0];
        assert_eq!(asked["latitude"], "48.85341");
        assert_eq!(asked["timezone"], "auto");
        assert_eq!(asked["forecast_days"], "7");

        // Coordinates need no geocoder; a name it does not know is the model's to fix.
        ok(
            tools(),
            &ctx,
            "get_weather",
            json!({"location": "51.5,-0.12"}),
        )
        .await;
        assert_eq!(fake.searches().len(), 1);
        let unknown = call(
            tools(),
            &ctx,
            "get_weather",
            json!({"location": "Atlantis"}),
        )
        .await
        .expect_err("no such place")
        .to_string();
        assert!(
            unknown.contains("no place called \"Atlantis\""),
            "{unknown}"
        );
        let bad = call(tools(), &ctx, "get_weather", json!({"location": "95,10"}))
            .await
            .expect_err("off the map")
            .to_string();
        assert!(bad.contains("not on Earth"), "{bad}");
    }

    #[tokio::test]
    async fn answers_are_cached_for_fifteen_minutes_per_place() {
        let fake = FakeOpenMeteo::start().await;
        let (ctx, clock, _dir) = context(&fake, Units::Metric, Some("48.85,2.35")).await;
        let family = tools();
        ok(family.clone(), &ctx, "get_weather", json!({})).await;
        clock.advance(Duration::from_secs(14 * 60));
        ok(family.clone(), &ctx, "get_forecast", json!({"days": 2})).await;
        ok(family.clone(), &ctx, "get_weather", json!({})).await;
        assert_eq!(fake.forecasts().len(), 1, "one request answers both tools");
        // Another place is its own entry.
        ok(
            family.clone(),
            &ctx,
            "get_weather",
            json!({"location": "40.7,-74"}),
        )
        .await;
        assert_eq!(fake.forecasts().len(), 2);
        clock.advance(Duration::from_secs(60));
        ok(family, &ctx, "get_weather", json!({})).await;
        assert_eq!(fake.forecasts().len(), 3, "after 15 minutes it asks again");
    }

    #[tokio::test]
    async fn units_follow_the_configuration() {
        let fake = FakeOpenMeteo::start().await;
        let (ctx, _clock, _dir) = context(&fake, Units::Metric, Some("48.85,2.35")).await;
        let metric = ok(tools(), &ctx, "get_weather", json!({})).await;
        assert_eq!(metric["now"]["temperature"], "5.3 °C", "{metric}");
        assert_eq!(metric["now"]["wind"], "11.2 km/h");
        assert_eq!(metric["now"]["conditions"], "overcast");
        assert_eq!(metric["today"]["precipitation"], "4.0 mm");
        let asked = &fake.forecasts()[0];
        for key in ["temperature_unit", "wind_speed_unit", "precipitation_unit"] {
            assert!(!asked.contains_key(key), "{asked:?}");
        }

        let (ctx, _clock, _dir2) = context(&fake, Units::Imperial, Some("48.85,2.35")).await;
        let imperial = ok(tools(), &ctx, "get_weather", json!({})).await;
        let asked = &fake.forecasts()[1];
        assert_eq!(asked["temperature_unit"], "fahrenheit");
        assert_eq!(asked["wind_speed_unit"], "mph");
        assert_eq!(asked["precipitation_unit"], "inch");
        assert_eq!(imperial["now"]["temperature"], "41.5 °F", "{imperial}");
        assert!(
            imperial["now"]["wind"]
                .as_str()
                .unwrap_or("")
                .ends_with("mph")
        );
    }

    #[tokio::test]
    async fn today_the_next_hours_and_the_week_read_in_words() {
        let fake = FakeOpenMeteo::start().await;
        let (ctx, _clock, _dir) = context(&fake, Units::Metric, Some("48.85,2.35")).await;
        let now = ok(tools(), &ctx, "get_weather", json!({})).await;
        assert_eq!(now["today"]["high"], "8.0 °C", "{now}");
        assert_eq!(now["today"]["low"], "2.0 °C");
        assert_eq!(now["today"]["conditions"], "slight rain");
        assert_eq!(now["rain_ahead"], "rain likely from 15:00 (70%)");
        let hours = now["next_hours"].as_array().expect("hours");
        assert_eq!(hours.len(), 12);
        assert_eq!(hours[0]["time"], "08:00");

        let week = ok(tools(), &ctx, "get_forecast", json!({"days": 7})).await;
        let days = week["days"].as_array().expect("days");
        assert_eq!(days.len(), 7);
        assert_eq!(days[3]["conditions"], "code 42", "unknown codes are named");
        assert_eq!(days[4]["conditions"], "thunderstorm");
        assert_eq!(days[4]["precipitation_probability"], "90%");
        assert_eq!(days[4]["wind_max"], "45.0 km/h");
        assert_eq!(days[6]["precipitation"], "unknown");
        assert_eq!(days[1]["weekday"], "Monday");
        let three = ok(tools(), &ctx, "get_forecast", json!({})).await;
        assert_eq!(three["days"].as_array().map(Vec::len), Some(3));
        let err = call(tools(), &ctx, "get_forecast", json!({"days": 8}))
            .await
            .expect_err("more than a week")
            .to_string();
        assert!(err.contains("from 1 to 7"), "{err}");
        assert_eq!(conditions(0), "clear sky");
        assert_eq!(WMO_CODES.len(), 28);
    }

    #[tokio::test]
    async fn a_failing_service_is_a_one_line_note_not_a_failed_call() {
        let fake = FakeOpenMeteo::start().await;
        let (ctx, _clock, _dir) = context(&fake, Units::Metric, Some("48.85,2.35")).await;
        fake.set_mode(ForecastMode::Status(503));
        let down = ok(tools(), &ctx, "get_weather", json!({})).await;
        let note = down["note"].as_str().expect("a note");
        assert_eq!(
            note,
            "Open-Meteo is unavailable (HTTP 503); no weather this time"
        );
        assert!(down.get("now").is_none(), "{down}");
        assert_eq!(down["credit"], CREDIT);

        fake.set_mode(ForecastMode::Error(
            "Parameter 'latitude' must be in range of -90 to 90. Given: 91.0.".into(),
        ));
        let refused = ok(tools(), &ctx, "get_forecast", json!({})).await;
        assert_eq!(
            refused["note"],
            "Open-Meteo refused the request: Parameter 'latitude' must be in range of -90 to 90. Given: 91.0."
        );

        // Failures are not cached: the next call gets the weather.
        fake.set_mode(ForecastMode::Normal);
        let family = tools();
        let back = ok(family, &ctx, "get_weather", json!({})).await;
        assert_eq!(back["now"]["temperature"], "5.3 °C", "{back}");

        // A place is needed from somewhere.
        let (ctx, _clock, _dir) = context(&fake, Units::Metric, None).await;
        let err = call(tools(), &ctx, "get_weather", json!({}))
            .await
            .expect_err("no place")
            .to_string();
        assert!(err.contains("[weather] location"), "{err}");
    }
}
