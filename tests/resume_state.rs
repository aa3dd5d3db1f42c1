//! State that lives outside the models must survive `--resume` too: the adaptive KL
//! coefficient β of an `adv` node and the adaptive entropy coefficient of an `ActorStep`
//! move every step, so a resumed run that restarted them from their configured values
//! would diverge from an uninterrupted run at the first resumed step.

mod common;

use common::{assert_ok, entry_names, metrics, roll_flow};

/// The bandit with a frozen reference model and an adaptive KL penalty in the rewards;
/// `horizon: 10` makes β move by up to 20%·n/10 per step, so a reset shows at once. The
/// entropy target is above any entropy of a few-token reply, so the entropy coefficient
/// grows by Δ every step (0.01, 0.02, ...).
const ADAPTIVE_KL_BANDIT: &str = r#"Pipeline(
    name: "bandit_adaptive_kl",
    seed: 3,
    steps: 4,
    device: Cpu,
    out_dir: "unused",
    models: {
        "policy": (arch: Tiny(layers: 1, dim: 32, heads: 2), tokenizer: Builtin, optim: AdamW(lr: 1e-2)),
        "reference": (arch: Tiny(layers: 1, dim: 32, heads: 2), tokenizer: Builtin),
    },
    envs: {
        "train": (env: Bandit(), groups: 2, group_size: 4),
    },
    nodes: {
        "rollout":     Rollout(envs: "train", policy: "policy", guide: Actions, instruction: false),
        "old_logprob": LogProb(model: "policy"),
        "ref_logprob": RefLogProb(model: "reference"),
        "adv":         Grpo(kl_penalty: (coef: 0.5, target: 0.001, horizon: 10.0)),
        "actor_step":  ActorStep(model: "policy", loss: PpoClip(low: 0.2, high: 0.28), adaptive_entropy: (target: 50.0, delta: 0.01)),
        "checkpoint":  Checkpoint(every: 2),
    },
    edges: [
        ("rollout", "old_logprob"),
        ("rollout", "ref_logprob"),
        ("old_logprob", "adv"),
        ("ref_logprob", "adv"),
        ("adv", "actor_step"),
        ("actor_step", "checkpoint"),
    ],
)"#;

type Record = serde_json::Map<String, serde_json::Value>;

fn beta(record: &Record) -> f64 {
    record["adv/kl/beta"]
        .as_f64()
        .expect("the adv node reports kl/beta")
}

fn entropy_coef(record: &Record) -> f64 {
    record["actor_step/entropy/coef"]
        .as_f64()
        .expect("the actor step reports entropy/coef")
}

#[test]
fn a_resumed_run_continues_the_adaptive_coefficients() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bandit_adaptive_kl.ron");
    std::fs::write(&file, ADAPTIVE_KL_BANDIT).unwrap();
    let (whole, split) = (dir.path().join("whole"), dir.path().join("split"));
    let run = |out: &std::path::Path, extra: &[&str]| {
        let mut args = vec![
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        roll_flow(&args)
    };
    assert_ok(&run(&whole, &[]));
    assert_ok(&run(&split, &["--stop-after", "2"]));
    assert!(split.join("checkpoints/step_2/adv/adv.json").exists());
    // The reference trains nowhere: its folder holds a fingerprint of its weights (in a
    // trained.safetensors of no tensors), not a copy; a resume rebuilds it.
    let reference = split.join("checkpoints/step_2/models/reference");
    assert_eq!(
        entry_names(&reference),
        ["hf", "optimizer.bin", "trained.safetensors", "version"]
    );
    let size = std::fs::metadata(reference.join("trained.safetensors"))
        .unwrap()
        .len();
    assert!(size < 200, "{size} bytes");
    // `export --hf` rebuilds it (frozen, as the run built it) and checks it against that.
    let exported = dir.path().join("reference_hf");
    let args = [
        "export",
        split.to_str().unwrap(),
        "--model",
        "reference",
        "--hf",
    ];
    assert_ok(&roll_flow(
        &[&args[..], &[exported.to_str().unwrap()]].concat(),
    ));
    assert!(exported.join("model.safetensors").is_file());
    assert!(split
        .join("checkpoints/step_2/actor/actor_step.json")
        .exists());
    assert_ok(&roll_flow(&["run", "--resume", split.to_str().unwrap()]));

    let (whole, split) = (metrics(&whole), metrics(&split));
    assert_eq!(split.len(), 4);
    // β moved before the checkpoint, so a fresh controller would report 0.5 again at step 2.
    assert!((beta(&whole[2]) - 0.5).abs() > 1e-3, "{}", beta(&whole[2]));
    // The entropy coefficient after step 2 is 0.03 (a fresh controller: 0.01).
    assert!((entropy_coef(&whole[2]) - 0.03).abs() < 1e-9);
    for step in 0..4 {
        assert_eq!(
            beta(&whole[step]),
            beta(&split[step]),
            "kl/beta at step {step}"
        );
        assert_eq!(
            entropy_coef(&whole[step]),
            entropy_coef(&split[step]),
            "entropy/coef at step {step}"
        );
    }
}
