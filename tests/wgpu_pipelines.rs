//! The FrozenLake pipelines on burn's wgpu backend (`device: Wgpu`), through the binary
//! built with `--features wgpu`: the same operators as on the CPU, with the CubeCL kernels
//! (log-prob + entropy, GAE, PPO loss) and burn's wgpu tensor ops underneath. On a machine
//! without a GPU this runs on Mesa's software Vulkan (lavapipe).
//!
//! The first step of a run starts from the same seeded weights on both backends, so its
//! rollout samples the same episodes (a sampled token could only differ if a uniform draw
//! fell within float rounding of a boundary) and its update sees the same batch: the
//! step's success rates must be equal and its gradient norms and losses agree to float
//! rounding (relative 1e-3). Later steps are not compared: AdamW's first update is
//! ±lr per weight wherever a gradient is near zero, so rounding can flip it.

#![cfg(feature = "wgpu")]

mod common;

use common::{assert_ok, metrics, run};
use serde_json::{Map, Value};

const PIPELINES: [&str; 3] = [
    // Whole chats through banded window attention, mini-batches, `old_logprob: Behaviour`.
    "pipelines/frozen_lake_starpo.ron",
    // Step-wise samples, `old_logprob: ThisStep`.
    "pipelines/frozen_lake_gigpo.ron",
    // A critic: `Values`, bi-level GAE, `CriticStep`.
    "pipelines/frozen_lake_ppo.ron",
];

fn value(record: &Map<String, Value>, key: &str) -> f64 {
    record
        .get(key)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no `{key}` in {record:?}"))
}

fn assert_close(file: &str, key: &str, cpu: f64, wgpu: f64) {
    let tolerance = 1e-3 * cpu.abs().max(wgpu.abs()).max(1e-3);
    assert!(
        (cpu - wgpu).abs() <= tolerance,
        "{file}: `{key}` is {cpu} on the CPU and {wgpu} on wgpu"
    );
}

#[test]
fn frozen_lake_pipelines_train_on_wgpu_as_on_the_cpu() {
    for file in PIPELINES {
        let dir = tempfile::tempdir().unwrap();
        let (cpu_dir, wgpu_dir) = (dir.path().join("cpu"), dir.path().join("wgpu"));
        assert_ok(&run(file, &cpu_dir, &[]));
        assert_ok(&run(file, &wgpu_dir, &["--set", "device=Wgpu"]));
        let (cpu, wgpu) = (metrics(&cpu_dir), metrics(&wgpu_dir));
        assert_eq!(wgpu.len(), 2, "{file}: one record per step on wgpu");
        for key in [
            "rollout/success",
            "rollout/response_length",
            "eval/val/success",
        ] {
            assert_eq!(
                cpu[0][key], wgpu[0][key],
                "{file}: `{key}` differs at step 0"
            );
        }
        let mut compared = 0;
        for key in [
            "actor_step/grad_norm",
            "actor_step/pg_loss",
            "actor_step/entropy",
            "critic_step/grad_norm",
            "critic_step/value_loss",
            "values/values/mean",
        ] {
            if cpu[0].contains_key(key) {
                assert_close(file, key, value(&cpu[0], key), value(&wgpu[0], key));
                compared += 1;
            }
        }
        assert!(compared >= 3, "{file}: the actor's metrics are compared");
        assert!(
            value(&wgpu[1], "actor_step/grad_norm").is_finite(),
            "{file}: the second step trains on wgpu"
        );
        let checkpoint = wgpu_dir.join("checkpoints/step_2/models/policy");
        for f in ["model.bin", "optimizer.bin", "hf/model.safetensors"] {
            assert!(checkpoint.join(f).is_file(), "{file}: checkpoint lacks {f}");
        }
    }
}
