//! Batched matrix products `[…, m, k] · […, k, n]` on strided f32 views: attention's q·kᵀ
//! and p·v, in training (many rows) and in a decode step (one query, or the few queries of
//! a key/value head, against its sequence's cache). Leading axes of size 1 broadcast.
//!
//! Why: burn-flex runs a batched matmul as one gemm call per matrix; gemm packs both
//! operands on every call, and its sums follow the CPU (see `cpu::ordered_product`). A
//! decode step of a dim-512 model has 256 such products of one row per layer (32 sequences
//! × 8 heads), each a few thousand multiply-adds, so packing and dispatch were about 12% of
//! generation time. Here each product goes through [`super::linear`]'s product (the
//! few-rows kernels on AVX-512 read the operands where they lie: keys through the
//! transposed view `kᵀ`, values row-major; the ordered product otherwise), so every output
//! is summed in the same order on every CPU, and the batch is split over rayon's threads.

use rayon::prelude::*;

use super::few_rows::splits_over_threads;
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
    /// The offset of each matrix of the view, over the leading axes `lead` (the view's own,
    /// or larger where the view's axis has size 1 and broadcasts), in row-major order.
    fn matrix_offsets(&self, lead: &[usize]) -> Vec<usize> {
        let mut offsets = vec![self.offset];
        for (axis, &size) in lead.iter().enumerate() {
            let stride = match self.shape[axis] {
                1 => 0,
                _ => self.strides[axis] as usize,
            };
            offsets = offsets
                .iter()
                .flat_map(|&o| (0..size).map(move |i| o + i * stride))
                .collect();
        }
        offsets
    }
}

/// `lhs · rhs` for every matrix of the batch, the output contiguous `[lead…, m, n]` with
/// `lead` the broadcast leading shape; `None` (nothing computed) when the shapes do not
/// multiply this way (ranks differ, leading axes that neither equal nor broadcast, inner
/// sizes that differ, or a negative stride), for burn's matmul to refuse.
pub fn batched_matmul(lhs: &View<'_>, rhs: &View<'_>) -> Option<Vec<f32>> {
    let rank = lhs.shape.len();
    let lead: Option<Vec<usize>> = (rank >= 2 && rhs.shape.len() == rank)
        .then(|| {
            lhs.shape[..rank - 2]
                .iter()
                .zip(&rhs.shape[..rank - 2])
                .map(|(&a, &b)| (a == b || a == 1 || b == 1).then_some(a.max(b)))
                .collect()
        })
        .flatten();
    let applies = lhs.shape.get(rank.wrapping_sub(1)) == rhs.shape.get(rank.wrapping_sub(2))
        && lhs.strides.iter().chain(rhs.strides).all(|&s| s >= 0);
    let lead = lead.filter(|_| applies)?;
    let (m, k, n) = (
        lhs.shape[rank - 2],
        lhs.shape[rank - 1],
        rhs.shape[rank - 1],
    );
    let mut out = vec![0.0f32; lead.iter().product::<usize>() * m * n];
    if m * n == 0 {
        return Some(out);
    }
    let (a_offsets, b_offsets) = (lhs.matrix_offsets(&lead), rhs.matrix_offsets(&lead));
    let (a_rows, a_cols) = (lhs.strides[rank - 2], lhs.strides[rank - 1]);
    let (b_rows, b_cols) = (rhs.strides[rank - 2], rhs.strides[rank - 1]);
    let one = |(dst, (&a, &b)): (&mut [f32], (&usize, &usize))| {
        let a = (&lhs.storage[a..], a_rows, a_cols);
        let b = (&rhs.storage[b..], b_rows, b_cols);
        // SAFETY: dst holds m·n floats; the views' strides keep each matrix inside its
        // storage (burn's layouts), read from the matrix's offset.
        unsafe { product(dst.as_mut_ptr(), (m, k, n), a, b, false) };
    };
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
            let got = batched_matmul(&lhs, &rhs).expect("the few-rows path applies");
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

    /// 65 rows (past the few-rows kernels) against a broadcast right side `[1, k, n]`: each
    /// output the in-order fused sum of `ordered_product`, bit for bit; shapes that do not
    /// multiply are refused.
    #[test]
    fn many_rows_and_broadcast_batches_sum_in_order() {
        let (b, m, k, n) = (2, 65, 5, 3);
        let lhs_storage: Vec<f32> = (0..b * m * k)
            .map(|i| ((i * 29 % 83) as f32 - 41.0) / 17.0)
            .collect();
        let rhs_storage: Vec<f32> = (0..k * n)
            .map(|i| ((i * 13 % 31) as f32 - 15.0) / 7.0)
            .collect();
        let lhs = View {
            storage: &lhs_storage,
            offset: 0,
            shape: &[b, m, k],
            strides: &[(m * k) as isize, k as isize, 1],
        };
        let rhs = View {
            storage: &rhs_storage,
            offset: 0,
            shape: &[1, k, n],
            strides: &[(k * n) as isize, n as isize, 1],
        };
        let got = batched_matmul(&lhs, &rhs).expect("the shapes multiply");
        for bi in 0..b {
            for r in 0..m {
                for c in 0..n {
                    let want = (0..k).fold(0.0f32, |s, j| {
                        lhs_storage[(bi * m + r) * k + j].mul_add(rhs_storage[j * n + c], s)
                    });
                    assert_eq!(
                        got[(bi * m + r) * n + c].to_bits(),
                        want.to_bits(),
                        "[{bi}, {r}, {c}]"
                    );
                }
            }
        }
        let bad_inner = View {
            storage: &rhs_storage,
            offset: 0,
            shape: &[1, k + 1, 2],
            strides: &[(2 * k + 2) as isize, 2, 1],
        };
        assert!(batched_matmul(&lhs, &bad_inner).is_none());
        let bad_lead = View {
            storage: &lhs_storage,
            offset: 0,
            shape: &[3, k, n],
            strides: &[0, n as isize, 1],
        };
        assert!(batched_matmul(&lhs, &bad_lead).is_none());
    }
}
