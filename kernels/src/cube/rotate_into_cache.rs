//! CubeCL: a cached attention step's q/k/v biases, rotations and cache writes in one
//! launch, one unit per element of the step's `tokens × (heads + 2·kv_heads) × d` outputs
//! (formulas in [`crate::cached_qkv`]): a unit of a query head writes its rotated query,
//! one of a key head its rotated key into the cache's key buffer, one of a value head its
//! value into the value buffer. Where the unfused step launches three bias adds, two
//! rotations and two cache writes, this is one launch a layer.
//!
//! Same arithmetic as the unfused ops: a bias is added in the operands' dtype (as burn's
//! add), the rotation in the accumulator type (f32) through [`rotate_pair`], the rotary
//! kernel's own. The products are read through their row stride, the tables and the
//! cache buffers through all four strides (the model's key tables repeat one head with
//! stride 0, which a copy to contiguous memory would cost two launches a layer).

use burn::tensor::Tensor as BurnTensor;
use burn_cubecl::element::BoolElement;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::{CubeBackend, CubeRuntime, FloatElement, IntElement};
use cubecl::prelude::*;

use super::cube_index::element_index;
use super::launch::{empty, grid, unit_stride_rows, ACCUMULATOR};
use super::rotary::rotate_pair;
use crate::cached_qkv::{CachedQkv, RotatedQkv};
use crate::float_primitive::{float, wrap};

/// Units per cube (one element each).
const UNITS: usize = 256;

/// The step in one kernel; the unfused ops where the operands' dtypes differ.
pub(super) fn launch<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement>(
    step: CachedQkv<CubeBackend<R, F, I, BT>>,
) -> RotatedQkv<CubeBackend<R, F, I, BT>> {
    let dtype = step.q.dtype();
    let mut dtypes = [&step.k, &step.v].map(|t| t.dtype()).into_iter();
    let one_dtype = dtypes.all(|t| t == dtype)
        && step
            .q_tables
            .iter()
            .chain(&step.k_tables)
            .all(|t| t.dtype() == dtype)
        && [&step.keys, &step.values]
            .iter()
            .all(|t| t.dtype() == dtype)
        && step.bias.iter().flatten().all(|b| b.dtype() == dtype);
    if !one_dtype {
        return step.unfused();
    }
    let [rows, n, heads, d] = step.query_shape();
    let kv_heads = step.k_tables[0].dims()[2];
    let rows_of = |t: BurnTensor<CubeBackend<R, F, I, BT>, 2>| unit_stride_rows(float(t));
    let (q, k, v) = (rows_of(step.q), rows_of(step.k), rows_of(step.v));
    let with_bias = step.bias.is_some();
    let [q_bias, k_bias, v_bias] = match step.bias {
        Some(bias) => bias.map(|b| into_contiguous(float(b))),
        // Not read (`with_bias` false); any tensor fills the argument.
        None => [q.clone(), q.clone(), q.clone()],
    };
    // Read through their strides: the model's key tables repeat one head with stride 0.
    let [q_cos, q_sin] = step.q_tables.map(float);
    let [k_cos, k_sin] = step.k_tables.map(float);
    let [keys, values] = [step.keys, step.values].map(|t| {
        let t = float(t);
        match t.can_mut() && t.is_nonoverlapping() {
            true => t,
            false => t.copy(),
        }
    });
    let q_out = empty(&q, &[rows, n, heads, d]);
    let elements = rows * n * (heads + 2 * kv_heads) * d;
    let client = q.client.clone();
    rotate_into_cache_kernel::launch::<R>(
        &client,
        grid(elements.div_ceil(UNITS)),
        CubeDim::new_1d(UNITS as u32),
        q.into_tensor_arg(),
        k.into_tensor_arg(),
        v.into_tensor_arg(),
        q_bias.into_tensor_arg(),
        k_bias.into_tensor_arg(),
        v_bias.into_tensor_arg(),
        q_cos.into_tensor_arg(),
        q_sin.into_tensor_arg(),
        k_cos.into_tensor_arg(),
        k_sin.into_tensor_arg(),
        q_out.clone().into_tensor_arg(),
        keys.clone().into_tensor_arg(),
        values.clone().into_tensor_arg(),
        elements,
        heads,
        kv_heads,
        d,
        n,
        step.column,
        with_bias,
        [dtype.into(), ACCUMULATOR.into()],
    );
    RotatedQkv {
        q: wrap(q_out),
        keys: wrap(keys),
        values: wrap(values),
    }
}

