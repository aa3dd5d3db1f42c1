//! The AVX-512 rows of [`super::logprob`], written with intrinsics (the loops the compiler
//! vectorises from plain Rust cannot use the two instructions that make `exp` cheap).
//!
//! Everything is in base 2: with c = log₂e / T, y = z·c − m·c = (s − m)·log₂e, so
//! e^{s−m} = 2^y and one `vfmadd` turns a logit into y. Then
//! - S₀ = Σ 2^y, S₁ = Σ 2^y·y, log₂S₀ = l;
//! - lse = ln2·(m·c + l), logp = ln2·(y_target − l), H = ln2·(l − S₁/S₀)
//!   (H = log S₀ − Σ e^x x / S₀ with x = y·ln2, as in [`super::logprob`]).
//!
//! `2^y` for y ≥ −126: `vreduceps` gives f = y − ⌊y⌋ ∈ [0, 1), a degree-5 polynomial
//! (fitted to minimise the relative error on [0, 1), p(0) = 1 exactly) gives 2^f, and
//! `vscalefps` multiplies by 2^⌊y⌋: 8 instructions and a relative error ≤ 2e-7 (the unit test
//! below), against 15 for the Cody–Waite + degree-6 Taylor `exp` of [`super::simd`], which
//! needs an explicit range reduction, two rounding steps and exponent-bit arithmetic.
//!
//! The row is read twice: a max/min pass (from memory), then the exponential pass (from L2:
//! a 32000-logit row is 128 KB, a 151,936-logit row 600 KB; L2 is 2 MB per core). That
//! replaces the online rescaling of the one-pass version and, knowing the row's range,
//! drops all clamping when every y is above −125 (no −∞, no value 87 below the max): the
//! exponential pass is then 10 instructions per 16 logits. Rows that need it (a logit of
//! −∞ from a guide, or a huge range) take the masked variant: y is clamped at [`Y_FLOOR`] and
//! lanes at or below it add exactly 0 (and get a zero gradient).
//!
//! Each lane sums in f32 within blocks of [`BLOCK`] logits, folded into a second f32
//! accumulator per block (two-level summation: the rounding error grows with the block
//! length plus the number of blocks, not with the row length).

use std::arch::x86_64::*;

use super::simd::low_lanes;

/// y below this (e^x below e^{−87.3}) counts as −∞: 2^y is taken as exactly 0.
const Y_FLOOR: f32 = -126.0;
/// Rows whose smallest y is above this take the unmasked exponential pass (2^y is a normal
/// float there, never 0 or subnormal).
const Y_FAST: f32 = -125.0;
const BLOCK: usize = 2048;
/// 2^f ≈ 1 + f(C1 + f(C2 + f(C3 + f(C4 + f·C5)))) on [0, 1), relative error 1.7e-7 in f32
/// (least-squares fit with Lawson reweighting to the minimax, p(0) = 1 fixed).
const C1: f32 = 0.693_151_3;
const C2: f32 = 0.240_164_46;
const C3: f32 = 0.055_799_91;
const C4: f32 = 0.009_017_038;
const C5: f32 = 0.001_867_126_3;

/// 2^y for finite y ≥ [`Y_FLOOR`].
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn exp2(y: __m512) -> __m512 {
    // imm 0x09: keep 0 fraction bits, round down, suppress the precision exception.
    let f = _mm512_reduce_ps::<0x09>(y);
    let mut p = _mm512_fmadd_ps(_mm512_set1_ps(C5), f, _mm512_set1_ps(C4));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(C3));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(C2));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(C1));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0));
    _mm512_scalef_ps(p, y) // p · 2^⌊y⌋
}

