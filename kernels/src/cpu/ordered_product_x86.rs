//! The x86-64 register tiles of [`super::ordered_product`]: AVX-512 (8 rows × 48 columns,
//! 24 accumulators) and AVX2 (6 × 16, 12 accumulators), each also one or two vectors wide
//! for a product's last columns. Each accumulator lane is one
//! output, so a vector FMA is 16 (or 8) independent scalar FMAs: the lane count changes
//! nothing in any output's chain.

use std::arch::x86_64::*;

use super::tile_kernel::{pack_lines_elements, Columns, Kernel, Rows};

/// The AVX-512 tile: 8 × 48.
pub(super) struct Avx512;

impl Kernel for Avx512 {
    const MR: usize = 8;
    const NR: usize = 48;
    const KC: usize = 256;
    const MC: usize = 128;

    #[inline(always)]
    unsafe fn tile(kc: usize, a: Rows, b: Columns, dst: *mut f32, stride: usize, load: bool) {
        // SAFETY: as the trait requires (AVX-512F available, the pointers valid).
        unsafe { Self::tile_width(kc, a, b, dst, stride, load, 48) }
    }

    const LANES: usize = 16;

    #[inline(always)]
    unsafe fn copy_padded(row: &mut [f32], from: *const f32, live: usize) {
        // SAFETY: as the trait requires (AVX-512F available).
        unsafe { copy_padded_avx512(row, from, live) }
    }

    #[inline(always)]
    unsafe fn pack_lines(
        panel: &mut [f32],
        width: usize,
        from: *const f32,
        strides: (usize, usize),
        sizes: (usize, usize),
    ) {
        // SAFETY: as the trait requires (AVX available with AVX-512F).
        unsafe { pack_lines_avx(panel, width, from, strides, sizes) }
    }

    #[inline(always)]
    unsafe fn tile_width(
        kc: usize,
        a: Rows,
        b: Columns,
        dst: *mut f32,
        stride: usize,
        load: bool,
        width: usize,
    ) {
        // SAFETY: as the trait requires.
        unsafe {
            match (width, a.row == 1 && a.step == Self::MR) {
                (16, false) => tile_avx512::<1, false>(kc, a, b, dst, stride, load),
                (32, false) => tile_avx512::<2, false>(kc, a, b, dst, stride, load),
                (_, false) => tile_avx512::<3, false>(kc, a, b, dst, stride, load),
                (16, true) => tile_avx512::<1, true>(kc, a, b, dst, stride, load),
                (32, true) => tile_avx512::<2, true>(kc, a, b, dst, stride, load),
                (_, true) => tile_avx512::<3, true>(kc, a, b, dst, stride, load),
            }
        }
    }
}

/// `V` vectors (16 columns each) of the 8 × 48 tile; b's columns at their step. `PACKED`:
/// a's rows are a packed panel (`row` 1, `step` 8), so the eight broadcasts of an inner
/// index read at fixed offsets instead of a chain of `row` additions.
#[target_feature(enable = "avx512f")]
unsafe fn tile_avx512<const V: usize, const PACKED: bool>(
    kc: usize,
    a: Rows,
    b: Columns,
    dst: *mut f32,
    stride: usize,
    load: bool,
) {
    let mut acc = [[_mm512_setzero_ps(); V]; 8];
    if load {
        for (r, row) in acc.iter_mut().enumerate() {
            for (v, s) in row.iter_mut().enumerate() {
                *s = unsafe { _mm512_loadu_ps(dst.add(r * stride + 16 * v)) };
            }
        }
    }
    let (mut at, mut bt) = (a.at, b.at);
    for _ in 0..kc {
        let mut bv = [_mm512_setzero_ps(); V];
        for (v, y) in bv.iter_mut().enumerate() {
            *y = unsafe { _mm512_loadu_ps(bt.add(16 * v)) };
        }
        for (r, row) in acc.iter_mut().enumerate() {
            let x = _mm512_set1_ps(unsafe { *at.add(if PACKED { r } else { r * a.row }) });
            for (s, &y) in row.iter_mut().zip(&bv) {
                *s = _mm512_fmadd_ps(x, y, *s);
            }
        }
        at = at.wrapping_add(if PACKED { 8 } else { a.step });
        bt = bt.wrapping_add(b.step);
    }
    for (r, row) in acc.iter().enumerate() {
        for (v, &s) in row.iter().enumerate() {
            unsafe { _mm512_storeu_ps(dst.add(r * stride + 16 * v), s) };
        }
    }
}

