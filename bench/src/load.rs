//! The load: messages pushed into the fake Telegram, answered by the fake LLM, and matched to
//! the replies the daemon sent back. Every timestamp is taken in the fakes (push time, the
//! LLM's arrival time, the Bot API's request log), so the harness's own work is not counted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hearth_testkit::telegram::FakeTelegram;
use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::Value;

/// The fakes and what they saw, shared with the LLM responder.
pub struct Load {
    pub tg: FakeTelegram,
    pub llm: FakeOpenAi,
    state: Arc<Shared>,
    next: u64,
}

struct Shared {
    latency_ms: AtomicU64,
    /// Every request the fake model has answered, so a run can report model calls per message.
    llm_requests: AtomicU64,
    /// When the LLM request for message `n` arrived.
    llm_seen: Mutex<HashMap<u64, Instant>>,
}

/// One message sent: its number, chat and push time.
#[derive(Clone, Copy)]
pub struct Sent {
    pub n: u64,
    pub chat: i64,
    pub at: Instant,
}

/// What happened to a batch of messages.
pub struct Outcome {
    pub sent: Vec<Sent>,
    /// For each sent message (same order): when the LLM saw it, when its reply reached the fake.
    pub llm_at: Vec<Option<Instant>>,
    pub reply_at: Vec<Option<Instant>>,
    pub latency: Duration,
}

impl Outcome {
    pub fn answered(&self) -> usize {
        self.reply_at.iter().flatten().count()
    }

    pub fn first_push(&self) -> Option<Instant> {
        self.sent.iter().map(|s| s.at).min()
    }

    pub fn last_reply(&self) -> Option<Instant> {
        self.reply_at.iter().flatten().copied().max()
    }

    /// Push -> reply, minus the LLM latency, in ms, for every answered message.
    pub fn overheads_ms(&self) -> Vec<f64> {
        self.sent
            .iter()
            .zip(&self.reply_at)
            .filter_map(|(s, r)| r.map(|r| r.duration_since(s.at).saturating_sub(self.latency)))
            .map(|d| d.as_secs_f64() * 1e3)
            .collect()
    }

    /// Push -> LLM request, in ms (the inbound half of the overhead).
    pub fn inbound_ms(&self) -> Vec<f64> {
        self.sent
            .iter()
            .zip(&self.llm_at)
            .filter_map(|(s, l)| l.map(|l| l.duration_since(s.at).as_secs_f64() * 1e3))
            .collect()
    }

    /// LLM request -> reply, minus the latency, in ms (the outbound half).
    pub fn outbound_ms(&self) -> Vec<f64> {
        self.llm_at
            .iter()
            .zip(&self.reply_at)
            .filter_map(|(l, r)| match (l, r) {
                (Some(l), Some(r)) => Some(
                    r.duration_since(*l)
                        .saturating_sub(self.latency)
                        .as_secs_f64()
                        * 1e3,
                ),
                _ => None,
            })
            .collect()
    }
}

/// The marker that ties a reply to its message: `q<n>q`.
fn marker_in(text: &str) -> Option<u64> {
    let start = text
        .find("bench q")
        .map(|i| i + 7)
        .or_else(|| text.find("ok q").map(|i| i + 4))?;
    let rest = &text[start..];
    let end = rest.find('q')?;
    rest[..end].parse().ok()
}

/// The text of the last user message in an OpenAI request.
fn last_user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

impl Load {
    pub async fn start() -> Self {
        let tg = FakeTelegram::start(crate::daemon::TOKEN).await;
        let llm = FakeOpenAi::start().await;
        let state = Arc::new(Shared {
            latency_ms: AtomicU64::new(0),
            llm_requests: AtomicU64::new(0),
            llm_seen: Mutex::new(HashMap::new()),
        });
        let responder = state.clone();
        llm.set_responder(move |request| {
            let now = Instant::now();
            responder.llm_requests.fetch_add(1, Ordering::Relaxed);
            let latency = Duration::from_millis(responder.latency_ms.load(Ordering::Relaxed));
            match marker_in(&last_user_text(request)) {
                Some(n) => {
                    responder
                        .llm_seen
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .entry(n)
                        .or_insert(now);
                    Reply::text(format!("ok q{n}q")).delay(latency)
                }
                None => Reply::text("ok").delay(latency),
            }
        });
        Self {
            tg,
            llm,
            state,
            next: 0,
        }
    }

