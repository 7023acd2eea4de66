#![no_main]
//! Arbitrary JSON arguments to each built-in tool: schema validation, then its parsing.

libfuzzer_sys::fuzz_target!(|data: &[u8]| hearth::fuzzing::tool_arguments(data));
