//! `statistics`: the usual summary of a list of numbers.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{GROUP, number};
use crate::tool::{ToolContext, ToolError, TypedTool};

/// Most numbers accepted in one call.
const MAX_NUMBERS: usize = 100_000;

/// Summarise a list of numbers: count, sum, mean, median, mode, min, max, range, sample and
/// population standard deviation and variance.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Statistics {
    /// the data
    #[schemars(length(min = 1, max = MAX_NUMBERS))]
    numbers: Vec<f64>,
}

impl TypedTool for Statistics {
    const NAME: &'static str = "statistics";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "average, mean, median, stdev, variance, math";
    type Output = Value;

    async fn run(self, _: &ToolContext) -> Result<Value, ToolError> {
        if self.numbers.is_empty() || self.numbers.len() > MAX_NUMBERS {
            return Err(ToolError::InvalidArguments(format!(
                "`numbers` must hold 1 to {MAX_NUMBERS} numbers, got {}",
                self.numbers.len()
            )));
        }
        Ok(summarise(&self.numbers))
    }
}

fn summarise(values: &[f64]) -> Value {
    let n = values.len() as f64;
    let sum: f64 = values.iter().sum();
    let mean = sum / n;
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    let median = if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    };
    let squares: f64 = values.iter().map(|v| (v - mean).powi(2)).sum();
    let population_variance = squares / n;
    let sample_variance = (values.len() > 1).then(|| squares / (n - 1.0));
    let min = sorted[0];
    let max = sorted[sorted.len() - 1];
    json!({
        "count": values.len(),
        "sum": number(sum),
        "mean": number(mean),
        "median": number(median),
        "mode": modes(&sorted).into_iter().map(number).collect::<Vec<_>>(),
        "min": number(min),
        "max": number(max),
        "range": number(max - min),
        "variance": sample_variance.map(number),
        "stdev": sample_variance.map(|v| number(v.sqrt())),
        "population_variance": number(population_variance),
        "population_stdev": number(population_variance.sqrt()),
    })
}

/// The most frequent values; empty when every value occurs once.
fn modes(sorted: &[f64]) -> Vec<f64> {
    let mut counts: HashMap<u64, usize> = HashMap::new();
    for v in sorted {
        // -0.0 and 0.0 are the same value here.
        *counts.entry((v + 0.0).to_bits()).or_default() += 1;
    }
    let best = counts.values().copied().max().unwrap_or(0);
    if best < 2 {
        return Vec::new();
    }
    let mut modes: Vec<f64> = counts
        .into_iter()
        .filter(|(_, c)| *c == best)
        .map(|(bits, _)| f64::from_bits(bits))
        .collect();
    modes.sort_by(f64::total_cmp);
    modes
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::*;

    async fn stats(numbers: Value) -> Value {
        call("statistics", json!({ "numbers": numbers }))
            .await
            .expect("ok")
    }

    #[tokio::test]
    async fn summarises_a_list() {
        let out = stats(json!([2, 4, 4, 4, 5, 5, 7, 9])).await;
        assert_eq!(out["count"], 8);
        assert_eq!(out["sum"], 40);
        assert_eq!(out["mean"], 5);
        assert_eq!(out["median"], 4.5);
        assert_eq!(out["mode"], json!([4]));
        assert_eq!(out["min"], 2);
        assert_eq!(out["max"], 9);
        assert_eq!(out["range"], 7);
        assert_eq!(out["population_variance"], 4);
        assert_eq!(out["population_stdev"], 2);
        assert_eq!(out["variance"], 4.57142857142857);
    }

    #[tokio::test]
    async fn single_values_and_ties() {
        let out = stats(json!([3.5])).await;
        assert_eq!(out["median"], 3.5);
        assert_eq!(out["mode"], json!([]));
        assert_eq!(
            out["stdev"],
            Value::Null,
            "no sample deviation of one value"
        );
        let out = stats(json!([1, 1, 2, 2, 3])).await;
        assert_eq!(out["mode"], json!([1, 2]));
        assert_eq!(out["median"], 2);
    }

    #[tokio::test]
    async fn refuses_empty_and_non_numeric_input() {
        assert!(call("statistics", json!({"numbers": []})).await.is_err());
        let err = call("statistics", json!({"numbers": [1, "x"]}))
            .await
            .expect_err("not a number");
        assert!(err.to_string().contains("`numbers[1]`"), "{err}");
        let err = call("statistics", json!({})).await.expect_err("missing");
        assert!(err.to_string().contains("missing field `numbers`"), "{err}");
    }
}
