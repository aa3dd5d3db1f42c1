//! Fused token log-prob + entropy on the CPU: one pass over each logits row.
//!
//! With s = z / T (T the temperature) and p = softmax(s) over the vocabulary:
//! - lse = log Σ_v e^{s_v} (online log-sum-exp),
//! - logp = s_y − lse for the target y,
//! - H = −Σ p_v log p_v = log S₀ − S₁ / S₀ with S₀ = Σ e^{s_v − m}, S₁ = Σ e^{s_v − m}(s_v − m)
//!   and m the running row max (both sums rescaled when m grows:
//!   S₁ ← e^{m−m'}(S₁ + (m − m')S₀), S₀ ← e^{m−m'}S₀).
//!
//! Logits of −∞ (tokens ruled out by a guide) are allowed: they add nothing to the sums and
//! get a zero gradient; the target's logit must be finite.
//!
//! Backward (from the saved lse and H, never a stored softmax):
//! ∂logp/∂s_v = δ_vy − p_v, ∂H/∂s_v = −p_v(log p_v + H), and ∂/∂z = ∂/∂s / T.
//!
//! Rows run in parallel with rayon. Each row is the loops below, which LLVM vectorises for
//! the instruction set picked at run time (AVX-512, AVX2 or plain), always over the same
//! 16 lanes with the same fused multiply-adds, so every path gives the same bits. The row
//! is walked in blocks of `BLOCK` values: the block max is taken first (the block stays in
//! L1), then the block's exponentials are added (online rescaling when the max grows), so
//! memory is read once. (An AVX-512 intrinsics version in base 2 with a cheaper `exp` was
//! faster but rounded differently from the other paths, so a run's numbers depended on
//! the CPU: removed.)
//!
//! Sources: the online softmax of Milakov & Gimelshein 2018; verl/ROLL
//! `entropy_from_logits` (H = lse − Σ p·s); the oracle is `roll-flow-operators`
//! `model::logprob` (log_softmax + gather, −Σ e^{log p} log p).

use rayon::prelude::*;

use super::logprob_row::RowGrad;
use super::simd::{dispatch, exp, exp_in_range, fma, isa_copies, Isa};

const LANES: usize = 16;
const BLOCK: usize = 1024;
const NEG_BIG: f32 = -3.0e38;
/// Lower bound of s − m and log p (both ≤ 0) before the exponential, in
/// [`exp_in_range`]'s range; at or below it e^x is taken as exactly 0.
const FLOOR: f32 = -87.0;

/// (x, e^x) for x ≤ 0 with x floored at [`FLOOR`] and e^x = 0 there: a logit of −∞ (a
/// token ruled out by a guide) then adds 0 and 0·FLOOR = 0 to the sums, never NaN, and gets
/// a zero gradient; a forced token (the only finite logit) gets entropy exactly 0.
#[inline(always)]
fn exp_floored<const FMA: bool>(x: f32) -> (f32, f32) {
    let x = if x > FLOOR { x } else { FLOOR };
    let e = exp_in_range::<FMA>(x);
    (x, if x > FLOOR { e } else { 0.0 })
}

/// Row statistics: (logp, entropy, lse) of one row.
#[inline(always)]
fn row_forward<const FMA: bool>(row: &[f32], target: usize, inv_t: f32) -> (f32, f32, f32) {
    let mut m = NEG_BIG;
    let mut s0 = [0.0f32; LANES];
    let mut s1 = [0.0f32; LANES];
    let (mut t0, mut t1) = (0.0f32, 0.0f32); // tail lanes
    for block in row.chunks(BLOCK) {
        let mut bm = [NEG_BIG; LANES];
        let chunks = block.chunks_exact(LANES);
        let tail = chunks.remainder();
        for c in chunks.clone() {
            for l in 0..LANES {
                bm[l] = if c[l] > bm[l] { c[l] } else { bm[l] };
            }
        }
        let mut block_max = bm.iter().fold(NEG_BIG, |a, &b| if b > a { b } else { a });
        for &z in tail {
            block_max = if z > block_max { z } else { block_max };
        }
        // max(z)·(1/T) = max(z/T) for T > 0, rounding included (so the largest s − m is
        // exactly 0; s = z·(1/T) is rounded before − m, not fused, for the same reason).
        let block_max = block_max * inv_t;
        if block_max > m {
            let d = m - block_max;
            let f = exp::<FMA>(d);
            for l in 0..LANES {
                s1[l] = f * (s1[l] + d * s0[l]);
                s0[l] *= f;
            }
            t1 = f * (t1 + d * t0);
            t0 *= f;
            m = block_max;
        }
        for c in chunks {
            for l in 0..LANES {
                let (x, e) = exp_floored::<FMA>(c[l] * inv_t - m);
                s0[l] += e;
                s1[l] = fma::<FMA>(e, x, s1[l]);
            }
        }
        for &z in tail {
            let (x, e) = exp_floored::<FMA>(z * inv_t - m);
            t0 += e;
            t1 = fma::<FMA>(e, x, t1);
        }
    }
    let sum0 = s0.iter().sum::<f32>() + t0;
    let sum1 = s1.iter().sum::<f32>() + t1;
    let log_s0 = sum0.ln();
    let lse = m + log_s0;
    (row[target] * inv_t - lse, log_s0 - sum1 / sum0, lse)
}