    pub fn set_latency(&self, latency: Duration) {
        self.state.latency_ms.store(
            u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    fn push(&mut self, chat: i64) -> Sent {
        self.next += 1;
        let n = self.next;
        let text = format!("bench q{n}q");
        let at = Instant::now();
        self.tg.push_text(chat, chat, &text);
        Sent { n, chat, at }
    }

    /// How many requests the fake model has answered since the harness started.
    pub fn llm_requests(&self) -> u64 {
        self.state.llm_requests.load(Ordering::Relaxed)
    }

    /// The next message number, for a message sent by other means than Telegram.
    pub fn next_marker(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// When the LLM request for message `n` arrived.
    pub fn llm_seen(&self, n: u64) -> Option<Instant> {
        self.state
            .llm_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&n)
            .copied()
    }

    /// Pushes one message to each chat in turn, `count` in all, as fast as possible.
    pub fn burst(&mut self, chats: &[i64], count: usize) -> Vec<Sent> {
        (0..count)
            .map(|i| self.push(chats[i % chats.len()]))
            .collect()
    }

    /// Pushes `count` messages at `rate` per second, one chat after the other.
    pub async fn paced(&mut self, chats: &[i64], count: usize, rate: f64) -> Vec<Sent> {
        let start = tokio::time::Instant::now();
        let mut sent = Vec::with_capacity(count);
        for i in 0..count {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            tokio::time::sleep_until(due).await;
            sent.push(self.push(chats[i % chats.len()]));
        }
        sent
    }

    /// Waits until every sent message has a reply (or `timeout`), then reads the timings
    /// from the fakes.
    pub async fn collect(&self, sent: Vec<Sent>, latency: Duration, timeout: Duration) -> Outcome {
        let deadline = Instant::now() + timeout;
        let mut pending: HashMap<i64, Vec<u64>> = HashMap::new();
        for s in &sent {
            pending.entry(s.chat).or_default().push(s.n);
        }
        while !pending.is_empty() && Instant::now() < deadline {
            pending.retain(|chat, numbers| {
                let texts: Vec<u64> = self
                    .tg
                    .messages(*chat)
                    .iter()
                    .filter_map(|m| marker_in(&m.text))
                    .collect();
                numbers.retain(|n| !texts.contains(n));
                !numbers.is_empty()
            });
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The first request carrying the full reply (a send, or the edit that completes a
        // streamed preview) is when the platform got it.
        let mut replied: HashMap<u64, Instant> = HashMap::new();
        for request in self.tg.requests() {
            let method = request.method.to_ascii_lowercase();
            if method != "sendmessage" && method != "editmessagetext" {
                continue;
            }
            let text = request.body["text"].as_str().unwrap_or("");
            if let Some(n) = text.find("ok q").and_then(|i| marker_in(&text[i..])) {
                replied
                    .entry(n)
                    .and_modify(|t| *t = (*t).min(request.at))
                    .or_insert(request.at);
            }
        }
        let llm_seen = self
            .state
            .llm_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        Outcome {
            llm_at: sent.iter().map(|s| llm_seen.get(&s.n).copied()).collect(),
            reply_at: sent.iter().map(|s| replied.get(&s.n).copied()).collect(),
            sent,
            latency,
        }
    }
}

/// The value at quantile `q` (0..=1) of `values`, nearest rank.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_and_quantiles() {
        assert_eq!(marker_in("bench q42q"), Some(42));
        assert_eq!(marker_in("🏠 General\nok q7q"), Some(7));
        assert_eq!(marker_in("ok q7"), None);
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
    }
}
