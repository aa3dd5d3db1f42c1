use burn::backend::{Autodiff, Flex};

use super::*;
use crate::policy_loss::PolicyLoss;
use crate::ppo_loss::{PolicyInputs, PpoClip};
use crate::test_batches::gradient;
use crate::AlgoStats;

type AD = Autodiff<Flex>;

/// Two samples, (prompt, 3 response tokens) and (2 response tokens); π_old = 0 (log) and
/// the sampler's log-probs chosen so that ρ = [–, 2.5, 1, 0.4 | 1.5, 1.25].
const OFFSETS: [usize; 3] = [0, 4, 6];
const MASK: [bool; 6] = [false, true, true, true, true, true];
const RHO: [f64; 6] = [1.0, 2.5, 1.0, 0.4, 1.5, 1.25];

fn layout() -> PackedLayout<AD> {
    PackedLayout::new(&OFFSETS, &MASK, None, &Default::default())
}

fn behaviour(l: &PackedLayout<AD>) -> Tensor<AD, 1> {
    // log ρ = old − behave with old = 0 → behave = −ln ρ; the prompt token's is arbitrary.
    let mut b: Vec<f32> = RHO.iter().map(|r| -(r.ln()) as f32).collect();
    b[0] = -7.0;
    l.constant(b)
}

fn weights(c: &MismatchCorrection) -> (Vec<f64>, AlgoStats) {
    let l = layout();
    let w = c.weights(l.constant(vec![0.0; 6]), behaviour(&l), &l);
    let v = w.weight.into_data().to_vec::<f32>().unwrap();
    (v.iter().map(|&x| x as f64).collect(), w.stats.resolve())
}

fn assert_weights(got: &[f64], want: &[f64]) {
    // The prompt token's weight is never used (the loss masks it); compare the rest.
    for t in 1..6 {
        assert!(
            (got[t] - want[t]).abs() < 1e-6,
            "got {got:?}, want {want:?}"
        );
    }
}

#[test]
fn tis_caps_each_tokens_ratio_by_hand() {
    let c = MismatchCorrection {
        tis: Some(2.0),
        ..Default::default()
    };
    let (w, stats) = weights(&c);
    assert_weights(&w, &[1.0, 2.0, 1.0, 0.4, 1.5, 1.25]);
    assert!((stats["mismatch/ratio_mean"] - (2.5 + 1.0 + 0.4 + 1.5 + 1.25) / 5.0).abs() < 1e-6);
    assert!((stats["mismatch/weight_mean"] - (2.0 + 1.0 + 0.4 + 1.5 + 1.25) / 5.0).abs() < 1e-6);
    assert!((stats["mismatch/capped_frac"] - 0.2).abs() < 1e-6);
    assert_eq!(stats["mismatch/masked_frac"], 0.0);
}

#[test]
fn icepop_masks_tokens_outside_the_two_sided_range() {
    // Token mask [0.5, 2] (the defaults): ρ = 2.5 and 0.4 drop out.
    let c: MismatchCorrection = roll_flow_engine::spec::ron_options()
        .from_str("(mask: Token())")
        .unwrap();
    assert_eq!(
        c.mask,
        MismatchMask::Token {
            low: 0.5,
            high: 2.0
        }
    );
    let (w, stats) = weights(&c);
    assert_weights(&w, &[1.0, 0.0, 1.0, 0.0, 1.0, 1.0]);
    assert!((stats["mismatch/masked_frac"] - 0.4).abs() < 1e-6);
    // With TIS at 1.4 as well: the kept tokens' weights are capped, the masked stay 0.
    let both = MismatchCorrection {
        tis: Some(1.4),
        ..c
    };
    let (w, stats) = weights(&both);
    assert_weights(&w, &[1.0, 0.0, 1.0, 0.0, 1.4, 1.25]);
    assert!((stats["mismatch/capped_frac"] - 0.4).abs() < 1e-6);
}

