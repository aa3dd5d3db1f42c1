//! The dense layer's product for a few rows (a decode step: one row per running sequence)
//! with AVX-512 register tiles that read the weight where it lies, for
//! [`super::linear`].
//!
//! Why not the `gemm` crate here: gemm packs both operands into its own panel order on
//! every call, and at 32 rows each weight element packed serves only 32 multiply-adds, so
//! the packing pass is a large share of the work. Measured on the 2-core VM (AVX-512, 2
//! threads), gemm reached 60-80 GFLOP/s on the decode shapes of a dim-512 model (32 × 512
//! × 512 … 32 × 512 × 8192) where PyTorch's `a @ b` reached 100-120.
//!
//! y `[rows, cols]` = x `[rows, inner]` · W `[inner, cols]`, x row-major, W either
//! - row-major `[inner, cols]` (burn's `Linear` layout): [`broadcast_form`], a tile of 8
//!   rows × 48 columns, 24 accumulators; per inner index, three loads of W's row (from a
//!   packed copy of the 48-column panel) and eight broadcasts of x feed 24 multiply-adds;
//! - or stored as its transpose `[cols, inner]` (a tied output head): [`transposed_form`],
//!   yᵀ = Wᵀ·xᵀ with the roles swapped, so W is read in order along its rows. A decode
//!   step's tied head goes through panels packed from the transpose instead
//!   (`super::weight_panels`), where the broadcast form ran it 18% cheaper.
//!
//! Row and column tails reuse the full tile: missing rows read the last row again (or
//! zeros) and are not stored, missing columns are masked off or not stored. Each output is
//! summed over the inner index in order from its start value, exactly as
//! [`super::ordered_product`] sums it: the same bits whichever of the two computes a
//! product. A transposed W takes the transposed form at any row count, though below 16
//! rows most lanes of xᵀ's column are padding (summing across lanes instead would change
//! the order): the ordered product it went to before, at most 8 rows, packed all of Wᵀ on
//! every call, the whole 49,152 × 576 tied head of SmolLM2 in each decode step of one
//! sequence and every key cache in a decode step's q·kᵀ (3 query rows a KV head). One
//! sequence's greedy 128 tokens with SmolLM2 (`roll-flow generate`) took 12-19% less time
//! (bench/history/model_throughput.md).

use std::arch::x86_64::*;

use super::simd::low_lanes;

/// Rows and 16-lane column vectors of a broadcast-form tile.
const BROADCAST_ROWS: usize = 8;
const BROADCAST_VECTORS: usize = 3;
/// How many W rows ahead the packing loop prefetches (16: 5-10% faster than none on the
/// decode shapes, within the VM's noise beyond).
const PACK_PREFETCH: usize = 16;
/// Inner indices of a panel that every row tile of a broadcast-form product takes in turn
/// (64 × 48 floats, 12 KB: the chunk and the next one, prefetched, stay in L1).
const INNER_CHUNK: usize = 64;
/// Columns one broadcast-form tile covers: a panel of packed weights.
pub(super) const BROADCAST_COLS: usize = 16 * BROADCAST_VECTORS;
const _: () = assert!(BROADCAST_COLS == super::weight_panels::PANEL_COLS);
/// Columns a part of a transposed-form product is a multiple of: every tile width
/// (16, 12, 8, 6) divides it.
pub(super) const TRANSPOSED_COLS: usize = 48;

/// A row-major matrix: data pointer and row stride (unit column stride).
#[derive(Clone, Copy)]
pub(super) struct Rows {
    pub ptr: *const f32,
    pub stride: usize,
}

// SAFETY: `Rows` is only read through, by threads that each hold the borrow it came from
// (the callers' slices outlive the parallel loop).
unsafe impl Send for Rows {}
// SAFETY: as above.
unsafe impl Sync for Rows {}

/// W for [`broadcast_form`]: row-major `[inner, all columns]` at a row stride, or packed
/// in 48-column panels (`super::weight_panels`), panel `p` at `ptr + p · stride`.
#[derive(Clone, Copy)]
pub(super) enum Weight {
    Rows(Rows),
    Panels(Rows),
}

