//! Clipped PPO loss, forward and backward fused, on the CPU.
//!
//! Per token (Schulman et al. 2017 eq. 7; dual clip Ye et al. 2020; verl/ROLL
//! `compute_policy_loss`; oracle `roll-flow-operators` `algo::ppo_loss::surrogate`):
//! - r = exp(logp − old_logp), pg₁ = −A·r, pg₂ = −A·clip(r, 1 − ε_low, 1 + ε_high);
//! - l = max(pg₁, pg₂), "clipped" when pg₂ > pg₁;
//! - dual clip c, A < 0 only: "capped" when l > −c·A, then l = −c·A;
//! - ∂l/∂logp = −A·r unless clipped or capped (then 0).
//!
//! An optional constant token weight u (decoupled PPO's behaviour weight) scales each
//! token's loss and gradient (l ← u·l), not the counts or statistics.
//!
//! One pass per sequence gives the partial sums [`PARTIALS`]: Σm·u·l, Σm, Σm·clipped,
//! Σm·capped, Σm·(old − logp). [`combine`] turns them into the aggregated loss
//! (`LossAgg`), per-sequence weights w_s (loss = Σ_s w_s Σ_{t∈s} m_t l_t) and the stats;
//! the backward pass is dlogp_t = g·w_s·m_t·u_t·∂l_t/∂logp_t, recomputed from the inputs.

use rayon::prelude::*;

use super::gae::{check_offsets, split_sequences};
use super::simd::exp;
use crate::aggregation::sequence_weights;
use crate::{PpoClipConfig, PpoStats};

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
    let counts: Vec<f64> = seqs.clone().map(|p| p[1]).collect();
    let total: f64 = counts.iter().sum();
    let weights = sequence_weights(&counts, cfg.agg, cfg.norm_length);
    let loss: f64 = seqs.clone().zip(&weights).map(|(p, w)| p[0] * w).sum();
    let sum = |k: usize| seqs.clone().map(|p| p[k]).sum::<f64>() / total.max(1.0);
    let stats = PpoStats {
        clipfrac: sum(2) as f32,
        clipfrac_lower: sum(3) as f32,
        approx_kl: sum(4) as f32,
        response_tokens: total as f32,
    };
    (
        loss as f32,
        stats,
        weights.iter().map(|&w| w as f32).collect(),
    )
}

/// The per-token inputs on the host, each `[tokens]` (see [`crate::backend::PpoTokens`]).
#[derive(Clone, Copy, Debug)]
pub struct PpoSlices<'a> {
    pub logp: &'a [f32],
    pub old_logp: &'a [f32],
    pub advantages: &'a [f32],
    pub mask: &'a [f32],
    /// Constant per-token loss weight; `None` = 1.
    pub weight: Option<&'a [f32]>,
}

impl PpoSlices<'_> {
    fn check(&self, offsets: &[usize]) {
        let n = self.logp.len();
        assert!(
            self.old_logp.len() == n
                && self.advantages.len() == n
                && self.mask.len() == n
                && self.weight.is_none_or(|w| w.len() == n),
            "ppo_clip_loss: logp, old_logp, advantages, mask and weight differ in length"
        );
        check_offsets(offsets, n, "ppo_clip_loss");
    }

    #[inline(always)]
    fn weight(&self, t: usize) -> f32 {
        self.weight.map_or(1.0, |w| w[t])
    }
}

/// Forward: (loss, stats, per-sequence weights).
pub fn ppo_clip_forward(
    x: PpoSlices<'_>,
    offsets: &[usize],
    cfg: &PpoClipConfig,
) -> (f32, PpoStats, Vec<f32>) {
    x.check(offsets);
    let partials: Vec<f64> = offsets
        .par_windows(2)
        .with_min_len(8)
        .flat_map_iter(|w| {
            let mut acc = [0.0f64; PARTIALS];
            for t in w[0]..w[1] {
                let m = x.mask[t];
                if m != 0.0 {
                    let (lp, old) = (x.logp[t], x.old_logp[t]);
                    let (l, clipped, capped, _) = token(lp, old, x.advantages[t], cfg);
                    let m = m as f64;
                    acc[0] += m * (x.weight(t) * l) as f64;
                    acc[1] += m;
                    acc[2] += m * clipped as u8 as f64;
                    acc[3] += m * capped as u8 as f64;
                    acc[4] += m * (old - lp) as f64;
                }
            }
            acc
        })
        .collect();
    combine(&partials, cfg)
}

/// Backward: dlogp `[tokens]` for an incoming loss gradient `grad`.
pub fn ppo_clip_backward(
    x: PpoSlices<'_>,
    offsets: &[usize],
    seq_weight: &[f32],
    grad: f32,
    cfg: &PpoClipConfig,
) -> Vec<f32> {
    x.check(offsets);
    let mut out = vec![0.0f32; x.logp.len()];
    split_sequences(&mut out, offsets)
        .into_par_iter()
        .zip(offsets.par_windows(2))
        .zip(seq_weight.par_iter())
        .with_min_len(8)
        .for_each(|((o, w), &sw)| {
            let scale = grad * sw;
            for (k, t) in (w[0]..w[1]).enumerate() {
                let m = x.mask[t];
                if m != 0.0 {
                    let d = token(x.logp[t], x.old_logp[t], x.advantages[t], cfg).3;
                    o[k] = scale * m * x.weight(t) * d;
                }
            }
        });
    out
}
