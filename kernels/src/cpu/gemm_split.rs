//! A matrix product through the `gemm` crate, and how it splits over rayon's threads.
//!
//! gemm computes a row-major product as its transpose (dstᵀ = bᵀ·aᵀ, its kernels want a
//! column-major destination), so `b` becomes its left operand. When `b` is a transposed
//! weight (column stride ≠ 1: Wᵀ in the backward's dx = dy·Wᵀ, or a tied output head reading
//! the `[vocab, hidden]` embedding), gemm packs all of it on the calling thread before its
//! threads start, and they wait. For those products the destination is cut here into a
//! grid of column strips (and row strips, when there are more threads than strips), each a
//! single-threaded gemm call that packs only its own columns: the packing runs on every
//! thread at once. Other products keep gemm's own split, which shares one packed operand.
//!
//! Measured (2-core AMD EPYC Zen 4, AVX-512, two threads, the products of a dim-512
//! training step; GFLOP/s, gemm's split → the grid): dx 1,024 · 512 · 512 147–163 →
//! 195–207; dx 1,024 · 2,048 · 512 158–170 → 181–196; the tied head's forward
//! 1,024 · 512 · 8,192 188–199 → 197–201. The other products (row-major `b`) were the same
//! either way or slower with the grid, which packs `a` once per strip where gemm shares it.
//! A one-pass training step of that model (`bench/model_throughput.rs -- medium`) went from
//! 1,194 to 1,293 tokens/s (medians of six alternating runs).
//!
//! The arithmetic does not depend on the split: every element of the destination is the
//! same dot product, accumulated in the same order over the inner dimension.

use super::few_rows::{splits_over_threads, Operand};

/// Column strips are whole multiples of this: gemm's register tile spans 64 rows of its
/// transposed destination (16 lanes × 4 with AVX-512), i.e. 64 of our columns.
const STRIP_COLS: usize = 64;

/// dst `[rows, cols]` (row-major, uninitialised unless `accumulate`) := (dst +) a·b, with
/// gemm.
///
/// # Safety
/// `dst` must hold `rows · cols` writable floats; `a` and `b` must be valid for
/// `rows × inner` and `inner × cols` reads at their (positive) strides.
pub(super) unsafe fn gemm_product(
    dst: *mut f32,
    dims: (usize, usize, usize),
    a: Operand<'_>,
    b: Operand<'_>,
    accumulate: bool,
) {
    let (rows, inner, cols) = dims;
    let threads = rayon::current_num_threads();
    let split = splits_over_threads(rows.saturating_mul(inner).saturating_mul(cols));
    let (a, b) = (Raw::of(a), Raw::of(b));
    let grid = (split && b.col_stride != 1)
        .then(|| Grid::new(rows, cols, threads))
        .flatten();
    let Some(grid) = grid else {
        let parallelism = match split {
            true => gemm::Parallelism::Rayon(0),
            false => gemm::Parallelism::None,
        };
        // SAFETY: as the caller guarantees.
        unsafe { gemm_call(dst, cols, dims, a, b, accumulate, parallelism) };
        return;
    };
    let dst = dst as usize;
    let cell = |(row, col): (usize, usize)| {
        let ((r0, r1), (c0, c1)) = (grid.rows(row), grid.cols(col));
        // SAFETY: the cells cover disjoint blocks of dst; the offsets stay inside the
        // operands the caller vouched for.
        unsafe {
            gemm_call(
                (dst as *mut f32).add(r0 * cols + c0),
                cols,
                (r1 - r0, inner, c1 - c0),
                a.rows_from(r0),
                b.cols_from(c0),
                accumulate,
                gemm::Parallelism::None,
            );
        }
    };
    let cells = grid.row_parts * grid.col_parts;
    rayon::scope(|scope| {
        for i in 1..cells {
            let cell = &cell;
            scope.spawn(move |_| cell((i / grid.col_parts, i % grid.col_parts)));
        }
        cell((0, 0));
    });
}

/// An operand as a raw pointer and strides, shareable across threads (the slice it came
/// from outlives the call).
#[derive(Clone, Copy)]
struct Raw {
    at: usize,
    row_stride: isize,
    col_stride: isize,
}

impl Raw {
    fn of((data, row_stride, col_stride): Operand<'_>) -> Raw {
        let at = data.as_ptr() as usize;
        Raw {
            at,
            row_stride,
            col_stride,
        }
    }

    /// The operand from row `r` on.
    fn rows_from(self, r: usize) -> Raw {
        Raw {
            at: self.at + r * self.row_stride as usize * size_of::<f32>(),
            ..self
        }
    }

    /// The operand from column `c` on.
    fn cols_from(self, c: usize) -> Raw {
        Raw {
            at: self.at + c * self.col_stride as usize * size_of::<f32>(),
            ..self
        }
    }
}

/// How a `[rows, cols]` destination is cut for `threads`: up to one column strip per
/// thread, each at least [`STRIP_COLS`] wide and a whole number of them (the last takes
/// the rest), and, when there are fewer strips than threads, row strips of more than
/// [`STRIP_ROWS`] rows each for the rest. So every cell is a product gemm blocks as it does
/// the whole one (the same inner-dimension blocks), and none falls to its small-matrix or
/// matrix-vector paths.
#[derive(Clone, Copy)]
struct Grid {
    rows: usize,
    cols: usize,
    row_parts: usize,
    col_parts: usize,
}

/// Row strips are longer than this: gemm takes a product of at most 64 × 64 (in either
/// orientation) through a path with other inner-dimension blocks.
const STRIP_ROWS: usize = 64;

