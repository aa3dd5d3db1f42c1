//! The FrozenLake pipelines on a GPU backend through the binary: burn's wgpu backend
//! (`device: Wgpu`, built with `--features wgpu`; on a machine without a GPU it runs on
//! Mesa's software Vulkan, lavapipe) or CUDA (`device: Cuda(0)`, built with `--features
//! cuda`, run on an NVIDIA GPU by `bench/gpu/run.sh`). The same operators as on the CPU,
//! with the CubeCL kernels (log-prob + entropy, GAE, PPO loss) and burn's GPU tensor ops
//! underneath.
//!
//! The first step of a run starts from the same seeded weights on both backends, so its
//! rollout samples the same episodes (a sampled token could only differ if a uniform draw
//! fell within float rounding of a boundary) and its update sees the same batch: the
//! step's success rates must be equal and its gradient norms and losses agree to float
//! rounding (relative 1e-3). Later steps are not compared: AdamW's first update is
//! ±lr per weight wherever a gradient is near zero, so rounding can flip it. The same
//! holds for an asynchronous run (`staleness: 1`) and a data-parallel one (`-w 2`, two
//! workers on the one GPU).
//!
//! The GPU pipeline (`qwen2.5-0.5b_frozen_lake.ron`: a Hugging Face directory, free-text
//! replies, a reference model and a KL term) runs one step the same way, with the tiny
//! Qwen2 fixture in place of Qwen2.5-0.5B.

#![cfg(any(feature = "wgpu", feature = "cuda"))]

mod common;

use common::{assert_ok, metrics, roll_flow, run};
use serde_json::{Map, Value};

const PIPELINES: [&str; 3] = [
    // Whole chats through banded window attention, mini-batches, `old_logprob: Behaviour`.
    "pipelines/frozen_lake_starpo.ron",
    // Step-wise samples, `old_logprob: ThisStep`.
    "pipelines/frozen_lake_gigpo.ron",
    // A critic: `Values`, bi-level GAE, `CriticStep`.
    "pipelines/frozen_lake_ppo.ron",
];

/// The device the binary's GPU feature serves (CUDA when both are built).
const GPU: &str = if cfg!(feature = "cuda") {
    "Cuda(0)"
} else {
    "Wgpu"
};

fn value(record: &Map<String, Value>, key: &str) -> f64 {
    record
        .get(key)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no `{key}` in {record:?}"))
}

fn assert_close(file: &str, key: &str, cpu: f64, gpu: f64) {
    let tolerance = 1e-3 * cpu.abs().max(gpu.abs()).max(1e-3);
    eprintln!("{file}: `{key}` CPU {cpu} {GPU} {gpu}");
    assert!(
        (cpu - gpu).abs() <= tolerance,
        "{file}: `{key}` is {cpu} on the CPU and {gpu} on {GPU}"
    );
}

#[test]
fn frozen_lake_pipelines_train_on_the_gpu_as_on_the_cpu() {
    for file in PIPELINES {
        first_step_as_on_the_cpu(file, &[]);
    }
}

/// An asynchronous run (`staleness: 1`: the rollout of step t plays with the weights step
/// t − 1 started from, in its own inference loops) and a data-parallel one (two workers
/// sharing the one GPU, each with its own micro-batches) take their first step on the GPU
/// as on the CPU too.
#[test]
fn asynchronous_and_data_parallel_runs_train_on_the_gpu_as_on_the_cpu() {
    first_step_as_on_the_cpu("pipelines/frozen_lake_starpo_async.ron", &[]);
    let two_workers = [
        "-w",
        "2",
        "--set",
        "envs.train.groups=4",
        "--set",
        "nodes.actor_step.micro_batch=2",
    ];
    first_step_as_on_the_cpu("pipelines/frozen_lake_starpo.ron", &two_workers);
}

/// Runs `path` (shrunk, two steps, with `extra` arguments) on the CPU and on the GPU: the
/// first step's success rates are equal and its losses and norms agree; the second step
/// trains and its checkpoint is written.
fn first_step_as_on_the_cpu(path: &str, extra: &[&str]) {
    let file = &[path]
        .iter()
        .chain(extra)
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    let dir = tempfile::tempdir().unwrap();
    let (cpu_dir, gpu_dir) = (dir.path().join("cpu"), dir.path().join("gpu"));
    let on_gpu = format!("device={GPU}");
    let gpu_extra: Vec<&str> = extra.iter().copied().chain(["--set", &on_gpu]).collect();
    assert_ok(&run(path, &cpu_dir, extra));
    assert_ok(&run(path, &gpu_dir, &gpu_extra));
    let (cpu, gpu) = (metrics(&cpu_dir), metrics(&gpu_dir));
    assert_eq!(gpu.len(), 2, "{file}: one record per step on {GPU}");
    for key in [
        "rollout/success",
        "rollout/response_length",
        "eval/val/success",
    ] {
        assert_eq!(
            cpu[0][key], gpu[0][key],
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
            assert_close(file, key, value(&cpu[0], key), value(&gpu[0], key));
            compared += 1;
        }
    }
    assert!(compared >= 3, "{file}: the actor's metrics are compared");
    assert!(
        value(&gpu[1], "actor_step/grad_norm").is_finite(),
        "{file}: the second step trains on {GPU}"
    );
    let checkpoint = gpu_dir.join("checkpoints/step_2/models/policy");
    for f in ["model.bin", "optimizer.bin", "hf/model.safetensors"] {
        assert!(checkpoint.join(f).is_file(), "{file}: checkpoint lacks {f}");
    }
}

