use burn::backend::{Autodiff, Flex};
use proptest::prelude::*;

use super::*;
use crate::AlgoStats;

type AD = Autodiff<Flex>;

fn layout(offsets: &[usize], mask: &[bool], turns: Option<&[i64]>) -> PackedLayout<AD> {
    PackedLayout::new(offsets, mask, turns, &Default::default())
}

fn run(
    cfg: &PpoClip,
    l: &PackedLayout<AD>,
    logp: &[f32],
    old: &[f32],
    adv: &[f32],
) -> (f32, Vec<f32>, AlgoStats) {
    let logp_t = l.constant(logp.to_vec()).require_grad();
    let inputs = PolicyInputs {
        logprob: logp_t.clone(),
        old_logprob: l.constant(old.to_vec()),
        advantages: l.constant(adv.to_vec()),
        layout: l,
    };
    let out = cfg.loss(&inputs).unwrap();
    let g = crate::test_batches::gradient(&logp_t, &out.loss);
    (out.loss.into_scalar(), g, out.stats.resolve())
}

#[test]
fn symmetric_clip_by_hand() {
    // r = 1.5 with A = 1 and r = 0.5 with A = −1: both clipped → (−1.2 + 0.8)/2, zero grads.
    let l = layout(&[0, 2], &[true, true], None);
    let (loss, g, stats) = run(
        &PpoClip::default(),
        &l,
        &[1.5f32.ln(), 0.5f32.ln()],
        &[0.0, 0.0],
        &[1.0, -1.0],
    );
    assert!((loss + 0.2).abs() < 1e-6);
    assert_eq!(g, vec![0.0, 0.0]);
    assert_eq!(stats["pg_clipfrac"], 1.0);
    // ppo_kl = mean(old − logp) = (−ln 1.5 − ln 0.5)/2 = ½·ln(4/3) ≈ 0.143841.
    assert!((stats["ppo_kl"] - 0.143_841).abs() < 1e-5, "{stats:?}");
}

#[test]
fn asymmetric_clip_and_unclipped_gradient() {
    // Token 0: r = 1.5, A = 1 → −1.28 (clipped at 1.28). Token 1: r = 1.1, A = 2 → −2.2,
    // gradient −A·r = −2.2, halved by the sequence mean.
    let cfg = PpoClip {
        high: 0.28,
        ..Default::default()
    };
    let l = layout(&[0, 2], &[true, true], None);
    let (loss, g, stats) = run(
        &cfg,
        &l,
        &[1.5f32.ln(), 1.1f32.ln()],
        &[0.0, 0.0],
        &[1.0, 2.0],
    );
    assert!((loss - (-1.28 - 2.2) / 2.0).abs() < 1e-5);
    assert!(g[0].abs() < 1e-7 && (g[1] + 1.1).abs() < 1e-5, "{g:?}");
    assert_eq!(stats["pg_clipfrac"], 0.5);
    // ppo_kl = (−ln 1.5 − ln 1.1)/2 = −½·ln 1.65 ≈ −0.250388.
    assert!((stats["ppo_kl"] + 0.250_388).abs() < 1e-5, "{stats:?}");
}

#[test]
fn dual_clip_caps_negative_advantage_loss() {
    // r = 5, A = −1: clipped loss max(5, 1.2) = 5, dual clip c = 3 caps it at 3 (no grad).
    let cfg = PpoClip {
        dual_clip: Some(3.0),
        agg: LossAgg::TokenMean,
        ..Default::default()
    };
    let l = layout(&[0, 2], &[true, true], None);
    let (loss, g, stats) = run(&cfg, &l, &[5f32.ln(), 0.0], &[0.0, 0.0], &[-1.0, 1.0]);
    assert!((loss - (3.0 - 1.0) / 2.0).abs() < 1e-6);
    assert!(g[0].abs() < 1e-7 && (g[1] + 0.5).abs() < 1e-6, "{g:?}");
    assert_eq!(stats["pg_clipfrac_lower"], 0.5);
    // ppo_kl = (−ln 5 + 0)/2 ≈ −0.804719, whatever the clipping.
    assert!((stats["ppo_kl"] + 0.804_719).abs() < 1e-5, "{stats:?}");
    assert!(PpoClip {
        dual_clip: Some(1.0),
        ..Default::default()
    }
    .validate()
    .is_err());
    assert!(PpoClip {
        low: 1.0,
        ..Default::default()
    }
    .validate()
    .is_err());
}

#[test]
fn empty_mask_and_single_token() {
    // Sample 0 has no response token; sample 1 has exactly one, r = 1, A = 0.5.
    let l = layout(&[0, 2, 3], &[false, false, true], None);
    let (loss, g, _) = run(
        &PpoClip::default(),
        &l,
        &[-1.0, -2.0, -0.3],
        &[-4.0, -4.0, -0.3],
        &[9.0, 9.0, 0.5],
    );
    assert!((loss + 0.5).abs() < 1e-6);
    assert_eq!(g[0], 0.0);
    assert_eq!(g[1], 0.0);
    assert!((g[2] + 0.5).abs() < 1e-6);
    let none = layout(&[0, 2], &[false, false], None);
    let (loss, g, _) = run(
        &PpoClip::default(),
        &none,
        &[-1.0, -2.0],
        &[-1.0, -1.0],
        &[1.0, 1.0],
    );
    assert_eq!((loss, g), (0.0, vec![0.0, 0.0]));
}

