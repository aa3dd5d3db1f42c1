//! The registry's contracts: the columns each node kind reads and gives, as graph
//! validation checks them, and the advice it gives for a column nothing upstream gives.

use roll_flow_engine::batch::column::*;
use roll_flow_engine::{Column, Need, NodeSpec, Role};

use super::node;
use crate::nodes::rollout::{STEP_COLUMNS, TRAJECTORY_COLUMNS};
use crate::registry::Node;

/// The names of the columns the node `text` reads, in its contract's order.
fn needs(text: &str) -> Vec<String> {
    node(text)
        .contract()
        .needs
        .into_iter()
        .map(|n| n.column.name().to_string())
        .collect()
}

/// The names of the columns the node `text` gives.
fn gives(text: &str) -> Vec<String> {
    node(text)
        .contract()
        .gives
        .into_iter()
        .map(|c| c.name().to_string())
        .collect()
}

#[test]
fn roles_and_contracts_follow_the_config() {
    let rollout = node("Rollout(envs: \"train\")");
    assert_eq!((rollout.kind(), rollout.role()), ("Rollout", Role::Source));
    assert!(!gives("Rollout(envs: \"train\")").contains(&"state_hash".to_string()));
    let stepwise = "Rollout(envs: [\"a\", \"b\"], samples: Step(history: 2))";
    assert!(gives(stepwise).contains(&"state_hash".to_string()));
    assert_eq!(
        node(stepwise).references().len(),
        3,
        "two env sets and the policy"
    );
    assert_eq!(node("ActorStep()").role(), Role::PolicyUpdate);
    assert!(needs("ActorStep(kl: (coef: 0.1))").contains(&"ref_logprob".to_string()));
    assert!(needs("ActorStep()").contains(&"old_logprob".to_string()));
    assert_eq!(
        needs("ActorStep(old_logprob: ThisStep)"),
        ["response_mask", "advantages"]
    );
    assert_eq!(
        needs("ActorStep(old_logprob: Behaviour, loss: DecoupledPpo())"),
        ["response_mask", "advantages", "behaviour_logprob"]
    );
    assert_eq!(node("StarPO(keep_top_std: 0.5)").kind(), "StarPO");
    assert!(node("Grpo()").contract().group_normalised);
}

/// The contracts graph validation checks the step nodes against: exactly the columns each
/// update reads (the losses read nothing else; `algo::actor_loss` and `algo::value_loss`
/// keep no list of their own).
#[test]
fn step_contracts_name_every_column_they_read() {
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
        assert!(gives(text).is_empty(), "{text} gives nothing");
    }
    for (text, column) in [
        ("LogProb()", "old_logprob"),
        ("RefLogProb(model: \"r\")", "ref_logprob"),
        ("Values(model: \"c\")", "values"),
    ] {
        assert_eq!(needs(text), ["response_mask"], "{text}");
        assert_eq!(gives(text), [column], "{text}");
    }
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
fn gigpo_refuses_trajectory_samples_at_validation() {
    let spec = node("GiGPO()");
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
    assert!(unmet(&node("StarPO()"), &trajectory_columns()).is_empty());
    assert!(unmet(&node("Grpo()"), &trajectory_columns()).is_empty());
    assert!(unmet(&node("AgenticReinforce()"), &trajectory_columns()).is_empty());
    assert_eq!(unmet(&node("BiLevelGae()"), &trajectory_columns()).len(), 1);
    assert!(unmet(&node("StepReinforce()"), &step_columns()).is_empty());
    let gae = unmet(&node("Gae()"), &trajectory_columns());
    assert_eq!(
        gae,
        vec![Need::with_hint(VALUES, "add a Values node upstream")]
    );
    let kl = unmet(&node("Grpo(kl_penalty: ())"), &trajectory_columns());
    assert_eq!(
        kl.iter().map(|n| n.column.name()).collect::<Vec<_>>(),
        ["ref_logprob"]
    );
    assert_eq!(node("Gae()").contract().gives, vec![ADVANTAGES, RETURNS]);
    assert_eq!(node("GiGPO()").contract().gives, vec![ADVANTAGES]);
}

#[test]
fn group_normalised_flags_the_group_of_one_pitfall() {
    assert!(node("Grpo(norm: Mean)").contract().group_normalised);
    assert!(node("StarPO()").contract().group_normalised);
    assert!(node("GiGPO()").contract().group_normalised);
    assert!(!node("Grpo(norm: Identity)").contract().group_normalised);
    assert!(!node("Gae()").contract().group_normalised);
    assert!(!node("AgenticReinforce()").contract().group_normalised);
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
fn the_new_losses_read_what_they_need_and_refuse_what_cannot_work() {
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

/// `shaping.repeat_penalty` adds the columns it reads to any estimator's needs, once each,
/// and every rollout gives them.
#[test]
fn the_repeat_penalty_reads_outcome_and_group() {
    assert_eq!(needs("Grpo()"), ["response_mask", "score", "group_id"]);
    assert_eq!(
        needs("Grpo(shaping: (repeat_penalty: 0.3))"),
        ["response_mask", "score", "group_id", "outcome"]
    );
    assert_eq!(
        needs("Gae(shaping: (repeat_penalty: 0.3))"),
        [
            "response_mask",
            "token_reward",
            "values",
            "outcome",
            "group_id"
        ]
    );
    for text in [
        "Grpo(shaping: (repeat_penalty: 0.3))",
        "GiGPO(shaping: (repeat_penalty: 0.3))",
    ] {
        assert!(unmet(&node(text), &step_columns()).is_empty(), "{text}");
    }
}
