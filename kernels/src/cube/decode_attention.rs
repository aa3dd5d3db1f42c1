//! CubeCL attention of one query per row against its keys (a decode step), fused:
//! `out = softmax(q kᵀ + mask) v` for every (row, query head) in one cube, query head `h`
//! reading key/value head `h / rep` (grouped-query attention), the queries already scaled.
//!
//! Each of the cube's units walks the keys `j ≡ unit (mod units)` once, keeping an online
//! softmax (Milakov & Gimelshein 2018): the running max m, the sum l = Σ e^{s_j − m} and
//! the weighted values acc = Σ e^{s_j − m} v_j, all three rescaled by e^{m_old − m_new}
//! when the max rises. The units' triples meet in shared memory, and unit `u` writes the
//! features `f ≡ u`: `out_f = Σ_u e^{m_u − M} acc_u,f / Σ_u e^{m_u − M} l_u`, M the largest
//! m_u. Masked keys carry the mask's −1e30, so e^{s − M} = 0 once a visible key is seen; a
//! row whose keys are all masked gets the uniform average of its values, as the unfused
//! softmax of equal scores gives. Flash-decoding (Dao et al. 2023) in its simplest form:
//! keys and values are read once per query head, scores never leave the cube.
//!
//! Every operand is read through its strides, so the cache's live columns (a narrowed view
//! of a buffer with spare columns) and the queries' head-swapped view go in uncopied. The
//! sums are kept in the accumulator type `A` (f32 at launch) whatever the operands' type,
//! as in the log-prob kernel: a bf16 l over thousands of keys would stop growing.

use burn::tensor::TensorMetadata;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;

use super::cube_index::cube_index;
use super::launch::{empty, grid, ACCUMULATOR};

/// A "minus infinity" WGSL accepts as a literal (as the log-prob kernel's).
const NEG_BIG: f32 = -1.0e30;
/// Units per cube (one cube per row and query head); the shared memory holds
/// (2 + head_dim) f32 a unit: 16.5 KB at a head of 128.
const UNITS: u32 = 32;
/// The widest head taken (the shared memory at 256: 33 KB).
const MAX_HEAD: usize = 256;

/// `softmax(q kᵀ + mask) v` of `q [rows, heads, 1, d]`, `k`, `v [rows, kv_heads, keys, d]`
/// and `mask [rows, heads, 1, keys]`, as `[rows, heads, d]`; `None` for shapes it does not
/// take (more than one query, a head wider than [`MAX_HEAD`], no keys, heads not a
/// multiple of the key/value heads).
pub(super) fn launch<R: CubeRuntime>(
    q: CubeTensor<R>,
    k: CubeTensor<R>,
    v: CubeTensor<R>,
    mask: CubeTensor<R>,
) -> Option<CubeTensor<R>> {
    let [rows, heads, queries, d] = q.shape().dims::<4>();
    let [_, kv_heads, keys, _] = k.shape().dims::<4>();
    let fits = queries == 1 && d <= MAX_HEAD && keys > 0 && heads % kv_heads == 0;
    if !fits {
        return None;
    }
    let out = empty(&q, &[rows, heads, d]);
    let (client, dtype, items) = (q.client.clone(), q.dtype, rows * heads);
    decode_attention_kernel::launch::<R>(
        &client,
        grid(items),
        CubeDim::new_1d(UNITS),
        q.into_tensor_arg(),
        k.into_tensor_arg(),
        v.into_tensor_arg(),
        mask.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        items as u32,
        heads as u32,
        (heads / kv_heads) as u32,
        keys as u32,
        d as u32,
        UNITS,
        [dtype.into(), ACCUMULATOR.into()],
    );
    Some(out)
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_attention_kernel<F: Float, A: Float>(
    q: &Tensor<F>,
    k: &Tensor<F>,
    v: &Tensor<F>,
    mask: &Tensor<F>,
    out: &mut Tensor<F>,
    items: u32,
    heads: u32,
    rep: u32,
    keys: u32,
    #[comptime] d: u32,
    #[comptime] units: u32,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let item = cube_index(items);
    let (row, head) = (item / heads as usize, item % heads as usize);
    let group = head / rep as usize;
    let dim = d as usize;
    let qb = row * q.stride(0) + head * q.stride(1);
    let kb = row * k.stride(0) + group * k.stride(1);
    let vb = row * v.stride(0) + group * v.stride(1);
    let mb = row * mask.stride(0) + head * mask.stride(1);
    let mut query = Array::<A>::new(dim);
    let mut acc = Array::<A>::new(dim);
    for f in 0..dim {
        query[f] = A::cast_from(q[qb + f * q.stride(3)]);
        acc[f] = A::new(0.0);
    }
    let mut m = A::new(NEG_BIG);
    let mut l = A::new(0.0);
    let mut j = UNIT_POS_X as usize;
    while j < keys as usize {
        let kj = kb + j * k.stride(2);
        let mut s = A::cast_from(mask[mb + j * mask.stride(3)]);
        for f in 0..dim {
            s += query[f] * A::cast_from(k[kj + f * k.stride(3)]);
        }
        if s > m {
            let scale = (m - s).exp();
            l *= scale;
            for f in 0..dim {
                acc[f] *= scale;
            }
            m = s;
        }
        let p = (s - m).exp();
        l += p;
        let vj = vb + j * v.stride(2);
        for f in 0..dim {
            acc[f] += p * A::cast_from(v[vj + f * v.stride(3)]);
        }
        j += units as usize;
    }
    // (m | l | acc) of every unit side by side.
    let n = units as usize;
    let mut shared = SharedMemory::<A>::new(((2 + d) * units) as usize);
    let u = UNIT_POS_X as usize;
    shared[u] = m;
    shared[n + u] = l;
    for f in 0..dim {
        shared[2 * n + u * dim + f] = acc[f];
    }
    sync_cube();
    let mut top = A::new(NEG_BIG);
    for w in 0..n {
        top = A::max(top, shared[w]);
    }
    let mut total = A::new(0.0);
    for w in 0..n {
        total += (shared[w] - top).exp() * shared[n + w];
    }
    let ob = item * dim;
    let mut f = u;
    while f < dim {
        let mut sum = A::new(0.0);
        for w in 0..n {
            sum += (shared[w] - top).exp() * shared[2 * n + w * dim + f];
        }
        out[ob + f] = F::cast_from(sum / total);
        f += n;
    }
}
