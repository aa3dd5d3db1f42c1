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
//! lane order into the block's partial sum; the second launch sums the blocks' partials
//! the same way. Sums in f32 (`A`), whatever `x`'s dtype, rounded once to it at the end;
//! the order is fixed by the shape, so the result is the same on every run.

use burn::tensor::TensorMetadata;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;

use super::launch::{empty, empty_of, ACCUMULATOR};

/// Columns a cube takes (one unit each, adjacent in memory).
const COLUMNS: u32 = 32;
/// Units a column gets in a cube (each takes every 8th row of the block).
const LANES: u32 = 8;
/// Rows of a block, the first launch's unit of work (32 a unit).
const ROWS: usize = 256;
const MAX_GRID_Y: usize = 65_535;

/// Σ_rows `x` for `x [n, m]` (n ≥ 1), as `[m]` in `x`'s dtype; `x` is read through its
/// strides.
pub(super) fn column_sums<R: CubeRuntime>(x: CubeTensor<R>) -> CubeTensor<R> {
    let [n, m] = x.shape().dims::<2>();
    let rows = ROWS.max(n.div_ceil(MAX_GRID_Y));
    let blocks = n.div_ceil(rows);
    let partials = empty_of(&x, &[blocks, m], ACCUMULATOR);
    launch(&x, &partials, n, rows, blocks);
    let out = empty(&x, &[m]);
    launch(&partials, &out, blocks, blocks, 1);
    out
}

/// Sums each block of `rows` rows of `x [n, m]` into row `block` of `out` (`[blocks, m]`,
/// or `[m]` for one block).
fn launch<R: CubeRuntime>(
    x: &CubeTensor<R>,
    out: &CubeTensor<R>,
    n: usize,
    rows: usize,
    blocks: usize,
) {
    let m = x.shape()[1];
    let count = CubeCount::Static(m.div_ceil(COLUMNS as usize) as u32, blocks as u32, 1);
    column_sums_kernel::launch::<R>(
        &x.client,
        count,
        CubeDim::new_2d(COLUMNS, LANES),
        x.clone().into_tensor_arg(),
        out.clone().into_tensor_arg(),
        n,
        m,
        rows,
        [x.dtype.into(), out.dtype.into(), ACCUMULATOR.into()],
    );
}

/// Cube (tile, block), unit (c, lane): column `tile·32 + c`, rows `block·rows + lane`,
/// `+ 8`, … below the block's end.
#[cube(launch)]
pub(crate) fn column_sums_kernel<F: Float, O: Float, A: Float>(
    x: &Tensor<F>,
    out: &mut Tensor<O>,
    n: usize,
    m: usize,
    rows: usize,
    #[define(F, O, A)] _dtypes: [StorageType; 3],
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
        out[block * m + column] = O::cast_from(total);
    }
}
