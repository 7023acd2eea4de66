#![no_main]
//! A Discord REST history page to inbound events.

libfuzzer_sys::fuzz_target!(|data: &[u8]| hearth_discord::fuzzing::rest_messages(data));
