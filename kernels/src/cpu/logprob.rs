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
/// Lower bound of s − m and log p in the sums: far below exp's underflow (so e^x = 0
/// exactly) yet finite, so that a logit of −∞ (a masked token) adds 0·x = 0, not NaN.
const FLOOR: f32 = -1.0e4;

#[inline(always)]
fn floored(x: f32) -> f32 {
    if x < FLOOR {
        FLOOR
    } else {
        x
    }
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
                let x = floored(c[l] * inv_t - m);
                let e = exp::<FMA>(x);
                s0[l] += e;
                s1[l] += e * x;
            }
        }
        for &z in tail {
            let x = floored(z * inv_t - m);
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

/// What the backward pass of one row needs besides the logits.
#[derive(Clone, Copy)]
struct RowGrad {
    lse: f32,
    entropy: f32,
    g_lp: f32,
    g_h: f32,
}

/// dz of one row: (g_lp (δ_vy − p_v) − g_H p_v (log p_v + H)) / T.
#[inline(always)]
fn row_backward<const FMA: bool>(
    row: &[f32],
    out: &mut [f32],
    target: usize,
    inv_t: f32,
    g: RowGrad,
) {
    let (a, b) = (g.g_lp * inv_t, g.g_h * inv_t);
    for (o, &z) in out.iter_mut().zip(row) {
        let log_p = floored(z * inv_t - g.lse);
        let p = exp::<FMA>(log_p);
        *o = -p * (a + b * (log_p + g.entropy));
    }
    out[target] += a;
}

/// The instruction set the row loops run with, detected once per call.
#[derive(Clone, Copy)]
enum Isa {
    Avx512,
    Avx2,
    Generic,
}

impl Isa {
    fn detect() -> Isa {
        if has_avx512() {
            Isa::Avx512
        } else if has_avx2_fma() {
            Isa::Avx2
        } else {
            Isa::Generic
        }
    }
}

/// Copies of the generic row loops compiled with `features` enabled (same bodies; LLVM
/// vectorises each for its instruction set).
macro_rules! row_loops_with {
    ($module:ident, $features:literal) => {
        #[cfg(target_arch = "x86_64")]
        mod $module {
            use super::{row_backward, row_forward, RowGrad};

            #[target_feature(enable = $features)]
            pub(super) fn forward(row: &[f32], target: usize, inv_t: f32) -> (f32, f32, f32) {
                row_forward::<true>(row, target, inv_t)
            }

            #[target_feature(enable = $features)]
            pub(super) fn backward(
                row: &[f32],
                out: &mut [f32],
                target: usize,
                inv_t: f32,
                g: RowGrad,
            ) {
                row_backward::<true>(row, out, target, inv_t, g)
            }
        }
    };
}

row_loops_with!(avx512, "avx512f,avx2,fma");
row_loops_with!(avx2, "avx2,fma");

fn forward_row(isa: Isa, row: &[f32], target: usize, inv_t: f32) -> (f32, f32, f32) {
    match isa {
        // SAFETY: `Isa::detect` found these target features at run time.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512::forward(row, target, inv_t) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { avx2::forward(row, target, inv_t) },
        _ => row_forward::<false>(row, target, inv_t),
    }
}

fn backward_row(isa: Isa, row: &[f32], out: &mut [f32], target: usize, inv_t: f32, g: RowGrad) {
    match isa {
        // SAFETY: `Isa::detect` found these target features at run time.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512::backward(row, out, target, inv_t, g) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { avx2::backward(row, out, target, inv_t, g) },
        _ => row_backward::<false>(row, out, target, inv_t, g),
    }
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
    let isa = Isa::detect();
    let mut out = vec![0.0f32; rows * 2];
    let mut lse = vec![0.0f32; rows];
    out.par_chunks_mut(2)
        .zip(lse.par_iter_mut())
        .zip(logits.par_chunks(vocab).zip(targets.par_iter()))
        .for_each(|((o, l), (row, &y))| {
            let (lp, h, s) = forward_row(isa, row, y, inv_t);
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
    let isa = Isa::detect();
    let mut dlogits = vec![0.0f32; logits.len()];
    dlogits
        .par_chunks_mut(vocab)
        .zip(logits.par_chunks(vocab))
        .enumerate()
        .for_each(|(r, (o, row))| {
            let g = RowGrad {
                lse: lse[r],
                entropy: out[2 * r + 1],
                g_lp: grad[2 * r],
                g_h: grad[2 * r + 1],
            };
            backward_row(isa, row, o, targets[r], inv_t, g);
        });
    dlogits
}
