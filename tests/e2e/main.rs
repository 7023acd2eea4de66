//! End-to-end tests: the daemon and its parts against local fake servers speaking the real wire
//! protocols. One test binary, one module per area.

mod cli;
mod commands;
mod config_check;
mod confirmations;
mod crash;
mod faults_delivery;
mod faults_intake;
mod faults_process;
mod identities;
mod mcp;
mod pipeline;
mod postgres;
mod providers;
mod routing;
mod scheduled_runs;
mod schedules;
mod seam;
mod supervision;
mod support;
mod telegram;
mod tool_registry;
mod tools_memory;
mod tools_money;
mod tools_organiser;
mod tools_utility;
