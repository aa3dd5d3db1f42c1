//! CubeCL token log-prob + entropy, forward and backward (one cube per logits row).
//!
//! Formula as in [`crate::cpu::logprob`]: with s = z/T, each unit walks the row with
//! stride `CUBE_DIM_X` keeping an online (m, S₀ = Σe^{s−m}, S₁ = Σe^{s−m}(s−m)); the
//! cube merges the triples in shared memory (tree reduction, rescaling both sides to the
//! larger max), then lse = m + ln S₀, H = ln S₀ − S₁/S₀, logp = s_y − lse.
//! Backward: dz_v = (g_lp(δ_vy − p_v) − g_H p_v(log p_v + H)) / T, p_v = e^{s_v − lse}.
//!
//! Logits of any float type (f32, bf16, f16) are read as such and every sum, the max and
//! lse are kept in the accumulator type `A` (f32 at launch): a bf16 S₀ over 151,936 terms
//! would stop growing once each term falls below its last bit, and a bf16 lse is only
//! good to ±0.03, which the backward's p_v would inherit. The log-prob and entropy are
//! written in `A` too (`[rows, 2]`, a few bytes a row): a bf16 log-prob of −5 is good to
//! ±0.02, and PPO's ratio e^{logp − old} would inherit 2% of noise, so half-precision
//! logits still give f32 log-probs (as verl's, computed in f32 from bf16 logits). The
//! backward reads the incoming gradient in `A` and writes dlogits in the logits' type;
//! what it reads per row, (lse, H), is saved in `A` beside the output.
//!
//! Rows are read where they lie: `row_vectors` apart, in vectors. CUDA pads each row of a
//! tensor it lays out to a multiple of 512 bytes, so bf16 logits over Qwen2.5's 151,936
//! tokens come 152,064 apart; copying them to compact rows first cost more than the kernel
//! itself (run 7: 6.1 ms for the forward, of which Nsight Compute timed the kernel at
//! 0.89 ms). The gradient is written compactly, `vocab` apart.
//! Both walks read and write the row as vectors of `N` elements (the widest load the device
//! favours that divides the vocabulary: 8 bf16 or 4 f32 in one 16-byte load on CUDA), so a
//! unit has one wide load in flight per step instead of one 2-byte load, which a sum carried
//! from step to step would otherwise serialise; the forward rescales its running sums once
//! a vector, by the vector's largest score.
//! Source: online softmax (Milakov & Gimelshein 2018), burn-cubecl's one-cube-per-row
//! reductions.

use cubecl::prelude::*;

use super::cube_index::cube_index;