#[test]
fn the_gpu_pipeline_runs_an_hf_directory_on_the_gpu_as_on_the_cpu() {
    let file = "pipelines/qwen2.5-0.5b_frozen_lake.ron";
    let dir = tempfile::tempdir().unwrap();
    let fixture = "HfDir(\"tests/fixtures/tiny_qwen2\")";
    let sets = [
        format!("models.policy.arch={fixture}"),
        format!("models.reference.arch={fixture}"),
        "envs.train.groups=2".into(),
        "envs.train.group_size=2".into(),
        "envs.val.groups=2".into(),
        "envs.train.max_turns=2".into(),
        "envs.val.max_turns=2".into(),
        "nodes.rollout.max_new_tokens=8".into(),
        "nodes.eval.max_new_tokens=8".into(),
        // The fixture's replies are never well-formed, so every advantage is 0; the
        // entropy bonus gives the update a gradient to compare.
        "nodes.actor_step.entropy=0.01".into(),
    ];
    let mut records = Vec::new();
    for device in ["Cpu", GPU] {
        let out_dir = dir.path().join(device);
        let mut args = vec!["run".to_string(), file.into(), "--steps".into(), "1".into()];
        args.extend(["--out".into(), out_dir.display().to_string()]);
        args.extend(["--set".into(), format!("device={device}")]);
        for set in &sets {
            args.extend(["--set".into(), set.clone()]);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_ok(&roll_flow(&refs));
        records.push(metrics(&out_dir).remove(0));
    }
    let (cpu, gpu) = (&records[0], &records[1]);
    for key in [
        "rollout/response_length",
        "rollout/format_error_rate",
        "eval/val/success",
    ] {
        assert_eq!(cpu[key], gpu[key], "{file}: `{key}` differs");
    }
    for key in [
        "old_logprob/entropy",
        "actor_step/entropy",
        "actor_step/grad_norm",
        "actor_step/kl_loss",
    ] {
        assert_close(file, key, value(cpu, key), value(gpu, key));
    }
    assert!(
        value(cpu, "actor_step/grad_norm") > 0.0,
        "{file}: the update has a gradient"
    );
}

/// Mixed precision (`precision:` on each model; f16 on wgpu, where lavapipe has it, bf16 on
/// CUDA): the PPO pipeline, policy and critic, trains two steps with every loss and
/// gradient norm finite, and its checkpoint keeps the f32 weights. (Its episodes are not
/// the f32 run's: the sampled tokens follow half-precision logits.)
#[test]
fn a_pipeline_trains_in_half_precision_on_the_gpu() {
    let file = "pipelines/frozen_lake_ppo.ron";
    let half = if cfg!(feature = "cuda") {
        "Bf16"
    } else {
        "F16"
    };
    let dir = tempfile::tempdir().unwrap();
    let sets = [
        format!("device={GPU}"),
        format!("models.policy.precision={half}"),
        format!("models.critic.precision={half}"),
    ];
    let mut extra = Vec::new();
    for set in &sets {
        extra.extend(["--set", set.as_str()]);
    }
    assert_ok(&run(file, dir.path(), &extra));
    let records = metrics(dir.path());
    assert_eq!(records.len(), 2, "{file}: one record per step in {half}");
    for record in &records {
        for key in [
            "actor_step/grad_norm",
            "actor_step/pg_loss",
            "critic_step/grad_norm",
            "critic_step/value_loss",
        ] {
            let v = value(record, key);
            assert!(v.is_finite(), "{file}: `{key}` is {v} in {half}");
        }
    }
    assert!(value(&records[0], "actor_step/grad_norm") > 0.0);
    let checkpoint = dir
        .path()
        .join("checkpoints/step_2/models/policy/hf/model.safetensors");
    let bytes = std::fs::read(&checkpoint).expect("the checkpoint's HF copy");
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = String::from_utf8_lossy(&bytes[8..8 + header_len]);
    assert!(header.contains("\"F32\""), "f32 weights: {header}");
    assert!(
        !header.contains("\"F16\"") && !header.contains("\"BF16\""),
        "{header}"
    );
}
