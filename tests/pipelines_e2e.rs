//! Every shipped pipeline through the real binary: the CPU ones run two steps at tiny sizes
//! (`--set` overrides) and leave metrics, a checkpoint and batch dumps; the GPU one
//! validates. Also: two runs with one seed write the same metrics, and a run stopped after
//! a checkpoint and resumed ends with the same weights as one that was not stopped.

mod common;

use common::{assert_ok, metrics, roll_flow, run, untimed};
use roll_flow_engine::batch::column::{ADVANTAGES, BEHAVIOUR_LOGPROB, OLD_LOGPROB, RESPONSE_MASK};
use serde_json::Value;

const CPU_PIPELINES: [&str; 15] = [
    "pipelines/frozen_lake_starpo.ron",
    "pipelines/frozen_lake_starpo_async.ron",
    "pipelines/frozen_lake_gigpo.ron",
    "pipelines/frozen_lake_ppo.ron",
    "pipelines/sokoban_starpo.ron",
    "pipelines/sokoban_gigpo.ron",
    "pipelines/bandit_grpo.ron",
    "pipelines/math_multi_turn.ron",
    "pipelines/math_single_turn.ron",
    "pipelines/webshop_gigpo.ron",
    "pipelines/webshop_grpo.ron",
    // the SmolLM2 files with a Tiny model in place of the GGUF (LoRA kept on the FrozenLake one)
    "pipelines/smollm2_math_agent.ron",
    "pipelines/smollm2_frozen_lake.ron",
    "pipelines/smollm2_frozen_lake_warmup.ron",
    "pipelines/smollm2_frozen_lake_free.ron",
];

#[test]
fn every_cpu_pipeline_runs_two_steps_and_leaves_metrics_checkpoints_and_dumps() {
    for file in CPU_PIPELINES {
        let dir = tempfile::tempdir().unwrap();
        let out_dir = dir.path().join("run");
        let dumps = dir.path().join("dumps");
        let out = run(file, &out_dir, &["--dump-batches", dumps.to_str().unwrap()]);
        assert_ok(&out);
        let records = metrics(&out_dir);
        assert_eq!(records.len(), 2, "{file}: one record per step");
        // π_old comes from a LogProb node, or the actor takes it itself
        // (`old_logprob: ThisStep | Behaviour`).
        let text = std::fs::read_to_string(file).unwrap();
        let actor_old = ["old_logprob: ThisStep", "old_logprob: Behaviour"]
            .iter()
            .any(|source| text.contains(source));
        for (step, r) in records.iter().enumerate() {
            assert_eq!(r["step"], step as u64, "{file}");
            for key in [
                "rollout/score/mean",
                "rollout/success",
                "rollout/effective_action_rate",
                "actor_step/lr",
                "actor_step/grad_norm",
                "actor_step/entropy",
                if actor_old {
                    "actor_step/ppo_kl"
                } else {
                    "old_logprob/entropy"
                },
            ] {
                let v = r.get(key).and_then(Value::as_f64);
                assert!(
                    v.is_some_and(f64::is_finite),
                    "{file}: step {step} has no finite `{key}`: {r:?}"
                );
            }
        }
        assert!(
            records[0].contains_key("eval/val/success"),
            "{file}: eval runs at step 0"
        );
        assert_eq!(records[1]["actor_step/policy_version"], 2.0, "{file}");
        if text.contains("guide_steps:") {
            // `tiny` ends the guide after step 0: a guided step, then a free one.
            let guided: Vec<&Value> = records.iter().map(|r| &r["rollout/guided"]).collect();
            assert_eq!(guided, [1.0, 0.0], "{file}");
        }
        // A LoRA policy's checkpoint holds its adapters (and PEFT's copy), not the model.
        let ckpt = out_dir.join("checkpoints/step_2/models/policy");
        let (lora, whole) = (
            ["trained.safetensors", "peft/adapter_model.safetensors"],
            ["model.bin", "hf/model.safetensors"],
        );
        let has_lora = text.lines().any(|l| l.trim_start().starts_with("lora:"));
        let (held, absent) = match has_lora {
            true => (lora, whole),
            false => (whole, lora),
        };
        for f in held.into_iter().chain(["optimizer.bin", "version"]) {
            assert!(ckpt.join(f).is_file(), "{file}: checkpoint lacks {f}");
        }
        for f in absent {
            assert!(!ckpt.join(f).exists(), "{file}: checkpoint holds {f}");
        }
        let dump = dumps.join("step_000001/actor_step.json");
        let batch = roll_flow_engine::batch_dump::read(&dump).unwrap();
        for c in [RESPONSE_MASK, ADVANTAGES, BEHAVIOUR_LOGPROB] {
            assert!(batch.has(&c), "{file}: dump lacks `{}`", c.name());
        }
        assert!(batch.num_samples() > 0, "{file}: the dump holds samples");
        assert_eq!(
            batch.has(&OLD_LOGPROB),
            !actor_old,
            "{file}: the dump has `old_logprob` exactly when a LogProb node gives it"
        );
        let renders = out_dir.join("renders/step_0");
        assert!(
            renders.join("val_0_chat.txt").is_file(),
            "{file}: eval transcript saved"
        );
    }
}

#[test]
fn the_gpu_pipeline_validates() {
    let out = roll_flow(&["validate", "pipelines/qwen2.5-0.5b_frozen_lake.ron"]);
    assert_ok(&out);
}

/// The same seed gives the same metrics, whatever the threads: one env thread and one
/// inference loop play the same episodes as the default pool and the file's two loops.
#[test]
fn same_seed_same_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    assert_ok(&run("pipelines/frozen_lake_starpo.ron", &a, &[]));
    let threads = [
        "--set",
        "nodes.rollout.env_threads=1",
        "--set",
        "nodes.rollout.inference_loops=1",
    ];
    assert_ok(&run("pipelines/frozen_lake_starpo.ron", &b, &threads));
    let (ma, mb) = (untimed(&a), untimed(&b));
    assert_eq!(ma, mb);
    assert!(ma[0].len() > 20, "records carry the metrics: {:?}", ma[0]);
}

#[test]
fn a_resumed_run_ends_with_the_weights_of_an_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let (whole, split) = (dir.path().join("whole"), dir.path().join("split"));
    let four = ["--steps", "4", "--set", "nodes.checkpoint.every=2"];
    assert_ok(&run("pipelines/frozen_lake_ppo.ron", &whole, &four));
    let mut stopped = four.to_vec();
    stopped.extend(["--stop-after", "2"]);
    assert_ok(&run("pipelines/frozen_lake_ppo.ron", &split, &stopped));
    assert!(!split.join("checkpoints/step_4").exists());
    assert_eq!(metrics(&split).len(), 2);
    assert_ok(&roll_flow(&["run", "--resume", split.to_str().unwrap()]));
    // The weights as safetensors (the burn records also hold random parameter ids, which
    // differ between any two runs); the optimizer state shows in the metrics of the resumed
    // steps, which must match too.
    for f in [
        "models/policy/hf/model.safetensors",
        "critics/critic/hf/model.safetensors",
    ] {
        let a = std::fs::read(whole.join("checkpoints/step_4").join(f)).unwrap();
        let b = std::fs::read(split.join("checkpoints/step_4").join(f)).unwrap();
        assert!(a == b, "{f} differs after resuming");
    }
    assert_eq!(untimed(&whole), untimed(&split));
}