#[test]
fn sequence_mask_drops_whole_samples_by_their_geometric_mean() {
    // Sample 0: exp(mean(ln 2.5, 0, ln 0.4)) = exp(0) = 1; sample 1: sqrt(1.5·1.25) ≈
    // 1.3693. With [0.9, 1.2] sample 1 drops out whole; with the default [0.999, 1.001]
    // too, and sample 0 stays.
    let c = MismatchCorrection {
        mask: MismatchMask::Sequence {
            low: 0.9,
            high: 1.2,
        },
        ..Default::default()
    };
    let (w, stats) = weights(&c);
    assert_weights(&w, &[1.0, 1.0, 1.0, 1.0, 0.0, 0.0]);
    assert!((stats["mismatch/masked_frac"] - 0.4).abs() < 1e-6);
    let geo: MismatchCorrection = roll_flow_engine::spec::ron_options()
        .from_str("(mask: Sequence())")
        .unwrap();
    assert_weights(&weights(&geo).0, &[1.0, 1.0, 1.0, 1.0, 0.0, 0.0]);
    let tight = MismatchCorrection {
        mask: MismatchMask::Sequence {
            low: 1.3,
            high: 1.4,
        },
        ..Default::default()
    };
    assert_weights(&weights(&tight).0, &[1.0, 0.0, 0.0, 0.0, 1.0, 1.0]);
}

#[test]
fn the_policy_loss_weights_each_tokens_term_and_gradient() {
    // PpoClip with r = 1 (logp = old = 0), TokenMean, A = 1 on every token, TIS at 2:
    // L = −Σ w_t / 5 and ∂L/∂logp_t = −w_t·A_t/5 (r = 1 is inside the clip range).
    let l = layout();
    let logp = l.constant(vec![0.0; 6]).require_grad();
    let inputs = PolicyInputs {
        logprob: logp.clone(),
        old_logprob: l.constant(vec![0.0; 6]),
        advantages: l.constant(vec![1.0; 6]),
        layout: &l,
    };
    let loss = PolicyLoss::PpoClip(PpoClip {
        agg: crate::LossAgg::TokenMean,
        correction: Some(MismatchCorrection {
            tis: Some(2.0),
            ..Default::default()
        }),
        ..Default::default()
    });
    assert!(loss.reads_behaviour());
    let out = loss.loss(&inputs, Some(behaviour(&l))).unwrap();
    let w = [0.0, 2.0, 1.0, 0.4, 1.5, 1.25];
    let value: f32 = out.loss.clone().into_scalar();
    assert!(
        (value as f64 + w.iter().sum::<f64>() / 5.0).abs() < 1e-6,
        "{value}"
    );
    let g = gradient(&logp, &out.loss);
    for t in 0..6 {
        assert!((g[t] as f64 + w[t] / 5.0).abs() < 1e-6, "{g:?}");
    }
    assert!((out.stats.clone().resolve()["mismatch/capped_frac"] - 0.2).abs() < 1e-6);
    // Without the behaviour log-probs the loss says what it needs.
    let err = loss.loss(&inputs, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "PpoClip: `correction` needs the rollout's behaviour_logprob, which was not provided"
    );
}

#[test]
fn bounds_are_checked() {
    let bad = |c: MismatchCorrection| c.validate("PpoClip").unwrap_err().to_string();
    assert_eq!(
        bad(MismatchCorrection {
            tis: Some(0.0),
            ..Default::default()
        }),
        "PpoClip: `correction.tis` must be > 0, got 0"
    );
    assert!(bad(MismatchCorrection {
        mask: MismatchMask::Token {
            low: 2.0,
            high: 0.5
        },
        ..Default::default()
    })
    .contains("needs 0 ≤ low < high"));
    assert!(roll_flow_engine::spec::ron_options()
        .from_str::<MismatchCorrection>("(tis: 2.0, cap: 3.0)")
        .is_err());
}
