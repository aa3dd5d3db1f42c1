//! CubeCL SwiGLU gate, forward and backward, one unit per element (formulas as
//! [`crate::cpu::swiglu`]): y = g·σ(g)·u; with s = σ(g), du = dy·g·s and
//! dg = dy·u·s·(1 + g·(1 − s)). One pass each way, where burn's ops (`crate::unfused`)
//! take three passes forward and eight backward, each with its own allocation. Arithmetic
//! in the accumulator type `A` (f32 at launch); σ(g) = 1 / (1 + e^{−g}) is 0 without a NaN
//! for g below −88 (e^{−g} overflows to ∞), so SiLU is 0 there.

use burn::tensor::TensorMetadata;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;

use super::cube_index::{element_index, row_offset};
use super::launch::{empty, grid, unit_stride_rows, ACCUMULATOR};

/// Units per cube (one element each).
const UNITS: usize = 256;

/// silu(gate) ⊙ up, equal shapes. Read where they lie when their rows are unit-stride: a
/// generating copy's gate and up are the two halves of one product's columns.
pub(super) fn forward<R: CubeRuntime>(gate: CubeTensor<R>, up: CubeTensor<R>) -> CubeTensor<R> {
    let (gate, up) = (unit_stride_rows(gate), unit_stride_rows(up));
    let shape = gate.shape().to_vec();
    let n = shape.iter().product::<usize>();
    let width = shape.last().copied().unwrap_or(1);
    let y = empty(&gate, &shape);
    let (client, dtype) = (gate.client.clone(), gate.dtype);
    swiglu_forward_kernel::launch::<R>(
        &client,
        grid(n.div_ceil(UNITS)),
        CubeDim::new_1d(UNITS as u32),
        gate.into_tensor_arg(),
        up.into_tensor_arg(),
        y.clone().into_tensor_arg(),
        n,
        width,
        [dtype.into(), ACCUMULATOR.into()],
    );
    y
}

/// (dgate, dup) for the incoming gradient `grad`.
pub(super) fn backward<R: CubeRuntime>(
    gate: CubeTensor<R>,
    up: CubeTensor<R>,
    grad: CubeTensor<R>,
) -> (CubeTensor<R>, CubeTensor<R>) {
    let (gate, up, grad) = (
        into_contiguous(gate),
        into_contiguous(up),
        into_contiguous(grad),
    );
    let n = gate.shape().num_elements();
    let shape = gate.shape().to_vec();
    let (dgate, dup) = (empty(&gate, &shape), empty(&gate, &shape));
    let (client, dtype) = (gate.client.clone(), gate.dtype);
    swiglu_backward_kernel::launch::<R>(
        &client,
        grid(n.div_ceil(UNITS)),
        CubeDim::new_1d(UNITS as u32),
        gate.into_tensor_arg(),
        up.into_tensor_arg(),
        grad.into_tensor_arg(),
        dgate.clone().into_tensor_arg(),
        dup.clone().into_tensor_arg(),
        n,
        [dtype.into(), ACCUMULATOR.into()],
    );
    (dgate, dup)
}

#[cube]
fn sigmoid<A: Float>(g: A) -> A {
    A::new(1.0) / (A::new(1.0) + (A::new(0.0) - g).exp())
}

#[cube(launch)]
pub(crate) fn swiglu_forward_kernel<F: Float, A: Float>(
    gate: &Tensor<F>,
    up: &Tensor<F>,
    y: &mut Tensor<F>,
    n: usize,
    width: usize,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let i = element_index(n);
    let (row, column) = (i / width, i % width);
    let g = A::cast_from(gate[row_offset(gate, row) + column]);
    let u = A::cast_from(up[row_offset(up, row) + column]);
    y[i] = F::cast_from(g * sigmoid::<A>(g) * u);
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn swiglu_backward_kernel<F: Float, A: Float>(
    gate: &Tensor<F>,
    up: &Tensor<F>,
    grad: &Tensor<F>,
    dgate: &mut Tensor<F>,
    dup: &mut Tensor<F>,
    n: usize,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let i = element_index(n);
    let g = A::cast_from(gate[i]);
    let dy = A::cast_from(grad[i]);
    let s = sigmoid::<A>(g);
    dup[i] = F::cast_from(dy * g * s);
    let ds = s * (A::new(1.0) + g * (A::new(1.0) - s));
    dgate[i] = F::cast_from(dy * A::cast_from(up[i]) * ds);
}