/// dz of one row, in place over its logits z: (g_lp (δ_vy − p_v) − g_H p_v (log p_v + H)) / T.
#[inline(always)]
fn row_backward<const FMA: bool>(row: &mut [f32], target: usize, inv_t: f32, g: RowGrad) {
    let (a, b) = (g.g_lp * inv_t, g.g_h * inv_t);
    for z in row.iter_mut() {
        let (log_p, p) = exp_floored::<FMA>(*z * inv_t - g.lse);
        *z = -p * (a + b * (log_p + g.entropy));
    }
    row[target] += a;
}

isa_copies!(avx512, "avx512f,avx2,fma":
    row_forward(row: &[f32], target: usize, inv_t: f32) -> (f32, f32, f32);
    row_backward(row: &mut [f32], target: usize, inv_t: f32, g: RowGrad);
);
isa_copies!(avx2, "avx2,fma":
    row_forward(row: &[f32], target: usize, inv_t: f32) -> (f32, f32, f32);
    row_backward(row: &mut [f32], target: usize, inv_t: f32, g: RowGrad);
);

fn check_targets(targets: &[usize], vocab: usize) {
    if let Some((i, &t)) = targets.iter().enumerate().find(|(_, &t)| t >= vocab) {
        panic!(
            "token_logprob_entropy: target {t} of row {i} is outside the vocabulary (size {vocab})"
        );
    }
}

/// Forward over `rows = targets.len()` rows of `logits` (row-major `[rows, vocab]`).
/// Returns `out` = `[rows, 2]` interleaved (logp, entropy) and `lse` = `[rows]`.
pub fn logprob_entropy_forward(
    logits: &[f32],
    targets: &[usize],
    temperature: f32,
) -> (Vec<f32>, Vec<f32>) {
    let rows = targets.len();
    assert!(
        rows > 0 && logits.len().is_multiple_of(rows),
        "logits length is not rows × vocab"
    );
    let vocab = logits.len() / rows;
    check_targets(targets, vocab);
    let inv_t = 1.0 / temperature;
    let isa = Isa::detect();
    let mut out = vec![0.0f32; rows * 2];
    let mut lse = vec![0.0f32; rows];
    out.par_chunks_mut(2)
        .zip(lse.par_iter_mut())
        .zip(logits.par_chunks(vocab).zip(targets.par_iter()))
        .for_each(|((o, l), (row, &y))| {
            let (lp, h, s) = dispatch!(isa, row_forward(row, y, inv_t));
            o[0] = lp;
            o[1] = h;
            *l = s;
        });
    (out, lse)
}

/// Backward: `dlogits [rows, vocab]` from the forward's `lse`, `out` (logp, entropy) and
/// the incoming gradient `grad` = `[rows, 2]` interleaved (g_logp, g_entropy).
pub fn logprob_entropy_backward(
    logits: &[f32],
    targets: &[usize],
    lse: &[f32],
    out: &[f32],
    grad: &[f32],
    temperature: f32,
) -> Vec<f32> {
    let rows = targets.len();
    let vocab = logits.len() / rows.max(1);
    check_targets(targets, vocab);
    let (inv_t, isa) = (1.0 / temperature, Isa::detect());
    let grads = RowGrads { lse, out, grad };
    let mut dlogits = super::buffer::zeroed(logits.len());
    dlogits
        .par_chunks_mut(vocab)
        .enumerate()
        .for_each(|(r, row)| {
            row.copy_from_slice(&logits[r * vocab..(r + 1) * vocab]);
            backward_row(isa, row, targets[r], inv_t, grads.row(r));
        });
    dlogits
}

/// [`logprob_entropy_backward`] overwriting `logits` with dlogits (no second `[rows, vocab]`
/// buffer: for logits nothing else holds, as in the autodiff backward pass).
pub fn logprob_entropy_backward_in_place(
    logits: &mut [f32],
    targets: &[usize],
    lse: &[f32],
    out: &[f32],
    grad: &[f32],
    temperature: f32,
) {
    let rows = targets.len();
    let vocab = logits.len() / rows.max(1);
    check_targets(targets, vocab);
    let (inv_t, isa) = (1.0 / temperature, Isa::detect());
    let grads = RowGrads { lse, out, grad };
    logits
        .par_chunks_mut(vocab)
        .enumerate()
        .for_each(|(r, row)| backward_row(isa, row, targets[r], inv_t, grads.row(r)));
}

/// The per-row inputs of the backward pass.
#[derive(Clone, Copy)]
struct RowGrads<'a> {
    lse: &'a [f32],
    out: &'a [f32],
    grad: &'a [f32],
}

impl RowGrads<'_> {
    fn row(&self, r: usize) -> RowGrad {
        RowGrad {
            lse: self.lse[r],
            entropy: self.out[2 * r + 1],
            g_lp: self.grad[2 * r],
            g_h: self.grad[2 * r + 1],
        }
    }
}

/// One row's backward pass in place, with the instruction set `isa` allows.
fn backward_row(isa: Isa, row: &mut [f32], target: usize, inv_t: f32, g: RowGrad) {
    dispatch!(isa, row_backward(row, target, inv_t, g))
}