/// dst columns `cols.0..cols.1` of all `rows` := (dst +) x · W, W row-major
/// `[inner, all columns]` with row stride `w.stride`, or already packed in panels.
///
/// With more rows than one tile, each 48-column panel of W is first copied into a
/// contiguous scratch panel (`inner × 48`), which every row tile then reads in order: read
/// in place, each inner index starts three new cache lines a whole W row apart (8 KB at
/// 2,048 columns, a new page each time), which the hardware prefetchers do not follow;
/// packed, the kernel ran 100-147 GFLOP/s on the decode shapes above against 35-95 in place.
/// Panels packed once for many calls ([`Weight::Panels`]) are read as they are. With
/// panels, `cols.0` must be a multiple of [`BROADCAST_COLS`].
///
/// With more rows than one tile, the row tiles take the panel [`INNER_CHUNK`] inner indices
/// at a time, each while that chunk is in L1, and prefetch the next chunk (the rest of the
/// panel, or this part's next packed panel) between them, each tile its share of the
/// chunk's cache lines. A decode step streams its weights from memory (538 MB of panels
/// for SmolLM2-135M in f32, the tied head included); when each of the four row tiles of 32
/// rows read a whole panel (110-295 KB, past L1), `perf annotate` put half of the kernel's
/// samples on W's loads (chunks: generation 3-9% faster); when the first tile alone
/// prefetched the next chunk, a third of the samples sat on its prefetches, the chunk's 12
/// KB arriving in a quarter of the time the four tiles take (shared: 8-9% faster at
/// SmolLM2's shape; bench/history/model_throughput.md). The partial sums go to dst between
/// chunks and come back as the next chunk's start, which is exact: the chain of every
/// output is unchanged.
///
/// # Safety
/// AVX-512F must be available; x must hold `rows × inner`, W `inner × cols.1`, dst
/// `rows × dst_stride` floats at the given strides; no other thread writes these columns.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn broadcast_form(
    dst: *mut f32,
    dst_stride: usize,
    (rows, inner): (usize, usize),
    cols: (usize, usize),
    x: Rows,
    w: Weight,
    accumulate: bool,
) {
    thread_local! {
        /// The scratch panel of this thread, grown as needed and reused across calls.
        static PANEL: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let pack = rows > BROADCAST_ROWS && matches!(w, Weight::Rows(_));
    PANEL.with_borrow_mut(|panel| {
        if pack && panel.len() < inner * BROADCAST_COLS {
            panel.resize(inner * BROADCAST_COLS, 0.0);
        }
        let mut col = cols.0;
        while col < cols.1 {
            let width = (cols.1 - col).min(BROADCAST_COLS);
            let masks = [
                low_lanes(width),
                low_lanes(width.saturating_sub(16)),
                low_lanes(width.saturating_sub(32)),
            ];
            let panel = match w {
                // `col` is a multiple of the panel width (parts are whole tiles).
                Weight::Panels(panels) => Rows {
                    ptr: unsafe { panels.ptr.add(col / BROADCAST_COLS * panels.stride) },
                    stride: BROADCAST_COLS,
                },
                Weight::Rows(w) if pack => {
                    let mut from = unsafe { w.ptr.add(col) };
                    // Columns past `width` are stored as zeros (masked loads).
                    for row in panel[..inner * BROADCAST_COLS].chunks_exact_mut(BROADCAST_COLS) {
                        // W's rows are far apart, beyond what the hardware prefetchers follow.
                        let ahead = from.wrapping_add(PACK_PREFETCH * w.stride) as *const i8;
                        for line in 0..BROADCAST_VECTORS {
                            _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * line));
                        }
                        for (v, &mask) in masks.iter().enumerate() {
                            let values = unsafe { _mm512_maskz_loadu_ps(mask, from.add(16 * v)) };
                            unsafe { _mm512_storeu_ps(row.as_mut_ptr().add(16 * v), values) };
                        }
                        from = unsafe { from.add(w.stride) };
                    }
                    Rows {
                        ptr: panel.as_ptr(),
                        stride: BROADCAST_COLS,
                    }
                }
                Weight::Rows(w) => Rows {
                    ptr: unsafe { w.ptr.add(col) },
                    stride: w.stride,
                },
            };
            // Several row tiles read the panel in chunks of the inner axis: every tile
            // takes a chunk while it is in L1 and prefetches its share of the next one.
            let chunk = if rows > BROADCAST_ROWS {
                INNER_CHUNK
            } else {
                inner
            };
            let packed = matches!(w, Weight::Panels(_));
            let mut k0 = 0;
            while k0 < inner {
                let kc = (inner - k0).min(chunk);
                let w = Rows {
                    ptr: unsafe { panel.ptr.add(k0 * panel.stride) },
                    stride: panel.stride,
                };
                // The next chunk lies right after this one (chunks only with more rows
                // than a tile, where the panel is contiguous): the rest of this panel, or
                // the first chunk of this part's next packed panel.
                let next_lines = if rows <= BROADCAST_ROWS {
                    0
                } else if k0 + kc < inner {
                    (inner - k0 - kc).min(chunk) * BROADCAST_VECTORS
                } else if packed && col + BROADCAST_COLS < cols.1 {
                    inner.min(chunk) * BROADCAST_VECTORS
                } else {
                    0
                };
                // Only an address for prefetches: with no next chunk (or W read in place,
                // a tile or fewer of rows) it may lie past W, so it is not an offset `add`
                // may take.
                let next = panel.ptr.wrapping_add((k0 + kc) * panel.stride) as *const i8;
                let per_tile = next_lines.div_ceil(rows.div_ceil(BROADCAST_ROWS));
                let mut row = 0;
                while row < rows {
                    let live = (rows - row).min(BROADCAST_ROWS);
                    let out = unsafe { dst.add(row * dst_stride + col) };
                    let x = Rows {
                        ptr: unsafe { x.ptr.add(row * x.stride + k0) },
                        stride: x.stride,
                    };
                    // The chain continues from the previous chunk's partial sums in dst.
                    let start = accumulate || k0 > 0;
                    // This tile's share of the next chunk's cache lines.
                    let first = (row / BROADCAST_ROWS * per_tile).min(next_lines);
                    let lines = per_tile.min(next_lines - first);
                    let prefetch = Prefetch {
                        from: next.wrapping_add(64 * first),
                        lines,
                        per_index: lines.div_ceil(kc),
                    };
                    let tile = (out, dst_stride, (live, kc), x, w, masks, (start, prefetch));
                    // A tile no taller than its live rows (a decode step's attention has one
                    // query row per product): no multiply-adds on repeated rows.
                    unsafe {
                        match live {
                            1 => broadcast_tile::<1>(tile),
                            2 => broadcast_tile::<2>(tile),
                            3 | 4 => broadcast_tile::<4>(tile),
                            _ => broadcast_tile::<BROADCAST_ROWS>(tile),
                        }
                    }
                    row += BROADCAST_ROWS;
                }
                k0 += kc;
            }
            col += BROADCAST_COLS;
        }
    });
}

