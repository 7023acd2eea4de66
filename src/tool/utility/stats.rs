//! `statistics`: the usual summary of a list of numbers.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::{ToolError, ToolInfo, number};

/// Most numbers accepted in one call.
const MAX_NUMBERS: usize = 100_000;

pub(super) fn info() -> ToolInfo {
    ToolInfo::new(
        "statistics",
        "utilities",
        "Summarise a list of numbers: count, sum, mean, median, mode, min, max, range, sample and \
         population standard deviation and variance.",
        json!({
            "type": "object",
            "properties": {
                "numbers": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": MAX_NUMBERS, "description": "the data"}
            },
            "required": ["numbers"],
            "additionalProperties": false
        }),
    )
    .tags(&["average", "mean", "median", "stdev", "variance", "math"])
}

pub(super) fn run(arguments: &Value) -> Result<String, ToolError> {
    let items = super::Args::new(arguments).array("numbers")?;
    if items.is_empty() {
        return Err(ToolError::InvalidArguments(
            "`numbers` needs at least one number".into(),
        ));
    }
    if items.len() > MAX_NUMBERS {
        return Err(ToolError::InvalidArguments(format!(
            "at most {MAX_NUMBERS} numbers, got {}",
            items.len()
        )));
    }
    let mut values = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let value = match item {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse::<f64>().ok(),
            _ => None,
        }
        .filter(|v| v.is_finite())
        .ok_or_else(|| {
            ToolError::InvalidArguments(format!("numbers[{i}] is not a finite number: {item}"))
        })?;
        values.push(value);
    }
    Ok(summarise(&values).to_string())
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
    use super::*;

    fn stats(numbers: Value) -> Value {
        serde_json::from_str(&run(&json!({ "numbers": numbers })).expect("ok")).expect("json")
    }

    #[test]
    fn summarises_a_list() {
        let out = stats(json!([2, 4, 4, 4, 5, 5, 7, 9]));
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

    #[test]
    fn single_values_and_ties() {
        let out = stats(json!([3.5]));
        assert_eq!(out["median"], 3.5);
        assert_eq!(out["mode"], json!([]));
        assert_eq!(
            out["stdev"],
            Value::Null,
            "no sample deviation of one value"
        );
        let out = stats(json!([1, 1, 2, 2, 3]));
        assert_eq!(out["mode"], json!([1, 2]));
        assert_eq!(out["median"], 2);
    }

    #[test]
    fn refuses_empty_and_non_numeric_input() {
        assert!(run(&json!({"numbers": []})).is_err());
        let err = run(&json!({"numbers": [1, "x"]})).expect_err("not a number");
        assert!(err.to_string().contains("numbers[1]"));
        assert!(run(&json!({})).is_err());
    }
}