impl Grid {
    /// The grid, or `None` when it would be one cell or a cell would be too small.
    fn new(rows: usize, cols: usize, threads: usize) -> Option<Grid> {
        let col_parts = threads.min(cols / STRIP_COLS);
        if col_parts == 0 {
            return None;
        }
        let row_parts = (threads / col_parts).min(rows / (STRIP_ROWS + 1));
        let grid = Grid {
            rows,
            cols,
            row_parts,
            col_parts,
        };
        (row_parts >= 1 && row_parts * col_parts > 1).then_some(grid)
    }

    /// Row range of row strip `i`.
    fn rows(&self, i: usize) -> (usize, usize) {
        strip(self.rows, self.row_parts, 1, i)
    }

    /// Column range of column strip `j`.
    fn cols(&self, j: usize) -> (usize, usize) {
        strip(self.cols, self.col_parts, STRIP_COLS, j)
    }
}

/// Strip `i` of `parts` over `len`: equal strips rounded down to a multiple of `unit`, the
/// last one to `len`.
fn strip(len: usize, parts: usize, unit: usize, i: usize) -> (usize, usize) {
    let per = len / parts / unit * unit;
    let end = if i + 1 == parts { len } else { (i + 1) * per };
    (i * per, end)
}

/// One gemm call: dst (row stride `dst_row_stride`) := (dst +) a·b.
///
/// # Safety
/// As [`gemm_product`], for the given dims and operands.
unsafe fn gemm_call(
    dst: *mut f32,
    dst_row_stride: usize,
    (rows, inner, cols): (usize, usize, usize),
    a: Raw,
    b: Raw,
    accumulate: bool,
    parallelism: gemm::Parallelism,
) {
    // SAFETY: as the caller guarantees; gemm reads `dst` only when `accumulate`.
    unsafe {
        gemm::gemm(
            rows,
            cols,
            inner,
            dst,
            1,
            dst_row_stride as isize,
            accumulate,
            a.at as *const f32,
            a.col_stride,
            a.row_stride,
            b.at as *const f32,
            b.col_stride,
            b.row_stride,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            parallelism,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_covers_every_cell_once_and_no_cell_is_small() {
        let shapes = [
            (1024, 512, 2),
            (1024, 512, 16),
            (130, 200, 3),
            (131, 64, 4),
            (1000, 129, 2),
        ];
        for (rows, cols, threads) in shapes {
            let grid = Grid::new(rows, cols, threads).expect("a grid");
            assert!(grid.row_parts * grid.col_parts <= threads);
            let mut seen = vec![0u8; rows * cols];
            for i in 0..grid.row_parts {
                for j in 0..grid.col_parts {
                    let ((r0, r1), (c0, c1)) = (grid.rows(i), grid.cols(j));
                    assert!(r1 - r0 > STRIP_ROWS && c1 - c0 >= STRIP_COLS);
                    for r in r0..r1 {
                        for c in c0..c1 {
                            seen[r * cols + c] += 1;
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{rows}x{cols} over {threads}");
        }
    }

    #[test]
    fn strips_are_whole_register_tiles() {
        let grid = Grid::new(1024, 512, 2).unwrap();
        assert_eq!(
            (grid.row_parts, grid.col_parts, grid.cols(1)),
            (1, 2, (256, 512))
        );
        // 16 threads over 512 columns: 8 strips of 64, each cut in 2 row strips.
        let grid = Grid::new(1024, 512, 16).unwrap();
        assert_eq!((grid.row_parts, grid.col_parts), (2, 8));
        // One strip of columns: row strips only.
        let grid = Grid::new(1000, 127, 2).unwrap();
        assert_eq!(
            (grid.row_parts, grid.col_parts, grid.rows(1)),
            (2, 1, (500, 1000))
        );
        // Too few rows and columns to cut, or fewer columns than a tile: gemm's own split
        // (a strip of 1 to 3 columns can take gemm's small-matrix path).
        assert!(Grid::new(64, 100, 2).is_none());
        assert!(Grid::new(1000, 63, 2).is_none());
    }

    /// dst of `gemm_product` with `threads` threads, b transposed (`[cols, inner]` storage).
    fn product(threads: usize, (rows, inner, cols): (usize, usize, usize), acc: bool) -> Vec<f32> {
        let value =
            |i: usize, salt: usize| ((i * 7919 + salt * 104_729) % 2003) as f32 / 1001.0 - 1.0;
        let a: Vec<f32> = (0..rows * inner).map(|i| value(i, 1)).collect();
        let b: Vec<f32> = (0..cols * inner).map(|i| value(i, 2)).collect();
        let mut dst: Vec<f32> = (0..rows * cols).map(|i| value(i, 3)).collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            // SAFETY: dst holds rows·cols floats; a and b hold their products' reads.
            unsafe {
                gemm_product(
                    dst.as_mut_ptr(),
                    (rows, inner, cols),
                    (&a, inner as isize, 1),
                    (&b, 1, inner as isize),
                    acc,
                )
            }
        });
        dst
    }

    #[test]
    fn split_products_equal_the_whole_bit_for_bit() {
        // Above the threading threshold (192³ multiply-adds); a ragged last strip; an inner
        // dimension over one gemm block (512); with and without accumulation.
        for dims in [(300, 600, 150), (1000, 100, 200), (130, 1500, 190)] {
            for acc in [false, true] {
                let whole = product(1, dims, acc);
                for threads in [2, 3, 5] {
                    assert!(
                        product(threads, dims, acc) == whole,
                        "{dims:?} {threads} threads"
                    );
                }
            }
        }
    }
}
