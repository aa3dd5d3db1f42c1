//! CubeCL sums over the rows of a matrix, `x [n, m]` → `[m]`: a dense layer's bias
//! gradient Σ_rows dy, in two launches that keep the whole GPU busy.
//!
//! burn 0.21 without autotune reduces with cubek's `Unit` routine: one unit per output,
//! each summing its n values alone. For a bias gradient that is m units (896, or 128 for
//! the 0.5B shape's key and value biases) walking 16,384 rows each, a few cubes on a GPU
//! of 132 multiprocessors: run 6's H200 profile put the training step's reductions at
//! 0.12 s, about 1.6 ms each, where reading the 29 MB of a query-bias gradient takes under
//! 10 µs (bench/history/gpu.md).
//!
//! Here a cube of 32 × 8 units takes 32 adjacent columns of a block of [`ROWS`] rows: unit
//! (c, l) sums rows l, l + 8, … of the block in column c (the 32 units of a row read
//! adjacent values), the 8 lanes' sums meet in shared memory, and lane 0 adds them in
//! lane order into the block's partial sum; the second launch, [`sum_blocks`] (also the
//! RMSNorm weight gradient's), adds the blocks' partials column by column in block
//! order. Sums in f32 (`A`), whatever `x`'s dtype, rounded once to it at the end; the
//! order is fixed by the shape, so the result is the same on every run.

use burn::tensor::{DType, TensorMetadata};
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;

use super::cube_index::element_index;
use super::launch::{empty_of, grid, ACCUMULATOR};

/// Columns a cube takes (one unit each, adjacent in memory).
const COLUMNS: u32 = 32;
/// Units a column gets in a cube (each takes every 8th row of the block).
const LANES: u32 = 8;
/// Rows of a block, the first launch's unit of work (32 a unit).
const ROWS: usize = 256;
const MAX_GRID_Y: usize = 65_535;
/// Units per cube of [`sum_blocks_kernel`] (one column each).
const SUM_UNITS: u32 = 128;

/// Σ_rows `x` for `x [n, m]` (n ≥ 1), as `[m]` in `x`'s dtype; `x` is read through its
/// strides.
pub(super) fn column_sums<R: CubeRuntime>(x: CubeTensor<R>) -> CubeTensor<R> {
    let [n, m] = x.shape().dims::<2>();
    let rows = ROWS.max(n.div_ceil(MAX_GRID_Y));
    let blocks = n.div_ceil(rows);
    let partials = empty_of(&x, &[blocks, m], ACCUMULATOR);
    column_partials_kernel::launch::<R>(
        &x.client,
        CubeCount::Static(m.div_ceil(COLUMNS as usize) as u32, blocks as u32, 1),
        CubeDim::new_2d(COLUMNS, LANES),
        x.clone().into_tensor_arg(),
        partials.clone().into_tensor_arg(),
        n,
        m,
        rows,
        [x.dtype.into(), ACCUMULATOR.into()],
    );
    sum_blocks(&partials, x.dtype, blocks, m)
}

/// out_j = Σ_b partials[b, j] in block order, `[m]` in `dtype`, from f32 `partials [blocks,
/// m]`: the second step of a column sum (here, and the RMSNorm weight gradient's).
pub(super) fn sum_blocks<R: CubeRuntime>(
    partials: &CubeTensor<R>,
    dtype: DType,
    blocks: usize,
    m: usize,
) -> CubeTensor<R> {
    let out = empty_of(partials, &[m], dtype);
    sum_blocks_kernel::launch::<R>(
        &partials.client,
        grid(m.div_ceil(SUM_UNITS as usize)),
        CubeDim::new_1d(SUM_UNITS),
        partials.clone().into_tensor_arg(),
        out.clone().into_tensor_arg(),
        blocks as u32,
        m as u32,
        [dtype.into(), ACCUMULATOR.into()],
    );
    out
}

/// Cube (tile, block), unit (c, lane): column `tile·32 + c`, rows `block·rows + lane`,
/// `+ 8`, … below the block's end, summed into `partials[block, column]`.
#[cube(launch)]
pub(crate) fn column_partials_kernel<F: Float, A: Float>(
    x: &Tensor<F>,
    partials: &mut Tensor<A>,
    n: usize,
    m: usize,
    rows: usize,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let unit = UNIT_POS_X as usize;
    let lane = UNIT_POS_Y as usize;
    let column = CUBE_POS_X as usize * COLUMNS as usize + unit;
    let block = CUBE_POS_Y as usize;
    let start = block * rows;
    let mut end = start + rows;
    if end > n {
        end = n;
    }
    let mut sum = A::new(0.0);
    if column < m {
        let mut r = start + lane;
        while r < end {
            sum += A::cast_from(x[r * x.stride(0) + column * x.stride(1)]);
            r += LANES as usize;
        }
    }
    let mut lanes = SharedMemory::<A>::new((COLUMNS * LANES) as usize);
    lanes[lane * COLUMNS as usize + unit] = sum;
    sync_cube();
    if lane == 0 && column < m {
        let mut total = A::new(0.0);
        for l in 0..LANES as usize {
            total += lanes[l * COLUMNS as usize + unit];
        }
        partials[block * m + column] = total;
    }
}

/// out_j = Σ_b partials[b, j], in block order, one unit per column.
#[cube(launch)]
pub(crate) fn sum_blocks_kernel<F: Float, A: Float>(
    partials: &Tensor<A>,
    out: &mut Tensor<F>,
    blocks: u32,
    m: u32,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let n = m as usize;
    let j = element_index(n);
    let mut sum = A::new(0.0);
    for b in 0..blocks as usize {
        sum += partials[b * n + j];
    }
    out[j] = F::cast_from(sum);
}
