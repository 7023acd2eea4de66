//! End-to-end tests: the daemon and its parts against local fake servers speaking the real wire
//! protocols. One test binary, one module per area; those that need the Telegram channel are
//! left out of a build without it (`--no-default-features`).

#[cfg(feature = "telegram")]
mod agent_versions;
#[cfg(all(feature = "email", feature = "telegram"))]
mod approvals;
#[cfg(feature = "discord")]
mod background;
#[cfg(feature = "telegram")]
mod calendars;
mod cli;
mod commands;
mod compaction;
mod config_check;
mod confirmations;
mod context;
#[cfg(feature = "telegram")]
mod crash;
#[cfg(all(feature = "discord", feature = "telegram"))]
mod discord;
mod doors;
#[cfg(feature = "email")]
mod email;
#[cfg(feature = "telegram")]
mod faults_delivery;
#[cfg(feature = "telegram")]
mod faults_intake;
#[cfg(feature = "telegram")]
mod faults_process;
#[cfg(feature = "http")]
mod http;
#[cfg(feature = "http")]
mod http_doors;
#[cfg(feature = "http")]
mod http_scopes;
mod identities;
#[cfg(all(feature = "email", feature = "telegram"))]
mod mail;
#[cfg(feature = "matrix")]
mod matrix;
mod mcp;
#[cfg(feature = "http")]
mod mcp_approval;
#[cfg(feature = "http")]
mod mcp_server;
#[cfg(feature = "http")]
mod openai_api;
mod pdf;
mod pipeline;
mod plan_mode;
mod plans;
mod postgres;
mod providers;
mod routing;
mod scheduled_runs;
#[cfg(feature = "telegram")]
mod schedules;
mod seam;
#[cfg(feature = "http")]
mod stopped_streams;
mod supervision;
// Without the Telegram channel most of the child-process harness has no user left.
#[cfg_attr(
    not(feature = "telegram"),
    allow(dead_code, unused_imports, unused_macros)
)]
mod support;
#[cfg(feature = "telegram")]
mod telegram;
mod tool_registry;
mod tools_memory;
mod tools_money;
mod tools_organiser;
mod tools_utility;
#[cfg(feature = "telegram")]
mod weather_feeds;
#[cfg(feature = "telegram")]
mod web;
#[cfg(feature = "telegram")]
mod web_browser;
