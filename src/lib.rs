//! hearth: a personal AI assistant daemon.
//!
//! The path of a message (docs/architecture.md, "The path of a message"): channel adapter ->
//! inbox -> dispatcher -> router -> agent turn -> outbox -> delivery worker -> channel adapter.

pub mod agent;
pub mod calendar;
pub mod channels;
pub mod cli;
pub mod clock;
pub mod config;
pub mod confirmation;
pub mod daemon;
#[doc(hidden)]
pub mod fuzzing;
pub mod health;
pub mod http;
pub mod mcp_server;
pub mod metrics;
pub mod pdf;
pub mod pipeline;
pub mod provider;
pub mod router;
pub mod runtime;
pub mod scheduler;
pub mod store;
pub mod systemd;
pub mod terminal;
pub mod text;
pub mod time;
pub mod tool;
pub mod transcribe;
pub mod web;
