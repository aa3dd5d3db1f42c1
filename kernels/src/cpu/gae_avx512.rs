//! The AVX-512 GAE scan of one sequence for [`super::gae`]: the serial recurrence
//! A_t = δ_t + γλ·A_{t+1} becomes a vectorised scan, 16 time steps per register.
//!
//! 1. Compaction: the response tokens' rewards and values are packed into a scratch buffer
//!    (`vcompressps` on the mask), so V_next is simply the next packed value (0 after the
//!    last) and the observation tokens in between drop out.
//! 2. Scan over the packed tokens, last chunk of 16 first: δ = r + γ·V_next − V from three
//!    loads, then the suffix scan within the register in four doubling steps
//!    (x_i += (γλ)^d·x_{i+d} for d = 1, 2, 4, 8, each a lane shift `valignd` and one
//!    multiply-add), then the carry from the chunk above: A_i = x_i + (γλ)^{16−i}·A_16.
//!    The only serial dependency left is the carry, one broadcast and one multiply-add per
//!    16 tokens.
//! 3. Expansion: advantages and returns go back to the response positions
//!    (`vexpandps`), 0 elsewhere.
//!
//! About 40 vector instructions per 16 tokens, against ≈ 5 cycles per token for the scalar
//! f64 scan. The arithmetic is f32 (the CubeCL kernel does the same), in a different order
//! than the sequential oracle: the doubling steps add at most four rounding steps per
//! chunk plus one per chunk for the carry, so the error grows with the number of chunks
//! (≈ 1e-6 relative to |A| at 512 tokens); the test suite's bound against the f64 oracle,
//! ≤ 1e-4·(1 + |A|), holds with a wide margin.

use std::arch::x86_64::*;

/// Scratch space of one worker, reused across sequences.
#[derive(Default)]
pub(super) struct Scratch(Vec<f32>);

/// The lanes of the last `n` (≤ 16) elements of a 16-lane chunk.
fn top_lanes(n: usize) -> __mmask16 {
    if n == 0 {
        0
    } else {
        !0u16 << (16 - n)
    }
}

/// The lanes of the first `n` (≤ 16) elements.
fn low_lanes(n: usize) -> __mmask16 {
    if n >= 16 {
        !0
    } else {
        ((1u32 << n) - 1) as __mmask16
    }
}

/// The response-token lanes (mask ≠ 0) among the `k` lanes of `m[i..]`.
///
/// # Safety
/// The `k` lanes from `i` must lie inside `m`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn live_lanes(m: &[f32], i: usize, k: __mmask16) -> __mmask16 {
    // SAFETY: the masked load reads only the `k` lanes, inside `m` (the caller's contract).
    let mask = unsafe { _mm512_maskz_loadu_ps(k, m.as_ptr().add(i)) };
    _mm512_mask_cmp_ps_mask::<_CMP_NEQ_UQ>(k, mask, _mm512_setzero_ps())
}

/// x_i + c·x_{i+D} (0 past the last lane).
#[inline]
#[target_feature(enable = "avx512f")]
fn shift_add<const D: i32>(x: __m512, c: __m512) -> __m512 {
    let shifted = _mm512_alignr_epi32::<D>(_mm512_setzero_si512(), _mm512_castps_si512(x));
    _mm512_fmadd_ps(_mm512_castsi512_ps(shifted), c, x)
}

