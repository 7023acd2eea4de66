//! End-to-end tests: the daemon and its parts against local fake servers speaking the real wire
//! protocols. One test binary, one module per area.

mod config_check;
mod providers;
