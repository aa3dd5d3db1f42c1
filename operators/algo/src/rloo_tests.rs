use roll_flow_engine::batch::column::{ADVANTAGES, GROUP_ID, OLD_LOGPROB, REF_LOGPROB, SCORE};

use super::*;
use crate::test_batches::{assert_close, f32s, get, u64s, with_masks};

/// RLOO's advantage of every sample, in float64, straight from the definition:
/// s_i − mean of the other scores of its group (0 for a group of one).
fn reference(scores: &[f64], groups: &[u64]) -> Vec<f64> {
    (0..scores.len())
        .map(|i| {
            let others: Vec<f64> = (0..scores.len())
                .filter(|&j| j != i && groups[j] == groups[i])
                .map(|j| scores[j])
                .collect();
            if others.is_empty() {
                0.0
            } else {
                scores[i] - others.iter().sum::<f64>() / others.len() as f64
            }
        })
        .collect()
}

#[test]
fn leave_one_out_baseline_by_hand() {
    // Group 4 = samples 0, 1, 3 with scores [1, 0, 0] (sample 3 has no response token but
    // counts in its group): A = [1 − 0, 0 − ½, 0 − ½]; group 9 is a group of one → 0.
    let mut b = with_masks(&[&[0, 1, 1], &[0, 1], &[1], &[0, 0]]);
    f32s(&mut b, &SCORE, &[1.0, 0.0, 0.5, 0.0]);
    u64s(&mut b, &GROUP_ID, &[4, 4, 9, 4]);
    let stats = Rloo::default()
        .apply(&mut b, &mut AdvantageState::default())
        .unwrap();
    assert_close(
        &get(&b, &ADVANTAGES),
        &[0.0, 1.0, 1.0, 0.0, -0.5, 0.0, 0.0, 0.0],
        1e-7,
    );
    assert_eq!(
        reference(&[1.0, 0.0, 0.5, 0.0], &[4, 4, 9, 4]),
        [1.0, -0.5, 0.0, -0.5]
    );
    assert_eq!(stats["adv/response_tokens"], 4.0);
    assert!(Rloo::default().contract().group_normalised);
}

#[test]
fn four_samples_match_the_float64_reference_and_g_over_g_minus_one() {
    // Scores [3, 1, 0, 2], one group: A = s − (6 − s)/3 = [2, −2/3, −2, 2/3], which is
    // 4/3·(s − 1.5).
    let scores = [3.0, 1.0, 0.0, 2.0];
    let mut b = with_masks(&[&[1], &[1], &[1], &[1]]);
    f32s(&mut b, &SCORE, &[3.0, 1.0, 0.0, 2.0]);
    u64s(&mut b, &GROUP_ID, &[7; 4]);
    Rloo::default()
        .apply(&mut b, &mut AdvantageState::default())
        .unwrap();
    let want = reference(&scores, &[7; 4]);
    assert_close(&get(&b, &ADVANTAGES), &want, 1e-6);
    for (a, s) in want.iter().zip(scores) {
        assert!((a - 4.0 / 3.0 * (s - 1.5)).abs() < 1e-12);
    }
}

#[test]
fn discount_and_kl_penalty_by_hand() {
    // Two samples of one group, scores [1, 0] → ŝ = [1, −1]; each has two response tokens.
    // KL penalty β = 0.5 on d = old − ref = [0.2, 0.4 | 0, 0.2] (K1); γ = 0.5:
    // sample 0: r = [−0.1, 1 − 0.2] → A = [−0.1 + 0.5·0.8, 0.8] = [0.3, 0.8];
    // sample 1: r = [0, −1 − 0.1] → A = [0.5·(−1.1), −1.1] = [−0.55, −1.1].
    let mut b = with_masks(&[&[1, 1], &[1, 1]]);
    f32s(&mut b, &SCORE, &[1.0, 0.0]);
    u64s(&mut b, &GROUP_ID, &[0, 0]);
    f32s(&mut b, &OLD_LOGPROB, &[-1.0, -1.0, -2.0, -2.0]);
    f32s(&mut b, &REF_LOGPROB, &[-1.2, -1.4, -2.0, -2.2]);
    let cfg: Rloo = roll_flow_engine::spec::ron_options()
        .from_str("(gamma: 0.5, kl_penalty: (coef: 0.5))")
        .unwrap();
    cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
    assert_close(&get(&b, &ADVANTAGES), &[0.3, 0.8, -0.55, -1.1], 1e-6);
}

#[test]
fn parses_with_defaults_and_refuses_unknown_fields() {
    let opts = roll_flow_engine::spec::ron_options();
    assert_eq!(opts.from_str::<Rloo>("()").unwrap(), Rloo::default());
    assert!(opts.from_str::<Rloo>("(norm: Mean)").is_err());
    let err = Rloo {
        gamma: 2.0,
        ..Default::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(err.to_string(), "Rloo: `gamma` must be in [0, 1], got 2");
}
