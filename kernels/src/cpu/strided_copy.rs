//! A row-major copy of a strided f32 view that has an axis of stride 1, e.g. a gradient
//! that reaches an op through `swap_dims`, or attention's heads merged back (`[batch,
//! heads, queries, d]` read as `[batch, queries, heads, d]`). burn-flex's own copy
//! collapses such layouts only to 2-D and walks a 4-D head transpose element by element,
//! on one thread: the largest cost outside the matrix products of a training step once,
//! and still 2% of a dim-512 one (`perf`, `bench/model_throughput.rs -- medium`).
//!
//! With `u` the unit-stride axis and `l` the last one, every index of the other axes
//! selects a `[size_u, size_l]` block: rows copied whole when u = l, otherwise a small
//! transpose reading along u (the block of a head is a few KB and stays in L1). Blocks go
//! to rayon's threads in runs of at least `PARALLEL_MIN` values; every output value is
//! written once, so the output is never zeroed first.

use rayon::prelude::*;

use super::buffer;

/// A run of blocks given to one thread copies at least this many values (256 KB).
const PARALLEL_MIN: usize = 1 << 16;

/// The row-major copy of the view of `src` at `start` with `shape` and `strides` (in
/// values); `None` when no axis has stride 1, a stride is negative, the view is empty or
/// reads past `src`.
pub fn contiguous_copy(
    src: &[f32],
    start: usize,
    shape: &[usize],
    strides: &[isize],
) -> Option<Vec<f32>> {
    if strides.len() != shape.len() || strides.iter().any(|&s| s < 0) {
        return None;
    }
    let strides: Vec<usize> = strides.iter().map(|&s| s as usize).collect();
    let rank = shape.len();
    // The unit-stride axis: the last one when it has stride 1 (rows copied whole), else the
    // first of more than one value (a size-1 axis of stride 1 would say nothing).
    let l = rank.checked_sub(1)?;
    let u = match strides[l] == 1 {
        true => l,
        false => (0..rank).find(|&d| strides[d] == 1 && shape[d] > 1)?,
    };
    let mut out_strides = vec![1usize; rank];
    for d in (0..l).rev() {
        out_strides[d] = out_strides[d + 1] * shape[d + 1];
    }
    let total = shape.iter().product::<usize>();
    let last_read = start
        + (0..rank)
            .map(|d| shape[d].saturating_sub(1) * strides[d])
            .sum::<usize>();
    if total == 0 || last_read >= src.len() {
        return None;
    }
    let outer: Vec<usize> = (0..rank).filter(|&d| d != u && d != l).collect();
    let blocks = outer.iter().map(|&d| shape[d]).product::<usize>();
    let block = Block {
        rows: u == l,
        size_u: shape[u],
        size_l: shape[l],
        stride_l: strides[l],
        out_u: out_strides[u],
    };
    let mut out = buffer::uninit(total);
    let dst = out.as_mut_ptr() as usize;
    let per_block = if block.rows {
        block.size_l
    } else {
        block.size_u * block.size_l
    };
    (0..blocks)
        .into_par_iter()
        .with_min_len(PARALLEL_MIN.div_ceil(per_block).max(1))
        .for_each(|b| {
            // Block `b`'s index over the other axes (the last of them fastest), and its
            // starts in the source and the output.
            let (mut rest, mut from, mut to) = (b, start, 0);
            for &d in outer.iter().rev() {
                let i = rest % shape[d];
                rest /= shape[d];
                from += i * strides[d];
                to += i * out_strides[d];
            }
            // SAFETY: the blocks write disjoint sets of the `total` output values (a
            // row-major layout is one-to-one).
            unsafe { block.copy(src, from, (dst as *mut f32).add(to)) };
        });
    // SAFETY: the blocks wrote every one of the `total` values.
    unsafe { out.set_len(total) };
    Some(out)
}

/// The shape of one block: a row of `size_l` values when the last axis has stride 1
/// (`rows`), else `[size_u, size_l]` with its last axis' stride in the source and its
/// unit-stride axis' stride in the output.
struct Block {
    rows: bool,
    size_u: usize,
    size_l: usize,
    stride_l: usize,
    out_u: usize,
}

impl Block {
    /// Copies the block starting at `src[from]` to `to`.
    ///
    /// # Safety
    /// `to` must be valid for the block's writes (reads of `src` are checked).
    unsafe fn copy(&self, src: &[f32], from: usize, to: *mut f32) {
        if self.rows {
            let row = &src[from..from + self.size_l];
            // SAFETY: as the caller guarantees.
            unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), to, self.size_l) };
            return;
        }
        for j in 0..self.size_l {
            let column = &src[from + j * self.stride_l..from + j * self.stride_l + self.size_u];
            for (i, &v) in column.iter().enumerate() {
                // SAFETY: as the caller guarantees.
                unsafe { *to.add(i * self.out_u + j) = v };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::contiguous_copy;

    /// The row-major copy, value by value.
    fn naive(src: &[f32], start: usize, shape: &[usize], strides: &[isize]) -> Vec<f32> {
        let total = shape.iter().product::<usize>();
        (0..total)
            .map(|mut flat| {
                let mut at = start as isize;
                for d in (0..shape.len()).rev() {
                    at += (flat % shape[d]) as isize * strides[d];
                    flat /= shape[d];
                }
                src[at as usize]
            })
            .collect()
    }

    #[test]
    fn views_copy_as_value_by_value() {
        let src: Vec<f32> = (0..200_000).map(|i| i as f32).collect();
        // [2, 3, 4, 5] heads swapped from [2, 4, 3, 5] (u = l); a 2-D transpose (u ≠ l);
        // a view with an offset whose last axis is strided; large enough to split.
        let views: [(usize, &[usize], &[isize]); 7] = [
            (0, &[2, 3, 4, 5], &[60, 5, 15, 1]),
            (0, &[6, 7], &[1, 6]),
            (3, &[4, 5, 6], &[1, 4 * 6, 4]),
            (0, &[8, 128, 8, 16], &[16_384, 16, 2048, 1]),
            // Size-1 axes after (or at) the unit-stride one: a [1, n] transposed; a key
            // axis of one.
            (0, &[4, 1], &[1, 4]),
            (0, &[2, 3, 1], &[3, 1, 9]),
            (0, &[2, 1, 5], &[5, 1, 1]),
        ];
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            for (start, shape, strides) in views {
                let got = pool.install(|| contiguous_copy(&src, start, shape, strides));
                assert_eq!(
                    got.unwrap(),
                    naive(&src, start, shape, strides),
                    "{shape:?}"
                );
            }
        }
    }

    #[test]
    fn views_it_cannot_copy_are_refused() {
        let src = vec![0.0f32; 10];
        assert!(
            contiguous_copy(&src, 0, &[2, 5], &[10, 2]).is_none(),
            "no unit stride"
        );
        assert!(
            contiguous_copy(&src, 0, &[2, 5], &[-5, 1]).is_none(),
            "negative stride"
        );
        assert!(
            contiguous_copy(&src, 0, &[3, 5], &[5, 1]).is_none(),
            "reads past the end"
        );
        assert!(
            contiguous_copy(&src, 0, &[0, 5], &[5, 1]).is_none(),
            "empty"
        );
    }
}
