//! hearth: a personal AI assistant daemon.
//!
//! The path of a message (DESIGN.md §2): channel adapter -> inbox -> dispatcher -> router ->
//! agent turn -> outbox -> delivery worker -> channel adapter.

pub mod agent;
pub mod clock;
pub mod config;
pub mod provider;
pub mod router;
