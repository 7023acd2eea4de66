//! `hearth-load --compare OLD NEW`: both binaries measured in one run on the same machine,
//! because its absolute speed varies two- to threefold from day to day while the ratio of two
//! binaries run side by side does not. Each round runs both, in alternating order (so neither
//! always gets the cooler or the warmer machine), and the table shows NEW/OLD for each round's
//! pair: min / median / max.

use std::path::Path;

use serde_json::Value;

use crate::{Args, Sizes, measure};

/// Which way a measurement is better.
#[derive(Clone, Copy, PartialEq)]
enum Better {
    Lower,
    Higher,
}

/// The budget a measurement is held to.
#[derive(Clone, Copy)]
enum Budget {
    /// NEW/OLD at most this (the median of the rounds).
    RatioAtMost(f64),
    /// NEW/OLD at least this.
    RatioAtLeast(f64),
    /// NEW's own value (the median of the rounds) at most this.
    ValueAtMost(f64),
    None,
}

struct Metric {
    name: &'static str,
    /// Where the value is in the report's JSON.
    path: &'static [&'static str],
    unit: &'static str,
    better: Better,
    budget: Budget,
}

const METRICS: &[Metric] = &[
    Metric {
        name: "daemon CPU per message",
        path: &["throughput", "daemon_cpu_ms_per_msg"],
        unit: "ms",
        better: Better::Lower,
        budget: Budget::RatioAtMost(0.5),
    },
    Metric {
        name: "sustained throughput",
        path: &["throughput", "msg_per_s"],
        unit: "msg/s",
        better: Better::Higher,
        budget: Budget::RatioAtLeast(2.0),
    },
    Metric {
        name: "overhead p99 at the offered rate",
        path: &["overhead_ms", "p99"],
        unit: "ms",
        better: Better::Lower,
        budget: Budget::RatioAtMost(1.0),
    },
    Metric {
        name: "model calls per message",
        path: &["throughput", "model_calls_per_msg"],
        unit: "",
        better: Better::Lower,
        budget: Budget::RatioAtMost(1.0),
    },
    Metric {
        name: "peak RSS, many conversations",
        path: &["concurrency", "peak_rss_mb"],
        unit: "MiB",
        better: Better::Lower,
        budget: Budget::ValueAtMost(100.0),
    },
    Metric {
        name: "first message answered after start",
        path: &["start_ms", "first_answer"],
        unit: "ms",
        better: Better::Lower,
        budget: Budget::ValueAtMost(25.0),
    },
    Metric {
        name: "idle RSS",
        path: &["idle_rss_mb"],
        unit: "MiB",
        better: Better::Lower,
        budget: Budget::ValueAtMost(16.5),
    },
    Metric {
        name: "start -> /healthz connected",
        path: &["start_ms", "healthz"],
        unit: "ms",
        better: Better::Lower,
        budget: Budget::None,
    },
];

fn value_at(json: &serde_json::Map<String, Value>, path: &[&str]) -> Option<f64> {
    let (first, rest) = path.split_first()?;
    let mut value = json.get(*first)?;
    for key in rest {
        value = value.get(key)?;
    }
    value.as_f64()
}

/// The median of `values` (the mean of the middle two when even); NaN when empty.
fn median(values: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// (min, median, max) of the finite values.
fn spread(values: &[f64]) -> (f64, f64, f64) {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if finite.is_empty() {
        (f64::NAN, f64::NAN, f64::NAN)
    } else {
        (min, median(&finite), max)
    }
}

/// One metric over the rounds: OLD's and NEW's values, paired by round.
struct Row<'a> {
    metric: &'a Metric,
    old: Vec<f64>,
    new: Vec<f64>,
}

impl Row<'_> {
    fn ratios(&self) -> Vec<f64> {
        self.old
            .iter()
            .zip(&self.new)
            .map(|(old, new)| if *old > 0.0 { new / old } else { f64::NAN })
            .collect()
    }

    /// Whether the budget holds, or None when the metric has no budget (or no values).
    fn within(&self) -> Option<bool> {
        let ratio = median(&self.ratios());
        let value = median(&self.new);
        match self.metric.budget {
            Budget::RatioAtMost(most) if ratio.is_finite() => Some(ratio <= most),
            Budget::RatioAtLeast(least) if ratio.is_finite() => Some(ratio >= least),
            Budget::ValueAtMost(most) if value.is_finite() => Some(value <= most),
            Budget::None => None,
            // A budgeted measurement with no value (e.g. the first message never answered).
            _ => Some(false),
        }
    }

    fn budget_text(&self) -> String {
        match self.metric.budget {
            Budget::RatioAtMost(r) => format!("ratio <= {r}"),
            Budget::RatioAtLeast(r) => format!("ratio >= {r}"),
            Budget::ValueAtMost(v) => format!("<= {v} {}", self.metric.unit),
            Budget::None => String::new(),
        }
    }
}

