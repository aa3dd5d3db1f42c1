//! The AVX-512 GAE scan of one sequence for [`super::gae`]: the serial recurrence
//! A_t = δ_t + γλ·A_{t+1} becomes a vectorised scan, 16 time steps per register.
//!
//! 1. Compaction: the response tokens' rewards and values are packed into a scratch buffer
//!    (`vcompressps` on the mask), so V_next is simply the next packed value (0 after the
//!    last) and the observation tokens in between drop out. A sequence whose tokens are all
//!    response tokens is already packed and skips this step and step 3.
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
use std::mem::MaybeUninit;

use super::simd::low_lanes;

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
/// into `adv` and `ret`, all of whose elements are written.
#[target_feature(enable = "avx512f,avx512dq")]
#[allow(clippy::too_many_arguments)]
pub(super) fn scan_sequence(
    r: &[f32],
    v: &[f32],
    m: &[f32],
    adv: &mut [MaybeUninit<f32>],
    ret: &mut [MaybeUninit<f32>],
    gamma: f32,
    gl: f32,
    scratch: &mut Scratch,
) {
    let n = r.len();
    assert!(v.len() == n && m.len() == n && adv.len() == n && ret.len() == n);
    let (adv, ret) = (
        adv.as_mut_ptr().cast::<f32>(),
        ret.as_mut_ptr().cast::<f32>(),
    );
    if all_live(m) {
        // A sequence of response tokens only (single-turn, or a step-wise sample) is
        // already packed: scan it in place.
        // SAFETY: `r` and `v` hold n floats and `adv` and `ret` have room for n.
        unsafe { scan_packed(r.as_ptr(), v.as_ptr(), adv, ret, n, gamma, gl) };
        return;
    }
    // Four packed columns (r, V, A, returns) of n + 16 floats: compressed stores write 16
    // lanes.
    let stride = n + 16;
    scratch.0.resize(4 * stride, 0.0);
    let (cr, rest) = scratch.0.split_at_mut(stride);
    let (cv, rest) = rest.split_at_mut(stride);
    let (ca, cg) = rest.split_at_mut(stride);

    // 1. Compaction.
    let mut len = 0;
    for i in (0..n).step_by(16) {
        let k = low_lanes(n - i);
        // SAFETY: loads touch only the `k` lanes, inside the slices; the packed stores
        // write 16 lanes at `len` ≤ i, inside the n + 16 floats.
        unsafe {
            let live = live_lanes(m, i, k);
            let rv = _mm512_maskz_loadu_ps(live, r.as_ptr().add(i));
            let vv = _mm512_maskz_loadu_ps(live, v.as_ptr().add(i));
            _mm512_storeu_ps(cr.as_mut_ptr().add(len), _mm512_maskz_compress_ps(live, rv));
            _mm512_storeu_ps(cv.as_mut_ptr().add(len), _mm512_maskz_compress_ps(live, vv));
            len += live.count_ones() as usize;
        }
    }

    // 2. The scan of the packed tokens.
    // SAFETY: each column holds n + 16 ≥ len floats.
    unsafe {
        let (ca, cg) = (ca.as_mut_ptr(), cg.as_mut_ptr());
        scan_packed(cr.as_ptr(), cv.as_ptr(), ca, cg, len, gamma, gl);
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
            _mm512_mask_storeu_ps(adv.add(i), k, a);
            _mm512_mask_storeu_ps(ret.add(i), k, g);
            pos += live.count_ones() as usize;
        }
    }
}

/// Whether every token of the mask is a response token.
#[target_feature(enable = "avx512f")]
fn all_live(m: &[f32]) -> bool {
    (0..m.len()).step_by(16).all(|i| {
        let k = low_lanes(m.len() - i);
        // SAFETY: the `k` lanes from `i` lie inside `m`.
        unsafe { live_lanes(m, i, k) == k }
    })
}

/// The suffix scan of `len` packed tokens (rewards `r`, values `v`; V_next = 0 after the
/// last) into advantages `a` and returns `g`, last chunk of 16 first; chunk
/// [top − 16, top), lanes below 0 masked out.
///
/// # Safety
/// `r` and `v` must be readable and `a` and `g` writable for `len` floats.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn scan_packed(
    r: *const f32,
    v: *const f32,
    a: *mut f32,
    g: *mut f32,
    len: usize,
    gamma: f32,
    gl: f32,
) {
    let powers: [f32; 17] = std::array::from_fn(|i| gl.powi(i as i32));
    let c = |d: usize| _mm512_set1_ps(powers[d]);
    let (c1, c2, c4, c8) = (c(1), c(2), c(4), c(8));
    // (γλ)^{16−i} for lane i.
    let carry_pow: [f32; 16] = std::array::from_fn(|i| powers[16 - i]);
    // SAFETY: a 16-float array.
    let carry_pow = unsafe { _mm512_loadu_ps(carry_pow.as_ptr()) };
    let gv = _mm512_set1_ps(gamma);
    let mut carry = _mm512_setzero_ps();
    let mut top = len;
    while top > 0 {
        let lanes = top.min(16);
        let k = top_lanes(lanes);
        // V_next of the last lane of the first (topmost) chunk is past the end: 0.
        let k_next = if top == len { k & 0x7fff } else { k };
        let base = top.wrapping_sub(16);
        let at = |p: *const f32, off: usize| p.wrapping_add(base.wrapping_add(off));
        // SAFETY: the masked loads and stores touch positions [top − lanes, top) only
        // (V_next reads [top − lanes + 1, top + 1) ∩ [0, len)), inside the caller's `len`.
        unsafe {
            let rv = _mm512_maskz_loadu_ps(k, at(r, 0));
            let vv = _mm512_maskz_loadu_ps(k, at(v, 0));
            let next = _mm512_maskz_loadu_ps(k_next, at(v, 1));
            let mut x = _mm512_sub_ps(_mm512_fmadd_ps(gv, next, rv), vv);
            x = shift_add::<1>(x, c1);
            x = shift_add::<2>(x, c2);
            x = shift_add::<4>(x, c4);
            x = shift_add::<8>(x, c8);
            let adv = _mm512_fmadd_ps(carry_pow, carry, x);
            _mm512_mask_storeu_ps(a.wrapping_add(base), k, adv);
            _mm512_mask_storeu_ps(g.wrapping_add(base), k, _mm512_add_ps(adv, vv));
            carry = _mm512_broadcastss_ps(_mm512_castps512_ps128(adv));
        }
        top -= lanes;
    }
}
