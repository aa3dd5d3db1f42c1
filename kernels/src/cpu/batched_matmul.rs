//! Batched matrix products of few rows, `[…, m, k] · […, k, n]` with m ≤ 64, on strided f32
//! views: attention's q·kᵀ and p·v in a decode step, one query (or, with grouped heads, the
//! few queries of a key/value head) against its sequence's cache.
//!
//! Why: burn-flex runs a batched matmul as one gemm call per matrix, and gemm packs both
//! operands on every call; a decode step of a dim-512 model has 256 such products of one
//! row per layer (32 sequences × 8 heads), each a few thousand multiply-adds, so packing
//! and dispatch were about 12% of generation time. Here each product goes through
//! [`super::linear`]'s few-rows kernels, which read the operands where they lie (keys
//! through the transposed view `kᵀ`, values row-major), and the batch is split over
//! rayon's threads.

use rayon::prelude::*;

use super::few_rows::{few_rows_kernels_run, splits_over_threads, FEW_ROWS};
use super::linear::product;

/// A batch of products splits over threads from 1/16 of the multiply-adds at which one
/// product splits its columns: a batch splits into halves at one join, a product into four
/// parts per thread. A `medium` decode step's attention (32 sequences × 8 heads, 64 × 17-80
/// keys, 0.3-1.3 M multiply-adds) then splits from 27 keys on (two-thread generation
/// 1,557-1,659 → 1,958-2,067 tok/s, `bench/model_throughput.rs`, AMD VM); a Tiny model's
/// (32 × 4 heads, 32 × keys) only beyond 108 keys.
const BATCH_SPLIT_SCALE: usize = 16;

/// A strided f32 view: the storage, the first element's offset, shape and strides.
pub struct View<'a> {
    pub storage: &'a [f32],
    pub offset: usize,
    pub shape: &'a [usize],
    pub strides: &'a [isize],
}

impl View<'_> {
    /// Offsets of the matrices of the leading axes, in row-major order of those axes.
    fn matrix_offsets(&self) -> Vec<usize> {
        let lead = self.shape.len() - 2;
        let mut offsets = vec![self.offset];
        for axis in 0..lead {
            let stride = self.strides[axis] as usize;
            offsets = offsets
                .iter()
                .flat_map(|&o| (0..self.shape[axis]).map(move |i| o + i * stride))
                .collect();
        }
        offsets
    }
}

