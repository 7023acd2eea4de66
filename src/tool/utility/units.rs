//! `convert_units`: length, mass, temperature, volume, speed, data size and time.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{GROUP, number};
use crate::tool::{ToolContext, ToolError, TypedTool};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Length,
    Mass,
    Temperature,
    Volume,
    Speed,
    Data,
    Time,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Length => "length",
            Kind::Mass => "mass",
            Kind::Temperature => "temperature",
            Kind::Volume => "volume",
            Kind::Speed => "speed",
            Kind::Data => "data size",
            Kind::Time => "time",
        }
    }
}

/// A unit: its kind and how to reach the kind's base unit (metre, kilogram, kelvin, litre,
/// metre per second, byte, second) as `base = value * factor + offset`.
#[derive(Clone, Copy, Debug)]
struct Unit {
    symbol: &'static str,
    kind: Kind,
    factor: f64,
    offset: f64,
}

const fn unit(symbol: &'static str, kind: Kind, factor: f64) -> Unit {
    Unit {
        symbol,
        kind,
        factor,
        offset: 0.0,
    }
}

/// Every unit with the names it answers to (lower case).
const UNITS: &[(Unit, &[&str])] = &[
    // Length, in metres.
    (
        unit("mm", Kind::Length, 0.001),
        &["mm", "millimeter", "millimetre"],
    ),
    (
        unit("cm", Kind::Length, 0.01),
        &["cm", "centimeter", "centimetre"],
    ),
    (unit("m", Kind::Length, 1.0), &["m", "meter", "metre"]),
    (
        unit("km", Kind::Length, 1000.0),
        &["km", "kilometer", "kilometre"],
    ),
    (
        unit("in", Kind::Length, 0.0254),
        &["in", "inch", "inches", "\""],
    ),
    (
        unit("ft", Kind::Length, 0.3048),
        &["ft", "foot", "feet", "'"],
    ),
    (unit("yd", Kind::Length, 0.9144), &["yd", "yard"]),
    (unit("mi", Kind::Length, 1609.344), &["mi", "mile"]),
    (
        unit("nmi", Kind::Length, 1852.0),
        &["nmi", "nautical mile", "nautical_mile"],
    ),
    // Mass, in kilograms.
    (unit("mg", Kind::Mass, 1e-6), &["mg", "milligram"]),
    (unit("g", Kind::Mass, 0.001), &["g", "gram", "gramme"]),
    (unit("kg", Kind::Mass, 1.0), &["kg", "kilogram", "kilo"]),
    (unit("t", Kind::Mass, 1000.0), &["t", "tonne", "metric ton"]),
    (unit("oz", Kind::Mass, 0.028_349_523_125), &["oz", "ounce"]),
    (
        unit("lb", Kind::Mass, 0.453_592_37),
        &["lb", "lbs", "pound"],
    ),
    (unit("st", Kind::Mass, 6.350_293_18), &["st", "stone"]),
    // Volume, in litres.
    (
        unit("ml", Kind::Volume, 0.001),
        &["ml", "milliliter", "millilitre", "cm3", "cc"],
    ),
    (
        unit("cl", Kind::Volume, 0.01),
        &["cl", "centiliter", "centilitre"],
    ),
    (
        unit("dl", Kind::Volume, 0.1),
        &["dl", "deciliter", "decilitre"],
    ),
    (unit("l", Kind::Volume, 1.0), &["l", "liter", "litre"]),
    (
        unit("m3", Kind::Volume, 1000.0),
        &["m3", "m³", "cubic meter", "cubic metre"],
    ),
    (
        unit("tsp", Kind::Volume, 0.004_928_921_593_75),
        &["tsp", "teaspoon"],
    ),
    (
        unit("tbsp", Kind::Volume, 0.014_786_764_781_25),
        &["tbsp", "tablespoon"],
    ),
    (
        unit("fl_oz", Kind::Volume, 0.029_573_529_562_5),
        &["fl_oz", "fl oz", "floz", "fluid ounce"],
    ),
    (unit("cup", Kind::Volume, 0.236_588_236_5), &["cup"]),
    (unit("pt", Kind::Volume, 0.473_176_473), &["pt", "pint"]),
    (unit("qt", Kind::Volume, 0.946_352_946), &["qt", "quart"]),
    (
        unit("gal", Kind::Volume, 3.785_411_784),
        &["gal", "gallon", "us gallon"],
    ),
    (
        unit("imp_gal", Kind::Volume, 4.546_09),
        &["imp_gal", "imperial gallon", "uk gallon"],
    ),
    // Speed, in metres per second.
    (
        unit("m/s", Kind::Speed, 1.0),
        &["m/s", "mps", "meters per second", "metres per second"],
    ),
    (
        unit("km/h", Kind::Speed, 1.0 / 3.6),
        &[
            "km/h",
            "kmh",
            "kph",
            "kilometers per hour",
            "kilometres per hour",
        ],
    ),
    (
        unit("mph", Kind::Speed, 0.447_04),
        &["mph", "mi/h", "miles per hour"],
    ),
    (
        unit("kn", Kind::Speed, 1852.0 / 3600.0),
        &["kn", "knot", "kt"],
    ),
    (
        unit("ft/s", Kind::Speed, 0.3048),
        &["ft/s", "fps", "feet per second"],
    ),
    // Data size, in bytes. KB, MB … are decimal (1000); KiB, MiB … binary (1024).
    (unit("bit", Kind::Data, 0.125), &["bit"]),
    (unit("B", Kind::Data, 1.0), &["b", "byte", "octet"]),
    (unit("KB", Kind::Data, 1e3), &["kb", "kilobyte"]),
    (unit("MB", Kind::Data, 1e6), &["mb", "megabyte"]),
    (unit("GB", Kind::Data, 1e9), &["gb", "gigabyte"]),
    (unit("TB", Kind::Data, 1e12), &["tb", "terabyte"]),
    (unit("PB", Kind::Data, 1e15), &["pb", "petabyte"]),
    (unit("KiB", Kind::Data, 1024.0), &["kib", "kibibyte"]),
    (unit("MiB", Kind::Data, 1_048_576.0), &["mib", "mebibyte"]),
    (
        unit("GiB", Kind::Data, 1_073_741_824.0),
        &["gib", "gibibyte"],
    ),
    (
        unit("TiB", Kind::Data, 1_099_511_627_776.0),
        &["tib", "tebibyte"],
    ),
    (
        unit("PiB", Kind::Data, 1_125_899_906_842_624.0),
        &["pib", "pebibyte"],
    ),
    (unit("kbit", Kind::Data, 125.0), &["kbit", "kilobit"]),
    (unit("Mbit", Kind::Data, 125_000.0), &["mbit", "megabit"]),
    (
        unit("Gbit", Kind::Data, 125_000_000.0),
        &["gbit", "gigabit"],
    ),
    // Time, in seconds. A month is a twelfth of a Gregorian year.
    (unit("ns", Kind::Time, 1e-9), &["ns", "nanosecond"]),
    (unit("µs", Kind::Time, 1e-6), &["us", "µs", "microsecond"]),
    (unit("ms", Kind::Time, 0.001), &["ms", "millisecond"]),
    (unit("s", Kind::Time, 1.0), &["s", "sec", "second"]),
    (unit("min", Kind::Time, 60.0), &["min", "minute"]),
    (unit("h", Kind::Time, 3600.0), &["h", "hr", "hour"]),
    (unit("day", Kind::Time, 86_400.0), &["d", "day"]),
    (unit("week", Kind::Time, 604_800.0), &["wk", "week"]),
    (unit("month", Kind::Time, 2_629_746.0), &["mo", "month"]),
    (unit("year", Kind::Time, 31_556_952.0), &["y", "yr", "year"]),
    // Temperature, in kelvin.
    (
        Unit {
            symbol: "°C",
            kind: Kind::Temperature,
            factor: 1.0,
            offset: 273.15,
        },
        &["c", "°c", "celsius", "degc", "degrees celsius"],
    ),
    (
        Unit {
            symbol: "°F",
            kind: Kind::Temperature,
            factor: 5.0 / 9.0,
            offset: 273.15 - 32.0 * 5.0 / 9.0,
        },
        &["f", "°f", "fahrenheit", "degf", "degrees fahrenheit"],
    ),
    (unit("K", Kind::Temperature, 1.0), &["k", "kelvin"]),
];

