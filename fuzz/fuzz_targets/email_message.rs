#![no_main]
//! A raw mail, the whole inbound path to an event, HTML to text included.

libfuzzer_sys::fuzz_target!(|data: &[u8]| hearth_email::fuzzing::message(data));
