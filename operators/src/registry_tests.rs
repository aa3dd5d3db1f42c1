//! The registry: every shipped pipeline validates, every kind parses with its defaults
//! and range-checks its settings, and the runtime's plain facts come from the kinds.

use std::path::Path;

use roll_flow_engine::spec::{ron_options, Loaded, Source};
use roll_flow_engine::{validate, NodeSpec};

use super::*;
use crate::catalog::RollFlow;

#[path = "registry_contract_tests.rs"]
mod contracts;

/// The shipped pipelines and the GPU benchmark's.
fn pipeline_files() -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files: Vec<_> = ["pipelines", "bench/gpu"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root.join(dir)).unwrap())
        .map(|e| e.unwrap().path())
        .collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "ron"));
    files.sort();
    files
}

fn load(text: &str) -> Loaded<RollFlow> {
    let path = Path::new("t.ron");
    let pipeline =
        roll_flow_engine::spec::parse::<RollFlow>(path, text).unwrap_or_else(|d| panic!("{d}"));
    Loaded {
        pipeline,
        source: Source {
            path: path.to_path_buf(),
            text: text.to_string(),
        },
    }
}

#[test]
fn every_shipped_pipeline_validates_without_warnings() {
    let files = pipeline_files();
    assert!(files.len() >= 3);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let v = validate(&load(&text));
        assert!(
            v.diagnostics.is_empty(),
            "{}: {:?}",
            file.display(),
            v.diagnostics
        );
        assert!(v.graph.is_some());
    }
}

fn node(text: &str) -> Node {
    let wrapped =
        format!("Pipeline(name: \"t\", steps: 1, out_dir: \"o\", nodes: {{ \"n\": {text} }})");
    load(&wrapped).pipeline.nodes.get("n").unwrap().clone()
}

#[test]
fn settings_are_range_checked() {
    let err = |t: &str| node(t).check().unwrap_err();
    assert_eq!(
        err("Rollout(envs: \"t\", temperature: -1.0)"),
        "`temperature` must be >= 0, got -1"
    );
    assert_eq!(
        err("Rollout(envs: \"t\", top_p: 0.0)"),
        "`top_p` must be in (0, 1], got 0"
    );
    assert_eq!(err("Checkpoint(every: 0)"), "`every` must be at least 1");
    assert_eq!(
        err("ActorStep(ppo_epochs: 0)"),
        "`ppo_epochs` must be at least 1"
    );
    assert!(node("ActorStep(loss: PpoClip(low: 0.2, high: 0.28))")
        .check()
        .is_ok());
    assert_eq!(
        err("ActorStep(uniform_kl: -0.1)"),
        "`uniform_kl` must be >= 0, got -0.1"
    );
    assert!(node("ActorStep(uniform_kl: 0.05)").check().is_ok());
    assert!(node("ActorStep(old_logprob: ThisStep)").check().is_ok());
    assert!(
        node("ActorStep(old_logprob: Behaviour, ppo_epochs: 2, mini_batch: 64)")
            .check()
            .is_ok()
    );
    for off_policy in ["ppo_epochs: 2", "mini_batch: 64"] {
        let e = err(&format!("ActorStep(old_logprob: ThisStep, {off_policy})"));
        assert!(
            e.starts_with("`old_logprob: ThisStep` needs one optimizer step per batch")
                && e.ends_with("remove it and add a LogProb node upstream"),
            "{e}"
        );
    }
    assert!(node("ActorStep(old_logprob: Behaviour, target: Free)")
        .check()
        .is_ok());
    assert!(
        node("ActorStep(max_tokens_per_micro_batch: 4096, micro_batch: 8)")
            .check()
            .is_ok()
    );
    assert_eq!(
        err("ActorStep(max_tokens_per_micro_batch: 0)"),
        "`max_tokens_per_micro_batch` must be at least 1"
    );
    let e = err("ActorStep(max_tokens_per_micro_batch: 4096, prefix_grouper: true)");
    assert!(
        e.starts_with("`max_tokens_per_micro_batch` counts rows × the longest row"),
        "{e}"
    );
    for pi_old in ["", "old_logprob: ThisStep, "] {
        assert_eq!(
            err(&format!("ActorStep({pi_old}target: Free)")),
            "`target: Free` weighs each guided token by π_free / π_guide, which needs the \
             guided rollout's own log-probs as π_old; add `old_logprob: Behaviour`"
        );
    }
    assert_eq!(
        err("ActorStep(adaptive_entropy: (target: 0.05, max: -1.0))"),
        "`adaptive_entropy.max` must be > 0, got -1"
    );
    let Node::ActorStep(spec) = node("ActorStep(adaptive_entropy: (target: 0.05))") else {
        panic!("an ActorStep");
    };
    let adaptive = spec.adaptive_entropy.expect("set");
    assert_eq!((adaptive.delta, adaptive.max), (0.005, 0.05), "defaults");
    assert_eq!(
        err("Eval(envs: \"v\", temperature: -0.5)"),
        "`temperature` must be >= 0 (0 is greedy), got -0.5"
    );
    assert_eq!(
        err("Eval(envs: \"v\", temperature: inf)"),
        "`temperature` must be >= 0 (0 is greedy), got inf"
    );
    assert!(node("Eval(envs: \"v\", temperature: 0.7)").check().is_ok());
}

