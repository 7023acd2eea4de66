//! A fake Open-Meteo on one port, speaking its two real JSON APIs: the forecast
//! (`GET /v1/forecast?latitude=…&longitude=…&current=…&hourly=…&daily=…`) and the geocoder
//! (`GET /v1/search?name=…`). It knows one place, Paris; any other name finds nothing, answered
//! as Open-Meteo does (`{"generationtime_ms": …}` without `results`). The forecast can be made
//! to fail with a 5xx or with Open-Meteo's `{"error": true, "reason": …}` and a 400. Every
//! request's query is recorded. It stops when dropped.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::net::Served;

/// The query of one request.
pub type Params = BTreeMap<String, String>;

/// How the forecast endpoint answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ForecastMode {
    /// A forecast for the asked place, in the asked units.
    #[default]
    Normal,
    /// An empty answer with this status (a 5xx).
    Status(u16),
    /// Open-Meteo's error body with 400.
    Error(String),
}

#[derive(Default)]
struct Inner {
    forecasts: Vec<Params>,
    searches: Vec<Params>,
    mode: ForecastMode,
}

/// The fake; [`FakeOpenMeteo::url`] is both `base_url` and `geocoding_url`.
pub struct FakeOpenMeteo {
    served: Served,
    inner: Arc<Mutex<Inner>>,
}

impl FakeOpenMeteo {
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = Router::new()
            .route("/v1/forecast", get(forecast))
            .route("/v1/search", get(search))
            .with_state(inner.clone());
        Self {
            served: Served::start(app).await,
            inner,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.served.addr())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_mode(&self, mode: ForecastMode) {
        self.lock().mode = mode;
    }

    /// The query of every forecast request, in order.
    pub fn forecasts(&self) -> Vec<Params> {
        self.lock().forecasts.clone()
    }

    /// The query of every geocoding request, in order.
    pub fn searches(&self) -> Vec<Params> {
        self.lock().searches.clone()
    }
}

async fn search(State(inner): State<Arc<Mutex<Inner>>>, Query(params): Query<Params>) -> Response {
    let name = params.get("name").cloned().unwrap_or_default();
    inner
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .searches
        .push(params);
    if !name.eq_ignore_ascii_case("paris") {
        return axum::Json(json!({"generationtime_ms": 0.42})).into_response();
    }
    axum::Json(json!({
        "results": [{
            "id": 2988507,
            "name": "Paris",
            "latitude": 48.85341,
            "longitude": 2.3488,
            "elevation": 43.0,
            "feature_code": "PPLC",
            "country_code": "FR",
            "admin1_id": 3012874,
            "admin2_id": 2968815,
            "timezone": "Europe/Paris",
            "population": 2138551,
            "country_id": 3017382,
            "country": "France",
            "admin1": "Île-de-France",
            "admin2": "Paris"
        }],
        "generationtime_ms": 0.9
    }))
    .into_response()
}

async fn forecast(
    State(inner): State<Arc<Mutex<Inner>>>,
    Query(params): Query<Params>,
) -> Response {
    let mode = {
        let mut inner = inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.forecasts.push(params.clone());
        inner.mode.clone()
    };
    match mode {
        ForecastMode::Status(status) => StatusCode::from_u16(status)
            .unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
            .into_response(),
        ForecastMode::Error(reason) => (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": true, "reason": reason})),
        )
            .into_response(),
        ForecastMode::Normal => axum::Json(answer(&params)).into_response(),
    }
}

/// A forecast as Open-Meteo shapes it, for 2026-11-29 from 08:00 in Paris: cloudy now, rain
/// from 15:00, and seven days whose codes include one outside the WMO table (42).
fn answer(params: &Params) -> Value {
    let imperial = params.get("temperature_unit").map(String::as_str) == Some("fahrenheit");
    let (t, speed, rain) = if imperial {
        ("°F", "mp/h", "inch")
    } else {
        ("°C", "km/h", "mm")
    };
    let temp = |c: f64| {
        if imperial {
            ((c * 9.0 / 5.0 + 32.0) * 10.0).round() / 10.0
        } else {
            c
        }
    };
    let hours: Vec<String> = (0..168)
        .map(|h| format!("2026-{}T{:02}:00", day_of(h / 24), h % 24))
        .collect();
    let probability: Vec<Value> = (0..168)
        .map(|h| json!(if (15..20).contains(&(h % 24)) { 70 } else { 5 }))
        .collect();
    let precipitation: Vec<Value> = (0..168)
        .map(|h| {
            json!(if (15..20).contains(&(h % 24)) {
                0.8
            } else {
                0.0
            })
        })
        .collect();
    let days: Vec<String> = (0..7).map(|d| format!("2026-{}", day_of(d))).collect();
    json!({
        "latitude": params.get("latitude").and_then(|v| v.parse::<f64>().ok()),
        "longitude": params.get("longitude").and_then(|v| v.parse::<f64>().ok()),
        "generationtime_ms": 0.12,
        "utc_offset_seconds": 3600,
        "timezone": "Europe/Paris",
        "timezone_abbreviation": "GMT+1",
        "elevation": 43.0,
        "current_units": {"time": "iso8601", "interval": "seconds", "temperature_2m": t,
            "apparent_temperature": t, "precipitation": rain, "weather_code": "wmo code",
            "wind_speed_10m": speed},
        "current": {"time": "2026-11-29T08:00", "interval": 900, "temperature_2m": temp(5.3),
            "apparent_temperature": temp(2.1), "precipitation": 0.0, "weather_code": 3,
            "wind_speed_10m": 11.2},
        "hourly_units": {"time": "iso8601", "precipitation_probability": "%", "precipitation": rain},
        "hourly": {"time": hours, "precipitation_probability": probability,
            "precipitation": precipitation},
        "daily_units": {"time": "iso8601", "weather_code": "wmo code", "temperature_2m_max": t,
            "temperature_2m_min": t, "precipitation_sum": rain,
            "precipitation_probability_max": "%", "wind_speed_10m_max": speed},
        "daily": {
            "time": days,
            "weather_code": [61, 3, 0, 42, 95, 71, 2],
            "temperature_2m_max": [temp(8.0), temp(9.5), temp(11.0), temp(7.0), temp(6.0), temp(2.0), temp(4.0)],
            "temperature_2m_min": [temp(2.0), temp(3.0), temp(4.0), temp(1.0), temp(0.0), temp(-3.0), temp(-1.0)],
            "precipitation_sum": [4.0, 0.0, 0.0, 1.0, 12.5, 3.0, null],
            "precipitation_probability_max": [80, 10, 0, 40, 90, 60, null],
            "wind_speed_10m_max": [20.5, 14.0, 9.0, 30.2, 45.0, 12.0, 10.0]
        }
    })
}

/// "11-29" for day 0, then the days after (the fake's week ends in December).
fn day_of(day: usize) -> String {
    let date = 29 + day;
    if date <= 30 {
        format!("11-{date:02}")
    } else {
        format!("12-{:02}", date - 30)
    }
}