/// Mask of the first `n` (at most 16) lanes.
#[inline(always)]
fn first_lanes(n: usize) -> __mmask16 {
    if n >= 16 {
        0xffff
    } else {
        ((1u32 << n) - 1) as __mmask16
    }
}

/// [`Kernel::copy_padded`] 16 lanes at a time, the last vector masked.
#[target_feature(enable = "avx512f")]
unsafe fn copy_padded_avx512(row: &mut [f32], from: *const f32, live: usize) {
    let out = row.as_mut_ptr();
    for v in (0..row.len()).step_by(16) {
        let lanes = first_lanes(row.len() - v);
        let values = first_lanes(live.saturating_sub(v)) & lanes;
        // SAFETY: only the `values` lanes are read (below live), the `lanes` written (in row).
        unsafe {
            let x = _mm512_maskz_loadu_ps(values, from.add(v));
            _mm512_mask_storeu_ps(out.add(v), lanes, x);
        }
    }
}

/// [`Kernel::pack_lines`] for contiguous lines (`step` 1) in 8 × 8 blocks: eight lines'
/// next eight values loaded, transposed in registers, stored as eight panel rows; the
/// values past the last whole block one by one. (AVX-512's gather instruction, used here
/// before, is slow on AMD's Zen 4: a dx = dy·Wᵀ packed with it ran 8% slower there.)
#[target_feature(enable = "avx")]
unsafe fn pack_lines_avx(
    panel: &mut [f32],
    width: usize,
    from: *const f32,
    (line, step): (usize, usize),
    (live, kc): (usize, usize),
) {
    if step != 1 || !width.is_multiple_of(8) {
        // SAFETY: as the caller guarantees.
        return unsafe { pack_lines_elements(panel, width, from, (line, step), (live, kc)) };
    }
    debug_assert!(panel.len() >= kc * width && live <= width);
    let out = panel.as_mut_ptr();
    let (whole_lines, whole_steps) = (live / 8 * 8, kc / 8 * 8);
    for i0 in (0..whole_lines).step_by(8) {
        for p0 in (0..whole_steps).step_by(8) {
            // SAFETY: lines i0..i0 + 8 < live, values p0..p0 + 8 < kc; the panel rows
            // p0..p0 + 8 hold columns i0..i0 + 8 < width.
            unsafe {
                let rows: [__m256; 8] =
                    std::array::from_fn(|r| _mm256_loadu_ps(from.add((i0 + r) * line + p0)));
                for (q, column) in transpose8(rows).into_iter().enumerate() {
                    _mm256_storeu_ps(out.add((p0 + q) * width + i0), column);
                }
            }
        }
    }
    for p in 0..kc {
        let first = if p < whole_steps { whole_lines } else { 0 };
        for i in first..width {
            // SAFETY: i < live, p < kc are inside the lines; the panel holds kc rows.
            unsafe {
                *out.add(p * width + i) = if i < live {
                    *from.add(i * line + p)
                } else {
                    0.0
                }
            };
        }
    }
}

