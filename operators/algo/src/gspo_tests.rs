use burn::backend::{Autodiff, Flex};

use super::*;
use crate::packed_layout::PackedLayout;
use crate::ppo_loss::PpoClip;
use crate::test_batches::{finite_difference, gradient};
use crate::AlgoStats;

type AD = Autodiff<Flex>;

/// Two samples: three response tokens, then a prompt token and two response tokens.
const OFFSETS: [usize; 3] = [0, 3, 6];
const MASK: [bool; 6] = [true, true, true, false, true, true];

fn layout() -> PackedLayout<AD> {
    PackedLayout::new(&OFFSETS, &MASK, None, &Default::default())
}

fn run(cfg: &Gspo, logp: &[f64], old: &[f64], adv: &[f64]) -> (f64, Vec<f64>, AlgoStats) {
    let l = layout();
    let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
    let logp_t = l.constant(f32s(logp)).require_grad();
    let inputs = PolicyInputs {
        logprob: logp_t.clone(),
        old_logprob: l.constant(f32s(old)),
        advantages: l.constant(f32s(adv)),
        layout: &l,
    };
    let out = cfg.loss(&inputs, None).unwrap();
    let g = gradient(&logp_t, &out.loss);
    let value: f32 = out.loss.into_scalar();
    (
        value as f64,
        g.iter().map(|&x| x as f64).collect(),
        out.stats.resolve(),
    )
}

/// GSPO in float64 from the paper's definition, `SeqMeanTokenMean`: each sample's
/// s_i = exp(mean of its response tokens' logp − old), each response token's
/// max(−A·s_i, −A·clip(s_i)), the mean over the sample's tokens, the mean over samples.
fn reference(logp: &[f64], old: &[f64], adv: &[f64], low: f64, high: f64) -> f64 {
    let mut total = 0.0;
    let mut samples = 0.0;
    for w in OFFSETS.windows(2) {
        let tokens: Vec<usize> = (w[0]..w[1]).filter(|&t| MASK[t]).collect();
        let n = tokens.len() as f64;
        let s = (tokens.iter().map(|&t| logp[t] - old[t]).sum::<f64>() / n).exp();
        let clipped = s.clamp(1.0 - low, 1.0 + high);
        let sum: f64 = tokens
            .iter()
            .map(|&t| (-adv[t] * s).max(-adv[t] * clipped))
            .sum();
        total += sum / n;
        samples += 1.0;
    }
    total / samples
}

const LOGP: [f64; 6] = [-1.0, -0.5, -2.0, -3.0, -0.2, -0.9];
const OLD: [f64; 6] = [-1.1, -0.6, -2.05, -1.0, -0.1, -0.6];
// Outcome advantages: A = 1 on sample 0, −2 on sample 1.
const ADV: [f64; 6] = [1.0, 1.0, 1.0, 0.0, -2.0, -2.0];

#[test]
fn one_clipped_ratio_per_sequence_by_hand() {
    // s_0 = exp(mean(0.1, 0.1, 0.05)) = exp(1/12) ≈ 1.0869 (inside 1 ± 0.1, A > 0);
    // s_1 = exp(mean(−0.1, −0.3)) = exp(−0.2) ≈ 0.8187 < 0.9 with A < 0: clipped, the loss
    // 2·0.9 = 1.8 and no gradient. L = (−s_0 + 1.8)/2.
    let cfg = Gspo {
        low: 0.1,
        high: 0.1,
        ..Default::default()
    };
    let (loss, g, stats) = run(&cfg, &LOGP, &OLD, &ADV);
    let s0 = (1.0f64 / 12.0).exp();
    assert!((loss - (-s0 + 1.8) / 2.0).abs() < 1e-6, "{loss}");
    assert!((loss - reference(&LOGP, &OLD, &ADV, 0.1, 0.1)).abs() < 1e-6);
    // ∂L/∂logp_u = −A·s_0/(|y_0|·samples) on sample 0's tokens; 0 on the clipped one.
    let want = [-s0 / 6.0, -s0 / 6.0, -s0 / 6.0, 0.0, 0.0, 0.0];
    for (a, b) in g.iter().zip(want) {
        assert!((a - b).abs() < 1e-6, "{g:?}");
    }
    // The two response tokens of the clipped sequence, of five.
    assert!((stats["pg_clipfrac"] - 0.4).abs() < 1e-6, "{stats:?}");
    // ppo_kl = mean over response tokens of old − logp = −(0.25 − 0.4)/5.
    assert!((stats["ppo_kl"] - 0.03).abs() < 1e-6, "{stats:?}");
}

