//! How [`super::ordered_product`] packs its operands: b's column panels and a's row
//! panels as the register tile reads them, and when an operand is worth packing at all.
//! Packing moves values only, so it never changes a result's bits.

use super::Job;
use crate::cpu::tile_kernel::Kernel;

impl Job {
    /// b's inner indices `k0..k0 + kc` × columns `c0..c1` as `NR`-column panels, each
    /// `[kc][NR]`, columns past `c1` zero.
    ///
    /// # Safety
    /// The ranges lie inside b.
    pub(super) unsafe fn pack_b<K: Kernel>(
        &self,
        out: &mut [f32],
        (k0, kc): (usize, usize),
        (c0, c1): (usize, usize),
    ) {
        let nr = K::NR;
        for (jp, panel) in out
            .chunks_exact_mut(nr * kc)
            .take((c1 - c0).div_ceil(nr))
            .enumerate()
        {
            let c = c0 + jp * nr;
            let live = (c1 - c).min(nr);
            if self.b.col_stride == 1 {
                for (p, row) in panel.chunks_exact_mut(nr).enumerate() {
                    // SAFETY: row k0 + p, columns c..c + live lie inside b.
                    let from =
                        unsafe { (self.b.at as *const f32).add((k0 + p) * self.b.row_stride + c) };
                    // SAFETY: as above.
                    unsafe { K::copy_padded(row, from, live) };
                }
            } else {
                // A transposed b (Wᵀ in dx = dy·Wᵀ): a panel column is contiguous.
                let strides = (self.b.col_stride, self.b.row_stride);
                // SAFETY: rows k0..k0 + kc, columns c..c + live lie inside b.
                unsafe { K::pack_lines(panel, nr, self.b.ptr(k0, c), strides, (live, kc)) };
            }
        }
    }

    /// a's rows `m0..m1` × inner indices `k0..k0 + kc` as `MR`-row panels, each
    /// `[kc][MR]`, rows past `m1` zero (called for a product's last, partial panel).
    ///
    /// # Safety
    /// The ranges lie inside a.
    pub(super) unsafe fn pack_a<K: Kernel>(
        &self,
        out: &mut [f32],
        (m0, m1): (usize, usize),
        (k0, kc): (usize, usize),
    ) {
        let mr = K::MR;
        for (ip, panel) in out
            .chunks_exact_mut(mr * kc)
            .take((m1 - m0).div_ceil(mr))
            .enumerate()
        {
            let r = m0 + ip * mr;
            let live = (m1 - r).min(mr);
            if self.a.row_stride == 1 {
                // aᵀ stored row-major (xᵀ in dW = xᵀ·dy): a panel row is contiguous.
                for (p, row) in panel.chunks_exact_mut(mr).enumerate() {
                    // SAFETY: column k0 + p, rows r..r + live lie inside a.
                    let from =
                        unsafe { (self.a.at as *const f32).add((k0 + p) * self.a.col_stride + r) };
                    // SAFETY: as above.
                    unsafe { K::copy_padded(row, from, live) };
                }
            } else {
                // Row-major a (x in y = x·W): a panel column is one of a's rows.
                let strides = (self.a.row_stride, self.a.col_stride);
                // SAFETY: rows r..r + live, columns k0..k0 + kc lie inside a.
                unsafe { K::pack_lines(panel, mr, self.a.ptr(r, k0), strides, (live, kc)) };
            }
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
