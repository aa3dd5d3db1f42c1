//! How [`super::ordered_product`] packs its operands: b's column panels and a's row
//! panels as the register tile reads them, and when an operand is worth packing at all.
//! Packing moves values only, so it never changes a result's bits.

use super::Raw;
use crate::cpu::tile_kernel::Kernel;

impl Raw {
    /// The same values as the transposed matrix (rows and columns swapped): a's row
    /// panels are the column panels of aᵀ.
    pub(super) fn transposed(self) -> Raw {
        Raw {
            at: self.at,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
        }
    }
}

/// `operand`'s rows `k0..k0 + kc` (the inner indices) × columns `c0..c1` as `width`-column
/// panels, each `[kc][width]`, columns past `c1` zero: b's panels (`width` NR) and, through
/// [`Raw::transposed`], a's (`width` MR, a's rows as aᵀ's columns).
///
/// # Safety
/// The ranges lie inside `operand`; `out` holds the panels.
pub(super) unsafe fn pack_panels<K: Kernel>(
    out: &mut [f32],
    operand: Raw,
    width: usize,
    (k0, kc): (usize, usize),
    (c0, c1): (usize, usize),
) {
    for (jp, panel) in out
        .chunks_exact_mut(width * kc)
        .take((c1 - c0).div_ceil(width))
        .enumerate()
    {
        let c = c0 + jp * width;
        let live = (c1 - c).min(width);
        if operand.col_stride == 1 {
            // A panel row is contiguous: a row-major b (W in y = x·W), or an a stored
            // transposed (xᵀ in dW = xᵀ·dy).
            for (p, row) in panel.chunks_exact_mut(width).enumerate() {
                // SAFETY: row k0 + p, columns c..c + live lie inside the operand.
                unsafe { K::copy_padded(row, operand.ptr(k0 + p, c), live) };
            }
        } else {
            // A panel column is contiguous: a transposed b (Wᵀ in dx = dy·Wᵀ), or a
            // row-major a (x in y = x·W), whose rows are the panel's columns.
            let strides = (operand.col_stride, operand.row_stride);
            // SAFETY: rows k0..k0 + kc, columns c..c + live lie inside the operand.
            unsafe { K::pack_lines(panel, width, operand.ptr(k0, c), strides, (live, kc)) };
        }
    }
}

/// Column panels of a chunk from which a's block is worth packing (measured on the
/// SmolLM2 shape's products, bench/history/model_throughput.md: below it the copy costs more
/// than the reads it saves).
pub(super) const PACK_A_PANELS: usize = 4;

/// Whether rows `stride` floats apart fall on fewer than 16 of the 64 line positions of a
/// 4 KiB page, so that a tile's `KC` rows of a panel crowd into a few of L1's sets and evict
/// each other (a 1,024-wide matrix puts every row on one; SmolLM2's 1,536-wide weights on
/// two, its 576-wide ones on sixteen). Such an operand is packed rather than read in place.
pub(super) fn aliases_in_l1(stride: usize) -> bool {
    let bytes = stride * 4;
    if !bytes.is_multiple_of(64) {
        return false;
    }
    64 / gcd((bytes / 64) % 64, 64) < 16
}

/// Greatest common divisor.
fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
