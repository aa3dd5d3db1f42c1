//! The x86-64 register tiles of [`super::ordered_product`]: AVX-512 (8 rows × 48 columns,
//! 24 accumulators) and AVX2 (6 × 16, 12 accumulators), each also one or two vectors wide
//! for a product's last columns. Each accumulator lane is one
//! output, so a vector FMA is 16 (or 8) independent scalar FMAs: the lane count changes
//! nothing in any output's chain.

use std::arch::x86_64::*;

use super::tile_kernel::{Columns, Kernel, Rows};

/// The AVX-512 tile: 8 × 48.
pub(super) struct Avx512;

impl Kernel for Avx512 {
    const MR: usize = 8;
    const NR: usize = 48;
    const KC: usize = 128;
    const MC: usize = 128;

    #[inline(always)]
    unsafe fn tile(kc: usize, a: Rows, b: Columns, dst: *mut f32, stride: usize, load: bool) {
        // SAFETY: as the trait requires (AVX-512F available, the pointers valid).
        unsafe { tile_avx512::<3>(kc, a, b, dst, stride, load) }
    }

    const LANES: usize = 16;

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
                16 => tile_avx512::<1>(kc, a, b, dst, stride, load),
                32 => tile_avx512::<2>(kc, a, b, dst, stride, load),
                _ => tile_avx512::<3>(kc, a, b, dst, stride, load),
            }
        }
    }
}

/// `V` vectors (16 columns each) of the 8 × 48 tile; b's columns at their step.
#[target_feature(enable = "avx512f")]
unsafe fn tile_avx512<const V: usize>(
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
            let x = _mm512_set1_ps(unsafe { *at.add(r * a.row) });
            for (s, &y) in row.iter_mut().zip(&bv) {
                *s = _mm512_fmadd_ps(x, y, *s);
            }
        }
        at = at.wrapping_add(a.step);
        bt = bt.wrapping_add(b.step);
    }
    for (r, row) in acc.iter().enumerate() {
        for (v, &s) in row.iter().enumerate() {
            unsafe { _mm512_storeu_ps(dst.add(r * stride + 16 * v), s) };
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
