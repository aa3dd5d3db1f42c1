//! CubeCL attention of one query per row against its keys (a decode step), fused:
//! `out = softmax(q kᵀ + mask) v` for every (row, query head) in one cube, query head `h`
//! reading key/value head `h / rep` (grouped-query attention), the queries already scaled.
//!
//! The cube first finds the row's first visible key (the mask above −10⁴) and starts there:
//! the keys before it would add exactly 0, and in a continuous batch a row that joined late
//! or a short left-padded prompt has its columns at the end of a wider cache. From there it
//! walks the keys in tiles of `T` (32 keys at a head of 64 or less, 16 at 128, 8 at
//! 256: the two tiles take about 16 KB of shared memory):
//! 1. its units copy the tile's keys and values into shared memory together, consecutive
//!    units reading consecutive vectors of features of one key (so a warp's loads are one
//!    contiguous run of the cache, not 32 rows a head apart; 16-byte vectors where the
//!    cache's layout allows, as the log-prob kernel reads its rows);
//! 2. unit `t` scores key `t` against the query (from shared memory, rows padded by one
//!    so the units' reads fall in different banks);
//! 3. every unit reads the tile's scores and keeps the online softmax (Milakov &
//!    Gimelshein 2018): the running max m, the sum l = Σ e^{s_j − m}, and the factor
//!    e^{m_old − m_new} that rescales what was summed before when the max rises; unit `t`
//!    writes key `t`'s e^{s − m} for all;
//! 4. unit `u` owns the output features `f ≡ u (mod units)`, acc_f = Σ e^{s_j − m} v_j,f,
//!    kept in shared memory, and adds the tile's values to them.
//!
//! At the end out_f = acc_f / l. Masked keys carry the mask's −1e30, so e^{s − m} = 0 once
//! a visible key is seen; a row whose keys are all masked gets the uniform average of its
//! values, as the unfused softmax of equal scores gives. The last tile's slots past the
//! keys count for nothing. Flash-decoding (Dao et al. 2023) without the split over keys:
//! keys and values are read once per query head (the heads of a group read the same
//! cache rows back to back, from L2), scores never leave the cube, and the order of every
//! sum is fixed by the shapes.
//!
//! Until 2026-12-05 each unit walked every 32nd key alone, reading a whole key row per
//! score (32 rows a head apart per warp load) and rescaling a head-wide accumulator array
//! per key: the H200 ran 128 rows × 14 heads × 1,024 keys in 1.3 ms, 3% of its bandwidth
//! and 0.6× burn's unfused ops (bench/history/gpu.md, run 6).
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
use super::cube_reduce::cube_max;
use super::launch::{empty, grid, widest_vector, ACCUMULATOR};

/// A "minus infinity" WGSL accepts as a literal (as the log-prob kernel's).
const NEG_BIG: f32 = -1.0e30;
/// A mask value at or below this hides its key: the model's masks are 0 or −1e30 (−65,504
/// in f16), and a key behind by 10⁴ or more weighs e^{−10⁴} = 0 in f32.
const HIDDEN: f32 = -1.0e4;
/// Units per cube (one cube per row and query head): two warps, so that a multiprocessor
/// holds about 13 cubes (832 units) beside their ~17 KB of tiles each; not yet tuned on a
/// GPU.
const UNITS: u32 = 64;
/// The most keys a tile holds (one a unit while scoring).
const MAX_TILE: usize = 32;
/// The widest head taken.
const MAX_HEAD: usize = 256;

/// Keys per tile for a head of `d`: two tiles of `T × (d + 1)` f32 stay near 16 KB.
fn tile_keys(d: usize) -> u32 {
    (2048 / d.max(1)).clamp(8, MAX_TILE) as u32
}

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
    let vector_size = cache_vector_size(&k, &v, d);
    decode_attention_kernel::launch::<R>(
        &client,
        grid(items),
        CubeDim::new_1d(UNITS),
        vector_size,
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
        tile_keys(d),
        UNITS,
        [dtype.into(), ACCUMULATOR.into()],
    );
    Some(out)
}

