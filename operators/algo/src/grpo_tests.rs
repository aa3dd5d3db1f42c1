use proptest::prelude::*;
use roll_flow_engine::batch::column::{ADVANTAGES, ENV_TAG, GROUP_ID, SCORE};

use super::*;
use crate::test_batches::{assert_close, f32s, get, u64s, with_masks};

fn grpo_batch() -> Batch {
    let mut b = with_masks(&[&[0, 1, 1], &[0, 1], &[1], &[0, 0]]);
    f32s(&mut b, &SCORE, &[1.0, 0.0, 0.5, 0.0]);
    u64s(&mut b, &GROUP_ID, &[4, 4, 9, 4]);
    b
}

#[test]
fn grpo_mean_std_by_hand() {
    // group 4 = [1, 0, 0]: mean 1/3, unbiased std sqrt(1/3); group 9 is a group of one → 0.
    // Sample 3 has an empty response mask: it counts in its group but gets no tokens.
    let mut b = grpo_batch();
    Grpo::default()
        .apply(&mut b, &mut AdvantageState::default())
        .unwrap();
    let s = (1.0f64 / 3.0).sqrt() + 1e-6;
    let hi = (2.0 / 3.0) / s;
    let lo = (-1.0 / 3.0) / s;
    assert_close(
        &get(&b, &ADVANTAGES),
        &[0.0, hi, hi, 0.0, lo, 0.0, 0.0, 0.0],
        1e-5,
    );
}

#[test]
fn grpo_discount_places_score_on_last_token() {
    let mut b = grpo_batch();
    let cfg = Grpo {
        gamma: 0.5,
        norm: Norm::Mean,
        ..Default::default()
    };
    cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
    let hi = 2.0 / 3.0;
    assert_close(
        &get(&b, &ADVANTAGES),
        &[0.0, 0.5 * hi, hi, 0.0, -1.0 / 3.0, 0.0, 0.0, 0.0],
        1e-6,
    );
}

#[test]
fn all_actions_invalid_gives_zero_advantage() {
    // Every trajectory only produced invalid actions: same format penalty, zero std.
    let mut b = with_masks(&[&[1, 1], &[1], &[1, 0, 1]]);
    f32s(&mut b, &SCORE, &[-0.03, -0.03, -0.03]);
    u64s(&mut b, &GROUP_ID, &[0, 0, 0]);
    Grpo::default()
        .apply(&mut b, &mut AdvantageState::default())
        .unwrap();
    assert_close(&get(&b, &ADVANTAGES), &[0.0; 6], 0.0);
    let cfg = Grpo {
        norm: Norm::Identity,
        ..Default::default()
    };
    cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
    assert_close(
        &get(&b, &ADVANTAGES),
        &[-0.03, -0.03, -0.03, -0.03, 0.0, -0.03],
        1e-7,
    );
}

#[test]
fn env_tag_grouping() {
    let mut b = with_masks(&[&[1], &[1], &[1]]);
    f32s(&mut b, &SCORE, &[1.0, 3.0, 7.0]);
    b.set(&ENV_TAG, vec!["a".to_string(), "a".into(), "b".into()])
        .unwrap();
    let cfg = Grpo {
        group_by: Grouping::EnvTag,
        norm: Norm::Mean,
        ..Default::default()
    };
    cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
    assert_close(&get(&b, &ADVANTAGES), &[-1.0, 1.0, 0.0], 1e-6);
}

#[test]
fn state_grouping_on_trajectory_samples_is_refused_clearly() {
    let mut b = grpo_batch();
    let cfg = Grpo {
        group_by: Grouping::State,
        ..Default::default()
    };
    let err = cfg
        .estimate(&mut b, &mut AdvantageState::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("needs column `state_hash`") && err.contains("samples: Step(history: 2)"),
        "{err}"
    );
}

#[test]
fn parses_from_ron_with_defaults() {
    let cfg: Grpo = ron::from_str("(norm: Mean, shaping: (whiten: true))").unwrap();
    assert_eq!(cfg.norm, Norm::Mean);
    assert_eq!(cfg.group_by, Grouping::Group);
    assert!(cfg.shaping.whiten);
    assert!(ron::from_str::<Grpo>("(nrom: Mean)").is_err());
}

proptest! {
    /// Under Mean and MeanStd, the advantages of a group sum to zero.
    #[test]
    fn group_advantages_sum_to_zero(
        samples in prop::collection::vec((0u64..4, -5.0f32..5.0), 1..30),
        mean_std in any::<bool>(),
    ) {
        let masks: Vec<&[u8]> = samples.iter().map(|_| &[1u8][..]).collect();
        let mut b = with_masks(&masks);
        f32s(&mut b, &SCORE, &samples.iter().map(|s| s.1).collect::<Vec<_>>());
        u64s(&mut b, &GROUP_ID, &samples.iter().map(|s| s.0).collect::<Vec<_>>());
        let norm = if mean_std { Norm::MeanStd } else { Norm::Mean };
        Grpo { norm, ..Default::default() }.apply(&mut b, &mut AdvantageState::default()).unwrap();
        let adv = get(&b, &ADVANTAGES);
        for g in 0..4 {
            let sum: f64 = samples.iter().zip(&adv).filter(|(s, _)| s.0 == g).map(|(_, &a)| a as f64).sum();
            prop_assert!(sum.abs() < 1e-3, "group {} sums to {}", g, sum);
        }
    }
}