/// `lhs · rhs` (row-major `[…, m, n]`) when the few-rows kernels apply: they run on this
/// CPU (AVX-512, unless `ROLL_FLOW_KERNELS_ISA` caps it), equal leading axes (no
/// broadcasting), m ≤ 64, `lhs` with unit stride along its last axis and `rhs` along either
/// of its last two, no negative stride. `None` otherwise.
pub fn few_rows_matmul(lhs: &View<'_>, rhs: &View<'_>) -> Option<Vec<f32>> {
    let rank = lhs.shape.len();
    let applies = few_rows_kernels_run()
        && rank >= 2
        && rhs.shape.len() == rank
        && lhs.shape[..rank - 2] == rhs.shape[..rank - 2]
        && lhs.shape[rank - 1] == rhs.shape[rank - 2]
        && lhs.shape[rank - 2] <= FEW_ROWS
        && lhs.strides[rank - 1] == 1
        && (rhs.strides[rank - 1] == 1 || rhs.strides[rank - 2] == 1)
        && lhs.strides.iter().chain(rhs.strides).all(|&s| s >= 0);
    if !applies {
        return None;
    }
    let (m, k, n) = (
        lhs.shape[rank - 2],
        lhs.shape[rank - 1],
        rhs.shape[rank - 1],
    );
    let mut out = vec![0.0f32; lhs.shape[..rank - 2].iter().product::<usize>() * m * n];
    if m * n == 0 {
        return Some(out);
    }
    let (a_offsets, b_offsets) = (lhs.matrix_offsets(), rhs.matrix_offsets());
    let a_rows = lhs.strides[rank - 2];
    let (b_rows, b_cols) = (rhs.strides[rank - 2], rhs.strides[rank - 1]);
    let one = |(dst, (&a, &b)): (&mut [f32], (&usize, &usize))| {
        let a = (&lhs.storage[a..], a_rows, 1);
        let b = (&rhs.storage[b..], b_rows, b_cols);
        // SAFETY: dst holds m·n floats; each view's storage holds its matrix at these
        // strides (the tensors' layouts say so).
        unsafe { product(dst.as_mut_ptr(), (m, k, n), a, b, false) };
    };
    // The batch splits over threads only when it is a sizeable fraction of a product that
    // would (see BATCH_SPLIT_SCALE).
    if splits_over_threads(BATCH_SPLIT_SCALE * a_offsets.len() * m * k * n) {
        out.par_chunks_mut(m * n)
            .zip(a_offsets.par_iter().zip(&b_offsets))
            .for_each(one);
    } else {
        out.chunks_mut(m * n)
            .zip(a_offsets.iter().zip(&b_offsets))
            .for_each(one);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of 2 × 3 products of 5 rows: lhs with its heads and rows swapped (strides
    /// of a `swap_dims` view), rhs once a transposed view (as kᵀ) and once row-major (as
    /// v); against the products computed by hand from the indexing rule, in f64.
    #[test]
    fn strided_batches_match_the_indexing_rule() {
        if !few_rows_kernels_run() {
            return;
        }
        let (b, h, m, k, n) = (2, 3, 5, 7, 19);
        let value = |i: usize| ((i * 37 % 101) as f32 - 50.0) / 25.0;
        // lhs stored [b, m, h, k], viewed [b, h, m, k].
        let lhs_storage: Vec<f32> = (0..b * m * h * k).map(value).collect();
        let lhs_strides = [(m * h * k) as isize, k as isize, (h * k) as isize, 1];
        let lhs_at = |bi: usize, hi: usize, r: usize, c: usize| {
            lhs_storage[bi * m * h * k + r * h * k + hi * k + c]
        };
        // rhs stored [b, h, n, k] (keys), viewed as kᵀ [b, h, k, n]; or stored [b, h, k, n].
        let rhs_storage: Vec<f32> = (0..b * h * n * k).map(|i| value(i + 11)).collect();
        for transposed in [true, false] {
            let rhs_strides = if transposed {
                [(h * n * k) as isize, (n * k) as isize, 1, k as isize]
            } else {
                [(h * k * n) as isize, (k * n) as isize, n as isize, 1]
            };
            let rhs_at = |bi: usize, hi: usize, r: usize, c: usize| {
                let s = rhs_strides;
                rhs_storage[bi * s[0] as usize
                    + hi * s[1] as usize
                    + r * s[2] as usize
                    + c * s[3] as usize]
            };
            let lhs = View {
                storage: &lhs_storage,
                offset: 0,
                shape: &[b, h, m, k],
                strides: &lhs_strides,
            };
            let rhs = View {
                storage: &rhs_storage,
                offset: 0,
                shape: &[b, h, k, n],
                strides: &rhs_strides,
            };
            let got = few_rows_matmul(&lhs, &rhs).expect("the few-rows path applies");
            for bi in 0..b {
                for hi in 0..h {
                    for r in 0..m {
                        for c in 0..n {
                            let want: f64 = (0..k)
                                .map(|j| lhs_at(bi, hi, r, j) as f64 * rhs_at(bi, hi, j, c) as f64)
                                .sum();
                            let at = ((bi * h + hi) * m + r) * n + c;
                            assert!(
                                (got[at] as f64 - want).abs() < 1e-5,
                                "[{bi}, {hi}, {r}, {c}] transposed {transposed}: {} vs {want}",
                                got[at]
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn broadcasting_and_many_rows_are_left_to_burn() {
        let storage = vec![1.0f32; 4096];
        let view = |shape: &'static [usize], strides: &'static [isize]| View {
            storage: &storage,
            offset: 0,
            shape,
            strides,
        };
        let rows_65 = view(&[65, 2], &[2, 1]);
        assert!(few_rows_matmul(&rows_65, &view(&[2, 3], &[3, 1])).is_none());
        let broadcast = view(&[1, 2, 2], &[4, 2, 1]);
        assert!(few_rows_matmul(&view(&[2, 2, 2], &[4, 2, 1]), &broadcast).is_none());
    }
}
