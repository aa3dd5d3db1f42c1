//! Fused token log-prob + entropy on the CPU: one pass over each logits row.
//!
//! With s = z / T (T the temperature) and p = softmax(s) over the vocabulary:
//! - lse = log Σ_v e^{s_v} (online log-sum-exp),
//! - logp = s_y − lse for the target y,
//! - H = −Σ p_v log p_v = log S₀ − S₁ / S₀ with S₀ = Σ e^{s_v − m}, S₁ = Σ e^{s_v − m}(s_v − m)
//!   and m the running row max (both sums rescaled when m grows:
//!   S₁ ← e^{m−m'}(S₁ + (m − m')S₀), S₀ ← e^{m−m'}S₀).
//!
//! Backward (from the saved lse and H, never a stored softmax):
//! ∂logp/∂s_v = δ_vy − p_v, ∂H/∂s_v = −p_v(log p_v + H), and ∂/∂z = ∂/∂s / T.
//!
//! The row is walked in blocks of [`BLOCK`] values: the block max is taken first (the
//! block stays in L1), then the block's exponentials are added, so memory is read once
//! and the inner loops vectorise (16 lanes: one AVX-512 or two AVX2 registers, picked at
//! run time). Rows run in parallel with rayon.
//! Sources: the online softmax of Milakov & Gimelshein 2018; verl/ROLL
//! `entropy_from_logits` (H = lse − Σ p·s); the oracle is `roll-flow-operators`
//! `model::logprob` (log_softmax + gather, −Σ e^{log p} log p).

use rayon::prelude::*;

use super::simd::{exp, has_avx2_fma, has_avx512};

const LANES: usize = 16;
const BLOCK: usize = 1024;
const NEG_BIG: f32 = -3.0e38;

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
                let s = c[l] * inv_t;
                bm[l] = if s > bm[l] { s } else { bm[l] };
            }
        }
        let mut block_max = bm.iter().fold(NEG_BIG, |a, &b| if b > a { b } else { a });
        for &z in tail {
            let s = z * inv_t;
            block_max = if s > block_max { s } else { block_max };
        }
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
                let x = c[l] * inv_t - m;
                let e = exp::<FMA>(x);
                s0[l] += e;
                s1[l] += e * x;
            }
        }
        for &z in tail {
            let x = z * inv_t - m;
            let e = exp::<FMA>(x);
            t0 += e;
            t1 += e * x;
        }
    }
    let sum0 = s0.iter().sum::<f32>() + t0;
    let sum1 = s1.iter().sum::<f32>() + t1;
    let log_s0 = sum0.ln();
    let lse = m + log_s0;
    (row[target] * inv_t - lse, log_s0 - sum1 / sum0, lse)
}

/// dz of one row: (g_lp (δ_vy − p_v) − g_H p_v (log p_v + H)) / T.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn row_backward<const FMA: bool>(
    row: &[f32],
    out: &mut [f32],
    target: usize,
    inv_t: f32,
    lse: f32,
    entropy: f32,
    g_lp: f32,
    g_h: f32,
) {
    let (a, b) = (g_lp * inv_t, g_h * inv_t);
    for (o, &z) in out.iter_mut().zip(row) {
        let log_p = z * inv_t - lse;
        let p = exp::<FMA>(log_p);
        *o = -p * (a + b * (log_p + entropy));
    }
    out[target] += a;
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
fn row_forward_avx512(row: &[f32], target: usize, inv_t: f32) -> (f32, f32, f32) {
    row_forward::<true>(row, target, inv_t)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
fn row_backward_avx512(
    row: &[f32],
    out: &mut [f32],
    target: usize,
    inv_t: f32,
    lse: f32,
    entropy: f32,
    g_lp: f32,
    g_h: f32,
) {
    row_backward::<true>(row, out, target, inv_t, lse, entropy, g_lp, g_h)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn row_forward_avx2(row: &[f32], target: usize, inv_t: f32) -> (f32, f32, f32) {
    row_forward::<true>(row, target, inv_t)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
fn row_backward_avx2(
    row: &[f32],
    out: &mut [f32],
    target: usize,
    inv_t: f32,
    lse: f32,
    entropy: f32,
    g_lp: f32,
    g_h: f32,
) {
    row_backward::<true>(row, out, target, inv_t, lse, entropy, g_lp, g_h)
}

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
    let (avx2, avx512) = (has_avx2_fma(), has_avx512());
    let mut out = vec![0.0f32; rows * 2];
    let mut lse = vec![0.0f32; rows];
    out.par_chunks_mut(2)
        .zip(lse.par_iter_mut())
        .zip(logits.par_chunks(vocab).zip(targets.par_iter()))
        .for_each(|((o, l), (row, &y))| {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the target features were detected at run time.
            let (lp, h, s) = if avx512 {
                unsafe { row_forward_avx512(row, y, inv_t) }
            } else if avx2 {
                unsafe { row_forward_avx2(row, y, inv_t) }
            } else {
                row_forward::<false>(row, y, inv_t)
            };
            #[cfg(not(target_arch = "x86_64"))]
            let (lp, h, s) = row_forward::<false>(row, y, inv_t);
            let _ = (avx2, avx512);
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
    let inv_t = 1.0 / temperature;
    let (avx2, avx512) = (has_avx2_fma(), has_avx512());
    let mut dlogits = vec![0.0f32; logits.len()];
    dlogits
        .par_chunks_mut(vocab)
        .zip(logits.par_chunks(vocab))
        .enumerate()
        .for_each(|(r, (o, row))| {
            let (y, h, g_lp, g_h) = (targets[r], out[2 * r + 1], grad[2 * r], grad[2 * r + 1]);
            #[cfg(target_arch = "x86_64")]
            if avx512 {
                // SAFETY: avx512f, avx2 and fma were detected at run time.
                unsafe { row_backward_avx512(row, o, y, inv_t, lse[r], h, g_lp, g_h) };
                return;
            } else if avx2 {
                // SAFETY: avx2 and fma were detected at run time.
                unsafe { row_backward_avx2(row, o, y, inv_t, lse[r], h, g_lp, g_h) };
                return;
            }
            let _ = (avx2, avx512);
            row_backward::<false>(row, o, y, inv_t, lse[r], h, g_lp, g_h);
        });
    dlogits
}