/// Cache lines a tile of [`broadcast_form`] prefetches while it runs: `lines` consecutive
/// lines from `from`, `per_index` of them with each inner index.
#[derive(Clone, Copy)]
struct Prefetch {
    from: *const i8,
    lines: usize,
    per_index: usize,
}

/// What one tile of [`broadcast_form`] reads and writes: dst and its row stride, (live rows,
/// inner length), x, W, the column masks, (whether to start from dst's values, what to
/// prefetch).
type BroadcastTile = (
    *mut f32,
    usize,
    (usize, usize),
    Rows,
    Rows,
    [__mmask16; BROADCAST_VECTORS],
    (bool, Prefetch),
);

/// One tile of [`broadcast_form`]: `live` (≤ `R`) rows of x against 48 columns of W,
/// stored through `masks`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn broadcast_tile<const R: usize>(
    (out, out_stride, (live, inner), x, w, masks, (accumulate, prefetch)): BroadcastTile,
) {
    // Each output's chain starts from dst's value when adding (the order of
    // `super::ordered_product`).
    let mut acc = [[_mm512_setzero_ps(); BROADCAST_VECTORS]; R];
    if accumulate {
        for (r, acc) in acc.iter_mut().enumerate().take(live) {
            let from = unsafe { out.add(r * out_stride) };
            for (v, sum) in acc.iter_mut().enumerate() {
                *sum = unsafe { _mm512_maskz_loadu_ps(masks[v], from.add(16 * v)) };
            }
        }
    }
    let x_rows: [*const f32; R] =
        std::array::from_fn(|r| unsafe { x.ptr.add(r.min(live - 1) * x.stride) });
    let mut w_row = w.ptr;
    for k in 0..inner {
        let first = k * prefetch.per_index;
        for line in first..(first + prefetch.per_index).min(prefetch.lines) {
            _mm_prefetch::<_MM_HINT_T0>(prefetch.from.wrapping_add(64 * line));
        }
        let b = std::array::from_fn::<_, BROADCAST_VECTORS, _>(|v| unsafe {
            _mm512_maskz_loadu_ps(masks[v], w_row.add(16 * v))
        });
        for r in 0..R {
            let a = _mm512_set1_ps(unsafe { *x_rows[r].add(k) });
            for v in 0..BROADCAST_VECTORS {
                acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
            }
        }
        w_row = unsafe { w_row.add(w.stride) };
    }
    for (r, acc) in acc.iter().enumerate().take(live) {
        let out = unsafe { out.add(r * out_stride) };
        for (v, &sum) in acc.iter().enumerate() {
            unsafe { _mm512_mask_storeu_ps(out.add(16 * v), masks[v], sum) };
        }
    }
}

