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

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Args, Tool, ToolContext, ToolError, ToolInfo};

type Outcome = Result<String, ToolError>;

/// How a utility computes its answer; none of them wait on anything, so they are plain functions.
#[derive(Clone, Copy)]
enum Run {
    Pure(fn(&Value) -> Outcome),
    /// Needs the clock or the user's timezone.
    Context(fn(&ToolContext, &Value) -> Outcome),
    /// Needs its own [`ToolInfo`] (list limits).
    Info(fn(&ToolInfo, &Value) -> Outcome),
}

struct Utility {
    info: ToolInfo,
    run: Run,
}

#[async_trait]
impl Tool for Utility {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Outcome {
        match self.run {
            Run::Pure(run) => run(&arguments),
            Run::Context(run) => run(ctx, &arguments),
            Run::Info(run) => run(&self.info, &arguments),
        }
    }
}

pub fn tools() -> Vec<Arc<dyn Tool>> {
    let utilities = [
        (date::current_info(), Run::Context(date::current)),
        (date::difference_info(), Run::Context(date::difference)),
        (date::add_info(), Run::Context(date::add)),
        (calc::info(), Run::Pure(calc::run)),
        (stats::info(), Run::Pure(stats::run)),
        (units::info(), Run::Pure(units::run)),
        (random::uuid_info(), Run::Pure(random::uuid)),
        (random::password_info(), Run::Pure(random::password)),
        (random::number_info(), Run::Pure(random::random_number)),
        (encode::hash_info(), Run::Pure(encode::hash_text)),
        (encode::encode_info(), Run::Pure(encode::encode_decode)),
        (text::stats_info(), Run::Pure(text::text_stats)),
        (text::transform_info(), Run::Pure(text::transform_text)),
        (text::regex_info(), Run::Pure(text::regex_test)),
        (data::json_info(), Run::Pure(data::format_json)),
        (data::parse_info(), Run::Info(data::parse_csv)),
        (data::generate_info(), Run::Pure(data::generate_csv)),
    ];
    utilities
        .into_iter()
        .map(|(info, run)| Arc::new(Utility { info, run }) as Arc<dyn Tool>)
        .collect()
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