#[test]
fn full_vocabulary_kl_is_refused_at_validation_with_the_alternatives() {
    let e = node("ActorStep(kl: (estimator: Full))")
        .check()
        .unwrap_err();
    assert!(
        e.starts_with("`kl: (estimator: Full)` is not supported: full-vocabulary KL needs the reference model's whole distribution at every response token")
            && e.ends_with("use `estimator: K3` (the default, low variance) or `K1`"),
        "{e}"
    );
    for estimator in ["K1", "K3", "Abs", "Mse"] {
        let text = format!("ActorStep(kl: (estimator: {estimator}))");
        assert!(node(&text).check().is_ok(), "{estimator}");
    }
}

#[test]
fn every_registered_kind_parses_with_defaults() {
    let bodies = [
        ("Rollout", "(envs: \"t\")"),
        ("LogProb", "()"),
        ("RefLogProb", "(model: \"r\")"),
        ("Values", "(model: \"c\")"),
        ("Gae", "()"),
        ("BiLevelGae", "()"),
        ("Grpo", "()"),
        ("Reinforce", "()"),
        ("Rloo", "()"),
        ("DrGrpo", "()"),
        ("ReinforcePlusPlus", "()"),
        ("StarPO", "()"),
        ("GiGPO", "()"),
        ("StepReinforce", "()"),
        ("AgenticReinforce", "()"),
        ("ActorStep", "()"),
        ("CriticStep", "(model: \"c\")"),
        ("ModelUpdate", "()"),
        ("Eval", "(envs: \"v\")"),
        ("Checkpoint", "()"),
    ];
    assert_eq!(bodies.len(), Node::KINDS.len());
    for (kind, body) in bodies {
        let n = node(&format!("{kind}{body}"));
        assert_eq!(n.kind(), kind);
        assert!(n.check().is_ok(), "{kind}: {:?}", n.check());
    }
}

#[test]
fn every_variant_parses_with_its_ron_name() {
    let texts = [
        "Gae(gamma: 1.0, lambda: 0.95)",
        "BiLevelGae(turn_gamma: 0.9)",
        "Grpo(norm: MeanStd, group_by: EnvTag)",
        "Reinforce()",
        "StarPO(norm: MeanStd, keep_top_std: 0.25)",
        "GiGPO(step_gamma: 0.95, step_weight: 1.0, norm: Mean)",
        "StepReinforce(gamma: 0.9, group_by: State)",
        "AgenticReinforce(gamma: 0.9)",
    ];
    for text in texts {
        assert_eq!(node(text).kind(), text.split('(').next().unwrap());
    }
    let kl = node("Gae(kl_penalty: (coef: 0.05, target: 0.1), shaping: (whiten: true))");
    let Node::Gae(g) = kl else { panic!() };
    assert_eq!(g.kl_penalty.unwrap().target, Some(0.1));
}

#[test]
fn unknown_fields_are_refused() {
    let err = ron_options()
        .from_str::<Node>("GiGPO(step_gama: 0.9)")
        .unwrap_err();
    assert!(err.to_string().contains("step_gama"), "{err}");
}

#[test]
fn out_of_range_settings_are_refused_before_running() {
    let cases = [
        (
            "Gae(lambda: 1.5)",
            "Gae: `lambda` must be in [0, 1], got 1.5",
        ),
        (
            "Grpo(gamma: -0.1)",
            "Grpo: `gamma` must be in [0, 1], got -0.1",
        ),
        (
            "StarPO(keep_top_std: 0.0)",
            "StarPO: `keep_top_std` must be in (0, 1], got 0",
        ),
        (
            "GiGPO(anchor: Similarity(threshold: 2.0))",
            "GiGPO: `anchor.threshold` must be in [0, 1], got 2",
        ),
        (
            "StepReinforce(shaping: (advantage_clip: -1.0))",
            "StepReinforce: `shaping.advantage_clip` must be > 0, got -1",
        ),
        (
            "Reinforce(shaping: (positive_weight: 1.5))",
            "Reinforce: `shaping.positive_weight` must be in [0, 1], got 1.5",
        ),
        (
            "Gae(kl_penalty: (estimator: Full))",
            "Gae: kl_penalty cannot use `Full`",
        ),
    ];
    for (text, message) in cases {
        let err = node(text).check().unwrap_err();
        assert!(err.starts_with(message), "{text}: {err}");
    }
}

