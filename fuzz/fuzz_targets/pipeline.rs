//! A pipeline file's text: parsing and validation give diagnostics, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = roll_flow::run::Run::from_text("fuzz.ron", text, &[]);
    }
});