/// The widest vector the device favours in which the keys and values can be read: every
/// key row contiguous (`stride(3)` 1), and the head width, the other strides and each
/// view's first element multiples of it (8 bf16 or 4 f32 in one 16-byte load on CUDA); 1
/// otherwise, reading through all four strides.
fn cache_vector_size<R: CubeRuntime>(k: &CubeTensor<R>, v: &CubeTensor<R>, d: usize) -> usize {
    let widest = |t: &CubeTensor<R>| match t.meta.strides()[..] {
        [a, b, c, 1] => widest_vector(t, &[d, a, b, c]),
        _ => 1,
    };
    widest(k).min(widest(v))
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_attention_kernel<F: Float, A: Float, N: Size>(
    q: &Tensor<F>,
    k: &Tensor<Vector<F, N>>,
    v: &Tensor<Vector<F, N>>,
    mask: &Tensor<F>,
    out: &mut Tensor<F>,
    items: u32,
    heads: u32,
    rep: u32,
    keys: u32,
    #[comptime] d: u32,
    #[comptime] tile: u32,
    #[comptime] units: u32,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let item = cube_index(items);
    let (row, head) = (item / heads as usize, item % heads as usize);
    let group = head / rep as usize;
    let dim = d as usize;
    // Tile rows padded by one, so unit t's reads of row t fall in different banks.
    let pitch = dim + 1;
    let t_keys = tile as usize;
    let n = units as usize;
    let u = UNIT_POS_X as usize;
    let width = k.vector_size();
    let row_vectors = dim / width;
    let qb = row * q.stride(0) + head * q.stride(1);
    let kb = row * k.stride(0) + group * k.stride(1);
    let vb = row * v.stride(0) + group * v.stride(1);
    let mb = row * mask.stride(0) + head * mask.stride(1);
    let mut query = SharedMemory::<A>::new(d as usize);
    let mut acc = SharedMemory::<A>::new(d as usize);
    let mut key_tile = SharedMemory::<A>::new((tile * (d + 1)) as usize);
    let mut value_tile = SharedMemory::<A>::new((tile * (d + 1)) as usize);
    let mut weights = SharedMemory::<A>::new(tile as usize);
    let mut probs = SharedMemory::<A>::new(tile as usize);
    let mut f = u;
    while f < dim {
        query[f] = A::cast_from(q[qb + f * q.stride(3)]);
        acc[f] = A::new(0.0);
        f += n;
    }
    let mut m = A::new(NEG_BIG);
    let mut l = A::new(0.0);
    let mut start = first_visible_key::<F, A>(mask, mb, keys as usize, units);
    while start < keys as usize {
        let mut live = keys as usize - start;
        if live > t_keys {
            live = t_keys;
        }
        // 1. The tile's keys and values, feature-major across the units, a vector of
        // `width` features a load (element offsets over `width`: vectors are indexed whole).
        let mut e = u;
        while e < live * row_vectors {
            let (t, c) = (e / row_vectors, e % row_vectors);
            let j = start + t;
            let key = k[(kb + j * k.stride(2) + c * width * k.stride(3)) / width];
            let value = v[(vb + j * v.stride(2) + c * width * v.stride(3)) / width];
            #[unroll]
            for lane in 0..width {
                key_tile[t * pitch + c * width + lane] = A::cast_from(key[lane]);
                value_tile[t * pitch + c * width + lane] = A::cast_from(value[lane]);
            }
            e += n;
        }
        sync_cube();
        // 2. Unit t's score of key start + t.
        let mut t = u;
        while t < live {
            let mut s = A::cast_from(mask[mb + (start + t) * mask.stride(3)]);
            for f in 0..dim {
                s += query[f] * key_tile[t * pitch + f];
            }
            weights[t] = s;
            t += n;
        }
        sync_cube();
        // 3. The online softmax over the tile: the new max (the same in every unit), then
        // unit t's e^{s_t − m}.
        let mut top = m;
        for t in 0..live {
            top = A::max(top, weights[t]);
        }
        let rescale = (m - top).exp();
        m = top;
        let mut t = u;
        while t < live {
            probs[t] = (weights[t] - m).exp();
            t += n;
        }
        sync_cube();
        l *= rescale;
        for t in 0..live {
            l += probs[t];
        }
        // 4. Unit u's features: the rescaled sum plus the tile's weighted values.
        let mut f = u;
        while f < dim {
            let mut a = acc[f] * rescale;
            for t in 0..live {
                a += probs[t] * value_tile[t * pitch + f];
            }
            acc[f] = a;
            f += n;
        }
        sync_cube();
        start += t_keys;
    }
    let ob = item * dim;
    let mut f = u;
    while f < dim {
        out[ob + f] = F::cast_from(acc[f] / l);
        f += n;
    }
}

/// The first key of the row the mask leaves visible (above [`HIDDEN`]), or 0 when it hides
/// them all: the keys before it would add exactly nothing (e^{s − m} is 0 in f32 once a
/// visible key sets m), so the walk starts there and never reads their keys and values. A
/// row that joined a running batch late, or a short prompt left-padded to the batch's
/// longest, has its cache columns at the end of a wider buffer. Each unit stops at its
/// first visible key; the cube takes the smallest (a max of −j, exact for keys below 2²⁴).
#[cube]
fn first_visible_key<F: Float, A: Float>(
    mask: &Tensor<F>,
    mb: usize,
    keys: usize,
    #[comptime] units: u32,
) -> usize {
    let mut first = keys;
    let mut j = UNIT_POS_X as usize;
    while j < keys {
        if A::cast_from(mask[mb + j * mask.stride(3)]) > A::new(HIDDEN) {
            first = j;
            j = keys;
        } else {
            j += units as usize;
        }
    }
    let mut shared = SharedMemory::<A>::new(units as usize);
    let smallest = A::new(0.0) - cube_max(&mut shared, A::new(0.0) - A::cast_from(first as u32));
    let mut start = u32::cast_from(smallest) as usize;
    if start >= keys {
        start = 0;
    }
    start
}