/// Convert a value between units of length (mm cm m km in ft yd mi nmi), mass (mg g kg t oz lb
/// st), temperature (C F K), volume (ml cl dl l m3 tsp tbsp fl_oz cup pt qt gal imp_gal; US
/// measures), speed (m/s km/h mph kn ft/s), data size (bit B KB MB GB TB = 1000s, KiB MiB GiB
/// TiB = 1024s, kbit Mbit Gbit) and time (ns us ms s min h day week month year).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ConvertUnits {
    /// the amount to convert
    value: f64,
    /// unit of the value, e.g. km, lb, F, GiB
    from: String,
    /// unit wanted, of the same kind
    to: String,
}

impl TypedTool for ConvertUnits {
    const NAME: &'static str = "convert_units";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str =
        "convert, metric, imperial, celsius, fahrenheit, miles, kilograms, bytes";
    type Output = Value;

    async fn run(self, _: &ToolContext) -> Result<Value, ToolError> {
        let value = self.value;
        let from = lookup(&self.from)?;
        let to = lookup(&self.to)?;
        if from.kind != to.kind {
            return Err(ToolError::InvalidArguments(format!(
                "cannot convert {} ({}) to {} ({})",
                from.symbol,
                from.kind.name(),
                to.symbol,
                to.kind.name()
            )));
        }
        let base = value * from.factor + from.offset;
        if from.kind == Kind::Temperature && base < 0.0 {
            return Err(ToolError::InvalidArguments(format!(
                "{value} {} is below absolute zero",
                from.symbol
            )));
        }
        let result = (base - to.offset) / to.factor;
        Ok(json!({
            "value": number(value),
            "from": from.symbol,
            "result": number(result),
            "to": to.symbol,
            "kind": from.kind.name(),
            "text": format!("{} {} = {} {}", number(value), from.symbol, number(result), to.symbol),
        }))
    }
}

