//! Running the real `roll-flow` binary from the integration tests.

use std::process::{Command, Output};

/// Runs `roll-flow ARGS` in the repository root.
pub fn roll_flow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roll-flow"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}
