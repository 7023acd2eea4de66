#![no_main]
//! A Telegram getUpdates answer (and webhook update) to inbound events.

libfuzzer_sys::fuzz_target!(|data: &[u8]| hearth_telegram::fuzzing::update(data));
