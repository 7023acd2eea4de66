#![no_main]
//! A Matrix room event to an inbound event.

libfuzzer_sys::fuzz_target!(|data: &[u8]| hearth_matrix::fuzzing::event(data));
