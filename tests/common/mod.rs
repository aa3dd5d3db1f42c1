//! Running the real `roll-flow` binary from the integration tests, and the tiny runs of
//! shipped pipelines several tests start from.
// Each test binary uses its own subset of these helpers.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// Runs `roll-flow ARGS` in the repository root.
pub fn roll_flow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roll-flow"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

/// `roll-flow play SPEC --seed SEED` with `actions` on stdin (one per line), the
/// repository's Python env package on PYTHONPATH; its output.
pub fn play_script(spec: &str, seed: &str, actions: &str) -> Output {
    use std::io::Write;
    let root = env!("CARGO_MANIFEST_DIR");
    let mut child = Command::new(env!("CARGO_BIN_EXE_roll-flow"))
        .env("PYTHONPATH", format!("{root}/python"))
        .args(["play", spec, "--seed", seed])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin
        .write_all(actions.as_bytes())
        .expect("stdin takes the actions");
    drop(stdin);
    child.wait_with_output().expect("the binary ends")
}

/// Shrinks a shipped pipeline: 1-layer 32-wide models, 2 groups of 2, short replies. A
/// policy with a sliding window keeps one (8 keys, shorter than a turn), so the banded
/// attention and the trimmed prefixes run through the binary too.
pub fn tiny(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
    let window = if text.contains("sliding_window:") {
        ", sliding_window: 8"
    } else {
        ""
    };
    let mut sets = vec![
        format!("models.policy.arch=Tiny(layers: 1, dim: 32, heads: 2{window})"),
        "envs.train.groups=2".into(),
        "envs.train.group_size=2".into(),
        "envs.val.groups=2".into(),
        "nodes.checkpoint.every=1".into(),
    ];
    if text.contains("\"critic\":") {
        sets.push("models.critic.arch=Tiny(layers: 1, dim: 32, heads: 2)".into());
    }
    sets.into_iter()
        .flat_map(|s| ["--set".to_string(), s])
        .collect()
}

/// `roll-flow run FILE` shrunk by [`tiny`], two steps unless `extra` sets `--steps`.
pub fn run(file: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args: Vec<String> = vec!["run".into(), file.into()];
    if !extra.contains(&"--steps") {
        args.extend(["--steps".into(), "2".into()]);
    }
    args.extend(["--out".into(), out.display().to_string()]);
    args.extend(tiny(file));
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    roll_flow(&refs)
}

/// The records of `dir/metrics.jsonl`.
pub fn metrics(dir: &Path) -> Vec<serde_json::Map<String, Value>> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .unwrap()
                .as_object()
                .unwrap()
                .clone()
        })
        .collect()
}

/// Asserts exit code 0, showing stderr otherwise.
pub fn assert_ok(out: &std::process::Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The records of `dir/metrics.jsonl` without their timing fields (the only ones that
/// differ between equal runs).
pub fn untimed(dir: &Path) -> Vec<Vec<(String, Value)>> {
    let timing = roll_flow_engine::metrics::is_timing_key;
    metrics(dir)
        .into_iter()
        .map(|r| r.into_iter().filter(|(k, _)| !timing(k)).collect())
        .collect()
}