/// A "minus infinity" WGSL accepts as a literal; finite logits never get near it.
const NEG_BIG: f32 = -1.0e30;
/// Lower bound of s − m and log p: e^FLOOR = 0 exactly, and a logit of −∞ (a token ruled
/// out by a guide) then adds 0·FLOOR = 0 to the sums instead of 0·(−∞) = NaN.
const FLOOR: f32 = -1.0e4;

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn logprob_forward_kernel<F: Float, A: Float, I: Numeric, N: Size>(
    logits: &Tensor<Vector<F, N>>,
    targets: &Tensor<I>,
    out: &mut Tensor<A>,
    lse: &mut Tensor<A>,
    rows: u32,
    vocab: u32,
    row_vectors: u32,
    inv_t: f32,
    #[comptime] block: u32,
    #[define(F, A, I)] _dtypes: [StorageType; 3],
) {
    let row = cube_index(rows);
    let n = logits.vector_size();
    let vectors = vocab as usize / n;
    let base = row * row_vectors as usize;
    let inv = A::cast_from(inv_t);
    let mut m = A::new(NEG_BIG);
    let mut s0 = A::new(0.0);
    let mut s1 = A::new(0.0);
    let mut i = UNIT_POS_X as usize;
    while i < vectors {
        let x = logits[base + i];
        let mut top = A::cast_from(x[0]) * inv;
        #[unroll]
        for k in 1..n {
            top = A::max(top, A::cast_from(x[k]) * inv);
        }
        if top > m {
            let d = m - top;
            let f = d.exp();
            s1 = f * (s1 + d * s0);
            s0 *= f;
            m = top;
        }
        #[unroll]
        for k in 0..n {
            let y = A::max(A::cast_from(x[k]) * inv - m, A::new(FLOOR));
            let e = y.exp();
            s0 += e;
            s1 += e * y;
        }
        i += CUBE_DIM_X as usize;
    }
    // One shared array holding the three per-unit values side by side, (m | S₀ | S₁), as
    // the PPO kernel keeps its partials.
    let b = block as usize;
    let mut acc = SharedMemory::<A>::new(3 * b);
    let u = UNIT_POS_X as usize;
    acc[u] = m;
    acc[b + u] = s0;
    acc[2 * b + u] = s1;
    sync_cube();
    let mut stride = CUBE_DIM_X as usize / 2;
    while stride > 0 {
        if u < stride {
            let ma = acc[u];
            let mb = acc[u + stride];
            let mx = A::max(ma, mb);
            let da = ma - mx;
            let db = mb - mx;
            let fa = da.exp();
            let fb = db.exp();
            let a0 = acc[b + u];
            let b0 = acc[b + u + stride];
            acc[2 * b + u] =
                fa * (acc[2 * b + u] + da * a0) + fb * (acc[2 * b + u + stride] + db * b0);
            acc[b + u] = fa * a0 + fb * b0;
            acc[u] = mx;
        }
        sync_cube();
        stride /= 2;
    }
    if u == 0 {
        let log_s0 = acc[b].ln();
        let l = acc[0] + log_s0;
        let y = u32::cast_from(targets[row]) as usize;
        // The target's lane by constant indices only (CUDA's code for a runtime lane index
        // casts the vector's address, which a const vector refuses).
        let (x, lane) = (logits[base + y / n], y % n);
        let mut target = A::cast_from(x[0]);
        #[unroll]
        for k in 1..n {
            if k == lane {
                target = A::cast_from(x[k]);
            }
        }
        out[row * 2] = target * inv - l;
        let h = log_s0 - acc[2 * b] / acc[b];
        out[row * 2 + 1] = h;
        lse[row * 2] = l;
        lse[row * 2 + 1] = h;
    }
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn logprob_backward_kernel<F: Float, A: Float, I: Numeric, N: Size>(
    logits: &Tensor<Vector<F, N>>,
    targets: &Tensor<I>,
    lse: &Tensor<A>,
    grad: &Tensor<A>,
    dlogits: &mut Tensor<Vector<F, N>>,
    rows: u32,
    vocab: u32,
    row_vectors: u32,
    inv_t: f32,
    #[define(F, A, I)] _dtypes: [StorageType; 3],
) {
    let row = cube_index(rows);
    let n = logits.vector_size();
    let vectors = vocab as usize / n;
    let (base, out_base) = (row * row_vectors as usize, row * vectors);
    let inv = A::cast_from(inv_t);
    let l = lse[row * 2];
    let h = lse[row * 2 + 1];
    let a = grad[row * 2] * inv;
    let b = grad[row * 2 + 1] * inv;
    let y = u32::cast_from(targets[row]) as usize;
    let mut i = UNIT_POS_X as usize;
    while i < vectors {
        let x = logits[base + i];
        let mut dz = Vector::new(F::new(0.0));
        #[unroll]
        for k in 0..n {
            let log_p = A::max(A::cast_from(x[k]) * inv - l, A::new(FLOOR));
            let p = log_p.exp();
            let mut d = A::new(0.0) - p * (a + b * (log_p + h));
            if i * n + k == y {
                d += a;
            }
            dz[k] = F::cast_from(d);
        }
        dlogits[out_base + i] = dz;
        i += CUBE_DIM_X as usize;
    }
}
