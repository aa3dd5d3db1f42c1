//! CubeCL RMSNorm over the last axis, forward and backward (formulas as
//! [`crate::cpu::rms_norm`]): r_i = 1 / sqrt(mean_j x_ij² + eps), y_ij = x_ij·r_i·w_j;
//! with g_ij = dy_ij·w_j, dx_ij = r_i·g_ij − r_i³·x_ij·(Σ_k g_ik·x_ik) / H and
//! dw_j = Σ_i dy_ij·x_ij·r_i.
//!
//! Forward and dx take one cube per row (the row's sums in shared memory), one read of the
//! row per sum and one write, where burn's ops (`crate::unfused`) run square, mean, add,
//! sqrt, recip and two broadcast products, each a pass with its own allocation. dw is a
//! sum over rows, done in two fixed-order steps so that it is the same on every run (no
//! atomics): the dx kernel also saves r_i, then each unit of [`dweight_partials_kernel`]
//! sums one feature over a block of [`ROWS_PER_BLOCK`] rows, and [`sum_blocks`] (a bias
//! gradient's second step too) adds the blocks' partials feature by feature. Sums in the
//! accumulator type `A` (f32 at launch) whatever `x`'s type.
//!
//! [`add_rms_norm_forward_kernel`] is the forward with a residual add in front, s = x + δ
//! (rounded to `x`'s type, as burn's add), writing s and y = rms(s): one launch for a
//! decoder layer's residual add and the norm after it, outside autodiff.

use burn::tensor::TensorMetadata;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;

use super::column_sums::sum_blocks;
use super::cube_index::cube_index;
use super::cube_reduce::cube_sum;
use super::launch::{empty, empty_of, grid, ACCUMULATOR};

/// Units per cube of the row kernels and of the dw kernels' feature blocks.
const UNITS: u32 = 128;
/// Rows summed by one unit of [`dweight_partials_kernel`]: 8 × 2,048 rows make 64
/// partials per feature.
const ROWS_PER_BLOCK: usize = 256;

/// `x` as rows of its last axis: (rows, features).
fn rows_of<R: CubeRuntime>(x: &CubeTensor<R>) -> (usize, usize) {
    let shape = x.shape();
    let h = shape[shape.num_dims() - 1];
    (shape.num_elements() / h.max(1), h)
}

/// y = x·r·w over the last axis of `x`, `weight` `[H]`.
pub(super) fn forward<R: CubeRuntime>(
    x: CubeTensor<R>,
    weight: CubeTensor<R>,
    eps: f32,
) -> CubeTensor<R> {
    let (x, weight) = (into_contiguous(x), into_contiguous(weight));
    let (rows, h) = rows_of(&x);
    let y = empty(&x, &x.shape().to_vec());
    let (client, dtype) = (x.client.clone(), x.dtype);
    rms_norm_forward_kernel::launch::<R>(
        &client,
        grid(rows),
        CubeDim::new_1d(UNITS),
        x.into_tensor_arg(),
        weight.into_tensor_arg(),
        y.clone().into_tensor_arg(),
        rows as u32,
        h as u32,
        eps,
        UNITS,
        [dtype.into(), ACCUMULATOR.into()],
    );
    y
}

/// (x + delta, RMSNorm of it) over the last axis, `weight` `[H]` (cast to `x`'s dtype).
pub(super) fn add_forward<R: CubeRuntime>(
    x: CubeTensor<R>,
    delta: CubeTensor<R>,
    weight: CubeTensor<R>,
    eps: f32,
) -> (CubeTensor<R>, CubeTensor<R>) {
    let weight = match weight.dtype == x.dtype {
        true => weight,
        false => burn_cubecl::kernel::cast(weight, x.dtype),
    };
    let (x, delta, weight) = (
        into_contiguous(x),
        into_contiguous(delta),
        into_contiguous(weight),
    );
    let (rows, h) = rows_of(&x);
    let shape = x.shape().to_vec();
    let (sum, y) = (empty(&x, &shape), empty(&x, &shape));
    let (client, dtype) = (x.client.clone(), x.dtype);
    add_rms_norm_forward_kernel::launch::<R>(
        &client,
        grid(rows),
        CubeDim::new_1d(UNITS),
        x.into_tensor_arg(),
        delta.into_tensor_arg(),
        weight.into_tensor_arg(),
        sum.clone().into_tensor_arg(),
        y.clone().into_tensor_arg(),
        rows as u32,
        h as u32,
        eps,
        UNITS,
        [dtype.into(), ACCUMULATOR.into()],
    );
    (sum, y)
}