fn lookup(name: &str) -> Result<Unit, ToolError> {
    let key = name.trim().to_lowercase();
    let key = key
        .strip_prefix("degrees ")
        .filter(|rest| !rest.contains(' '))
        .map_or(key.clone(), |rest| rest.to_string());
    let find = |key: &str| {
        UNITS
            .iter()
            .find(|(_, names)| names.contains(&key))
            .map(|(unit, _)| *unit)
    };
    find(&key)
        .or_else(|| key.strip_suffix('s').and_then(find))
        .or_else(|| key.strip_suffix("es").and_then(find))
        .ok_or_else(|| {
            ToolError::InvalidArguments(format!(
                "unknown unit {name:?}; see the tool description for the units known"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::*;

    async fn convert(value: f64, from: &str, to: &str) -> f64 {
        let out = call(
            "convert_units",
            json!({"value": value, "from": from, "to": to}),
        )
        .await
        .expect("converts");
        out["result"].as_f64().expect("number")
    }

    async fn run(arguments: Value) -> Result<Value, ToolError> {
        call("convert_units", arguments).await
    }

    #[tokio::test]
    async fn converts_within_each_kind() {
        assert_eq!(convert(1.0, "mile", "km").await, 1.609344);
        assert_eq!(convert(12.0, "inches", "ft").await, 1.0);
        assert_eq!(convert(1.0, "kg", "lbs").await, 2.20462262184878);
        assert_eq!(convert(100.0, "C", "F").await, 212.0);
        assert_eq!(convert(32.0, "fahrenheit", "celsius").await, 0.0);
        assert_eq!(convert(0.0, "K", "°C").await, -273.15);
        assert_eq!(convert(-40.0, "F", "C").await, -40.0);
        assert_eq!(convert(1.0, "gal", "l").await, 3.785411784);
        assert_eq!(convert(100.0, "km/h", "m/s").await, 27.7777777777778);
        assert_eq!(convert(1.0, "GiB", "MiB").await, 1024.0);
        assert_eq!(convert(1.0, "GB", "MB").await, 1000.0);
        assert_eq!(convert(1.0, "GiB", "GB").await, 1.073741824);
        assert_eq!(convert(8.0, "bits", "byte").await, 1.0);
        assert_eq!(convert(100.0, "Mbit", "MB").await, 12.5);
        assert_eq!(convert(90.0, "minutes", "hours").await, 1.5);
        assert_eq!(convert(2.0, "weeks", "days").await, 14.0);
    }

    #[tokio::test]
    async fn incompatible_and_unknown_units_are_explained() {
        let err = run(json!({"value": 1, "from": "kg", "to": "m"}))
            .await
            .expect_err("kinds");
        assert!(
            err.to_string()
                .contains("cannot convert kg (mass) to m (length)"),
            "{err}"
        );
        let err = run(json!({"value": 1, "from": "parsec", "to": "m"}))
            .await
            .expect_err("unknown");
        assert!(err.to_string().contains("unknown unit \"parsec\""));
        let err = run(json!({"value": -300, "from": "C", "to": "K"}))
            .await
            .expect_err("cold");
        assert!(err.to_string().contains("below absolute zero"));
        let err = run(json!({"from": "m", "to": "km"}))
            .await
            .expect_err("no value");
        assert!(err.to_string().contains("missing field `value`"), "{err}");
        let err = run(json!({"value": "ten", "from": "m", "to": "km"}))
            .await
            .expect_err("not a number");
        assert!(err.to_string().contains("`value`"), "{err}");
    }
}
