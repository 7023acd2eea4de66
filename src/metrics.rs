//! Counters and histograms for `/metrics`, in the Prometheus text format.
//!
//! A handful of labelled counters do not justify a metrics framework: a mutex-guarded map per
//! family is enough and is rendered on demand.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

#[derive(Debug, Default)]
struct Histogram {
    buckets: [u64; LATENCY_BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (bucket, bound) in self.buckets.iter_mut().zip(LATENCY_BUCKETS) {
            if seconds <= bound {
                *bucket += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// (family, labels) -> value
    counters: BTreeMap<(&'static str, String), u64>,
    histograms: BTreeMap<(&'static str, String), Histogram>,
}

#[derive(Debug)]
pub struct Metrics {
    inner: Mutex<Inner>,
    /// For `hearth_uptime_seconds`.
    started: Instant,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            inner: Mutex::default(),
            started: Instant::now(),
        }
    }
}

fn label(key: &str, value: &str) -> String {
    let escaped = value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    format!("{key}=\"{escaped}\"")
}

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn count(&self, family: &'static str, labels: String) {
        self.add(family, labels, 1);
    }

    fn add(&self, family: &'static str, labels: String, amount: u64) {
        *self.lock().counters.entry((family, labels)).or_default() += amount;
    }

    /// The tokens one model call used, as the provider reported them.
    pub fn tokens(&self, provider: &str, model: &str, input: u64, output: u64) {
        for (kind, amount) in [("input", input), ("output", output)] {
            self.add(
                "hearth_tokens_total",
                format!(
                    "{},{},{}",
                    label("provider", provider),
                    label("model", model),
                    label("kind", kind)
                ),
                amount,
            );
        }
    }

    pub fn message_in(&self, channel: &str) {
        self.count("hearth_messages_in_total", label("channel", channel));
    }

    pub fn message_out(&self, channel: &str) {
        self.count("hearth_messages_out_total", label("channel", channel));
    }

    pub fn delivery_error(&self, channel: &str) {
        self.count("hearth_delivery_errors_total", label("channel", channel));
    }

    pub fn tool_call(&self, tool: &str, outcome: &str) {
        self.count(
            "hearth_tool_calls_total",
            format!("{},{}", label("tool", tool), label("outcome", outcome)),
        );
    }

    /// A call to an MCP server's tool; `outcome` is `ok`, `tool_error`, `invalid`, `error`,
    /// `broken`, `timeout` or `unavailable`.
    pub fn mcp_call(&self, server: &str, outcome: &str) {
        self.count(
            "hearth_mcp_calls_total",
            format!("{},{}", label("server", server), label("outcome", outcome)),
        );
    }

    pub fn provider_error(&self, provider: &str) {
        self.count("hearth_provider_errors_total", label("provider", provider));
    }

    pub fn schedule_run(&self, schedule: &str, outcome: &str) {
        self.count(
            "hearth_schedule_runs_total",
            format!(
                "{},{}",
                label("schedule", schedule),
                label("outcome", outcome)
            ),
        );
    }

    /// One model call (a turn's, a summary's): its tokens, and the call and its cost
    /// (billionths of a USD) by provider and model.
    pub fn model_call(
        &self,
        provider: &str,
        model: &str,
        usage: &crate::provider::Usage,
        cost_nusd: i64,
    ) {
        self.tokens(provider, model, usage.input_tokens, usage.output_tokens);
        let labels = format!("{},{}", label("provider", provider), label("model", model));
        self.add("hearth_model_calls_total", labels.clone(), 1);
        self.add(
            "hearth_model_cost_nano_usd_total",
            labels,
            u64::try_from(cost_nusd).unwrap_or(0),
        );
    }

    /// A compaction of a conversation's older turns; `outcome` is `done`, `failed` or `skipped`.
    pub fn compaction(&self, outcome: &str) {
        self.count("hearth_compactions_total", label("outcome", outcome));
    }

    pub fn observe_llm(&self, provider: &str, elapsed: Duration) {
        self.lock()
            .histograms
            .entry(("hearth_llm_latency_seconds", label("provider", provider)))
            .or_default()
            .observe(elapsed.as_secs_f64());
    }

    /// One finished turn: its latency and its `outcome` label (`answered`, `failed` …).
    pub fn observe_turn(&self, elapsed: Duration, outcome: &str) {
        let mut inner = self.lock();
        inner
            .histograms
            .entry(("hearth_turn_latency_seconds", String::new()))
            .or_default()
            .observe(elapsed.as_secs_f64());
        *inner
            .counters
            .entry(("hearth_turns_total", label("outcome", outcome)))
            .or_default() += 1;
    }

    /// The Prometheus text exposition: what this build is and how long it has run, the
    /// counters and histograms, then the given gauges.
    pub fn render(&self, gauges: &[(&str, &str, f64)]) -> String {
        let inner = self.lock();
        let mut out = format!(
            "# HELP hearth_build_info The version and commit of the running hearth\n\
             # TYPE hearth_build_info gauge\n\
             hearth_build_info{{{},{}}} 1\n\
             # HELP hearth_uptime_seconds Seconds since this process started\n\
             # TYPE hearth_uptime_seconds gauge\n\
             hearth_uptime_seconds {:.3}\n",
            label("version", env!("CARGO_PKG_VERSION")),
            label("commit", env!("HEARTH_COMMIT")),
            self.started.elapsed().as_secs_f64()
        );
        let mut last_family = "";
        for ((family, labels), value) in &inner.counters {
            if *family != last_family {
                let _ = writeln!(out, "# TYPE {family} counter"); // writing to a String cannot fail
                last_family = family;
            }
            let _ = writeln!(out, "{family}{{{labels}}} {value}");
        }
        for ((family, labels), histogram) in &inner.histograms {
            if *family != last_family {
                let _ = writeln!(out, "# TYPE {family} histogram");
                last_family = family;
            }
            let sep = if labels.is_empty() { "" } else { "," };
            for (bound, count) in LATENCY_BUCKETS.iter().zip(histogram.buckets) {
                let _ = writeln!(
                    out,
                    "{family}_bucket{{{labels}{sep}le=\"{bound}\"}} {count}"
                );
            }
            let _ = writeln!(
                out,
                "{family}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
                histogram.count
            );
            let _ = writeln!(out, "{family}_sum{{{labels}}} {}", histogram.sum);
            let _ = writeln!(out, "{family}_count{{{labels}}} {}", histogram.count);
        }
        for (name, help, value) in gauges {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_histograms_and_gauges() {
        let metrics = Metrics::default();
        metrics.message_in("telegram");
        metrics.message_in("telegram");
        metrics.observe_turn(Duration::from_millis(30), "answered");
        let text = metrics.render(&[("hearth_inbox_depth", "Inbox entries waiting", 3.0)]);
        assert!(
            text.contains("hearth_messages_in_total{channel=\"telegram\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("hearth_turn_latency_seconds_bucket{le=\"0.05\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("hearth_turns_total{outcome=\"answered\"} 1"),
            "{text}"
        );
        assert!(text.contains("hearth_inbox_depth 3"), "{text}");
        assert!(
            text.contains(&format!(
                "hearth_build_info{{version=\"{}\",commit=\"{}\"}} 1",
                env!("CARGO_PKG_VERSION"),
                env!("HEARTH_COMMIT")
            )),
            "{text}"
        );
        assert!(text.contains("\nhearth_uptime_seconds "), "{text}");
    }

    #[test]
    fn tokens_add_up_per_provider_model_and_kind() {
        let metrics = Metrics::default();
        metrics.tokens("local", "llama3.1", 120, 30);
        metrics.tokens("local", "llama3.1", 80, 20);
        let text = metrics.render(&[]);
        assert!(
            text.contains(
                "hearth_tokens_total{provider=\"local\",model=\"llama3.1\",kind=\"input\"} 200"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "hearth_tokens_total{provider=\"local\",model=\"llama3.1\",kind=\"output\"} 50"
            ),
            "{text}"
        );
    }
}
