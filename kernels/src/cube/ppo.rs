//! CubeCL clipped PPO loss: per-sequence partial sums, one combine cube, and the
//! backward pass.
//!
//! Formula as in [`crate::cpu::ppo`]: r = e^{logp−old}, l = max(−A·r, −A·clip(r, 1−ε_low,
//! 1+ε_high)) ("clipped" when the clipped term wins), dual clip l = −c·A for A < 0 when
//! l > −c·A ("capped"); ∂l/∂logp = −A·r unless clipped or capped.
//! Launch arguments `lower`/`upper` are the ratio bounds 1 − ε_low, 1 + ε_high and
//! `dual` the dual-clip constant (0 = off); `weighted` = 1 scales each token's loss and
//! gradient by `weight` (decoupled PPO), 0 ignores it.
//! - `ppo_partials_kernel`: one cube per sequence → Σm·u·l, Σm, Σm·clipped, Σm·capped,
//!   Σm·(old − logp);
//! - `ppo_combine_kernel`: one cube → totals, per-sequence weights w_s of the aggregation
//!   mode, loss = Σ_s w_s·(Σm·l)_s, stats;
//! - `ppo_backward_kernel`: one cube per sequence → dlogp = g·w_s·m·u·∂l/∂logp.
//!
//! Source: Schulman et al. 2017 eq. 7; Ye et al. 2020 (dual clip); verl/ROLL
//! `compute_policy_loss` and `agg_loss`.

use cubecl::prelude::*;

use super::cube_index::cube_index;

/// Partial sums per sequence (same layout as the CPU twin).
pub(crate) const PARTIALS: usize = 5;

/// One token's clipped surrogate: loss l, ∂l/∂logp, and whether the clipped term won or
/// the dual clip capped it (0/1).
#[derive(CubeType)]
struct TokenLoss<F: Float> {
    loss: F,
    grad: F,
    clipped: F,
    capped: F,
}

/// The clipped (and, when `c` > 0, dual-clipped) surrogate of one token; `lo`/`hi` are the
/// ratio bounds.
#[cube]
fn token_loss<F: Float>(lp: F, old: F, a: F, lo: F, hi: F, c: F) -> TokenLoss<F> {
    let zero = F::new(0.0);
    let r = (lp - old).exp();
    let pg1 = zero - a * r;
    let pg2 = zero - a * F::max(F::min(r, hi), lo);
    let mut out = TokenLoss::<F> {
        loss: pg1,
        grad: pg1,
        clipped: zero,
        capped: zero,
    };
    if pg2 > pg1 {
        out.loss = pg2;
        out.grad = zero;
        out.clipped = F::new(1.0);
    }
    if c > zero && a < zero && out.loss > zero - c * a {
        out.loss = zero - c * a;
        out.grad = zero;
        out.capped = F::new(1.0);
    }
    out
}

