//! What `roll-flow run` does to its output directory before it trains: a second run into
//! a directory holding a run is refused (or moves it aside with `--overwrite`), `--resume`
//! checks the checkpoint before it touches the metrics, and a training pipeline is refused
//! several workers before anything is written.

mod common;

use std::path::Path;

use common::{assert_ok, roll_flow, run};

const STARPO: &str = "pipelines/frozen_lake_starpo.ron";

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The folders beside `out` whose names start with `<out name>.previous-`.
fn moved_aside(out: &Path) -> Vec<std::path::PathBuf> {
    let prefix = format!("{}.previous-", out.file_name().unwrap().to_str().unwrap());
    std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

#[test]
fn a_second_run_into_the_same_out_dir_is_refused_and_leaves_the_first_alone() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    assert_ok(&run(STARPO, &out, &["--steps", "1"]));
    let metrics = std::fs::read(out.join("metrics.jsonl")).unwrap();
    let pipeline = std::fs::read(out.join("pipeline.ron")).unwrap();

    let second = run(STARPO, &out, &["--steps", "1", "--set", "seed=99"]);
    let err = stderr(&second);
    assert_eq!(second.status.code(), Some(1), "{err}");
    let shown = out.display();
    let want = format!(
        "error: {shown} already holds a run (metrics.jsonl, checkpoints); a new \
         run there would mix with it. Continue that run with `roll-flow run --resume {shown}`, \
         write this one elsewhere with `--out DIR`, or add `--overwrite` to move the old run \
         aside (to {shown}.previous-<unix time>) and start afresh"
    );
    assert!(err.contains(&want), "{err}");
    assert_eq!(std::fs::read(out.join("metrics.jsonl")).unwrap(), metrics);
    assert_eq!(std::fs::read(out.join("pipeline.ron")).unwrap(), pipeline);
    assert!(moved_aside(&out).is_empty());
}

#[test]
fn overwrite_moves_the_old_run_aside_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    assert_ok(&run(STARPO, &out, &["--steps", "1"]));
    let metrics = std::fs::read(out.join("metrics.jsonl")).unwrap();

    let second = run(STARPO, &out, &["--steps", "2", "--overwrite"]);
    assert_ok(&second);
    let aside = moved_aside(&out);
    assert_eq!(aside.len(), 1, "{aside:?}");
    let want = format!(
        "moved the previous run in {} aside to {}",
        out.display(),
        aside[0].display()
    );
    assert!(stderr(&second).contains(&want), "{}", stderr(&second));
    // The old run, whole, at the aside path; the new one alone in `out`.
    assert_eq!(
        std::fs::read(aside[0].join("metrics.jsonl")).unwrap(),
        metrics
    );
    assert!(aside[0].join("checkpoints/step_1").is_dir());
    assert_eq!(common::metrics(&out).len(), 2);
    let old_pipeline = std::fs::read_to_string(aside[0].join("pipeline.ron")).unwrap();
    let new_pipeline = std::fs::read_to_string(out.join("pipeline.ron")).unwrap();
    assert!(old_pipeline.contains("steps: 1,"), "{old_pipeline}");
    assert!(new_pipeline.contains("steps: 2,"), "{new_pipeline}");
}

#[test]
fn resume_from_a_checkpoint_missing_a_file_fails_and_keeps_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    assert_ok(&run(STARPO, &out, &["--steps", "3", "--stop-after", "2"]));
    let metrics = std::fs::read(out.join("metrics.jsonl")).unwrap();
    let newest = out.join("checkpoints/step_2");
    std::fs::remove_file(newest.join("models/policy/optimizer.bin")).unwrap();

    let resumed = roll_flow(&["run", "--resume", out.to_str().unwrap()]);
    let err = stderr(&resumed);
    assert_eq!(resumed.status.code(), Some(1), "{err}");
    let want = format!(
        "error: checkpoint {} is incomplete (missing models/policy/optimizer.bin), so the run \
         cannot resume from it; move that folder out of checkpoints/ to resume from the one \
         before it",
        newest.display()
    );
    assert!(err.contains(&want), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(std::fs::read(out.join("metrics.jsonl")).unwrap(), metrics);
}

/// A pipeline that only rolls out: nothing to average, so it shards over workers.
const ROLLOUT_ONLY: &str = r#"Pipeline(
    name: "rollout_only", steps: 1, out_dir: "unused",
    models: { "policy": (arch: Tiny(layers: 1, dim: 32, heads: 2), tokenizer: Builtin) },
    envs: { "train": (env: Bandit(), groups: 2, group_size: 2) },
    nodes: { "rollout": Rollout(envs: "train", policy: "policy", guide: Actions, instruction: false) },
)"#;

#[test]
fn a_rollout_only_pipeline_still_runs_on_several_workers() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rollout_only.ron");
    std::fs::write(&file, ROLLOUT_ONLY).unwrap();
    let out = dir.path().join("run");
    let args = [
        "run",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    assert_ok(&roll_flow(&[&args[..], &["-w", "2"]].concat()));
    assert_eq!(common::metrics(&out).len(), 1);
}

/// A resume from a checkpoint whose weights file is damaged fails naming the file, with no
/// panic, and does not advise resuming from the same checkpoint as if it were whole.
#[test]
fn a_resume_from_a_damaged_checkpoint_names_it_and_the_way_on() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    assert_ok(&run(
        "pipelines/bandit_grpo.ron",
        &out,
        &["--stop-after", "1"],
    ));
    let weights = out.join("checkpoints/step_1/models/policy/model.bin");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..1000]).unwrap();
    let resumed = roll_flow(&["run", "--resume", out.to_str().unwrap()]);
    assert_eq!(resumed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains(&format!("{}: cannot be decoded (", weights.display()))
            && stderr.contains("the run stopped before writing a checkpoint past")
            && !stderr.contains("continues from it"),
        "{stderr}"
    );
    // A length prefix that claims more than the file holds: the first four-byte length
    // (0xfc, the first tensor's) made an eight-byte one, which asked for a vector past
    // isize::MAX and panicked the decoder.
    let mut damaged = bytes.clone();
    let marker = damaged.iter().position(|&b| b == 0xfc).unwrap();
    damaged[marker] = 0xfd;
    std::fs::write(&weights, &damaged).unwrap();
    let resumed = roll_flow(&["run", "--resume", out.to_str().unwrap()]);
    assert_eq!(resumed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(
        !stderr.contains("panicked")
            && stderr.contains(&format!("{}: cannot be decoded (", weights.display())),
        "{stderr}"
    );
}
