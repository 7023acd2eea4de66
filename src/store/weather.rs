//! The `weather_places` table: place names the weather tools geocoded, kept so Open-Meteo's
//! geocoder is asked once per name (`[weather] location` or a tool call's `location`).

use super::query::Sql;
use super::{Store, StoreResult};

/// A place as the geocoder found it.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct WeatherPlace {
    pub name: String,
    /// The region (state, province) when the geocoder gave one.
    pub admin1: Option<String>,
    pub country: Option<String>,
    pub latitude: f64,
    pub longitude: f64,
    /// Its IANA zone, when given.
    pub timezone: Option<String>,
}

const COLUMNS: &str = "name, admin1, country, latitude, longitude, timezone";

/// How a place name is looked up: trimmed and lowercased, so "Paris" and " paris" are one row.
pub fn place_key(query: &str) -> String {
    query.trim().to_lowercase()
}

impl Store {
    /// The place `query` was geocoded to before, if it was.
    pub async fn weather_place(&self, query: &str) -> StoreResult<Option<WeatherPlace>> {
        let mut sql = Sql::new(&format!(
            "SELECT {COLUMNS} FROM weather_places WHERE query = "
        ));
        sql.bind(place_key(query));
        sql.fetch_optional(self).await
    }

    /// Keeps `place` as what `query` means; a later lookup of the same name replaces it.
    pub async fn save_weather_place(
        &self,
        query: &str,
        place: &WeatherPlace,
        now: i64,
    ) -> StoreResult<()> {
        let mut sql = Sql::insert("weather_places", &format!("query, {COLUMNS}, created_at"));
        sql.value(place_key(query))
            .value(place.name.clone())
            .value(place.admin1.clone())
            .value(place.country.clone())
            .value(place.latitude)
            .value(place.longitude)
            .value(place.timezone.clone())
            .value(now)
            .push(
                ") ON CONFLICT (query) DO UPDATE SET name = excluded.name, \
                 admin1 = excluded.admin1, country = excluded.country, \
                 latitude = excluded.latitude, longitude = excluded.longitude, \
                 timezone = excluded.timezone, created_at = excluded.created_at",
            );
        let mut conn = self.write().await?;
        sql.execute_in(&mut conn).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_place_is_kept_under_its_name_in_any_case() {
        let (store, _dir) = crate::store::test_support::temp_store().await;
        assert_eq!(store.weather_place("Paris").await.expect("read"), None);
        let paris = WeatherPlace {
            name: "Paris".into(),
            admin1: Some("Île-de-France".into()),
            country: Some("France".into()),
            latitude: 48.85341,
            longitude: 2.3488,
            timezone: Some("Europe/Paris".into()),
        };
        store
            .save_weather_place("Paris", &paris, 1)
            .await
            .expect("saved");
        store
            .save_weather_place(" paris ", &paris, 2)
            .await
            .expect("saved again");
        assert_eq!(
            store.weather_place("PARIS").await.expect("read"),
            Some(paris)
        );
    }
}
