#![no_main]
//! Authentication-Results values and the sender verdict drawn from them.

libfuzzer_sys::fuzz_target!(|data: &[u8]| hearth_email::fuzzing::authentication_results(data));
