//! `--set KEY=VALUE` on the default pipeline: the override lexer and the edited file's
//! validation give diagnostics, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

const DEFAULT: &str = include_str!("../../pipelines/frozen_lake_starpo.ron");

fuzz_target!(|data: &[u8]| {
    if let Ok(set) = std::str::from_utf8(data) {
        let _ = roll_flow::run::Run::from_text("default.ron", DEFAULT, &[set.to_string()]);
    }
});
