//! Clipped PPO loss, forward and backward fused, on the CPU.
//!
//! Per token (Schulman et al. 2017 eq. 7; dual clip Ye et al. 2020; verl/ROLL
//! `compute_policy_loss`; oracle `crate::reference::ppo_clip_loss`):
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
//!
//! Both passes are branch-free per token (selects), so each sequence's loop vectorises:
//! 16 f32 lanes, summed over chunks of 1,024 tokens and folded into f64; sequences run
//! in parallel with rayon; AVX-512 / AVX2 copies picked at run time.

use rayon::prelude::*;

use super::gae::{check_offsets, split_sequences};
use super::simd::{dispatch, exp, isa_copies, Isa};
use crate::aggregation::sequence_weights;
use crate::ppo_clip::{ClipSettings, PpoStats};

/// Number of per-sequence partial sums.
pub const PARTIALS: usize = 5;

/// Lanes of the vector loops (one AVX-512 or two AVX2 registers).
const LANES: usize = 16;
/// Tokens summed in f32 lanes before the sums are folded into f64 (64 terms per lane).
const CHUNK: usize = 1024;

/// The clip constants of a [`ClipSettings`], hoisted out of the loops.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clip {
    lower: f32,
    upper: f32,
    /// Dual-clip constant c, 0 when off.
    dual: f32,
}

impl Clip {
    pub(crate) fn new(cfg: &ClipSettings) -> Clip {
        Clip {
            lower: 1.0 - cfg.low,
            upper: 1.0 + cfg.high,
            dual: cfg.dual_clip.unwrap_or(0.0),
        }
    }
}

/// (loss, clipped, capped, ∂loss/∂logp) of one token, clipped and capped as 0/1, written
/// with selects only (no branches) so that the loops around it vectorise.
#[inline(always)]
fn token<const FMA: bool>(lp: f32, old: f32, a: f32, c: Clip) -> (f32, f32, f32, f32) {
    let r = exp::<FMA>(lp - old);
    let rc = if r < c.lower {
        c.lower
    } else if r > c.upper {
        c.upper
    } else {
        r
    };
    let (pg1, pg2) = (-a * r, -a * rc);
    let clipped = pg2 > pg1;
    let l = if clipped { pg2 } else { pg1 };
    let pg3 = -c.dual * a;
    let capped = (c.dual > 0.0) & (a < 0.0) & (l > pg3);
    let l = if capped { pg3 } else { l };
    let d = if clipped | capped { 0.0 } else { pg1 };
    (
        l,
        f32::from(u8::from(clipped)),
        f32::from(u8::from(capped)),
        d,
    )
}

/// One token's terms of the partial sums (Σ m·u·l, m, m·clipped, m·capped, m·(old − lp)).
/// A masked-out token gives 0 whatever its inputs hold (selects, not products, so a NaN
/// there stays out).
#[inline(always)]
fn terms<const FMA: bool>(lp: f32, old: f32, a: f32, m: f32, u: f32, c: Clip) -> [f32; PARTIALS] {
    let (l, clipped, capped, _) = token::<FMA>(lp, old, a, c);
    let on = m != 0.0;
    let keep = |v: f32| if on { m * v } else { 0.0 };
    [keep(u * l), m, keep(clipped), keep(capped), keep(old - lp)]
}

