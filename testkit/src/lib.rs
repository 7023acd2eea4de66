//! The servers hearth's tests run against, all on 127.0.0.1 and speaking the real wire
//! protocols: fakes where no real server can run, the real server where one can be installed.
//!
//! - LLMs: [`FakeOpenAi`] and [`FakeAnthropic`] (below);
//! - chat platforms: a fake Telegram Bot API ([`telegram`]), a fake Discord REST API and gateway
//!   ([`discord`]), a real Synapse ([`matrix`]), real Dovecot and aiosmtpd ([`email`]);
//! - Python client libraries in cached venvs ([`python`]: the official `openai` client);
//! - a fake MCP server ([`mcp`]), a throwaway PostgreSQL ([`postgres`]), a TLS front that lets a
//!   fake answer on a real host name ([`tls`]), a small tmpfs to fill ([`tmpfs`]);
//! - one way to serve a fake on a port, and one to reserve a port for a server started as
//!   another process ([`net`]).
//!
//! [`FakeOpenAi`] answers `POST /v1/chat/completions` like an OpenAI-compatible server and
//! [`FakeAnthropic`] answers `POST /v1/messages` like Anthropic's Messages API, both as plain
//! JSON or, when the request says `"stream": true`, as server-sent events in the API's real
//! event format, with text and tool-call arguments cut into small deltas.
//!
//! Each server listens on `127.0.0.1:0`, records every request, and answers from a FIFO script
//! of [`Reply`]s, falling back to a responder function (by default `Reply::text("ok")`). Like the
//! real APIs, they reject malformed conversations with a 400 in the API's error format, so a
//! test fails when hearth sends something the real service would refuse.
//!
//! ```no_run
//! # async fn demo() {
//! use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
//!
//! let server = FakeOpenAi::start().await;
//! server.push(Reply::error(500, "try again"));
//! server.push(Reply::tool_calls(vec![ToolCallSpec::new("call_1", "add_task", r#"{"title":"milk"}"#)]));
//! server.set_responder(|_request| Reply::text("done"));
//! // point a provider at server.base_url(), then:
//! assert_eq!(server.request_count(), 0);
//! # }
//! ```
//! The server stops when the value is dropped.

mod anthropic;
pub mod caldav;
pub mod discord;
pub mod email;
pub mod feeds;
pub mod matrix;
pub mod mcp;
pub mod net;
mod openai;
pub mod pdf;
pub mod postgres;
pub mod python;
mod reply;
pub mod search;
mod server;
pub mod telegram;
pub mod tls;
pub mod tmpfs;
pub mod weather;

pub use anthropic::AnthropicApi;
pub use openai::OpenAiApi;
pub use reply::{Reply, ToolCallSpec};
pub use server::{Api, FakeLlm, RecordedRequest, Rejection};

/// A fake OpenAI-compatible server; `base_url()` ends in `/v1`.
pub type FakeOpenAi = FakeLlm<OpenAiApi>;

/// A fake Anthropic Messages API server; `base_url()` is `http://127.0.0.1:PORT`.
pub type FakeAnthropic = FakeLlm<AnthropicApi>;