/// dst columns `cols.0..cols.1` of all `rows` := (dst +) x · W, W stored transposed: row
/// `j` of `wt` (row stride `wt.stride`) is W's column `j`.
///
/// Computed as the transposed product yᵀ = Wᵀ · xᵀ: x (a few rows) is copied once into
/// xᵀ `[inner, rows rounded up to 16]`, and a tile of `J` rows of Wᵀ (output columns) ×
/// `RV` 16-row vectors reads, per inner index, `RV` vectors of xᵀ and broadcasts one value
/// of each of the `J` rows of Wᵀ, which are read in order. The results go to dst's
/// columns with scatter stores.
///
/// # Safety
/// As [`broadcast_form`], with `wt` holding `cols.1 × inner` floats and `rows` ≤ 64.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn transposed_form(
    dst: *mut f32,
    dst_stride: usize,
    (rows, inner): (usize, usize),
    cols: (usize, usize),
    x: Rows,
    wt: Rows,
    accumulate: bool,
) {
    thread_local! {
        /// xᵀ of this thread, grown as needed and reused across calls.
        static XT: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let vectors = rows.div_ceil(16);
    let padded = 16 * vectors;
    XT.with_borrow_mut(|xt| {
        if xt.len() < inner * padded {
            xt.resize(inner * padded, 0.0);
        }
        for (k, column) in xt[..inner * padded].chunks_exact_mut(padded).enumerate() {
            for (r, value) in column.iter_mut().enumerate() {
                *value = if r < rows {
                    unsafe { *x.ptr.add(r * x.stride + k) }
                } else {
                    0.0
                };
            }
        }
        let xt = Rows {
            ptr: xt.as_ptr(),
            stride: padded,
        };
        let out = Out {
            ptr: dst,
            stride: dst_stride,
            rows,
            accumulate,
        };
        match vectors {
            1 => unsafe { transposed_tiles::<1, 16>(out, inner, cols, xt, wt) },
            2 => unsafe { transposed_tiles::<2, 12>(out, inner, cols, xt, wt) },
            3 => unsafe { transposed_tiles::<3, 8>(out, inner, cols, xt, wt) },
            _ => unsafe { transposed_tiles::<4, 6>(out, inner, cols, xt, wt) },
        }
    });
}

/// Where [`transposed_form`] writes: dst, its row stride, its live rows, and whether to add.
#[derive(Clone, Copy)]
struct Out {
    ptr: *mut f32,
    stride: usize,
    rows: usize,
    accumulate: bool,
}

/// The tiles of [`transposed_form`] over columns `cols`: `J` columns × `RV` row vectors.
#[target_feature(enable = "avx512f")]
unsafe fn transposed_tiles<const RV: usize, const J: usize>(
    out: Out,
    inner: usize,
    cols: (usize, usize),
    xt: Rows,
    wt: Rows,
) {
    // Lane i of row vector v is dst row 16·v + i.
    let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let row_offsets = _mm512_mullo_epi32(lanes, _mm512_set1_epi32(out.stride as i32));
    let masks: [__mmask16; RV] =
        std::array::from_fn(|v| low_lanes(out.rows.saturating_sub(16 * v)));
    let mut col = cols.0;
    while col < cols.1 {
        let width = (cols.1 - col).min(J);
        let w_rows: [*const f32; J] =
            std::array::from_fn(|j| unsafe { wt.ptr.add((col + j.min(width - 1)) * wt.stride) });
        // Each output's chain starts from dst's value when adding (the order of
        // `super::ordered_product`).
        let mut acc = [[_mm512_setzero_ps(); RV]; J];
        if out.accumulate {
            for (j, acc) in acc.iter_mut().enumerate().take(width) {
                for (v, sum) in acc.iter_mut().enumerate() {
                    let base = unsafe { out.ptr.add(16 * v * out.stride + col + j) };
                    *sum = unsafe {
                        _mm512_mask_i32gather_ps::<4>(
                            _mm512_setzero_ps(),
                            masks[v],
                            row_offsets,
                            base,
                        )
                    };
                }
            }
        }
        let mut xt_row = xt.ptr;
        for k in 0..inner {
            let a =
                std::array::from_fn::<_, RV, _>(|v| unsafe { _mm512_loadu_ps(xt_row.add(16 * v)) });
            for j in 0..J {
                let b = _mm512_set1_ps(unsafe { *w_rows[j].add(k) });
                for v in 0..RV {
                    acc[j][v] = _mm512_fmadd_ps(a[v], b, acc[j][v]);
                }
            }
            xt_row = unsafe { xt_row.add(xt.stride) };
        }
        for (j, acc) in acc.iter().enumerate().take(width) {
            for (v, &sum) in acc.iter().enumerate() {
                let base = unsafe { out.ptr.add(16 * v * out.stride + col + j) };
                unsafe { _mm512_mask_i32scatter_ps::<4>(base, masks[v], row_offsets, sum) };
            }
        }
        col += J;
    }
}

#[cfg(test)]
#[path = "few_rows_avx512_tests.rs"]
mod tests;