#[test]
fn the_registry_hands_the_runtime_plain_facts_asked_of_the_kinds() {
    let text = r#"Pipeline(name: "t", steps: 3, out_dir: "o",
        envs: { "train": (env: FrozenLake(), groups: 1), "val": (env: FrozenLake(), groups: 1) },
        nodes: {
            "rollout": Rollout(envs: "train", temperature: 0.7, guide: Actions),
            "adv": StarPO(),
            "actor": ActorStep(),
            "update": ModelUpdate(),
            "eval": Eval(envs: "val", max_new_tokens: 9),
        },
        edges: [("rollout", "adv"), ("adv", "actor"), ("actor", "update")])"#;
    let pipeline = load(text).pipeline;
    let plan = run_plan(&pipeline);
    assert_eq!(
        plan.wiring.published_by_update.iter().collect::<Vec<_>>(),
        ["policy"]
    );
    assert_eq!(plan.wiring.trained.iter().collect::<Vec<_>>(), ["policy"]);
    let rollout = plan
        .wiring
        .rollout_for("policy")
        .expect("the rollout's policy");
    assert_eq!(
        (rollout.envs.as_slice(), rollout.guide),
        (
            &["train".to_string()][..],
            crate::play_settings::Guide::Actions
        )
    );
    assert_eq!(plan.wiring.sampling_temperature("policy"), 0.7);
    assert_eq!(
        plan.wiring.sampling_temperature("reference"),
        0.7,
        "scores the rollout's samples"
    );
    assert_eq!(training_nodes(&pipeline), ["actor"]);
    let evals: Vec<_> = pipeline
        .nodes
        .iter()
        .filter_map(|(_, n)| n.evaluates())
        .collect();
    assert_eq!((evals.len(), evals[0].max_new_tokens), (1, 9));
}

#[test]
fn starpo_on_step_wise_samples_is_refused_at_validation() {
    let text = r#"Pipeline(name: "t", steps: 3, out_dir: "o",
        models: { "policy": (arch: Tiny()) },
        envs: { "train": (env: FrozenLake(), groups: 1, group_size: 2) },
        nodes: {
            "rollout": Rollout(envs: "train", samples: Step(history: 2)),
            "adv": StarPO(),
            "actor": ActorStep(old_logprob: Behaviour),
        },
        edges: [("rollout", "adv"), ("adv", "actor")])"#;
    let v = validate(&load(text));
    assert!(v.graph.is_none());
    let messages: Vec<&str> = v.diagnostics.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "node `adv` (StarPO): StarPO needs trajectory-wise samples, but the rollout gives \
          step-wise ones; set the rollout's `samples: Trajectory` (or use GiGPO)"
        ]
    );
}

#[test]
fn every_registry_name_is_the_name_its_kind_gives_itself() {
    let names = Node::own_names();
    assert_eq!(names.len(), Node::KINDS.len());
    for (ron, own) in names {
        assert_eq!(
            ron, own,
            "the registry line `{ron}` names a kind that calls itself `{own}`"
        );
    }
}

#[test]
fn dynamic_sampling_is_range_checked_and_refused_with_asynchronous_or_partial_rollouts() {
    let err = |t: &str| node(t).check().unwrap_err();
    assert!(node("Rollout(envs: \"t\", dynamic_sampling: ())")
        .check()
        .is_ok());
    assert_eq!(
        err("Rollout(envs: \"t\", dynamic_sampling: (extra_rounds: 0))"),
        "`dynamic_sampling.extra_rounds` must be in 1..=1024, got 0"
    );
    let e = err("Rollout(envs: \"t\", staleness: 1, dynamic_sampling: ())");
    assert!(e.contains("cannot be combined with `staleness` > 0"), "{e}");
    let e = err("Rollout(envs: \"t\", partial: (extra_groups: 1), dynamic_sampling: ())");
    assert!(e.contains("cannot be combined with `partial`"), "{e}");
}