/// (max, min) of a row.
#[target_feature(enable = "avx512f,avx512dq")]
fn max_min(row: &[f32]) -> (f32, f32) {
    let mut hi = [_mm512_set1_ps(f32::NEG_INFINITY); 2];
    let mut lo = [_mm512_set1_ps(f32::INFINITY); 2];
    let mut pairs = row.chunks_exact(32);
    for c in pairs.by_ref() {
        // SAFETY: `c` holds 32 floats.
        let (a, b) = unsafe {
            (
                _mm512_loadu_ps(c.as_ptr()),
                _mm512_loadu_ps(c.as_ptr().add(16)),
            )
        };
        hi = [_mm512_max_ps(hi[0], a), _mm512_max_ps(hi[1], b)];
        lo = [_mm512_min_ps(lo[0], a), _mm512_min_ps(lo[1], b)];
    }
    for c in pairs.remainder().chunks(16) {
        let k = low_lanes(c.len());
        // SAFETY: the masked load touches only the `c.len()` lanes of `c`.
        let a = unsafe { _mm512_maskz_loadu_ps(k, c.as_ptr()) };
        hi[0] = _mm512_mask_max_ps(hi[0], k, hi[0], a);
        lo[0] = _mm512_mask_min_ps(lo[0], k, lo[0], a);
    }
    (
        _mm512_reduce_max_ps(_mm512_max_ps(hi[0], hi[1])),
        _mm512_reduce_min_ps(_mm512_min_ps(lo[0], lo[1])),
    )
}

/// One step of the exponential pass: adds 2^y and 2^y·y of the lanes in `k` (all lanes
/// when not `MASKED`: the caller knows every y is ≥ [`Y_FAST`]).
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn add_exp<const MASKED: bool>(y: __m512, k: __mmask16, s: &mut [__m512; 2]) {
    if MASKED {
        let k = k & _mm512_cmp_ps_mask::<_CMP_GT_OQ>(y, _mm512_set1_ps(Y_FLOOR));
        let y = _mm512_max_ps(y, _mm512_set1_ps(Y_FLOOR));
        let e = exp2(y);
        s[0] = _mm512_mask_add_ps(s[0], k, s[0], e);
        s[1] = _mm512_mask3_fmadd_ps(e, y, s[1], k);
    } else {
        let e = exp2(y);
        s[0] = _mm512_add_ps(s[0], e);
        s[1] = _mm512_fmadd_ps(e, y, s[1]);
    }
}

/// (S₀, S₁) of a row with y = z·c + neg_mc. Meanwhile the same span of the memory right
/// after the row (the next row, when rows are contiguous) is prefetched into L2, so the
/// next row's max/min pass reads from cache while this pass computes.
#[target_feature(enable = "avx512f,avx512dq")]
fn exp_sums<const MASKED: bool>(row: &[f32], c: f32, neg_mc: f32) -> (f32, f32) {
    let ahead = row.len();
    let (cv, bv) = (_mm512_set1_ps(c), _mm512_set1_ps(neg_mc));
    let zero = _mm512_setzero_ps();
    let mut total = [zero; 2];
    for block in row.chunks(BLOCK) {
        let (mut a, mut b) = ([zero; 2], [zero; 2]);
        let mut pairs = block.chunks_exact(32);
        for p in pairs.by_ref() {
            // A prefetch never faults, whatever the address.
            let next = p.as_ptr().wrapping_add(ahead).cast::<i8>();
            _mm_prefetch::<_MM_HINT_T1>(next);
            _mm_prefetch::<_MM_HINT_T1>(next.wrapping_add(64));
            // SAFETY: `p` holds 32 floats.
            let (z0, z1) = unsafe {
                (
                    _mm512_loadu_ps(p.as_ptr()),
                    _mm512_loadu_ps(p.as_ptr().add(16)),
                )
            };
            add_exp::<MASKED>(_mm512_fmadd_ps(z0, cv, bv), !0, &mut a);
            add_exp::<MASKED>(_mm512_fmadd_ps(z1, cv, bv), !0, &mut b);
        }
        for t in pairs.remainder().chunks(16) {
            let k = low_lanes(t.len());
            // SAFETY: the masked load touches only the `t.len()` lanes of `t`.
            let z = unsafe { _mm512_maskz_loadu_ps(k, t.as_ptr()) };
            add_exp::<true>(_mm512_fmadd_ps(z, cv, bv), k, &mut a);
        }
        total[0] = _mm512_add_ps(total[0], _mm512_add_ps(a[0], b[0]));
        total[1] = _mm512_add_ps(total[1], _mm512_add_ps(a[1], b[1]));
    }
    (
        _mm512_reduce_add_ps(total[0]),
        _mm512_reduce_add_ps(total[1]),
    )
}

