//! Clipped PPO loss, forward and backward fused, on the CPU.
//!
//! Per token (Schulman et al. 2017 eq. 7; dual clip Ye et al. 2020; verl/ROLL
//! `compute_policy_loss`; oracle `roll-flow-operators` `algo::ppo_loss::surrogate`):
//! - r = exp(logp − old_logp), pg₁ = −A·r, pg₂ = −A·clip(r, 1 − ε_low, 1 + ε_high);
//! - l = max(pg₁, pg₂), "clipped" when pg₂ > pg₁;
//! - dual clip c, A < 0 only: "capped" when l > −c·A, then l = −c·A;
//! - ∂l/∂logp = −A·r unless clipped or capped (then 0).
//!
//! One pass per sequence gives the partial sums [`PARTIALS`]: Σm·l, Σm, Σm·clipped,
//! Σm·capped, Σm·(old − logp). [`combine`] turns them into the aggregated loss
//! (`LossAgg`), per-sequence weights w_s (loss = Σ_s w_s Σ_{t∈s} m_t l_t) and the stats;
//! the backward pass is dlogp_t = g·w_s·m_t·∂l_t/∂logp_t, recomputed from the inputs.

use rayon::prelude::*;

use super::gae::{check_offsets, split_sequences};
use super::simd::exp;
use crate::{LossAgg, PpoClipConfig, PpoStats};

/// Number of per-sequence partial sums.
pub const PARTIALS: usize = 5;

/// (loss, clipped, capped, ∂loss/∂logp) of one token.
#[inline(always)]
pub(crate) fn token(lp: f32, old: f32, a: f32, cfg: &PpoClipConfig) -> (f32, bool, bool, f32) {
    let r = exp::<false>(lp - old);
    let rc = r.clamp(1.0 - cfg.low, 1.0 + cfg.high);
    let (pg1, pg2) = (-a * r, -a * rc);
    let clipped = pg2 > pg1;
    let (mut l, mut d) = if clipped { (pg2, 0.0) } else { (pg1, -a * r) };
    let mut capped = false;
    if let Some(c) = cfg.dual_clip {
        let pg3 = -c * a;
        if a < 0.0 && l > pg3 {
            capped = true;
            l = pg3;
            d = 0.0;
        }
    }
    (l, clipped, capped, d)
}

/// Per-sequence weights, loss and stats from the partial sums (`[sequences × PARTIALS]`).
pub fn combine(partials: &[f64], cfg: &PpoClipConfig) -> (f32, PpoStats, Vec<f32>) {
    let seqs = partials.chunks(PARTIALS);
    let total: f64 = seqs.clone().map(|p| p[1]).sum();
    let valid = seqs.clone().filter(|p| p[1] > 0.0).count().max(1) as f64;
    let longest = seqs.clone().map(|p| p[1]).fold(0.0, f64::max);
    let weights: Vec<f32> = seqs
        .clone()
        .map(|p| {
            let w = match cfg.agg {
                LossAgg::TokenMean => 1.0 / total.max(1.0),
                LossAgg::SeqMeanTokenSumNorm => {
                    1.0 / cfg.norm_length.map_or(longest, |l| l as f64).max(1.0)
                }
                LossAgg::SeqMeanTokenSum if p[1] > 0.0 => 1.0 / valid,
                LossAgg::SeqMeanTokenMean if p[1] > 0.0 => 1.0 / (p[1] * valid),
                _ => 0.0,
            };
            w as f32
        })
        .collect();
    let loss: f64 = seqs
        .clone()
        .zip(&weights)
        .map(|(p, &w)| p[0] * w as f64)
        .sum();
    let sum = |k: usize| seqs.clone().map(|p| p[k]).sum::<f64>() / total.max(1.0);
    let stats = PpoStats {
        clipfrac: sum(2) as f32,
        clipfrac_lower: sum(3) as f32,
        approx_kl: sum(4) as f32,
        response_tokens: total as f32,
    };
    (loss as f32, stats, weights)
}

fn check(logp: &[f32], old: &[f32], adv: &[f32], mask: &[f32], offsets: &[usize]) {
    let n = logp.len();
    assert!(
        old.len() == n && adv.len() == n && mask.len() == n,
        "ppo_clip_loss: logp, old_logp, advantages and mask differ in length"
    );
    check_offsets(offsets, n, "ppo_clip_loss");
}

/// Forward: (loss, stats, per-sequence weights).
pub fn ppo_clip_forward(
    logp: &[f32],
    old: &[f32],
    adv: &[f32],
    mask: &[f32],
    offsets: &[usize],
    cfg: &PpoClipConfig,
) -> (f32, PpoStats, Vec<f32>) {
    check(logp, old, adv, mask, offsets);
    let partials: Vec<f64> = offsets
        .par_windows(2)
        .with_min_len(8)
        .flat_map_iter(|w| {
            let mut acc = [0.0f64; PARTIALS];
            for t in w[0]..w[1] {
                let m = mask[t];
                if m != 0.0 {
                    let (l, clipped, capped, _) = token(logp[t], old[t], adv[t], cfg);
                    let m = m as f64;
                    acc[0] += m * l as f64;
                    acc[1] += m;
                    acc[2] += m * clipped as u8 as f64;
                    acc[3] += m * capped as u8 as f64;
                    acc[4] += m * (old[t] - logp[t]) as f64;
                }
            }
            acc
        })
        .collect();
    combine(&partials, cfg)
}

/// Backward: dlogp `[tokens]` for an incoming loss gradient `grad`.
#[allow(clippy::too_many_arguments)]
pub fn ppo_clip_backward(
    logp: &[f32],
    old: &[f32],
    adv: &[f32],
    mask: &[f32],
    offsets: &[usize],
    seq_weight: &[f32],
    grad: f32,
    cfg: &PpoClipConfig,
) -> Vec<f32> {
    check(logp, old, adv, mask, offsets);
    let mut out = vec![0.0f32; logp.len()];
    split_sequences(&mut out, offsets)
        .into_par_iter()
        .zip(offsets.par_windows(2))
        .zip(seq_weight.par_iter())
        .with_min_len(8)
        .for_each(|((o, w), &sw)| {
            let scale = grad * sw;
            for (k, t) in (w[0]..w[1]).enumerate() {
                let m = mask[t];
                if m != 0.0 {
                    o[k] = scale * m * token(logp[t], old[t], adv[t], cfg).3;
                }
            }
        });
    out
}