/// Advantages and returns of one sequence (`r`, `v`, `m` its rewards, values and mask)
/// into `adv` and `ret`.
#[target_feature(enable = "avx512f,avx512dq")]
#[allow(clippy::too_many_arguments)]
pub(super) fn scan_sequence(
    r: &[f32],
    v: &[f32],
    m: &[f32],
    adv: &mut [f32],
    ret: &mut [f32],
    gamma: f32,
    gl: f32,
    scratch: &mut Scratch,
) {
    let n = r.len();
    assert!(v.len() == n && m.len() == n && adv.len() == n && ret.len() == n);
    // Four packed columns (r, V, A, returns) of n + 32 floats: compressed stores write 16
    // lanes, and V gets a 0 after the last packed value.
    let stride = n + 32;
    scratch.0.resize(4 * stride, 0.0);
    let (cr, rest) = scratch.0.split_at_mut(stride);
    let (cv, rest) = rest.split_at_mut(stride);
    let (ca, cg) = rest.split_at_mut(stride);
    let zero = _mm512_setzero_ps();

    // 1. Compaction.
    let mut len = 0;
    for i in (0..n).step_by(16) {
        let k = low_lanes(n - i);
        // SAFETY: loads touch only the `k` lanes, inside the slices; the packed stores
        // write 16 lanes at `len` ≤ i, inside the n + 32 floats.
        unsafe {
            let live = live_lanes(m, i, k);
            let rv = _mm512_maskz_loadu_ps(live, r.as_ptr().add(i));
            let vv = _mm512_maskz_loadu_ps(live, v.as_ptr().add(i));
            _mm512_storeu_ps(cr.as_mut_ptr().add(len), _mm512_maskz_compress_ps(live, rv));
            _mm512_storeu_ps(cv.as_mut_ptr().add(len), _mm512_maskz_compress_ps(live, vv));
            len += live.count_ones() as usize;
        }
    }
    // SAFETY: len + 16 ≤ n + 32.
    unsafe { _mm512_storeu_ps(cv.as_mut_ptr().add(len), zero) };

    // 2. The scan, last chunk first; chunk [top − 16, top), lanes below 0 masked out.
    let powers: [f32; 17] = std::array::from_fn(|i| gl.powi(i as i32));
    let c = |d: usize| _mm512_set1_ps(powers[d]);
    let (c1, c2, c4, c8) = (c(1), c(2), c(4), c(8));
    // (γλ)^{16−i} for lane i.
    let carry_pow: [f32; 16] = std::array::from_fn(|i| powers[16 - i]);
    // SAFETY: a 16-float array.
    let carry_pow = unsafe { _mm512_loadu_ps(carry_pow.as_ptr()) };
    let gv = _mm512_set1_ps(gamma);
    let mut carry = zero;
    let mut top = len;
    while top > 0 {
        let lanes = top.min(16);
        let k = top_lanes(lanes);
        let base = top.wrapping_sub(16);
        // SAFETY: the masked loads and stores touch positions [top − lanes, top] of the
        // packed columns only (V_next reads up to `len`, the padding 0).
        unsafe {
            let at = |col: &[f32], off: usize| col.as_ptr().wrapping_add(base.wrapping_add(off));
            let rv = _mm512_maskz_loadu_ps(k, at(cr, 0));
            let vv = _mm512_maskz_loadu_ps(k, at(cv, 0));
            let next = _mm512_maskz_loadu_ps(k, at(cv, 1));
            let mut x = _mm512_sub_ps(_mm512_fmadd_ps(gv, next, rv), vv);
            x = shift_add::<1>(x, c1);
            x = shift_add::<2>(x, c2);
            x = shift_add::<4>(x, c4);
            x = shift_add::<8>(x, c8);
            let a = _mm512_fmadd_ps(carry_pow, carry, x);
            _mm512_mask_storeu_ps(ca.as_mut_ptr().wrapping_add(base), k, a);
            _mm512_mask_storeu_ps(cg.as_mut_ptr().wrapping_add(base), k, _mm512_add_ps(a, vv));
            carry = _mm512_broadcastss_ps(_mm512_castps512_ps128(a));
        }
        top -= lanes;
    }

    // 3. Expansion back to the response positions.
    let mut pos = 0;
    for i in (0..n).step_by(16) {
        let k = low_lanes(n - i);
        // SAFETY: loads and stores touch only the `k` lanes inside the slices, and the
        // expanding loads the `live` packed values from `pos` < len.
        unsafe {
            let live = live_lanes(m, i, k);
            let a = _mm512_maskz_expandloadu_ps(live, ca.as_ptr().add(pos));
            let g = _mm512_maskz_expandloadu_ps(live, cg.as_ptr().add(pos));
            _mm512_mask_storeu_ps(adv.as_mut_ptr().add(i), k, a);
            _mm512_mask_storeu_ps(ret.as_mut_ptr().add(i), k, g);
            pos += live.count_ones() as usize;
        }
    }
}
