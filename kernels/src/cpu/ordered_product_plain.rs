//! The plain register tile of [`super::ordered_product`]: 4 rows × 8 columns in scalar
//! registers, for a CPU without AVX2 or the kernels capped to `generic`
//! (`ROLL_FLOW_KERNELS_ISA`). Each output takes the module's chain of fused multiply-adds,
//! like the x86-64 tiles beside it (`ordered_product_x86.rs`).

use super::simd::fma;
use super::tile_kernel::{Columns, Kernel, Rows};

/// The plain kernel: 4 × 8 outputs, one fused multiply-add per output and inner index:
/// the FMA instruction where the CPU has it (a CPU with FMA but no AVX2, or the kernels
/// capped to `generic`), its exact emulation otherwise.
pub(super) struct Plain;

impl Kernel for Plain {
    const MR: usize = 4;
    const NR: usize = 8;
    const KC: usize = 256;
    const MC: usize = 64;

    unsafe fn tile(kc: usize, a: Rows, b: Columns, dst: *mut f32, stride: usize, load: bool) {
        #[cfg(target_arch = "x86_64")]
        if super::simd::has_fma() {
            // SAFETY: FMA was detected; the caller vouches for the pointers.
            return unsafe { plain_tile_fma(kc, a, b, dst, stride, load) };
        }
        // SAFETY: as the caller guarantees.
        unsafe { plain_tile::<false>(kc, a, b, dst, stride, load) }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn plain_tile_fma(kc: usize, a: Rows, b: Columns, dst: *mut f32, stride: usize, load: bool) {
    // SAFETY: as the caller guarantees.
    unsafe { plain_tile::<true>(kc, a, b, dst, stride, load) }
}

/// [`Plain`]'s tile, fused by the instruction (`FMA`) or by its emulation.
#[inline(always)]
pub(super) unsafe fn plain_tile<const FMA: bool>(
    kc: usize,
    a: Rows,
    b: Columns,
    dst: *mut f32,
    stride: usize,
    load: bool,
) {
    let mut acc = [[0.0f32; 8]; 4];
    if load {
        for (r, row) in acc.iter_mut().enumerate() {
            for (c, s) in row.iter_mut().enumerate() {
                // SAFETY: the caller hands a writable (so readable) MR × NR tile.
                *s = unsafe { *dst.add(r * stride + c) };
            }
        }
    }
    for p in 0..kc {
        // SAFETY: the packed panels hold kc · MR and kc · NR values.
        let bp = b.at.wrapping_add(p * b.step);
        for (r, row) in acc.iter_mut().enumerate() {
            let x = unsafe { *a.at.add(r * a.row + p * a.step) };
            for (c, s) in row.iter_mut().enumerate() {
                *s = fma::<FMA>(x, unsafe { *bp.add(c) }, *s);
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        for (c, &s) in row.iter().enumerate() {
            // SAFETY: as above.
            unsafe { *dst.add(r * stride + c) = s };
        }
    }
}
