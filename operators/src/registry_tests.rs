use std::path::Path;

use roll_flow_engine::spec::{ron_options, Loaded, Source};
use roll_flow_engine::{validate, NodeSpec, Role};

use roll_flow_engine::batch::column::*;
use roll_flow_engine::{Column, Need};

use super::*;
use crate::catalog::RollFlow;
use crate::nodes::rollout::{STEP_COLUMNS, TRAJECTORY_COLUMNS};

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
fn roles_and_contracts_follow_the_config() {
    let rollout = node("Rollout(envs: \"train\")");
    assert_eq!((rollout.kind(), rollout.role()), ("Rollout", Role::Source));
    let gives = |n: &Node| {
        n.contract()
            .gives
            .iter()
            .map(|c| c.name().to_string())
            .collect::<Vec<_>>()
    };
    assert!(!gives(&rollout).contains(&"state_hash".to_string()));
    let stepwise = node("Rollout(envs: [\"a\", \"b\"], samples: Step(history: 2))");
    assert!(gives(&stepwise).contains(&"state_hash".to_string()));
    assert_eq!(
        stepwise.references().len(),
        3,
        "two env sets and the policy"
    );
    assert_eq!(node("ActorStep()").role(), Role::PolicyUpdate);
    let with_kl = node("ActorStep(kl: (coef: 0.1))");
    assert!(with_kl
        .contract()
        .needs
        .iter()
        .any(|n| n.column.name() == "ref_logprob"));
    let needs = |n: &Node| {
        n.contract()
            .needs
            .iter()
            .map(|c| c.column.name().to_string())
            .collect::<Vec<_>>()
    };
    assert!(needs(&node("ActorStep()")).contains(&"old_logprob".to_string()));
    let this_step = node("ActorStep(old_logprob: ThisStep)");
    assert_eq!(needs(&this_step), vec!["response_mask", "advantages"]);
    let behaviour = node("ActorStep(old_logprob: Behaviour, loss: DecoupledPpo())");
    assert_eq!(
        needs(&behaviour),
        vec!["response_mask", "advantages", "behaviour_logprob"]
    );
    assert_eq!(node("StarPO(keep_top_std: 0.5)").kind(), "StarPO");
    assert!(node("Grpo()").contract().group_normalised);
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

/// The contracts graph validation checks the step nodes against: exactly the columns each
/// update reads (the losses read nothing else; `algo::actor_loss` and `algo::value_loss`
/// keep no list of their own).
#[test]
fn step_contracts_name_every_column_they_read() {
    let needs = |text: &str| {
        node(text)
            .contract()
            .needs
            .iter()
            .map(|c| c.column.name().to_string())
            .collect::<Vec<_>>()
    };
    let gives = |text: &str| node(text).contract().gives.len();
    let cases: [(&str, &[&str]); 8] = [
        (
            "ActorStep()",
            &["response_mask", "advantages", "old_logprob"],
        ),
        (
            "ActorStep(old_logprob: ThisStep)",
            &["response_mask", "advantages"],
        ),
        (
            "ActorStep(old_logprob: Behaviour)",
            &["response_mask", "advantages", "behaviour_logprob"],
        ),
        (
            "ActorStep(loss: DecoupledPpo())",
            &[
                "response_mask",
                "advantages",
                "old_logprob",
                "behaviour_logprob",
            ],
        ),
        (
            "ActorStep(old_logprob: ThisStep, loss: DecoupledPpo())",
            &["response_mask", "advantages", "behaviour_logprob"],
        ),
        (
            "ActorStep(loss: PpoClip(ratio: Segment), kl: (coef: 0.1))",
            &[
                "response_mask",
                "advantages",
                "old_logprob",
                "ref_logprob",
                "token_turn",
            ],
        ),
        (
            "ActorStep(old_logprob: Behaviour, loss: DecoupledPpo(ratio: Segment))",
            &[
                "response_mask",
                "advantages",
                "behaviour_logprob",
                "token_turn",
            ],
        ),
        (
            "CriticStep(model: \"c\")",
            &["response_mask", "returns", "values"],
        ),
    ];
    for (text, want) in cases {
        assert_eq!(needs(text), want, "{text}");
        assert_eq!(gives(text), 0, "{text} gives nothing");
    }
    for (text, column) in [
        ("LogProb()", "old_logprob"),
        ("RefLogProb(model: \"r\")", "ref_logprob"),
        ("Values(model: \"c\")", "values"),
    ] {
        let contract = node(text).contract();
        assert_eq!(needs(text), ["response_mask"], "{text}");
        let gives: Vec<&str> = contract.gives.iter().map(|c| c.name()).collect();
        assert_eq!(gives, [column], "{text}");
    }
}

fn parse(text: &str) -> Node {
    node(text)
}

/// Columns a trajectory-wise rollout plus an old-logprob node give.
fn trajectory_columns() -> Vec<Column> {
    let mut c = TRAJECTORY_COLUMNS.to_vec();
    c.push(OLD_LOGPROB);
    c
}

/// Columns a step-wise rollout plus an old-logprob node give.
fn step_columns() -> Vec<Column> {
    let mut c = trajectory_columns();
    c.extend(STEP_COLUMNS.iter().cloned());
    c
}

fn unmet(spec: &Node, given: &[Column]) -> Vec<Need> {
    spec.contract()
        .needs
        .into_iter()
        .filter(|n| !given.contains(&n.column))
        .collect()
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
        assert_eq!(parse(text).kind(), text.split('(').next().unwrap());
    }
    let kl = parse("Gae(kl_penalty: (coef: 0.05, target: 0.1), shaping: (whiten: true))");
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
fn gigpo_refuses_trajectory_samples_at_validation() {
    let spec = parse("GiGPO()");
    let missing = unmet(&spec, &trajectory_columns());
    let names: Vec<&str> = missing.iter().map(|n| n.column.name()).collect();
    assert_eq!(names, ["step_index", "state_hash"]);
    assert!(missing
        .iter()
        .all(|n| n.hint.as_deref() == Some(roll_flow_algo::gigpo::STEP_HINT)));
    assert!(unmet(&spec, &step_columns()).is_empty());
}

#[test]
fn needs_and_gives_per_variant() {
    assert!(unmet(&parse("StarPO()"), &trajectory_columns()).is_empty());
    assert!(unmet(&parse("Grpo()"), &trajectory_columns()).is_empty());
    assert!(unmet(&parse("AgenticReinforce()"), &trajectory_columns()).is_empty());
    assert_eq!(
        unmet(&parse("BiLevelGae()"), &trajectory_columns()).len(),
        1
    );
    assert!(unmet(&parse("StepReinforce()"), &step_columns()).is_empty());
    let gae = unmet(&parse("Gae()"), &trajectory_columns());
    assert_eq!(
        gae,
        vec![Need::with_hint(VALUES, "add a Values node upstream")]
    );
    let kl = unmet(&parse("Grpo(kl_penalty: ())"), &trajectory_columns());
    assert_eq!(
        kl.iter().map(|n| n.column.name()).collect::<Vec<_>>(),
        ["ref_logprob"]
    );
    assert_eq!(parse("Gae()").contract().gives, vec![ADVANTAGES, RETURNS]);
    assert_eq!(parse("GiGPO()").contract().gives, vec![ADVANTAGES]);
}

#[test]
fn group_normalised_flags_the_group_of_one_pitfall() {
    assert!(parse("Grpo(norm: Mean)").contract().group_normalised);
    assert!(parse("StarPO()").contract().group_normalised);
    assert!(parse("GiGPO()").contract().group_normalised);
    assert!(!parse("Grpo(norm: Identity)").contract().group_normalised);
    assert!(!parse("Gae()").contract().group_normalised);
    assert!(!parse("AgenticReinforce()").contract().group_normalised);
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
            "Gae(kl_penalty: (estimator: Full))",
            "Gae: kl_penalty cannot use `Full`",
        ),
    ];
    for (text, message) in cases {
        let err = parse(text).check().unwrap_err();
        assert!(err.starts_with(message), "{text}: {err}");
    }
}

