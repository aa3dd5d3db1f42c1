//! The matrix product every CPU path shares: dst `[rows, cols]` := (dst +) a·b, where each
//! output sums its inner axis **in order, one fused multiply-add at a time**:
//!
//! ```text
//! s ← (accumulate ? dst[i, j] : 0);   for p in 0..inner: s ← fma(a[i, p], b[p, j], s)
//! ```
//!
//! That order is fixed by this definition, not by the machine: the AVX-512, AVX2 and plain
//! kernels (`ordered_product_x86.rs`, `ordered_product_plain.rs`) differ in register tiles
//! (8 × 48, 6 × 16, 4 × 8 outputs), cache blocks and thread splits, but every output element takes exactly the same chain of roundings, so
//! the results are bit-identical on every x86-64 CPU and at every thread count (the
//! reproducibility contract, docs/ARCHITECTURE.md). What the `gemm` crate (burn-flex's
//! matmul) gives instead depends on the CPU: its inner-axis blocks follow the detected L1
//! cache (`gemm-common`'s `kernel_params`), its small-product kernels sum across 8 or 16
//! SIMD lanes, and its register tiles differ between AVX2 and AVX-512.
//!
//! The chain is cut into inner-axis blocks of [`Kernel::KC`] for the caches: a block's
//! partial sums are stored to dst and loaded again as the next block's start, which is
//! exact, so the blocks do not change the order. Threads split the outputs only (row or
//! column ranges), never the inner axis.
//!
//! The plain kernel fuses too (the instruction where the CPU has FMA, else its exact
//! emulation, [`super::simd::fma_without_instruction`]): never a separate multiply and add,
//! which would round twice.

use super::few_rows::{splits_over_threads, Operand};
use super::ordered_product_plain::Plain;
use super::simd::Isa;
use super::tile_kernel::{Columns, Kernel, Rows};

#[path = "ordered_product_packing.rs"]
mod packing;
use packing::{aliases_in_l1, pack_panels, PACK_A_PANELS};

/// dst `[rows, cols]` (row-major, uninitialised unless `accumulate`) := (dst +) a·b in the
/// order of the module docs, with the best kernel this CPU has (see [`Isa::detect`]).
///
/// # Safety
/// `dst` must hold `rows · cols` writable floats; `a` and `b` must be valid for
/// `rows × inner` and `inner × cols` reads at their (non-negative) strides.
pub(super) unsafe fn ordered_product(
    dst: *mut f32,
    dims: (usize, usize, usize),
    a: Operand<'_>,
    b: Operand<'_>,
    accumulate: bool,
) {
    // SAFETY: as the caller guarantees.
    unsafe { ordered_product_with(Isa::detect(), dst, dims, a, b, accumulate) }
}

/// [`ordered_product`] with the kernel of `isa` (which this CPU must have).
///
/// # Safety
/// As [`ordered_product`], and `isa` must be available.
pub(super) unsafe fn ordered_product_with(
    isa: Isa,
    dst: *mut f32,
    dims: (usize, usize, usize),
    a: Operand<'_>,
    b: Operand<'_>,
    accumulate: bool,
) {
    let (rows, inner, cols) = dims;
    if rows == 0 || cols == 0 {
        return;
    }
    if inner == 0 {
        if !accumulate {
            // SAFETY: dst holds rows · cols floats.
            unsafe { std::ptr::write_bytes(dst, 0, rows * cols) };
        }
        return;
    }
    let job = Job {
        dst: dst as usize,
        dims,
        a: Raw::of(a),
        b: Raw::of(b),
        accumulate,
    };
    // SAFETY: as the caller guarantees; `isa` is available.
    unsafe {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => job.run::<super::ordered_product_x86::Avx512>(),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => job.run::<super::ordered_product_x86::Avx2>(),
            _ => job.run::<Plain>(),
        }
    }
}

/// An operand as an address and strides, shareable across threads (the slice it came from
/// outlives the call).
#[derive(Clone, Copy)]
struct Raw {
    at: usize,
    row_stride: usize,
    col_stride: usize,
}

impl Raw {
    fn of((data, row_stride, col_stride): Operand<'_>) -> Raw {
        Raw {
            at: data.as_ptr() as usize,
            row_stride: row_stride as usize,
            col_stride: col_stride as usize,
        }
    }

