use roll_flow_engine::batch::column::*;
use roll_flow_engine::{Column, Need};

use super::*;
use crate::algo::gigpo::STEP_HINT;
use crate::nodes::{STEP_COLUMNS, TRAJECTORY_COLUMNS};

use roll_flow_engine::spec::ron_options;

fn parse(text: &str) -> AdvantageSpec {
    ron_options()
        .from_str(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
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

fn unmet(spec: &AdvantageSpec, given: &[Column]) -> Vec<Need> {
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
    for (text, name) in texts.iter().zip(AdvantageSpec::NAMES) {
        assert_eq!(parse(text).kind(), name);
    }
    let kl = parse("Gae(kl_penalty: (coef: 0.05, target: 0.1), shaping: (whiten: true))");
    let AdvantageSpec::Gae(g) = kl else { panic!() };
    assert_eq!(g.kl_penalty.unwrap().target, Some(0.1));
}

#[test]
fn unknown_fields_are_refused() {
    let err = ron_options()
        .from_str::<AdvantageSpec>("GiGPO(step_gama: 0.9)")
        .unwrap_err();
    assert!(err.to_string().contains("step_gama"), "{err}");
}

#[test]
fn gigpo_refuses_trajectory_samples_at_validation() {
    let spec = parse("GiGPO()");
    let missing = unmet(&spec, &trajectory_columns());
    let names: Vec<&str> = missing.iter().map(|n| n.column.name()).collect();
    assert_eq!(names, ["step_index", "state_hash"]);
    assert!(missing.iter().all(|n| n.hint.as_deref() == Some(STEP_HINT)));
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
        let spec = parse(text);
        let err = spec.validate().unwrap_err().to_string();
        assert!(err.starts_with(message), "{text}: {err}");
        let mut batch = crate::algo::test_batches::with_masks(&[&[1]]);
        let err = spec
            .apply(&mut batch, &mut Default::default())
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(message), "{text}: {err}");
    }
    for name in AdvantageSpec::NAMES {
        assert!(
            parse(&format!("{name}()")).validate().is_ok(),
            "{name} defaults"
        );
    }
}