/// (dx, dweight) for the incoming gradient `grad`.
pub(super) fn backward<R: CubeRuntime>(
    x: CubeTensor<R>,
    weight: CubeTensor<R>,
    grad: CubeTensor<R>,
    eps: f32,
) -> (CubeTensor<R>, CubeTensor<R>) {
    let (x, weight, grad) = (
        into_contiguous(x),
        into_contiguous(weight),
        into_contiguous(grad),
    );
    let (rows, h) = rows_of(&x);
    let dx = empty(&x, &x.shape().to_vec());
    let r = empty_of(&x, &[rows], ACCUMULATOR);
    let blocks = rows.div_ceil(ROWS_PER_BLOCK).max(1);
    let partials = empty_of(&x, &[blocks, h], ACCUMULATOR);
    let (client, x_dtype) = (x.client.clone(), x.dtype);
    let dtypes = [x_dtype.into(), ACCUMULATOR.into()];
    rms_norm_backward_kernel::launch::<R>(
        &client,
        grid(rows),
        CubeDim::new_1d(UNITS),
        x.clone().into_tensor_arg(),
        weight.into_tensor_arg(),
        grad.clone().into_tensor_arg(),
        dx.clone().into_tensor_arg(),
        r.clone().into_tensor_arg(),
        rows as u32,
        h as u32,
        eps,
        UNITS,
        dtypes,
    );
    let feature_cubes = h.div_ceil(UNITS as usize);
    dweight_partials_kernel::launch::<R>(
        &client,
        CubeCount::Static(feature_cubes as u32, blocks as u32, 1),
        CubeDim::new_1d(UNITS),
        x.into_tensor_arg(),
        grad.into_tensor_arg(),
        r.into_tensor_arg(),
        partials.clone().into_tensor_arg(),
        rows as u32,
        h as u32,
        ROWS_PER_BLOCK as u32,
        dtypes,
    );
    let dw = sum_blocks(&partials, x_dtype, blocks, h);
    (dx, dw)
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn rms_norm_forward_kernel<F: Float, A: Float>(
    x: &Tensor<F>,
    weight: &Tensor<F>,
    y: &mut Tensor<F>,
    rows: u32,
    h: u32,
    eps: f32,
    #[comptime] units: u32,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let row = cube_index(rows);
    let n = h as usize;
    let base = row * n;
    let mut squares = A::new(0.0);
    let mut j = UNIT_POS_X as usize;
    while j < n {
        let v = A::cast_from(x[base + j]);
        squares += v * v;
        j += units as usize;
    }
    let r = inverse_rms::<A>(squares, h, eps, units);
    write_scaled::<F, A>(x, weight, y, base, n, r, units);
}

/// r = 1 / sqrt(Σ_j x_j² / h + eps) from each unit's part of the sum of squares (added in
/// a fixed order, `cube_sum`).
#[cube]
fn inverse_rms<A: Float>(squares: A, h: u32, eps: f32, #[comptime] units: u32) -> A {
    let mut shared = SharedMemory::<A>::new(units as usize);
    let squares = cube_sum(&mut shared, squares);
    A::new(1.0) / (squares / A::cast_from(h) + A::cast_from(eps)).sqrt()
}

/// y_j = x_j·r·w_j over this unit's features of the row starting at `base`.
#[cube]
#[allow(clippy::too_many_arguments)]
fn write_scaled<F: Float, A: Float>(
    x: &Tensor<F>,
    weight: &Tensor<F>,
    y: &mut Tensor<F>,
    base: usize,
    n: usize,
    r: A,
    #[comptime] units: u32,
) {
    let mut j = UNIT_POS_X as usize;
    while j < n {
        let v = A::cast_from(x[base + j]) * r * A::cast_from(weight[j]);
        y[base + j] = F::cast_from(v);
        j += units as usize;
    }
}

/// [`rms_norm_forward_kernel`] of s = x + δ, s written too; each unit reads back the s
/// it wrote itself.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn add_rms_norm_forward_kernel<F: Float, A: Float>(
    x: &Tensor<F>,
    delta: &Tensor<F>,
    weight: &Tensor<F>,
    sum: &mut Tensor<F>,
    y: &mut Tensor<F>,
    rows: u32,
    h: u32,
    eps: f32,
    #[comptime] units: u32,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let row = cube_index(rows);
    let n = h as usize;
    let base = row * n;
    let mut squares = A::new(0.0);
    let mut j = UNIT_POS_X as usize;
    while j < n {
        let s = x[base + j] + delta[base + j];
        sum[base + j] = s;
        let v = A::cast_from(s);
        squares += v * v;
        j += units as usize;
    }
    let r = inverse_rms::<A>(squares, h, eps, units);
    write_scaled::<F, A>(sum, weight, y, base, n, r, units);
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn rms_norm_backward_kernel<F: Float, A: Float>(
    x: &Tensor<F>,
    weight: &Tensor<F>,
    grad: &Tensor<F>,
    dx: &mut Tensor<F>,
    r_out: &mut Tensor<A>,
    rows: u32,
    h: u32,
    eps: f32,
    #[comptime] units: u32,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let row = cube_index(rows);
    let n = h as usize;
    let base = row * n;
    let mut squares = A::new(0.0);
    let mut dot = A::new(0.0);
    let mut j = UNIT_POS_X as usize;
    while j < n {
        let v = A::cast_from(x[base + j]);
        squares += v * v;
        dot += A::cast_from(grad[base + j]) * A::cast_from(weight[j]) * v;
        j += units as usize;
    }
    let mut shared = SharedMemory::<A>::new(units as usize);
    let squares = cube_sum(&mut shared, squares);
    let dot = cube_sum(&mut shared, dot);
    let r = A::new(1.0) / (squares / A::cast_from(h) + A::cast_from(eps)).sqrt();
    let c = r * r * r * dot / A::cast_from(h);
    let mut j = UNIT_POS_X as usize;
    while j < n {
        let g = A::cast_from(grad[base + j]) * A::cast_from(weight[j]);
        dx[base + j] = F::cast_from(r * g - c * A::cast_from(x[base + j]));
        j += units as usize;
    }
    if UNIT_POS_X == 0 {
        r_out[row] = r;
    }
}

/// partials[b, j] = Σ over the rows of block b (cube y) of dy_ij·x_ij·r_i, feature j from
/// cube x's units.
#[cube(launch)]
pub(crate) fn dweight_partials_kernel<F: Float, A: Float>(
    x: &Tensor<F>,
    grad: &Tensor<F>,
    r: &Tensor<A>,
    partials: &mut Tensor<A>,
    rows: u32,
    h: u32,
    rows_per_block: u32,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let n = h as usize;
    let j = CUBE_POS_X as usize * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    if j >= n {
        terminate!();
    }
    let block = CUBE_POS_Y as usize;
    let first = block * rows_per_block as usize;
    let mut last = first + rows_per_block as usize;
    if last > rows as usize {
        last = rows as usize;
    }
    let mut sum = A::new(0.0);
    for i in first..last {
        sum += A::cast_from(grad[i * n + j]) * A::cast_from(x[i * n + j]) * r[i];
    }
    partials[block * n + j] = sum;
}