    /// The address of (r, c).
    ///
    /// # Safety
    /// (r, c) must lie inside the operand.
    #[inline(always)]
    unsafe fn ptr(self, r: usize, c: usize) -> *const f32 {
        unsafe { (self.at as *const f32).add(r * self.row_stride + c * self.col_stride) }
    }
}

/// One product: where it writes, its dims, its operands.
#[derive(Clone, Copy)]
struct Job {
    dst: usize,
    dims: (usize, usize, usize),
    a: Raw,
    b: Raw,
    accumulate: bool,
}

thread_local! {
    /// Packed panels of `a` and `b` of this thread, grown as needed and reused.
    static PACKED: std::cell::RefCell<(Vec<f32>, Vec<f32>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

impl Job {
    /// The whole product, its outputs split over threads when it is large enough: row
    /// ranges when it has more rows than columns, column ranges otherwise (whole tiles).
    ///
    /// # Safety
    /// As [`ordered_product_with`], with `K`'s instruction set available.
    unsafe fn run<K: Kernel>(self) {
        let (rows, inner, cols) = self.dims;
        let threads = rayon::current_num_threads();
        let parts = if splits_over_threads(rows.saturating_mul(inner).saturating_mul(cols)) {
            threads
        } else {
            1
        };
        let by_rows = rows >= cols;
        let (len, unit) = if by_rows {
            (rows, K::MR)
        } else {
            (cols, K::NR)
        };
        let per_part = len.div_ceil(unit).div_ceil(parts).max(1) * unit;
        let ranges = len.div_ceil(per_part);
        let part = |p: usize| {
            let range = (p * per_part, ((p + 1) * per_part).min(len));
            let (row_range, col_range) = if by_rows {
                (range, (0, cols))
            } else {
                ((0, rows), range)
            };
            // SAFETY: parts write disjoint blocks of dst; K's instruction set is available.
            unsafe { self.block::<K>(row_range, col_range) };
        };
        if ranges > 1 {
            use rayon::prelude::*;
            (0..ranges).into_par_iter().for_each(part);
        } else {
            part(0);
        }
    }

    /// dst rows `r0..r1` × columns `c0..c1`, on this thread.
    ///
    /// # Safety
    /// As [`Job::run`]; no other thread writes this block.
    unsafe fn block<K: Kernel>(self, rows: (usize, usize), (c0, c1): (usize, usize)) {
        let mut c = c0;
        while c < c1 {
            let end = (c + K::NC).min(c1);
            // SAFETY: as the caller guarantees, for a part of the block.
            unsafe { self.column_chunk::<K>(rows, (c, end)) };
            c = end;
        }
    }

    /// dst rows `r0..r1` × columns `c0..c1` (at most [`Kernel::NC`] of them), on this thread:
    /// for each inner block, b's block packed (or read in place), then for each `MC` rows
    /// a's block packed (or read in place) and every tile of the two.
    ///
    /// # Safety
    /// As [`Job::block`].
    unsafe fn column_chunk<K: Kernel>(self, (r0, r1): (usize, usize), (c0, c1): (usize, usize)) {
        let (_, inner, cols) = self.dims;
        let col_panels = (c1 - c0).div_ceil(K::NR);
        PACKED.with_borrow_mut(|(packed_a, packed_b)| {
            let b_len = col_panels * K::NR * K::KC;
            // a's rows are packed whole where reading them in place would be slow: a
            // transposed a (inner indices `col_stride` apart) or rows that share L1 sets;
            // and only when enough column panels reuse the packed block.
            let pack_a = col_panels >= PACK_A_PANELS
                && (self.a.col_stride != 1 || aliases_in_l1(self.a.row_stride));
            // Row-major b: whole column panels are read in place unless its rows share L1
            // sets, the last, partial one packed (zero columns past c1); a transposed b is
            // packed whole.
            let b_in_place = self.b.col_stride == 1 && !aliases_in_l1(self.b.row_stride);
            let a_len = K::MC * K::KC;
            if packed_b.len() < b_len {
                packed_b.resize(b_len, 0.0);
            }
            if packed_a.len() < a_len {
                packed_a.resize(a_len, 0.0);
            }
            let mut k0 = 0;
            while k0 < inner {
                let kc = (inner - k0).min(K::KC);
                let load = self.accumulate || k0 > 0;
                let whole = if b_in_place { (c1 - c0) / K::NR } else { 0 };
                if whole < col_panels {
                    // SAFETY: the ranges lie inside b; the buffer holds col_panels panels.
                    unsafe {
                        pack_panels::<K>(
                            packed_b,
                            self.b,
                            K::NR,
                            (k0, kc),
                            (c0 + whole * K::NR, c1),
                        )
                    };
                }
                let mut m0 = r0;
                while m0 < r1 {
                    let m1 = (m0 + K::MC).min(r1);
                    // Whole row panels are read in place (unless `pack_a`); the last, partial
                    // one is packed with zero rows past m1.
                    let edge = match pack_a {
                        true => m0,
                        false => m0 + (m1 - m0) / K::MR * K::MR,
                    };
                    if edge < m1 {
                        // SAFETY: as above, for a.
                        unsafe {
                            let a = self.a.transposed();
                            pack_panels::<K>(packed_a, a, K::MR, (k0, kc), (edge, m1))
                        };
                    }
                    for jp in 0..col_panels {
                        let c = c0 + jp * K::NR;
                        let b_cols = if jp < whole {
                            Columns {
                                at: (self.b.at as *const f32)
                                    .wrapping_add(k0 * self.b.row_stride + c),
                                step: self.b.row_stride,
                            }
                        } else {
                            Columns {
                                at: packed_b[(jp - whole) * K::NR * kc..].as_ptr(),
                                step: K::NR,
                            }
                        };
                        let mut r = m0;
                        while r < m1 {
                            let rows = if r < edge {
                                Rows {
                                    at: (self.a.at as *const f32).wrapping_add(
                                        r * self.a.row_stride + k0 * self.a.col_stride,
                                    ),
                                    row: self.a.row_stride,
                                    step: self.a.col_stride,
                                }
                            } else {
                                Rows {
                                    at: packed_a[(r - edge) * kc..].as_ptr(),
                                    row: 1,
                                    step: K::MR,
                                }
                            };
                            let (live_r, live_c) = ((m1 - r).min(K::MR), (c1 - c).min(K::NR));
                            let out = (self.dst as *mut f32).wrapping_add(r * cols + c);
                            // SAFETY: the tile lies in this block of dst; whole row and column panels
                            // lie inside a and b.
                            unsafe {
                                tile_at::<K>(kc, rows, b_cols, out, cols, (live_r, live_c), load)
                            };
                            r += K::MR;
                        }
                    }
                    m0 = m1;
                }
                k0 += kc;
            }
        });
    }
}

/// One tile: in place when its rows are whole and its live columns a whole number of
/// vectors, else through a tile-size copy (rows past the live ones computed on zero
/// padding and not stored). Columns are computed only up to the next vector past the live
/// ones ([`Kernel::tile_width`]).
///
/// # Safety
/// As [`Kernel::tile`] for the `live` part of the tile at `dst`.
#[inline(always)]
unsafe fn tile_at<K: Kernel>(
    kc: usize,
    a: Rows,
    b: Columns,
    dst: *mut f32,
    stride: usize,
    (live_r, live_c): (usize, usize),
    load: bool,
) {
    let width = live_c.next_multiple_of(K::LANES);
    if live_r == K::MR && live_c == width {
        // SAFETY: the whole tile, `width` columns, lies in dst.
        unsafe { K::tile_width(kc, a, b, dst, stride, load, width) };
        return;
    }
    let mut edge = [0.0f32; 8 * 48];
    debug_assert!(K::MR * K::NR <= edge.len());
    if load {
        for r in 0..live_r {
            for c in 0..live_c {
                // SAFETY: the live part lies in dst.
                edge[r * K::NR + c] = unsafe { *dst.add(r * stride + c) };
            }
        }
    }
    // SAFETY: `edge` holds a whole tile at row stride NR.
    unsafe { K::tile_width(kc, a, b, edge.as_mut_ptr(), K::NR, load, width) };
    for r in 0..live_r {
        for c in 0..live_c {
            // SAFETY: as above.
            unsafe { *dst.add(r * stride + c) = edge[r * K::NR + c] };
        }
    }
}

#[cfg(test)]
#[path = "ordered_product_tests.rs"]
mod tests;
