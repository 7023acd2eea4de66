#![no_main]
//! A reply's Markdown, planned and rendered at each platform's limit.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hearth_channel::fuzzing::outbound_plan(data);
    hearth_telegram::fuzzing::outbound_plan(data);
    hearth_discord::fuzzing::outbound_plan(data);
    hearth_matrix::fuzzing::outbound_plan(data);
    hearth_email::fuzzing::outbound_plan(data);
});
