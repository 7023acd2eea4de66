//! The `utilities` group: small computations that touch no data and no network — dates, an
//! arithmetic evaluator, statistics, unit conversion, randomness, hashing and encodings, text
//! and regex helpers, JSON and CSV. All are [`Risk::Safe`](super::Risk::Safe).

mod calc;
mod data;
mod date;
mod encode;
mod random;
mod stats;
mod text;
mod units;

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use super::{Tool, typed};

const GROUP: &str = "utilities";

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        typed::<date::GetCurrentDatetime>(),
        typed::<date::DateDifference>(),
        typed::<date::DateAdd>(),
        typed::<calc::Calculate>(),
        typed::<stats::Statistics>(),
        typed::<units::ConvertUnits>(),
        typed::<random::GenerateUuid>(),
        typed::<random::GeneratePassword>(),
        typed::<random::RandomNumber>(),
        typed::<encode::HashText>(),
        typed::<encode::EncodeDecode>(),
        typed::<text::TextStats>(),
        typed::<text::TransformText>(),
        typed::<text::RegexTest>(),
        typed::<data::FormatJson>(),
        typed::<data::ParseCsv>(),
        typed::<data::GenerateCsv>(),
    ]
}

/// A text input of at most `MAX` bytes; a longer one is refused when it is read (the schema is a
/// plain string, as it always was).
#[derive(Debug)]
struct Input<const MAX: usize>(String);

impl<'de, const MAX: usize> Deserialize<'de> for Input<MAX> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.len() > MAX {
            return Err(serde::de::Error::custom(format!(
                "is longer than {MAX} bytes"
            )));
        }
        Ok(Self(text))
    }
}

impl<const MAX: usize> JsonSchema for Input<MAX> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Input".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        String::json_schema(generator)
    }
}

/// A computed number for the model: whole numbers as integers, others rounded to 15
/// significant digits so `0.1 + 0.2` reads 0.3.
fn number(x: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if x.fract() == 0.0 && x.abs() < EXACT {
        return json!(x as i64);
    }
    let rounded = format!("{x:.14e}").parse::<f64>().unwrap_or(x);
    if rounded.fract() == 0.0 && rounded.abs() < EXACT {
        return json!(rounded as i64);
    }
    json!(rounded)
}

/// Calls the utility `name` as the model would (without the runtime's schema check).
#[cfg(test)]
async fn call(name: &str, arguments: Value) -> Result<Value, super::ToolError> {
    let (ctx, _dir) = super::test_context().await;
    call_in(&ctx, name, arguments).await
}

#[cfg(test)]
async fn call_in(
    ctx: &super::ToolContext,
    name: &str,
    arguments: Value,
) -> Result<Value, super::ToolError> {
    super::test_calls::call(tools(), ctx, name, arguments).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{Risk, ToolRegistry};

    #[test]
    fn numbers_read_cleanly() {
        assert_eq!(number(0.1 + 0.2), json!(0.3));
        assert_eq!(number(3.0), json!(3));
        assert_eq!(number(-2.5), json!(-2.5));
        assert_eq!(number(1e300), json!(1e300));
    }

    #[tokio::test]
    async fn every_utility_is_safe_registered_and_callable() {
        let mut registry = ToolRegistry::new();
        for tool in tools() {
            let info = tool.info();
            assert_eq!(info.group, "utilities");
            assert_eq!(info.risk, Risk::Safe, "{}", info.name);
            assert_eq!(info.parameters["type"], "object", "{}", info.name);
            assert_eq!(
                info.parameters["additionalProperties"], false,
                "{}",
                info.name
            );
            registry.register(tool).expect("valid, unique name");
        }
        assert_eq!(registry.len(), 17);
        let (ctx, _dir) = crate::tool::test_context().await;
        let calc = registry.get("calculate").expect("calculate");
        let out = calc
            .call(&ctx, json!({"expression": "max(2, 3) * 4"}))
            .await
            .expect("ok");
        assert!(out.contains("\"result\":12"), "{out}");
        let now = registry.get("get_current_datetime").expect("datetime");
        let out = now.call(&ctx, json!({})).await.expect("ok");
        assert!(out.contains("\"timezone\":\"UTC\""), "{out}");
        let csv = registry.get("parse_csv").expect("parse_csv");
        let out = csv
            .call(&ctx, json!({"text": "a\n1\n2\n3", "limit": 2}))
            .await
            .expect("ok");
        assert!(out.contains("\"returned\":2"), "{out}");
    }
}