#[test]
fn the_advice_for_a_missing_column_names_the_kinds_that_give_it() {
    assert_eq!(
        Node::giver_of(&OLD_LOGPROB).as_deref(),
        Some("a `LogProb` node")
    );
    assert_eq!(
        Node::giver_of(&REF_LOGPROB).as_deref(),
        Some("a `RefLogProb` node")
    );
    assert_eq!(Node::giver_of(&VALUES).as_deref(), Some("a `Values` node"));
    assert_eq!(
        Node::giver_of(&STATE_HASH).as_deref(),
        Some("a `Rollout` node")
    );
    let advantages = Node::giver_of(&ADVANTAGES).unwrap();
    assert_eq!(
        advantages,
        "one of the nodes `Gae`, `BiLevelGae`, `Grpo`, `Reinforce`, `Rloo`, `DrGrpo`, \
         `ReinforcePlusPlus`, `StarPO`, `GiGPO`, `StepReinforce`, `AgenticReinforce`"
    );
    let returns = Node::kinds_giving(&RETURNS);
    assert!(
        returns.contains(&"Gae") && !returns.contains(&"StarPO"),
        "{returns:?}"
    );
    assert_eq!(Node::giver_of(&Column::token("made_up")), None);
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
fn the_new_losses_read_what_they_need_and_refuse_what_cannot_work() {
    let needs = |text: &str| {
        node(text)
            .contract()
            .needs
            .iter()
            .map(|c| c.column.name().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        needs("ActorStep(loss: Gspo())"),
        ["response_mask", "advantages", "old_logprob"],
        "sequence ratios need no turn ids"
    );
    assert_eq!(
        needs("ActorStep(loss: Cispo(correction: (tis: 2.0)))"),
        [
            "response_mask",
            "advantages",
            "old_logprob",
            "behaviour_logprob"
        ]
    );
    assert_eq!(
        needs("ActorStep(old_logprob: ThisStep, loss: PpoClip(correction: (mask: Token())))"),
        ["response_mask", "advantages", "behaviour_logprob"]
    );
    let err = node("ActorStep(old_logprob: Behaviour, loss: Gspo(correction: (tis: 2.0)))")
        .check()
        .unwrap_err();
    assert!(
        err.starts_with("`correction` weighs each token by π_old/π_behave"),
        "{err}"
    );
    let err = node("ActorStep(loss: Gspo(low: 2.0))").check().unwrap_err();
    assert!(err.starts_with("Gspo: clip needs"), "{err}");
    let err = node("ActorStep(loss: PpoClip(correction: (tis: -1.0)))")
        .check()
        .unwrap_err();
    assert_eq!(err, "PpoClip: `correction.tis` must be > 0, got -1");
    // Only the decoupled loss takes the older samples of an asynchronous rollout.
    let refuses = |text: &str| {
        node(text)
            .contract()
            .refuses
            .into_iter()
            .map(|r| r.reason)
            .collect::<Vec<_>>()
    };
    let gspo = refuses("ActorStep(loss: Gspo())");
    assert!(
        gspo[0].contains("and `Gspo` does not correct for that"),
        "{gspo:?}"
    );
    assert!(refuses("ActorStep(loss: DecoupledPpo())").is_empty());
    for estimator in ["K2", "LowVarKl"] {
        let text = format!("ActorStep(kl: (estimator: {estimator}))");
        assert!(node(&text).check().is_ok(), "{estimator}");
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
