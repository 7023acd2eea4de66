//! The results: a table for people (with the budget beside each line) and one JSON line for
//! scripts.

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use crate::daemon::{Memory, StartTimes};
use crate::load::{Outcome, quantile};

pub struct Report {
    json: serde_json::Map<String, Value>,
    /// (measurement, value, budget, within budget?)
    rows: Vec<(String, String, String, Option<bool>)>,
}

fn ms(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1e5).round() / 1e2
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn mb(kb: u64) -> f64 {
    round2(kb as f64 / 1024.0)
}

impl Report {
    /// Starts with what is known before running: the binary's size and the build profile.
    pub fn new(binary: &Path, manifest: &Path) -> anyhow::Result<Self> {
        let mut report = Self {
            json: serde_json::Map::new(),
            rows: Vec::new(),
        };
        let size = std::fs::metadata(binary)?.len();
        let size_mb = round2(size as f64 / 1_048_576.0);
        report.put("binary_bytes", json!(size));
        report.row(
            "release binary size",
            format!("{size_mb} MiB"),
            "<= 30 MiB",
            Some(size_mb <= 30.0),
        );
        let profile = std::fs::read_to_string(manifest)
            .ok()
            .and_then(|text| text.parse::<toml::Table>().ok())
            .and_then(|t| t.get("profile")?.get("release")?.as_table().cloned())
            .unwrap_or_default();
        let key = |k: &str| {
            profile.get(k).map_or_else(
                || "default".to_owned(),
                |v| v.as_str().map_or_else(|| v.to_string(), str::to_owned),
            )
        };
        // The profile keeps `strip = false` and build.rs strips at the link (see build.rs), so
        // whether the symbols are gone is read off the binary: only an unstripped one has a
        // section named .symtab.
        let stripped = !std::fs::read(binary)?
            .windows(b".symtab\0".len())
            .any(|w| w == b".symtab\0");
        let summary = format!(
            "lto={} codegen-units={} panic={} stripped={}",
            key("lto"),
            key("codegen-units"),
            key("panic"),
            stripped
        );
        report.put(
            "profile",
            json!({"lto": key("lto"), "codegen_units": key("codegen-units"), "panic": key("panic"), "stripped": stripped}),
        );
        report.row("build profile", summary, "", None);
        report.put(
            "machine",
            json!({"cores": std::thread::available_parallelism().map_or(0, usize::from)}),
        );
        Ok(report)
    }

    fn put(&mut self, key: &str, value: Value) {
        self.json.insert(key.to_owned(), value);
    }

    fn row(&mut self, what: &str, value: String, budget: &str, ok: Option<bool>) {
        self.rows
            .push((what.to_owned(), value, budget.to_owned(), ok));
    }

    /// The whole report as JSON, as [`Report::print`] ends with it.
    pub fn json(&self) -> &serde_json::Map<String, Value> {
        &self.json
    }

    /// `first_answer`: from the fresh start to the answer of a message that was waiting.
    pub fn start(
        &mut self,
        fresh: StartTimes,
        warm: StartTimes,
        first_answer: Option<std::time::Duration>,
    ) {
        let fmt = |t: &StartTimes| match t.ready {
            Some(r) => format!("{} ms (READY=1 {} ms)", ms(t.healthz), ms(r)),
            None => format!("{} ms", ms(t.healthz)),
        };
        self.row(
            "start -> /healthz connected, fresh db",
            fmt(&fresh),
            "",
            None,
        );
        self.row(
            "start -> /healthz connected",
            fmt(&warm),
            "<= 100 ms",
            Some(ms(warm.healthz) <= 100.0),
        );
        let first = first_answer.map(ms);
        self.row(
            "start -> waiting message answered, fresh db",
            first.map_or_else(
                || "not answered in 10 s".to_owned(),
                |ms| format!("{ms} ms"),
            ),
            "<= 25 ms",
            Some(first.is_some_and(|ms| ms <= 25.0)),
        );
        self.put(
            "start_ms",
            json!({
                "fresh_healthz": ms(fresh.healthz), "fresh_ready": fresh.ready.map(ms),
                "healthz": ms(warm.healthz), "ready": warm.ready.map(ms),
                "first_answer": first,
            }),
        );
    }