/// The [`PARTIALS`] sums of tokens `start..end`: f32 lanes over chunks of [`CHUNK`]
/// tokens, folded into f64.
#[inline(always)]
fn sequence_partials<const FMA: bool>(
    x: PpoSlices<'_>,
    start: usize,
    end: usize,
    c: Clip,
) -> [f64; PARTIALS] {
    let lane_block =
        |v: &[f32], t: usize| -> [f32; LANES] { v[t..t + LANES].try_into().expect("LANES values") };
    let mut total = [0.0f64; PARTIALS];
    let mut t = start;
    while t < end {
        let stop = (t + CHUNK).min(end);
        let mut acc = [[0.0f32; LANES]; PARTIALS];
        while t + LANES <= stop {
            let (lp, old) = (lane_block(x.logp, t), lane_block(x.old_logp, t));
            let (adv, mask) = (lane_block(x.advantages, t), lane_block(x.mask, t));
            let u = x.weight.map_or([1.0; LANES], |w| lane_block(w, t));
            for lane in 0..LANES {
                let v = terms::<FMA>(lp[lane], old[lane], adv[lane], mask[lane], u[lane], c);
                for (a, v) in acc.iter_mut().zip(v) {
                    a[lane] += v;
                }
            }
            t += LANES;
        }
        for u in t..stop {
            let w = x.weight.map_or(1.0, |w| w[u]);
            let v = terms::<FMA>(x.logp[u], x.old_logp[u], x.advantages[u], x.mask[u], w, c);
            for (a, v) in acc.iter_mut().zip(v) {
                a[0] += v;
            }
        }
        t = stop;
        for (sum, lanes) in total.iter_mut().zip(&acc) {
            *sum += lanes.iter().map(|&v| v as f64).sum::<f64>();
        }
    }
    total
}

/// dlogp of tokens `start..start + out.len()`: `scale`·m·u·∂l/∂logp (0 off the mask).
#[inline(always)]
fn sequence_backward<const FMA: bool>(
    x: PpoSlices<'_>,
    out: &mut [f32],
    start: usize,
    scale: f32,
    c: Clip,
) {
    let end = start + out.len();
    let (lp, old) = (&x.logp[start..end], &x.old_logp[start..end]);
    let (adv, mask) = (&x.advantages[start..end], &x.mask[start..end]);
    let weight = x.weight.map(|w| &w[start..end]);
    for (k, o) in out.iter_mut().enumerate() {
        let d = token::<FMA>(lp[k], old[k], adv[k], c).3;
        let u = match weight {
            Some(w) => w[k],
            None => 1.0,
        };
        *o = if mask[k] != 0.0 {
            scale * mask[k] * u * d
        } else {
            0.0
        };
    }
}

isa_copies!(avx512, "avx512f,avx2,fma":
    sequence_partials(x: PpoSlices<'_>, start: usize, end: usize, c: Clip) -> [f64; PARTIALS];
    sequence_backward(x: PpoSlices<'_>, out: &mut [f32], start: usize, scale: f32, c: Clip);
);
isa_copies!(avx2, "avx2,fma":
    sequence_partials(x: PpoSlices<'_>, start: usize, end: usize, c: Clip) -> [f64; PARTIALS];
    sequence_backward(x: PpoSlices<'_>, out: &mut [f32], start: usize, scale: f32, c: Clip);
);

/// Per-sequence weights, loss and stats from the partial sums (`[sequences × PARTIALS]`).
pub fn combine(partials: &[f64], cfg: &ClipSettings) -> (f32, PpoStats, Vec<f32>) {
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
}

/// Forward: (loss, stats, per-sequence weights).
pub fn ppo_clip_forward(
    x: PpoSlices<'_>,
    offsets: &[usize],
    cfg: &ClipSettings,
) -> (f32, PpoStats, Vec<f32>) {
    x.check(offsets);
    let (isa, clip) = (Isa::detect(), Clip::new(cfg));
    let partials: Vec<f64> = offsets
        .par_windows(2)
        .with_min_len(8)
        .flat_map_iter(|w| dispatch!(isa, sequence_partials(x, w[0], w[1], clip)))
        .collect();
    combine(&partials, cfg)
}

/// Backward: dlogp `[tokens]` for an incoming loss gradient `grad`.
pub fn ppo_clip_backward(
    x: PpoSlices<'_>,
    offsets: &[usize],
    seq_weight: &[f32],
    grad: f32,
    cfg: &ClipSettings,
) -> Vec<f32> {
    x.check(offsets);
    let (isa, clip) = (Isa::detect(), Clip::new(cfg));
    let mut out = vec![0.0f32; x.logp.len()];
    split_sequences(&mut out, offsets)
        .into_par_iter()
        .zip(offsets.par_windows(2))
        .zip(seq_weight.par_iter())
        .with_min_len(8)
        .for_each(|((o, w), &sw)| {
            dispatch!(isa, sequence_backward(x, o, w[0], grad * sw, clip));
        });
    out
}
