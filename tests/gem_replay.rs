//! The shipped GEM pipeline through the binary: its first steps run, and every transition
//! roll-flow saw through the protocol (the Process env's `trace`) equals GEM's own when
//! replayed directly in Python with the same seeds and actions. Needs `gem-llm` in the
//! tests' Python (`./test.sh` installs it; `common::python`); the adapter comes from
//! `python/` on PYTHONPATH.

mod common;

use std::process::Command;

use common::{assert_ok, metrics, tiny};

const FILE: &str = "pipelines/gem_guess_the_number.ron";
const ENV_ID: &str = "game:GuessTheNumber-v0-easy";

#[test]
fn gem_transitions_through_a_rollout_equal_gem_driven_directly() {
    let python = common::python_with(&[("gem", "gem-llm")]);
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let command =
        format!("[{python:?}, \"-m\", \"roll_flow_env.gem\", \"{ENV_ID}\", \"--boxed\", \"1-10\"]");
    let server = format!(
        "Process(command: {command}, trace: Some({:?}))",
        trace.display().to_string()
    );
    let run_dir = dir.path().join("run");
    let out = Command::new(env!("CARGO_BIN_EXE_roll-flow"))
        .current_dir(root)
        .env("PYTHONPATH", format!("{root}/python"))
        .args(["run", FILE, "--steps", "2", "--out"])
        .arg(&run_dir)
        .args(tiny(FILE))
        .args(["--set", &format!("envs.train.env={server}")])
        .args([
            "--set",
            &format!("envs.val.env=Process(command: {command})"),
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let records = metrics(&run_dir);
    assert_eq!(records.len(), 2);
    assert_eq!(records[1]["rollout/env_errors"], 0.0);
    assert!(records[1]["eval/val/turns"].as_f64().unwrap() >= 1.0);

    let replay = Command::new(&python)
        .arg(format!("{root}/tests/fixtures/env_servers/gem_replay.py"))
        .arg(ENV_ID)
        .arg(&trace)
        .output()
        .expect("the tests' Python runs");
    let said = String::from_utf8_lossy(&replay.stdout);
    assert!(
        replay.status.success(),
        "the replay differs:\n{said}{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    // 2 steps × 2 groups × 2 envs, each at least one turn.
    let episodes: usize = said.split_whitespace().nth(1).unwrap().parse().unwrap();
    let steps: usize = said.split_whitespace().nth(3).unwrap().parse().unwrap();
    assert!(episodes >= 8 && steps >= episodes, "{said}");
}
