//! CubeCL attention softmax `y = softmax(x + mask)` over the last axis, forward and
//! backward, one cube per row (formulas as [`crate::cpu::softmax`]).
//!
//! Forward: each unit walks the keys `j ≡ unit (mod units)` once keeping an online
//! softmax (Milakov & Gimelshein 2018), the running max m and l = Σ e^{s_j − m} with
//! s = x + mask, rescaling l by e^{m_old − m_new} when the max rises; the units' pairs merge
//! in shared memory (M = max m_u, L = Σ_u l_u e^{m_u − M}); a second walk writes
//! y_j = e^{s_j − M} / L. The scores are read twice and the probabilities written once,
//! where burn's ops (`crate::unfused`) allocate and walk the row for the sum with the mask,
//! the max, the shift, the exponential, the sum and the division.
//! Backward: dx = y ⊙ (dy − Σ dy·y), one cube per row, the dot in shared memory.
//!
//! The mask is read through its strides (`row_offset`), so the expanded
//! `[rows, heads, queries, keys]` view the model passes is never copied to full size. Sums
//! are kept in the accumulator type `A` (f32 at launch) whatever the scores' type, and the
//! max starts below every finite score: a row whose keys are all hidden (mask −1e30) gets
//! the uniform softmax of its equal scores, as the unfused ops give.

use burn::tensor::TensorMetadata;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;

use super::cube_index::{cube_index, row_offset};
use super::cube_reduce::{cube_max, cube_sum};
use super::launch::{empty, grid, ACCUMULATOR};

/// Below every finite f32 score plus mask (−1e30), and finite, which WGSL literals must be.
const LOWEST: f32 = -3.0e38;

/// Units per cube for rows of `keys`: about four keys a unit, 32 to 256.
fn units(keys: usize) -> u32 {
    (keys / 4).next_power_of_two().clamp(32, 256) as u32
}

/// `softmax(scores + mask)` over the last axis; `mask` of the scores' shape, any strides.
pub(super) fn forward<R: CubeRuntime>(scores: CubeTensor<R>, mask: CubeTensor<R>) -> CubeTensor<R> {
    per_row(into_contiguous(scores), mask, Direction::Forward)
}

/// dscores = y ⊙ (dy − Σ dy·y) from the forward's output `probs` and the gradient `grad`.
pub(super) fn backward<R: CubeRuntime>(probs: CubeTensor<R>, grad: CubeTensor<R>) -> CubeTensor<R> {
    per_row(
        into_contiguous(probs),
        into_contiguous(grad),
        Direction::Backward,
    )
}

enum Direction {
    Forward,
    Backward,
}

/// One cube per row of `rows`' last axis (contiguous), `other` read beside it (the mask, or
/// the incoming gradient): a fresh output of `rows`' shape.
fn per_row<R: CubeRuntime>(
    rows: CubeTensor<R>,
    other: CubeTensor<R>,
    direction: Direction,
) -> CubeTensor<R> {
    let shape = rows.shape();
    let keys = shape[shape.num_dims() - 1];
    let count = shape.num_elements() / keys.max(1);
    let out = empty(&rows, &shape.to_vec());
    let (client, dtype, units) = (rows.client.clone(), rows.dtype, units(keys));
    let (cubes, dim, dtypes) = (
        grid(count),
        CubeDim::new_1d(units),
        [dtype.into(), ACCUMULATOR.into()],
    );
    let (rows, other, result) = (
        rows.into_tensor_arg(),
        other.into_tensor_arg(),
        out.clone().into_tensor_arg(),
    );
    let (count, keys) = (count as u32, keys as u32);
    match direction {
        Direction::Forward => masked_softmax_forward_kernel::launch::<R>(
            &client, cubes, dim, rows, other, result, count, keys, units, dtypes,
        ),
        Direction::Backward => masked_softmax_backward_kernel::launch::<R>(
            &client, cubes, dim, rows, other, result, count, keys, units, dtypes,
        ),
    }
    out
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn masked_softmax_forward_kernel<F: Float, A: Float>(
    scores: &Tensor<F>,
    mask: &Tensor<F>,
    probs: &mut Tensor<F>,
    rows: u32,
    keys: u32,
    #[comptime] units: u32,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let row = cube_index(rows);
    let k = keys as usize;
    let base = row * k;
    let mb = row_offset(mask, row);
    let ms = mask.stride(mask.rank() - 1);
    let u = UNIT_POS_X as usize;
    let mut m = A::cast_from(LOWEST);
    let mut l = A::new(0.0);
    let mut j = u;
    while j < k {
        let s = A::cast_from(scores[base + j]) + A::cast_from(mask[mb + j * ms]);
        if s > m {
            l *= (m - s).exp();
            m = s;
        }
        l += (s - m).exp();
        j += units as usize;
    }
    let mut shared = SharedMemory::<A>::new(units as usize);
    let top = cube_max(&mut shared, m);
    let total = cube_sum(&mut shared, l * (m - top).exp());
    let inv = A::new(1.0) / total;
    let mut j = u;
    while j < k {
        let s = A::cast_from(scores[base + j]) + A::cast_from(mask[mb + j * ms]);
        probs[base + j] = F::cast_from((s - top).exp() * inv);
        j += units as usize;
    }
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn masked_softmax_backward_kernel<F: Float, A: Float>(
    probs: &Tensor<F>,
    grad: &Tensor<F>,
    dx: &mut Tensor<F>,
    rows: u32,
    keys: u32,
    #[comptime] units: u32,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let row = cube_index(rows);
    let k = keys as usize;
    let base = row * k;
    let u = UNIT_POS_X as usize;
    let mut dot = A::new(0.0);
    let mut j = u;
    while j < k {
        dot += A::cast_from(probs[base + j]) * A::cast_from(grad[base + j]);
        j += units as usize;
    }
    let mut shared = SharedMemory::<A>::new(units as usize);
    let dot = cube_sum(&mut shared, dot);
    let mut j = u;
    while j < k {
        let y = A::cast_from(probs[base + j]);
        dx[base + j] = F::cast_from(y * (A::cast_from(grad[base + j]) - dot));
        j += units as usize;
    }
}