/// Eight rows of eight values transposed: column q of the rows as vector q.
#[inline(always)]
unsafe fn transpose8([r0, r1, r2, r3, r4, r5, r6, r7]: [__m256; 8]) -> [__m256; 8] {
    // SAFETY: register shuffles only; AVX is enabled in every caller.
    unsafe {
        let (t0, t1) = (_mm256_unpacklo_ps(r0, r1), _mm256_unpackhi_ps(r0, r1));
        let (t2, t3) = (_mm256_unpacklo_ps(r2, r3), _mm256_unpackhi_ps(r2, r3));
        let (t4, t5) = (_mm256_unpacklo_ps(r4, r5), _mm256_unpackhi_ps(r4, r5));
        let (t6, t7) = (_mm256_unpacklo_ps(r6, r7), _mm256_unpackhi_ps(r6, r7));
        // Columns (0 | 4), (1 | 5), (2 | 6), (3 | 7) of rows 0-3, then of rows 4-7.
        let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        [
            _mm256_permute2f128_ps::<0x20>(s0, s4),
            _mm256_permute2f128_ps::<0x20>(s1, s5),
            _mm256_permute2f128_ps::<0x20>(s2, s6),
            _mm256_permute2f128_ps::<0x20>(s3, s7),
            _mm256_permute2f128_ps::<0x31>(s0, s4),
            _mm256_permute2f128_ps::<0x31>(s1, s5),
            _mm256_permute2f128_ps::<0x31>(s2, s6),
            _mm256_permute2f128_ps::<0x31>(s3, s7),
        ]
    }
}

/// The AVX2 + FMA tile: 6 × 16.
pub(super) struct Avx2;

impl Kernel for Avx2 {
    const MR: usize = 6;
    const NR: usize = 16;
    const KC: usize = 256;
    const MC: usize = 96;

    #[inline(always)]
    unsafe fn tile(kc: usize, a: Rows, b: Columns, dst: *mut f32, stride: usize, load: bool) {
        // SAFETY: as the trait requires (AVX2 and FMA available, the pointers valid).
        unsafe { tile_avx2::<2>(kc, a, b, dst, stride, load) }
    }

    const LANES: usize = 8;

    #[inline(always)]
    unsafe fn pack_lines(
        panel: &mut [f32],
        width: usize,
        from: *const f32,
        strides: (usize, usize),
        sizes: (usize, usize),
    ) {
        // SAFETY: as the trait requires (AVX available with AVX2).
        unsafe { pack_lines_avx(panel, width, from, strides, sizes) }
    }

    #[inline(always)]
    unsafe fn tile_width(
        kc: usize,
        a: Rows,
        b: Columns,
        dst: *mut f32,
        stride: usize,
        load: bool,
        width: usize,
    ) {
        // SAFETY: as the trait requires.
        unsafe {
            match width {
                8 => tile_avx2::<1>(kc, a, b, dst, stride, load),
                _ => tile_avx2::<2>(kc, a, b, dst, stride, load),
            }
        }
    }
}

/// `V` vectors (8 columns each) of the 6 × 16 tile; b's columns at their step.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2<const V: usize>(
    kc: usize,
    a: Rows,
    b: Columns,
    dst: *mut f32,
    stride: usize,
    load: bool,
) {
    let mut acc = [[_mm256_setzero_ps(); V]; 6];
    if load {
        for (r, row) in acc.iter_mut().enumerate() {
            for (v, s) in row.iter_mut().enumerate() {
                *s = unsafe { _mm256_loadu_ps(dst.add(r * stride + 8 * v)) };
            }
        }
    }
    let (mut at, mut bt) = (a.at, b.at);
    for _ in 0..kc {
        let mut bv = [_mm256_setzero_ps(); V];
        for (v, y) in bv.iter_mut().enumerate() {
            *y = unsafe { _mm256_loadu_ps(bt.add(8 * v)) };
        }
        for (r, row) in acc.iter_mut().enumerate() {
            let x = _mm256_set1_ps(unsafe { *at.add(r * a.row) });
            for (s, &y) in row.iter_mut().zip(&bv) {
                *s = _mm256_fmadd_ps(x, y, *s);
            }
        }
        at = at.wrapping_add(a.step);
        bt = bt.wrapping_add(b.step);
    }
    for (r, row) in acc.iter().enumerate() {
        for (v, &s) in row.iter().enumerate() {
            unsafe { _mm256_storeu_ps(dst.add(r * stride + 8 * v), s) };
        }
    }
}
