//! The x86-64 register tiles of [`super::ordered_product`]: AVX-512 (8 rows × 48 columns,
//! 24 accumulators) and AVX2 (6 × 16, 12 accumulators), each also one or two vectors wide
//! for a product's last columns. Each accumulator lane is one
//! output, so a vector FMA is 16 (or 8) independent scalar FMAs: the lane count changes
//! nothing in any output's chain.

use std::arch::x86_64::*;

use super::tile_kernel::{gather_elements, Columns, Kernel, Rows};

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
    unsafe fn gather(row: &mut [f32], from: *const f32, stride: usize, live: usize) {
        if stride > (i32::MAX as usize) / row.len().max(1) {
            // Offsets past a 32-bit index: element by element.
            // SAFETY: as the trait requires.
            return unsafe { gather_elements(row, from, stride, live) };
        }
        // SAFETY: as the trait requires; every offset fits an i32 (checked above).
        unsafe { gather_avx512(row, from, stride, live) }
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

/// [`Kernel::gather`] 16 lanes at a time with the gather instruction, the last masked.
#[target_feature(enable = "avx512f")]
unsafe fn gather_avx512(row: &mut [f32], from: *const f32, stride: usize, live: usize) {
    let out = row.as_mut_ptr();
    let step = _mm512_set1_epi32(stride as i32);
    let index = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        step,
    );
    for v in (0..row.len()).step_by(16) {
        let lanes = first_lanes(row.len() - v);
        let values = first_lanes(live.saturating_sub(v)) & lanes;
        // SAFETY: only the `values` lanes are read (below live: offsets (v + i) · stride,
        // which fit an i32 by the caller's check), the `lanes` written.
        unsafe {
            let x = _mm512_mask_i32gather_ps::<4>(
                _mm512_setzero_ps(),
                values,
                index,
                from.add(v * stride),
            );
            _mm512_mask_storeu_ps(out.add(v), lanes, x);
        }
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
