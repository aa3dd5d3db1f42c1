//! Writing a block into a larger row-major array in place: what a KV cache's append needs.
//!
//! burn-flex's `slice_assign` always copies its whole destination first (its
//! `slice_write_impl` clones the tensor's storage handle, via `to_contiguous`, before asking
//! for mutable storage, so the copy-on-write always fires), which made every KV-cache
//! append of the rollout copy the entire cache. This writes the block's rows straight into
//! the destination's storage; [`crate::backend::KernelBackend::block_write`] uses it on
//! `Flex` tensors that own their storage alone.

/// Writes `src` (row-major, shape `src_shape`) into `dst` (row-major, shape `dst_shape`) at
/// offsets `starts` (one per axis). Panics when the block does not fit.
pub fn write_block(
    dst: &mut [f32],
    dst_shape: &[usize],
    starts: &[usize],
    src: &[f32],
    src_shape: &[usize],
) {
    let rank = dst_shape.len();
    assert!(
        rank > 0
            && src_shape.len() == rank
            && starts.len() == rank
            && (0..rank).all(|d| starts[d] + src_shape[d] <= dst_shape[d])
            && dst.len() == dst_shape.iter().product::<usize>()
            && src.len() == src_shape.iter().product::<usize>(),
        "write_block: a {src_shape:?} block at {starts:?} does not fit {dst_shape:?}"
    );
    let span = src_shape[rank - 1];
    if span == 0 || src.is_empty() {
        return;
    }
    let mut dst_strides = vec![1usize; rank];
    for d in (0..rank - 1).rev() {
        dst_strides[d] = dst_strides[d + 1] * dst_shape[d + 1];
    }
    // One contiguous span of the last axis per index of the leading axes.
    let mut index = vec![0usize; rank - 1];
    for row in src.chunks_exact(span) {
        let at: usize = (0..rank)
            .map(|d| (starts[d] + index.get(d).copied().unwrap_or(0)) * dst_strides[d])
            .sum();
        dst[at..at + span].copy_from_slice(row);
        for d in (0..rank - 1).rev() {
            index[d] += 1;
            if index[d] < src_shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_block_at_an_offset_and_leaves_the_rest() {
        // A [2, 3, 4] array of zeros; a [1, 2, 2] block of 1..=4 at (1, 1, 2).
        let mut dst = vec![0.0; 24];
        write_block(
            &mut dst,
            &[2, 3, 4],
            &[1, 1, 2],
            &[1.0, 2.0, 3.0, 4.0],
            &[1, 2, 2],
        );
        let mut expected = vec![0.0; 24];
        // (1, 1, 2), (1, 1, 3), (1, 2, 2), (1, 2, 3) in row-major order.
        expected[12 + 4 + 2] = 1.0;
        expected[12 + 4 + 3] = 2.0;
        expected[12 + 8 + 2] = 3.0;
        expected[12 + 8 + 3] = 4.0;
        assert_eq!(dst, expected);
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn refuses_a_block_that_overhangs() {
        let mut dst = vec![0.0; 6];
        write_block(&mut dst, &[2, 3], &[1, 2], &[1.0, 2.0], &[1, 2]);
    }
}