/// (logp, entropy, lse) of one row (see the module docs).
#[target_feature(enable = "avx512f,avx512dq")]
pub(super) fn row_forward(row: &[f32], target: usize, inv_t: f32) -> (f32, f32, f32) {
    use std::f32::consts::{LN_2, LOG2_E};
    let (max, min) = max_min(row);
    let c = inv_t * LOG2_E;
    let mc = max * c;
    let (s0, s1) = if min * c - mc > Y_FAST {
        exp_sums::<false>(row, c, -mc)
    } else {
        exp_sums::<true>(row, c, -mc)
    };
    let l = s0.log2();
    let y_target = row[target].mul_add(c, -mc);
    (LN_2 * (y_target - l), LN_2 * (l - s1 / s0), LN_2 * (mc + l))
}

/// dz of one row from `src` into `dst` (the same row for the in-place pass):
/// dz = −p·(a + b(log p + H)) + a·δ_vy with (a, b) = (g_lp, g_H)/T, p = 2^y,
/// y = log₂p = z·c − lse·log₂e; lanes with y ≤ [`Y_FLOOR`] (p = 0 in f32, −∞ logits) get 0.
///
/// # Safety
/// `src` and `dst` are valid for `n` floats (they may be the same pointer).
#[target_feature(enable = "avx512f,avx512dq")]
pub(super) unsafe fn row_backward(
    src: *const f32,
    dst: *mut f32,
    n: usize,
    target: usize,
    inv_t: f32,
    g: super::logprob_row::RowGrad,
) {
    use std::f32::consts::{LN_2, LOG2_E};
    let (a, b) = (g.g_lp * inv_t, g.g_h * inv_t);
    let c = _mm512_set1_ps(inv_t * LOG2_E);
    let neg_lc = _mm512_set1_ps(-g.lse * LOG2_E);
    // −p(a + bH + b·ln2·y) = p·(ca + cb·y)
    let ca = _mm512_set1_ps(-(a + b * g.entropy));
    let cb = _mm512_set1_ps(-b * LN_2);
    let floor = _mm512_set1_ps(Y_FLOOR);
    let mut i = 0;
    while i < n {
        let k = low_lanes(n - i);
        let z = _mm512_maskz_loadu_ps(k, src.add(i));
        let y = _mm512_fmadd_ps(z, c, neg_lc);
        let live = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(y, floor);
        let y = _mm512_max_ps(y, floor);
        let d = _mm512_maskz_mul_ps(live, exp2(y), _mm512_fmadd_ps(cb, y, ca));
        _mm512_mask_storeu_ps(dst.add(i), k, d);
        i += 16;
    }
    *dst.add(target) += a;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tests the AVX-512 `exp2` itself whatever `ROLL_FLOW_KERNELS_ISA` says (the override
    /// picks the kernels' dispatch, not this direct call); on a CPU without AVX-512 it
    /// cannot run and says so on stderr.
    #[test]
    fn exp2_matches_f64() {
        if !super::super::simd::has_avx512() {
            // Straight to the stream, past libtest's capture, so the skip shows in the log.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED cpu::logprob_avx512::tests::exp2_matches_f64: this CPU has no AVX-512"
            );
            return;
        }
        // SAFETY: AVX-512 was detected above.
        unsafe {
            let mut worst = 0.0f64;
            let mut y = Y_FLOOR;
            while y < 0.0 {
                let ys: [f32; 16] = std::array::from_fn(|i| y + i as f32 * 0.000_37);
                let mut out = [0.0f32; 16];
                _mm512_storeu_ps(out.as_mut_ptr(), exp2(_mm512_loadu_ps(ys.as_ptr())));
                for (&y, &e) in ys.iter().zip(&out) {
                    let want = (y as f64).exp2();
                    worst = worst.max((e as f64 - want).abs() / want);
                }
                y += 0.0061;
            }
            assert!(worst < 2.5e-7, "worst relative error {worst}");
        }
    }
}