    pub fn idle(&mut self, memory: Memory) {
        self.row(
            "idle RSS (Telegram + scheduler)",
            format!(
                "{} MiB ({} heap+stacks, {} binary/files; {} threads)",
                mb(memory.rss_kb),
                mb(memory.anon_kb),
                mb(memory.file_kb),
                memory.threads
            ),
            "<= 16.5 MiB",
            Some(mb(memory.rss_kb) <= 16.5),
        );
        self.put("idle_rss_mb", json!(mb(memory.rss_kb)));
        self.put(
            "idle",
            json!({"anon_mb": mb(memory.anon_kb), "file_mb": mb(memory.file_kb), "threads": memory.threads}),
        );
    }

    /// `cpu`: CPU time of the daemon and of this harness (with the fakes) during the run;
    /// `model_calls`: the requests the fake model answered during it.
    pub fn throughput(
        &mut self,
        outcome: &Outcome,
        peak_kb: u64,
        cpu: (std::time::Duration, std::time::Duration),
        model_calls: u64,
    ) {
        let answered = outcome.answered();
        let rate = match (outcome.first_push(), outcome.last_reply()) {
            (Some(first), Some(last)) if last > first => {
                answered as f64 / last.duration_since(first).as_secs_f64()
            }
            _ => 0.0,
        };
        let rate = round2(rate);
        self.row(
            "throughput, zero-latency LLM",
            format!("{rate} msg/s ({answered}/{} answered)", outcome.sent.len()),
            ">= 1000 msg/s",
            Some(rate >= 1000.0 && answered == outcome.sent.len()),
        );
        self.row(
            "  peak RSS during throughput",
            format!("{} MiB", mb(peak_kb)),
            "",
            None,
        );
        let per_message = |d: std::time::Duration| round2(ms(d) / answered.max(1) as f64);
        self.row(
            "  CPU per message: daemon / harness+fakes",
            format!("{} / {} ms", per_message(cpu.0), per_message(cpu.1)),
            "",
            None,
        );
        // A plain message is one model call; a feature that adds a call to every message (a
        // planner, a router) shows here.
        let model_calls_per_message = round2(model_calls as f64 / answered.max(1) as f64);
        self.row(
            "  model calls per message",
            format!("{model_calls_per_message}"),
            "",
            None,
        );
        self.put(
            "throughput",
            json!({
                "messages": outcome.sent.len(), "answered": answered, "msg_per_s": rate,
                "peak_rss_mb": mb(peak_kb), "model_calls_per_msg": model_calls_per_message,
                "daemon_cpu_ms_per_msg": per_message(cpu.0), "harness_cpu_ms_per_msg": per_message(cpu.1),
            }),
        );
    }

    pub fn overhead(&mut self, outcome: &Outcome, rate: f64) {
        let all = outcome.overheads_ms();
        let inbound = outcome.inbound_ms();
        let outbound = outcome.outbound_ms();
        let q = |v: &[f64], p: f64| round2(quantile(v, p));
        let p99 = q(&all, 0.99);
        self.row(
            &format!("overhead at {rate} msg/s, p50/p95/p99"),
            format!(
                "{} / {} / {} ms ({}/{} answered)",
                q(&all, 0.5),
                q(&all, 0.95),
                p99,
                all.len(),
                outcome.sent.len()
            ),
            "p99 <= 5 ms",
            Some(p99 <= 5.0 && all.len() == outcome.sent.len()),
        );
        self.row(
            "  update -> LLM request, p50/p99",
            format!("{} / {} ms", q(&inbound, 0.5), q(&inbound, 0.99)),
            "",
            None,
        );
        self.row(
            "  LLM answer -> sendMessage, p50/p99",
            format!("{} / {} ms", q(&outbound, 0.5), q(&outbound, 0.99)),
            "",
            None,
        );
        self.put(
            "overhead_ms",
            json!({
                "rate": rate, "messages": outcome.sent.len(), "answered": all.len(),
                "p50": q(&all, 0.5), "p95": q(&all, 0.95), "p99": p99, "max": q(&all, 1.0),
                "inbound_p50": q(&inbound, 0.5), "inbound_p99": q(&inbound, 0.99),
                "outbound_p50": q(&outbound, 0.5), "outbound_p99": q(&outbound, 0.99),
            }),
        );
    }

