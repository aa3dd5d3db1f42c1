//! The non-finite guard through the binary: with an absurd learning rate (1e30) every
//! update overflows; each is skipped and counted (`actor_step/skipped_nonfinite`), the
//! weights stay the last finite ones, and the third in a row (`max_nonfinite`, default 3)
//! stops the run with an error naming the node, the step and the quantity, and a notice
//! naming the last checkpoint. No checkpoint holds a non-finite weight.

mod common;

use std::path::{Path, PathBuf};

use common::{metrics, run};

const FILE: &str = "pipelines/frozen_lake_starpo.ron";

/// Every F32 value of a safetensors file (the HF copy a checkpoint holds).
fn safetensors_f32(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    let data = &bytes[8 + header_len..];
    let mut values = Vec::new();
    for (name, tensor) in header.as_object().unwrap() {
        if name == "__metadata__" {
            continue;
        }
        assert_eq!(tensor["dtype"], "F32", "{name}");
        let offsets = tensor["data_offsets"].as_array().unwrap();
        let (start, end) = (
            offsets[0].as_u64().unwrap() as usize,
            offsets[1].as_u64().unwrap() as usize,
        );
        values.extend(
            data[start..end]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap())),
        );
    }
    values
}

/// Runs the tiny default pipeline for `steps` with the policy's optimizer `optim` into
/// `dir/run`; the run must fail (exit 1). Its directory and stderr.
fn failing_run(dir: &Path, steps: &str, optim: &str) -> (PathBuf, String) {
    let out_dir = dir.join("run");
    let set = format!("models.policy.optim={optim}");
    let out = run(FILE, &out_dir, &["--steps", steps, "--set", &set]);
    assert_eq!(out.status.code(), Some(1));
    (out_dir, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn non_finite_updates_are_skipped_then_stop_the_run_naming_the_last_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (out_dir, stderr) = failing_run(dir.path(), "5", "AdamW(lr: 1e30)");
    assert!(
        stderr.contains(
            "node `actor_step` at step 2: 3 non-finite updates in a row (`max_nonfinite`"
        ) && stderr.contains("the update norm was inf"),
        "{stderr}"
    );
    let last = out_dir.join("checkpoints/step_2");
    assert!(
        stderr.contains(&format!("the last checkpoint is {}", last.display())),
        "{stderr}"
    );
    let records = metrics(&out_dir);
    for step in [0, 1] {
        assert_eq!(
            records[step]["actor_step/skipped_nonfinite"], 1.0,
            "step {step}"
        );
        assert_eq!(records[step]["actor_step/update_norm"], 0.0, "step {step}");
    }
    // Skipped updates leave the weights as they were: both checkpoints hold the initial
    // weights, all finite.
    let policy = |step: u64| out_dir.join(format!("checkpoints/step_{step}/models/policy"));
    let read = |p: std::path::PathBuf| std::fs::read(p).unwrap();
    assert_eq!(
        read(policy(1).join("model.bin")),
        read(policy(2).join("model.bin"))
    );
    let weights = safetensors_f32(&policy(2).join("hf/model.safetensors"));
    assert!(!weights.is_empty() && weights.iter().all(|w| w.is_finite()));

    // A sane rate by default: nothing is skipped.
    let sane = dir.path().join("sane");
    common::assert_ok(&run(FILE, &sane, &["--steps", "1"]));
    assert_eq!(metrics(&sane)[0]["actor_step/skipped_nonfinite"], 0.0);
    assert!(
        metrics(&sane)[0]["actor_step/update_norm"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[test]
fn diverged_weights_stop_generation_with_an_error_not_a_panic() {
    // lr 1e8: the updates stay finite but the weights grow until the logits overflow;
    // the guided rollout (`guide: Actions`) then stops the run, naming the node.
    let dir = tempfile::tempdir().unwrap();
    let (_, stderr) = failing_run(dir.path(), "8", "AdamW(lr: 1e8)");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("node `rollout` at step ")
            && stderr.contains("the policy's logits were not finite (NaN or infinite)")
            && stderr.contains("the last checkpoint is"),
        "{stderr}"
    );
}
