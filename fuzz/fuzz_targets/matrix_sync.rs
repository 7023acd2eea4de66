#![no_main]
//! A Matrix /sync response and its timeline events to inbound events.

libfuzzer_sys::fuzz_target!(|data: &[u8]| hearth_matrix::fuzzing::sync_response(data));
