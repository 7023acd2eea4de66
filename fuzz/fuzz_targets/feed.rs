#![no_main]
//! Any bytes as a feed document: RSS, Atom, JSON Feed or none of them, through `read_feeds`'
//! parse.

libfuzzer_sys::fuzz_target!(|data: &[u8]| hearth::fuzzing::feed(data));