pub async fn run(old: &Path, new: &Path, args: &Args, sizes: &Sizes) -> anyhow::Result<()> {
    let mut reports: [Vec<serde_json::Map<String, Value>>; 2] = [Vec::new(), Vec::new()];
    for round in 0..args.rounds {
        // Alternate who goes first: OLD NEW, NEW OLD, OLD NEW, ...
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let (label, binary) = if which == 0 {
                ("OLD", old)
            } else {
                ("NEW", new)
            };
            eprintln!(
                "== round {} of {}: {label} {}",
                round + 1,
                args.rounds,
                binary.display()
            );
            let report = measure(binary, args, sizes).await?;
            reports[which].push(report.json().clone());
        }
    }

    let rows: Vec<Row> = METRICS
        .iter()
        .map(|metric| {
            let values = |side: &[serde_json::Map<String, Value>]| {
                side.iter()
                    .map(|json| value_at(json, metric.path).unwrap_or(f64::NAN))
                    .collect()
            };
            Row {
                metric,
                old: values(&reports[0]),
                new: values(&reports[1]),
            }
        })
        .collect();

    println!("OLD {}\nNEW {}", old.display(), new.display());
    println!(
        "{} rounds, alternating; NEW/OLD per round as min / median / max",
        args.rounds
    );
    let mut lines = vec![[
        "measurement".to_owned(),
        "OLD median".to_owned(),
        "NEW median".to_owned(),
        "NEW/OLD min / median / max".to_owned(),
        "budget".to_owned(),
        "ok".to_owned(),
    ]];
    for row in &rows {
        let (min, mid, max) = spread(&row.ratios());
        let better = match row.metric.better {
            Better::Lower => "lower is better",
            Better::Higher => "higher is better",
        };
        lines.push([
            format!("{} ({better})", row.metric.name),
            format!("{:.2} {}", median(&row.old), row.metric.unit),
            format!("{:.2} {}", median(&row.new), row.metric.unit),
            format!("{min:.2} / {mid:.2} / {max:.2}"),
            row.budget_text(),
            match row.within() {
                Some(true) => "yes".to_owned(),
                Some(false) => "NO".to_owned(),
                None => String::new(),
            },
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for line in &lines {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
    let json: serde_json::Map<String, Value> = rows
        .iter()
        .map(|row| {
            let (min, mid, max) = spread(&row.ratios());
            (
                row.metric.path.join("."),
                serde_json::json!({
                    "old": row.old, "new": row.new,
                    "ratio": {"min": finite(min), "median": finite(mid), "max": finite(max)},
                    "within_budget": row.within(),
                }),
            )
        })
        .collect();
    println!("{}", Value::Object(json));
    Ok(())
}

/// JSON has no NaN: a ratio that could not be taken is null.
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some((x * 1000.0).round() / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_spreads_skip_missing_values() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(spread(&[2.0, f64::NAN, 1.0, 4.0]), (1.0, 2.0, 4.0));
    }

    #[test]
    fn budgets_read_the_median_ratio_or_new_value() {
        let cpu = &METRICS[0];
        let row = Row {
            metric: cpu,
            old: vec![0.4, 0.5, 0.6],
            new: vec![0.2, 0.2, 0.4],
        };
        // Ratios 0.5, 0.4, 0.67: median 0.5, within "at most half".
        assert_eq!(row.within(), Some(true));
        let first = METRICS
            .iter()
            .find(|m| m.path == ["start_ms", "first_answer"])
            .expect("metric");
        let row = Row {
            metric: first,
            old: vec![50.0],
            new: vec![f64::NAN],
        };
        // Never answered: the budget is missed, not skipped.
        assert_eq!(row.within(), Some(false));
    }

    #[test]
    fn values_are_found_by_path() {
        let json = serde_json::json!({"throughput": {"msg_per_s": 1234.5}, "idle_rss_mb": 15.9});
        let map = json.as_object().expect("object");
        assert_eq!(value_at(map, &["throughput", "msg_per_s"]), Some(1234.5));
        assert_eq!(value_at(map, &["idle_rss_mb"]), Some(15.9));
        assert_eq!(value_at(map, &["nothing"]), None);
    }
}