#[test]
fn the_papers_small_clip_range_clips_both_sequences() {
    // ε = (3e-4, 4e-4): s_0 > 1.0004 with A > 0 and s_1 < 0.9997 with A < 0 are clipped:
    // L = (−1.0004 + 2·0.9997)/2, no gradient anywhere.
    let cfg = Gspo::default();
    assert_eq!((cfg.low, cfg.high), (3e-4, 4e-4));
    assert_eq!(cfg.agg, crate::LossAgg::SeqMeanTokenMean);
    let (loss, g, stats) = run(&cfg, &LOGP, &OLD, &ADV);
    assert!(
        (loss - (-1.0004 + 2.0 * 0.9997) / 2.0).abs() < 1e-6,
        "{loss}"
    );
    assert!(g.iter().all(|&x| x == 0.0), "{g:?}");
    assert!((stats["pg_clipfrac"] - 1.0).abs() < 1e-6);
}

#[test]
fn gradient_matches_float64_finite_differences_with_token_advantages() {
    // Advantages that vary within a sequence (as GAE gives), no token at a clip boundary:
    // s_0 ≈ 1.0869 and s_1 ≈ 0.8187 inside 1 ± 0.5.
    let adv = [0.5, -1.0, 2.0, 0.0, 1.5, -0.5];
    let cfg = Gspo {
        low: 0.5,
        high: 0.5,
        ..Default::default()
    };
    let (loss, g, _) = run(&cfg, &LOGP, &OLD, &adv);
    let f = |x: &[f64]| reference(x, &OLD, &adv, 0.5, 0.5);
    assert!((loss - f(&LOGP)).abs() < 1e-6);
    let want = finite_difference(f, &LOGP, 1e-6);
    for (a, b) in g.iter().zip(&want) {
        assert!(
            (a - b).abs() < 1e-5,
            "autodiff {g:?}, finite differences {want:?}"
        );
    }
    // The prompt token carries no gradient; sample 1's two tokens share one.
    assert_eq!(g[3], 0.0);
    assert!((g[4] - g[5]).abs() < 1e-7);
}

#[test]
fn is_ppo_clip_with_sequence_ratios() {
    let cfg = Gspo {
        low: 0.1,
        high: 0.1,
        ..Default::default()
    };
    let ppo = PpoClip {
        low: 0.1,
        high: 0.1,
        ratio: RatioLevel::Sequence,
        ..Default::default()
    };
    let l = layout();
    let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
    let inputs = PolicyInputs {
        logprob: l.constant(f32s(&LOGP)),
        old_logprob: l.constant(f32s(&OLD)),
        advantages: l.constant(f32s(&ADV)),
        layout: &l,
    };
    let a: f32 = cfg.loss(&inputs, None).unwrap().loss.into_scalar();
    let b: f32 = ppo.loss(&inputs).unwrap().loss.into_scalar();
    assert_eq!(a, b);
}

#[test]
fn settings_parse_and_are_checked() {
    let opts = roll_flow_engine::spec::ron_options();
    assert_eq!(opts.from_str::<Gspo>("()").unwrap(), Gspo::default());
    let g: Gspo = opts
        .from_str("(low: 0.001, correction: (tis: 2.0))")
        .unwrap();
    assert_eq!((g.low, g.high), (0.001, 4e-4));
    assert_eq!(g.correction.unwrap().tis, Some(2.0));
    assert!(opts.from_str::<Gspo>("(ratio: Token)").is_err());
    let err = Gspo {
        low: 1.5,
        ..Default::default()
    }
    .validate()
    .unwrap_err();
    assert!(err.to_string().starts_with("Gspo: clip needs"), "{err}");
}
