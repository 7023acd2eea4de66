#![no_main]
//! Arbitrary bytes read as a PDF, as `hearth __extract-pdf` reads them, and shown to the model.

libfuzzer_sys::fuzz_target!(|data: &[u8]| hearth::fuzzing::pdf_text(data));