    /// One turn at a time over HTTP beside one at a time over Telegram.
    pub fn sequential(&mut self, http: &Sequential, telegram: &Sequential) {
        let q = |v: &[f64], p: f64| round2(quantile(v, p));
        for (name, run) in [("HTTP", http), ("Telegram", telegram)] {
            self.row(
                &format!("one {name} turn at a time, p50/p95/p99"),
                format!(
                    "{} / {} / {} ms (to the LLM: p50 {} ms)",
                    q(&run.total_ms, 0.5),
                    q(&run.total_ms, 0.95),
                    q(&run.total_ms, 0.99),
                    q(&run.inbound_ms, 0.5)
                ),
                "",
                None,
            );
        }
        let summary = |run: &Sequential| {
            json!({
                "turns": run.total_ms.len(),
                "p50": q(&run.total_ms, 0.5), "p95": q(&run.total_ms, 0.95),
                "p99": q(&run.total_ms, 0.99), "inbound_p50": q(&run.inbound_ms, 0.5),
            })
        };
        self.put(
            "sequential_turn_ms",
            json!({ "http": summary(http), "telegram": summary(telegram) }),
        );
    }

    pub fn concurrency(&mut self, outcome: &Outcome, peak_kb: u64, started: Instant) {
        let answered = outcome.answered();
        let all_within = outcome
            .last_reply()
            .map(|last| ms(last.duration_since(outcome.first_push().unwrap_or(started))));
        let latency = ms(outcome.latency);
        // Every LLM request should arrive at once: no conversation waits for another's call.
        let llm_spread = outcome
            .llm_at
            .iter()
            .flatten()
            .max()
            .map(|last| ms(last.duration_since(outcome.first_push().unwrap_or(started))));
        let within = all_within.unwrap_or(f64::INFINITY);
        self.row(
            &format!(
                "{} conversations at {latency} ms LLM: all answered in",
                outcome.sent.len()
            ),
            format!(
                "{} ms ({answered}/{} answered; last LLM request {} ms after first push)",
                within,
                outcome.sent.len(),
                llm_spread.unwrap_or(f64::NAN)
            ),
            "<= 5000 ms",
            Some(within <= 5000.0 && answered == outcome.sent.len()),
        );
        self.row(
            "  peak RSS in that run",
            format!("{} MiB", mb(peak_kb)),
            "<= 100 MiB",
            Some(mb(peak_kb) <= 100.0),
        );
        self.put(
            "concurrency",
            json!({
                "conversations": outcome.sent.len(), "answered": answered, "llm_latency_ms": latency,
                "all_answered_ms": all_within, "last_llm_request_ms": llm_spread,
                "peak_rss_mb": mb(peak_kb),
            }),
        );
    }

    pub fn stopped(&mut self, clean: bool) {
        self.put("clean_stop", json!(clean));
    }

    pub fn print(&self) {
        let width = self
            .rows
            .iter()
            .map(|r| r.0.chars().count())
            .max()
            .unwrap_or(0);
        let value_width = self
            .rows
            .iter()
            .map(|r| r.1.chars().count())
            .max()
            .unwrap_or(0);
        println!(
            "{:width$}  {:value_width$}  {:12}  ok",
            "measurement", "value", "budget"
        );
        for (what, value, budget, ok) in &self.rows {
            let mark = match ok {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "",
            };
            println!("{what:width$}  {value:value_width$}  {budget:12}  {mark}");
        }
        println!("{}", Value::Object(self.json.clone()));
    }
}

/// Turns run one at a time: each one's time from sent to answered, and to the LLM request.
#[derive(Default)]
pub struct Sequential {
    pub total_ms: Vec<f64>,
    pub inbound_ms: Vec<f64>,
}

impl Sequential {
    pub fn add(&mut self, sent: Instant, llm: Option<Instant>, answered: Instant) {
        self.total_ms
            .push(answered.saturating_duration_since(sent).as_secs_f64() * 1000.0);
        if let Some(llm) = llm {
            self.inbound_ms
                .push(llm.saturating_duration_since(sent).as_secs_f64() * 1000.0);
        }
    }
}
