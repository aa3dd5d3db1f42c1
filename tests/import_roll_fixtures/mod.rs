//! What the `import-roll` key tests share: the demo config in ROLL's format, running the
//! command, and a copy of tests/fixtures/roll/ with one config changed.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const DEMO: &str = "tests/fixtures/roll/agentic_demo/agent_val_frozen_lake_demo.yaml";
pub const FIXTURES: &str = "tests/fixtures/roll";

/// `import-roll ARGS` with WANDB_API_KEY set in its environment.
pub fn import_roll(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roll-flow"))
        .arg("import-roll")
        .args(args)
        .env("WANDB_API_KEY", "secret-key-123")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// A copy of tests/fixtures/roll/ in a temporary folder, `main` written at `name`.
pub fn fixtures_with(dir: &Path, name: &str, main: &str) -> PathBuf {
    let copy = |from: &str| {
        let to = dir.join(from);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(Path::new(FIXTURES).join(from), to).unwrap();
    };
    copy("config/traj_envs.yaml");
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, main).unwrap();
    path
}