/// The token weight u_t, or 1 when `weighted` is 0 (then `weight` is a placeholder).
#[cube]
fn token_weight<F: Float>(weight: &Tensor<F>, t: usize, weighted: u32) -> F {
    let mut u = F::new(1.0);
    if weighted != 0 {
        u = weight[t];
    }
    u
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn ppo_partials_kernel<F: Float, I: Numeric>(
    logp: &Tensor<F>,
    old: &Tensor<F>,
    adv: &Tensor<F>,
    mask: &Tensor<F>,
    weight: &Tensor<F>,
    offsets: &Tensor<I>,
    partials: &mut Tensor<F>,
    sequences: u32,
    weighted: u32,
    lower: f32,
    upper: f32,
    dual: f32,
    #[comptime] block: u32,
    #[define(F, I)] _dtypes: [StorageType; 2],
) {
    let seq = cube_index(sequences);
    let start = u32::cast_from(offsets[seq]) as usize;
    let end = u32::cast_from(offsets[seq + 1]) as usize;
    let lo = F::cast_from(lower);
    let hi = F::cast_from(upper);
    let c = F::cast_from(dual);
    let zero = F::new(0.0);
    let mut acc = SharedMemory::<F>::new((block as usize) * PARTIALS);
    let u = UNIT_POS_X as usize;
    let mut sl = zero;
    let mut sm = zero;
    let mut sc = zero;
    let mut sd = zero;
    let mut sk = zero;
    let mut t = start + u;
    while t < end {
        let m = mask[t];
        if m != zero {
            let tl = token_loss::<F>(logp[t], old[t], adv[t], lo, hi, c);
            sc += m * tl.clipped;
            sd += m * tl.capped;
            sl += m * token_weight(weight, t, weighted) * tl.loss;
            sm += m;
            sk += m * (old[t] - logp[t]);
        }
        t += CUBE_DIM_X as usize;
    }
    acc[u * PARTIALS] = sl;
    acc[u * PARTIALS + 1] = sm;
    acc[u * PARTIALS + 2] = sc;
    acc[u * PARTIALS + 3] = sd;
    acc[u * PARTIALS + 4] = sk;
    sync_cube();
    let mut stride = CUBE_DIM_X as usize / 2;
    while stride > 0 {
        if u < stride {
            for k in 0..PARTIALS {
                let o = acc[(u + stride) * PARTIALS + k];
                acc[u * PARTIALS + k] += o;
            }
        }
        sync_cube();
        stride /= 2;
    }
    if u < PARTIALS {
        partials[seq * PARTIALS + u] = acc[u];
    }
}

/// `agg`: 0 TokenMean, 1 SeqMeanTokenSum, 2 SeqMeanTokenMean, 3 SeqMeanTokenSumNorm;
/// `norm_length` ≤ 0 means the longest response.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn ppo_combine_kernel<F: Float>(
    partials: &Tensor<F>,
    loss: &mut Tensor<F>,
    stats: &mut Tensor<F>,
    seq_weight: &mut Tensor<F>,
    sequences: u32,
    agg: u32,
    norm_length: f32,
    #[comptime] block: u32,
    #[define(F)] _dtype: StorageType,
) {
    let zero = F::new(0.0);
    let one = F::new(1.0);
    let u = UNIT_POS_X as usize;
    let n = sequences as usize;
    // Phase 1: Σm, #valid, max m, Σclipped, Σcapped, Σkl.
    let mut acc = SharedMemory::<F>::new((block as usize) * 6);
    let mut tot = zero;
    let mut valid = zero;
    let mut longest = zero;
    let mut clip = zero;
    let mut cap = zero;
    let mut kl = zero;
    let mut s = u;
    while s < n {
        let cnt = partials[s * PARTIALS + 1];
        tot += cnt;
        if cnt > zero {
            valid += one;
        }
        longest = F::max(longest, cnt);
        clip += partials[s * PARTIALS + 2];
        cap += partials[s * PARTIALS + 3];
        kl += partials[s * PARTIALS + 4];
        s += CUBE_DIM_X as usize;
    }
    acc[u * 6] = tot;
    acc[u * 6 + 1] = valid;
    acc[u * 6 + 2] = longest;
    acc[u * 6 + 3] = clip;
    acc[u * 6 + 4] = cap;
    acc[u * 6 + 5] = kl;
    sync_cube();
    let mut stride = CUBE_DIM_X as usize / 2;
    while stride > 0 {
        if u < stride {
            for k in 0..6usize {
                let o = acc[(u + stride) * 6 + k];
                if k == 2 {
                    acc[u * 6 + k] = F::max(acc[u * 6 + k], o);
                } else {
                    acc[u * 6 + k] += o;
                }
            }
        }
        sync_cube();
        stride /= 2;
    }
    let total = F::max(acc[0], one);
    let valid = F::max(acc[1], one);
    let mut norm = F::cast_from(norm_length);
    if norm <= zero {
        norm = acc[2];
    }
    norm = F::max(norm, one);
    // Phase 2: weights and Σ w_s·(Σm·l)_s.
    let mut lsum = SharedMemory::<F>::new(block as usize);
    let mut part = zero;
    let mut s = u;
    while s < n {
        let cnt = partials[s * PARTIALS + 1];
        let mut w = zero;
        if agg == 0 {
            w = one / total;
        } else if agg == 3 {
            w = one / norm;
        } else if cnt > zero {
            if agg == 1 {
                w = one / valid;
            } else {
                w = one / (cnt * valid);
            }
        }
        seq_weight[s] = w;
        part += w * partials[s * PARTIALS];
        s += CUBE_DIM_X as usize;
    }
    lsum[u] = part;
    sync_cube();
    let mut stride = CUBE_DIM_X as usize / 2;
    while stride > 0 {
        if u < stride {
            let o = lsum[u + stride];
            lsum[u] += o;
        }
        sync_cube();
        stride /= 2;
    }
    if u == 0 {
        loss[0] = lsum[0];
        stats[0] = acc[3] / total;
        stats[1] = acc[4] / total;
        stats[2] = acc[5] / total;
        stats[3] = acc[0];
    }
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn ppo_backward_kernel<F: Float, I: Numeric>(
    logp: &Tensor<F>,
    old: &Tensor<F>,
    adv: &Tensor<F>,
    mask: &Tensor<F>,
    weight: &Tensor<F>,
    offsets: &Tensor<I>,
    seq_weight: &Tensor<F>,
    grad: &Tensor<F>,
    dlogp: &mut Tensor<F>,
    sequences: u32,
    weighted: u32,
    lower: f32,
    upper: f32,
    dual: f32,
    #[define(F, I)] _dtypes: [StorageType; 2],
) {
    let seq = cube_index(sequences);
    let start = u32::cast_from(offsets[seq]) as usize;
    let end = u32::cast_from(offsets[seq + 1]) as usize;
    let lo = F::cast_from(lower);
    let hi = F::cast_from(upper);
    let c = F::cast_from(dual);
    let zero = F::new(0.0);
    let scale = grad[0] * seq_weight[seq];
    let mut t = start + UNIT_POS_X as usize;
    while t < end {
        let m = mask[t];
        let mut d = zero;
        if m != zero {
            let tl = token_loss::<F>(logp[t], old[t], adv[t], lo, hi, c);
            d = scale * m * token_weight(weight, t, weighted) * tl.grad;
        }
        dlogp[t] = d;
        t += CUBE_DIM_X as usize;
    }
}
