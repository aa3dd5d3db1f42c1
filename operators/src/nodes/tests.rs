use std::path::Path;

use roll_flow_engine::spec::{parse, Loaded, Source};
use roll_flow_engine::{validate, NodeSpec, Role};

use super::Node;
use crate::RollFlow;

fn pipeline_files() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pipelines");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "ron"));
    files.sort();
    files
}

fn load(text: &str) -> Loaded<RollFlow> {
    let path = Path::new("t.ron");
    let pipeline = parse::<RollFlow>(path, text).unwrap_or_else(|d| panic!("{d}"));
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
