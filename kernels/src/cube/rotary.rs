//! CubeCL rotary embedding, rotate-half layout, forward and backward, one unit per element
//! (formulas as [`crate::cpu::rotary`]): over rows of d = head_dim features, halves of
//! h = d/2, y₁ = x₁·cos₁ − x₂·sin₁ and y₂ = x₂·cos₂ + x₁·sin₂; backward (the tables are
//! constants) dx₁ = dy₁·cos₁ + dy₂·sin₂ and dx₂ = dy₂·cos₂ − dy₁·sin₁. One pass each way,
//! where burn's ops (`crate::unfused`) slice, negate, concatenate, multiply twice and add.
//! The tables have `x`'s shape (the model expands positions, heads and the query scale
//! into them), in any strides (a head repeated with stride 0 is read in place). Arithmetic
//! in the accumulator type `A` (f32 at launch).

use burn::tensor::TensorMetadata;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;

use super::cube_index::{element_index, row_offset};
use super::launch::{empty, grid, ACCUMULATOR};

/// Units per cube (one element each).
const UNITS: usize = 256;

/// The forward (`transpose` false) or the backward (`transpose` true, `x` the incoming
/// gradient) of the rotation with tables `cos`, `sin`.
pub(super) fn rotate<R: CubeRuntime>(
    x: CubeTensor<R>,
    cos: CubeTensor<R>,
    sin: CubeTensor<R>,
    transpose: bool,
) -> CubeTensor<R> {
    // The tables are read where they lie: the model's key tables repeat one head with
    // stride 0, and a copy of them was two launches a layer each way.
    let x = into_contiguous(x);
    let shape = x.shape();
    let (n, d) = (shape.num_elements(), shape[shape.num_dims() - 1]);
    let y = empty(&x, &shape.to_vec());
    let (client, dtype) = (x.client.clone(), x.dtype);
    rotary_kernel::launch::<R>(
        &client,
        grid(n.div_ceil(UNITS)),
        CubeDim::new_1d(UNITS as u32),
        x.into_tensor_arg(),
        cos.into_tensor_arg(),
        sin.into_tensor_arg(),
        y.clone().into_tensor_arg(),
        n,
        d / 2,
        u32::from(transpose),
        [dtype.into(), ACCUMULATOR.into()],
    );
    y
}

/// Element i of row-major rows of 2h (x and y contiguous, the tables' rows found through
/// their strides): forward y_i = x_i·cos_i ∓ x_partner·sin_i, the
/// partner in the other half (− in the first half); transposed, the partner's sine:
/// dx_i = dy_i·cos_i ± dy_partner·sin_partner (+ in the first half).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn rotary_kernel<F: Float, A: Float>(
    x: &Tensor<F>,
    cos: &Tensor<F>,
    sin: &Tensor<F>,
    y: &mut Tensor<F>,
    n: usize,
    half: usize,
    transpose: u32,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let i = element_index(n);
    let d = 2 * half;
    let (row, f) = (i / d, i % d);
    let first = f < half;
    // f ± h, written so that neither branch wraps below zero.
    let mut other = f + half;
    if !first {
        other = f - half;
    }
    // The tables' row `row`, read through their strides.
    let (c, s_row) = (row_offset(cos, row), row_offset(sin, row));
    let (c_step, s_step) = (cos.stride(cos.rank() - 1), sin.stride(sin.rank() - 1));
    let mut s = sin[s_row + f * s_step];
    // Forward: − in the first half; transposed: the partner's sine, − in the second.
    let mut negate = first;
    if transpose != 0 {
        s = sin[s_row + other * s_step];
        negate = !first;
    }
    let partner = x[row * d + other];
    y[i] = rotate_pair::<F, A>(x[i], partner, cos[c + f * c_step], s, negate);
}

/// `x·cos ∓ partner·sin` in the accumulator type `A`, rounded to `F` (− when `negate`):
/// one feature of the rotation (also `cube/rotate_into_cache.rs`'s).
#[cube]
pub(super) fn rotate_pair<F: Float, A: Float>(x: F, partner: F, cos: F, sin: F, negate: bool) -> F {
    let mut rotated = A::cast_from(partner) * A::cast_from(sin);
    if negate {
        rotated = A::new(0.0) - rotated;
    }
    F::cast_from(A::cast_from(x) * A::cast_from(cos) + rotated)
}
