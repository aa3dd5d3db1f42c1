//! Running the real `roll-flow` binary from the integration tests, and the tiny runs of
//! shipped pipelines several tests start from.
// Each test binary uses its own subset of these helpers.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

use roll_flow::engine::spec;
use roll_flow::model::spec::ArchSpec;
use roll_flow::operators::catalog::RollFlow;
use roll_flow::operators::registry::Node;
use serde_json::Value;

/// Runs `roll-flow ARGS` in the repository root.
pub fn roll_flow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roll-flow"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

/// The Python the env-server tests start: `$ROLL_FLOW_PYTHON` (`./test.sh` sets it to its
/// venv's, `.venv/bin/python`), else `python3` on the PATH.
pub fn python() -> String {
    std::env::var("ROLL_FLOW_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// [`python`], after checking that it imports each `(module, PyPI package)`: a test that
/// needs a package stops at once, in one line naming what to install, instead of failing
/// later inside a run or waiting for a server that died on import.
pub fn python_with(modules: &[(&str, &str)]) -> String {
    const PROBE: &str = r#"
import importlib, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception:
        print(name)
"#;
    let python = python();
    let probe = Command::new(&python)
        .args(["-c", PROBE])
        .args(modules.iter().map(|(module, _)| module))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start `{python}` ({e}): run ./test.sh, which makes .venv with what \
                 the tests need, or point ROLL_FLOW_PYTHON at a Python 3"
            )
        });
    assert!(
        probe.status.success(),
        "`{python}` failed: {}",
        String::from_utf8_lossy(&probe.stderr)
    );
    let said = String::from_utf8_lossy(&probe.stdout);
    let missing: Vec<&str> = modules
        .iter()
        .filter(|(module, _)| said.lines().any(|l| l == *module))
        .map(|(_, package)| *package)
        .collect();
    assert!(
        missing.is_empty(),
        "`{python}` lacks the Python package(s) {}: run ./test.sh (it installs them into \
         .venv), or `{python} -m pip install {}`",
        missing.join(", "),
        missing.join(" ")
    );
    python
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
/// attention and the trimmed prefixes run through the binary too; a guide that ends
/// (`guide_steps`) ends after step 0, so both phases run.
pub fn tiny(file: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let pipeline = spec::load::<RollFlow>(&path, &[])
        .unwrap_or_else(|d| panic!("{file} does not load: {d:?}"))
        .pipeline;
    let policy_window = matches!(
        pipeline.models.get("policy").map(|m| &m.arch),
        Some(ArchSpec::Tiny(arch)) if arch.sliding_window.is_some()
    );
    let window = if policy_window {
        ", sliding_window: 8"
    } else {
        ""
    };
    let mut sets = vec![
        format!("models.policy.arch=Tiny(layers: 1, dim: 32, heads: 2{window})"),
        "nodes.checkpoint.every=1".into(),
    ];
    // Every env set down to two groups, of two where it trains.
    for (tag, _) in pipeline.envs.iter() {
        sets.push(format!("envs.{tag}.groups=2"));
        if tag != "val" {
            sets.push(format!("envs.{tag}.group_size=2"));
        }
    }
    if matches!(
        pipeline.nodes.get("rollout"),
        Some(Node::Rollout(rollout)) if rollout.guide_steps.is_some()
    ) {
        sets.push("nodes.rollout.guide_steps=1".into());
    }
    if pipeline.models.contains("critic") {
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

/// The names of the entries of folder `dir`, sorted.
pub fn entry_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
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
