//! Which products the few-rows kernels ([`super::few_rows_avx512`]) take instead of gemm,
//! when a product splits over threads (gemm's too), and how the few-rows kernels split a
//! product's columns; for the dense layer (`linear`) and `batched_matmul`.

use super::weight_panels::{WeightPanels, PANEL_COLS};

/// Products with at least this many multiply-adds (m·n·k) split over rayon's threads,
/// burn-flex's own threshold (192³), in gemm and in the few-rows kernels alike. A lower one
/// (2²⁰) split the Tiny model's decode-step projections (32 rows · 128 · 512 and less) and
/// cost a third of its two-thread generation speed in `bench/model_throughput.rs`, with
/// gemm and again with the few-rows kernels; a dim-512 model's (32 · 512 · 512 and up) and
/// training's products (1,024 tokens · 128 · 128 and up) are above it.
const PARALLEL_MIN: usize = 192 * 192 * 192;

/// Whether a product (or a batch of products) of `macs` multiply-adds splits over rayon's
/// threads.
pub(super) fn splits_over_threads(macs: usize) -> bool {
    rayon::current_num_threads() > 1 && macs >= PARALLEL_MIN
}

/// A row-major matrix operand: data, row stride, column stride.
pub(super) type Operand<'a> = (&'a [f32], isize, isize);

/// Whether the few-rows kernels run on this CPU (AVX-512, unless `ROLL_FLOW_KERNELS_ISA`
/// caps the instruction set, so the capped test runs take the fallback paths).
pub(crate) fn few_rows_kernels_run() -> bool {
    matches!(super::simd::Isa::detect(), super::simd::Isa::Avx512)
}

/// Products of at most this many rows (a decode step's batch) take the register-tile
/// kernels of `few_rows_avx512`, which read the weight in place, instead of gemm.
pub(crate) const FEW_ROWS: usize = 64;

/// `linear::product` through the few-rows kernels when they apply (AVX-512, at most
/// [`FEW_ROWS`] rows, a row-major `a`, `b` row-major or transposed); false when they do not.
///
/// # Safety
/// As `linear::product`.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn few_rows_product(
    dst: *mut f32,
    (rows, inner, cols): (usize, usize, usize),
    a: Operand<'_>,
    b: Operand<'_>,
    accumulate: bool,
) -> bool {
    use super::few_rows_avx512::{broadcast_form, transposed_form, Rows, Weight};
    use super::few_rows_avx512::{BROADCAST_COLS, TRANSPOSED_COLS};
    // b row-major (unit column stride), or transposed (unit row stride).
    let transposed = match (b.1, b.2) {
        (_, 1) => false,
        (1, _) => true,
        _ => return false,
    };
    let usable = few_rows_kernels_run() && a.2 == 1 && rows <= FEW_ROWS;
    if !usable || rows == 0 || inner == 0 || cols == 0 {
        return false;
    }
    let x = Rows {
        ptr: a.0.as_ptr(),
        stride: a.1 as usize,
    };
    let w = Rows {
        ptr: b.0.as_ptr(),
        stride: if transposed { b.2 } else { b.1 } as usize,
    };
    let tile = if transposed {
        TRANSPOSED_COLS
    } else {
        BROADCAST_COLS
    };
    let dst = dst as usize;
    split_columns(rows * inner * cols, cols, tile, |range| {
        let dst = dst as *mut f32;
        // SAFETY: AVX-512F was detected; the operands hold what the caller guarantees, and
        // parts write disjoint column ranges of dst.
        unsafe {
            if transposed {
                transposed_form(dst, cols, (rows, inner), range, x, w, accumulate);
            } else {
                broadcast_form(
                    dst,
                    cols,
                    (rows, inner),
                    range,
                    x,
                    Weight::Rows(w),
                    accumulate,
                );
            }
        }
    });
    true
}

/// Runs `part` over column ranges of whole `tile`s that together cover `0..cols`: in one
/// part, or, when a product of `macs` multiply-adds splits over threads, in four parts per
/// thread, so that tile counts that do not divide evenly (512 columns are 10.7 tiles of
/// 48) leave no thread idle for long.
fn split_columns(macs: usize, cols: usize, tile: usize, part: impl Fn((usize, usize)) + Sync) {
    let parts = if splits_over_threads(macs) {
        (4 * rayon::current_num_threads()).min(cols.div_ceil(tile))
    } else {
        1
    };
    // Each part: whole tiles of columns, the last part the rest.
    let per_part = cols.div_ceil(tile).div_ceil(parts) * tile;
    let range = |p: usize| ((p * per_part).min(cols), ((p + 1) * per_part).min(cols));
    if parts > 1 {
        use rayon::prelude::*;
        (0..parts).into_par_iter().for_each(|p| part(range(p)));
    } else {
        part(range(0));
    }
}

/// dst `[n, m]` := (dst +) x · W for the packed W, through the broadcast-form kernel.
///
/// # Safety
/// AVX-512F must be available, dst must hold n·m floats and x n·k.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn panels_product(
    dst: *mut f32,
    x: &[f32],
    panels: &WeightPanels,
    n: usize,
    accumulate: bool,
) {
    use super::few_rows_avx512::{broadcast_form, Rows, Weight};
    let (k, m) = panels.dims();
    let x = Rows {
        ptr: x.as_ptr(),
        stride: k,
    };
    let w = Weight::Panels(Rows {
        ptr: panels.values().as_ptr(),
        stride: k * PANEL_COLS,
    });
    let dst = dst as usize;
    split_columns(n * k * m, m, PANEL_COLS, |range| {
        // SAFETY: as the caller guarantees; parts write disjoint column ranges of dst.
        unsafe { broadcast_form(dst as *mut f32, m, (n, k), range, x, w, accumulate) };
    });
}

/// Without x86-64 there is no few-rows kernel (`linear::linear_forward_panels` returns
/// first).
#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn panels_product(_: *mut f32, _: &[f32], _: &WeightPanels, _: usize, _: bool) {
    unreachable!("the few-rows kernels run on x86-64 only")
}

/// Without x86-64 the few-rows kernels do not exist: `ordered_product` computes every
/// product.
#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn few_rows_product(
    _: *mut f32,
    _: (usize, usize, usize),
    _: Operand<'_>,
    _: Operand<'_>,
    _: bool,
) -> bool {
    false
}
