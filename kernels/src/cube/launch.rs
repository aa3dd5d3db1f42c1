//! What the CubeCL launches share: one cube per item over the (x, y) grid, fresh outputs
//! with compact strides, the accumulator type of the kernels that sum in f32, and the
//! packed sequences' offsets (checked, then uploaded as a small u32 tensor per call).

use burn::tensor::ops::IntTensorOps;
use burn::tensor::{DType, Shape, TensorData};
use burn_cubecl::element::BoolElement;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeBackend, CubeRuntime, FloatElement, IntElement};
use cubecl::prelude::*;

/// The log-prob and decode-attention kernels' accumulator type, whatever their operands'
/// (module docs of [`super::logprob`] and [`super::decode_attention`]).
pub(super) const ACCUMULATOR: DType = DType::F32;
const MAX_GRID_X: usize = 65_535;

/// One cube per item, spread over y when there are more than 65,535.
pub(super) fn grid(items: usize) -> CubeCount {
    let x = items.clamp(1, MAX_GRID_X);
    CubeCount::Static(x as u32, items.div_ceil(x).max(1) as u32, 1)
}

/// A fresh output of `like`'s dtype with compact row-major strides, which the kernels
/// index by hand (`row * vocab + i`). `empty_device_dtype` may pad each row to an
/// aligned pitch on CUDA, and a kernel that writes compactly into a pitched `[rows, 2]`
/// or `[rows, vocab]` tensor leaves every row after the first in the wrong place (the
/// log-prob suite's failures on an H100, bench/history/gpu.md).
pub(super) fn empty<R: CubeRuntime>(like: &CubeTensor<R>, shape: &[usize]) -> CubeTensor<R> {
    empty_of(like, shape, like.dtype)
}

/// [`empty`] of another dtype (an f32 accumulator's output beside bf16 logits).
pub(super) fn empty_of<R: CubeRuntime>(
    like: &CubeTensor<R>,
    shape: &[usize],
    dtype: DType,
) -> CubeTensor<R> {
    empty_device_contiguous_dtype::<R>(
        like.client.clone(),
        like.device.clone(),
        Shape::from(shape.to_vec()),
        dtype,
    )
}

/// `t` where it lies when its last axis has unit stride (row-major, or a column view of a
/// wider tensor: the kernel finds each row through [`super::cube_index::row_offset`]),
/// else a contiguous copy.
pub(super) fn unit_stride_rows<R: CubeRuntime>(t: CubeTensor<R>) -> CubeTensor<R> {
    match t.meta.strides().last() {
        Some(1) => t,
        _ => into_contiguous(t),
    }
}

/// The widest vector the device favours for `t`'s element type that divides every one of
/// `lengths` (sizes and strides in elements) and the number of elements before the view's
/// first one (so that every load of a vector is aligned); 1 when none does.
pub(super) fn widest_vector<R: CubeRuntime>(t: &CubeTensor<R>, lengths: &[usize]) -> usize {
    let skipped = t.handle.offset_start.unwrap_or(0) as usize / t.dtype.size();
    (t.client)
        .io_optimized_vector_sizes(t.dtype.size())
        .find(|&n| {
            lengths
                .iter()
                .chain([&skipped])
                .all(|x| x.is_multiple_of(n))
        })
        .unwrap_or(1)
}

/// The offsets on the device, as u32.
pub(super) fn upload_offsets<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement>(
    offsets: &[usize],
    device: &R::Device,
) -> CubeTensor<R> {
    let v: Vec<u32> = offsets
        .iter()
        .map(|&o| u32::try_from(o).expect("more than 2^32 tokens"))
        .collect();
    let n = v.len();
    CubeBackend::<R, F, I, BT>::int_from_data(TensorData::new(v, [n]), device)
}

/// Refuses offsets that do not run non-decreasing from 0 to `tokens`.
pub(super) fn check_offsets(offsets: &[usize], tokens: usize, op: &str) {
    assert!(
        offsets.first() == Some(&0)
            && offsets.last() == Some(&tokens)
            && offsets.windows(2).all(|w| w[0] <= w[1]),
        "{op}: offsets must run non-decreasing from 0 to {tokens}"
    );
}