/// Element `i` of the step's `tokens × (heads + 2·kv_heads) × d` outputs: token
/// `i / width`, head `(i mod width) / d` (queries, then keys, then values), feature
/// `i mod d`, its rotation partner `f ± d/2` in the same head.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn rotate_into_cache_kernel<F: Float, A: Float>(
    q: &Tensor<F>,
    k: &Tensor<F>,
    v: &Tensor<F>,
    q_bias: &Tensor<F>,
    k_bias: &Tensor<F>,
    v_bias: &Tensor<F>,
    q_cos: &Tensor<F>,
    q_sin: &Tensor<F>,
    k_cos: &Tensor<F>,
    k_sin: &Tensor<F>,
    q_out: &mut Tensor<F>,
    keys: &mut Tensor<F>,
    values: &mut Tensor<F>,
    n: usize,
    heads: usize,
    kv_heads: usize,
    d: usize,
    columns: usize,
    column: usize,
    #[comptime] with_bias: bool,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let i = element_index(n);
    let width = (heads + 2 * kv_heads) * d;
    let token = i / width;
    let head = (i % width) / d;
    let f = i % d;
    let half = d / 2;
    // f ± h, written so that neither branch wraps below zero.
    let mut partner = f + half;
    if f >= half {
        partner = f - half;
    }
    // Row `token / columns` of the batch, its column `token mod columns` of the step's.
    let (r, t) = (token / columns, token % columns);
    let place = Place {
        token,
        r,
        t,
        f,
        partner,
        d,
    };
    if head < heads {
        let y = rotated::<F, A>(q, q_bias, q_cos, q_sin, head, place, with_bias);
        q_out[(token * heads + head) * d + f] = y;
    } else {
        let (c, g) = (column + t, (head - heads) % kv_heads);
        let at = g * d;
        if head < heads + kv_heads {
            let y = rotated::<F, A>(k, k_bias, k_cos, k_sin, g, place, with_bias);
            keys[offset(keys, r, g, c, f)] = y;
        } else {
            let mut x = v[token * v.stride(0) + at + f];
            if with_bias {
                x += v_bias[at + f];
            }
            values[offset(values, r, g, c, f)] = x;
        }
    }
}

/// Where a unit works: token `token` (row `r` of the batch, column `t` of the step's),
/// feature `f` of a head of `d` and its rotation partner.
#[derive(CubeType)]
struct Place {
    token: usize,
    r: usize,
    t: usize,
    f: usize,
    partner: usize,
    d: usize,
}

/// Feature `place.f` of head `head` of `x` (a product, rows at its row stride) with its
/// bias added, rotated with the tables' entry for (row, column, head, feature).
#[cube]
#[allow(clippy::too_many_arguments)]
fn rotated<F: Float, A: Float>(
    x: &Tensor<F>,
    bias: &Tensor<F>,
    cos: &Tensor<F>,
    sin: &Tensor<F>,
    head: usize,
    place: Place,
    #[comptime] with_bias: bool,
) -> F {
    let (at, row) = (head * place.d, place.token * x.stride(0));
    let mut value = x[row + at + place.f];
    let mut other = x[row + at + place.partner];
    if with_bias {
        value += bias[at + place.f];
        other += bias[at + place.partner];
    }
    let c = cos[offset(cos, place.r, place.t, head, place.f)];
    let s = sin[offset(sin, place.r, place.t, head, place.f)];
    rotate_pair::<F, A>(value, other, c, s, place.f < place.d / 2)
}

/// Where `[a, b, c, f]` of a rank-4 tensor lies (its four strides).
#[cube]
fn offset<F: Float>(t: &Tensor<F>, a: usize, b: usize, c: usize, f: usize) -> usize {
    a * t.stride(0) + b * t.stride(1) + c * t.stride(2) + f * t.stride(3)
}