#[test]
fn segment_ratio_shares_turn_ratio() {
    // One turn of two tokens: log r = mean(ln 1.1 + 0, 0) → r = sqrt(1.1) for both tokens.
    let cfg = PpoClip {
        ratio: RatioLevel::Segment,
        agg: LossAgg::TokenMean,
        ..Default::default()
    };
    let l = layout(&[0, 2], &[true, true], Some(&[0, 0]));
    let (loss, g, _) = run(&cfg, &l, &[1.1f32.ln(), 0.0], &[0.0, 0.0], &[1.0, 1.0]);
    let r = 1.1f64.sqrt();
    assert!((loss as f64 + r).abs() < 1e-6);
    // d/dlogp_u of −r (mean over 2 tokens of the same −r) = −r/2 for each u.
    assert!(
        (g[0] as f64 + r / 2.0).abs() < 1e-6 && (g[1] as f64 + r / 2.0).abs() < 1e-6,
        "{g:?}"
    );
}

/// An independent f64 reference of the PPO loss (loops, no tensors).
fn reference(
    cfg: &PpoClip,
    offsets: &[usize],
    mask: &[bool],
    turns: &[i64],
    logp: &[f64],
    old: &[f64],
    adv: &[f64],
) -> f64 {
    let n = logp.len();
    let mut log_r: Vec<f64> = (0..n).map(|t| logp[t] - old[t]).collect();
    if cfg.ratio == RatioLevel::Segment {
        let mut seg_r = log_r.clone();
        for t in 0..n {
            let same: Vec<usize> = (0..n)
                .filter(|&u| turns[u] == turns[t] && mask[u] && same_sample(offsets, t, u))
                .collect();
            seg_r[t] = if same.is_empty() {
                0.0
            } else {
                same.iter().map(|&u| log_r[u]).sum::<f64>() / same.len() as f64
            };
        }
        log_r = seg_r;
    }
    let tok: Vec<f64> = (0..n)
        .map(|t| {
            let r = log_r[t].exp();
            let a = adv[t];
            let l = (-a * r).max(-a * r.clamp(1.0 - cfg.low as f64, 1.0 + cfg.high as f64));
            match cfg.dual_clip {
                Some(c) if a < 0.0 => l.min(-a * c as f64),
                _ => l,
            }
        })
        .collect();
    let seq_means: Vec<f64> = offsets
        .windows(2)
        .filter_map(|w| {
            let v: Vec<f64> = (w[0]..w[1]).filter(|&t| mask[t]).map(|t| tok[t]).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        })
        .collect();
    seq_means.iter().sum::<f64>() / seq_means.len().max(1) as f64
}

fn same_sample(offsets: &[usize], t: usize, u: usize) -> bool {
    offsets
        .windows(2)
        .any(|w| (w[0]..w[1]).contains(&t) && (w[0]..w[1]).contains(&u))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Autodiff gradients of the PPO loss match central finite differences of an
    /// independent f64 reference (away from the clip kinks), within 2e-3 absolute +
    /// 1e-2 relative (f32 forward/backward vs f64 differences with h = 1e-4).
    #[test]
    fn gradient_matches_finite_differences(
        tokens in prop::collection::vec((0usize..4, 0.0f64..1.0, -2.0f64..2.0, any::<bool>()), 2..12),
        split in 1usize..11,
        segment in any::<bool>(),
        dual in any::<bool>(),
    ) {
        let n = tokens.len();
        let split = split.min(n - 1);
        let offsets = [0, split, n];
        let mask: Vec<bool> = tokens.iter().map(|t| t.3).collect();
        // Two turns per sample: the first half of its tokens is turn 0.
        let turns: Vec<i64> = (0..n)
            .map(|t| {
                let (start, len) = if t < split { (0, split) } else { (split, n - split) };
                i64::from(2 * (t - start) >= len)
            })
            .collect();
        // Log-ratios drawn from regions away from the kinks at ln 0.8, ln 1.28, ln 1.5.
        let regions = [(-0.6, -0.3), (-0.18, 0.2), (0.28, 0.37), (0.45, 0.7)];
        let old: Vec<f64> = (0..n).map(|t| -1.0 - 0.1 * t as f64).collect();
        let logp: Vec<f64> = (0..n)
            .map(|t| {
                let (lo, hi) = regions[tokens[t].0];
                old[t] + lo + (hi - lo) * tokens[t].1
            })
            .collect();
        let adv: Vec<f64> = tokens.iter().map(|t| t.2).collect();
        let cfg = PpoClip {
            low: 0.2, high: 0.28,
            dual_clip: dual.then_some(1.5),
            ratio: if segment { RatioLevel::Segment } else { RatioLevel::Token },
            ..Default::default()
        };
        // Skip inputs within 0.02 of a kink of the loss.
        let f = |x: &[f64]| reference(&cfg, &offsets, &mask, &turns, x, &old, &adv);
        let h = 1e-4;
        let mut fd = vec![0.0; n];
        for t in 0..n {
            let (mut up, mut down) = (logp.clone(), logp.clone());
            up[t] += h;
            down[t] -= h;
            fd[t] = (f(&up) - f(&down)) / (2.0 * h);
            let (mut up2, mut down2) = (logp.clone(), logp.clone());
            up2[t] += 0.02;
            down2[t] -= 0.02;
            let wide = (f(&up2) - f(&down2)) / 0.04;
            prop_assume!((wide - fd[t]).abs() < 1e-3 * (1.0 + fd[t].abs()));
        }
        let l = layout(&offsets, &mask, segment.then_some(&turns[..]));
        let to32 = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        let (loss, g, _) = run(&cfg, &l, &to32(&logp), &to32(&old), &to32(&adv));
        prop_assert!((loss as f64 - f(&logp)).abs() < 1e-4, "loss {} vs {}", loss, f(&logp));
        for t in 0..n {
            prop_assert!((g[t] as f64 - fd[t]).abs() < 2e-3 + 1e-2 * fd[t].abs(), "token {}: {} vs {}", t, g[t], fd[t]);
        }
    }
}
