#![no_main]
//! A Discord gateway payload to inbound events.

libfuzzer_sys::fuzz_target!(|data: &[u8]| hearth_discord::fuzzing::gateway(data));
