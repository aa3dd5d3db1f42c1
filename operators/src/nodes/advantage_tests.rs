use std::collections::BTreeMap;

use roll_flow_algo::grpo::Grpo;
use roll_flow_algo::test_batches::{f32s, u64s, with_masks};
use roll_flow_algo::KlPenalty;
use roll_flow_engine::batch::column::{ADVANTAGES, GROUP_ID, OLD_LOGPROB, REF_LOGPROB, SCORE};

use super::*;

fn ctx() -> StepContext {
    StepContext {
        step: 0,
        policy_version: 0,
        seed: 1,
        worker: 0,
        workers: 1,
        metrics: BTreeMap::new(),
    }
}

#[test]
fn fills_advantages_reports_metrics_and_keeps_kl_state() {
    let estimator = Grpo {
        kl_penalty: Some(KlPenalty {
            coef: 0.1,
            target: Some(0.01),
            ..ron::from_str("()").unwrap()
        }),
        ..Default::default()
    };
    let mut node = AdvantageNode::new(estimator);
    let mut b = with_masks(&[&[1], &[1]]);
    f32s(&mut b, &SCORE, &[1.0, 0.0]);
    u64s(&mut b, &GROUP_ID, &[0, 0]);
    f32s(&mut b, &OLD_LOGPROB, &[-1.0, -1.0]);
    f32s(&mut b, &REF_LOGPROB, &[-1.5, -1.5]);
    let mut c = ctx();
    let out = node.process(&mut c, b).unwrap();
    assert!(out.has(&ADVANTAGES));
    assert_eq!(c.metrics["kl/beta"], 0.1f32 as f64);
    // KL 0.5 ≫ target 0.01: β grows by the capped 20%·n/horizon.
    let beta = node.state().kl.as_ref().unwrap().beta();
    assert!((beta - 0.1f32 as f64 * (1.0 + 0.2 * 2.0 / 10000.0)).abs() < 1e-12);
    let err = node.process(&mut ctx(), with_masks(&[&[1]])).unwrap_err();
    assert!(err.0.contains("Grpo needs column `score`"), "{}", err.0);
}

#[test]
fn settings_out_of_range_are_refused_when_run_too() {
    let mut node = AdvantageNode::new(Grpo {
        gamma: -0.1,
        ..Default::default()
    });
    let err = node.process(&mut ctx(), with_masks(&[&[1]])).unwrap_err();
    assert!(
        err.0
            .starts_with("Grpo: `gamma` must be in [0, 1], got -0.1"),
        "{}",
        err.0
    );
}
