//! What a cached attention step does between the q/k/v products and the attention: add
//! the projections' biases, rotate queries and keys, and write the keys and values into
//! the KV cache (`KernelBackend::rotate_into_cache`).
//!
//! For `n` new columns of each of `rows` rows (`tokens = rows · n`, row-major), head
//! width `d` and h = d/2 (rotate-half layout, as the crate's `rotary`):
//!
//! - `q' = rot(q + b_q)` with the query tables (the query scale 1/√d folded in), returned
//!   as `[rows, n, heads, d]`;
//! - `keys[r, g, column + t, :] = rot(k + b_k)[r·n + t, g]` with the key tables;
//! - `values[r, g, column + t, :] = (v + b_v)[r·n + t, g]`;
//!
//! where `rot(x)_i = x_i·cos_i − x_{i+h}·sin_i` in the first half of a head and
//! `x_i·cos_i + x_{i−h}·sin_i` in the second (Su et al. 2021, RoFormer, as transformers'
//! `apply_rotary_pos_emb`). The sums with the biases are rounded to the operands' dtype
//! before the rotation, as burn's add followed by the rotary kernel rounds them.
//!
//! Unfused ([`CachedQkv::unfused`], in `backend.rs` beside the trait whose default it is:
//! every backend's but the CubeCL ones): three bias adds, two rotations and two cache
//! writes, seven launches on a GPU; the CubeCL backends do it in one
//! (`cube/rotate_into_cache.rs`).

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// The inputs of `KernelBackend::rotate_into_cache`.
#[derive(Clone, Debug)]
pub struct CachedQkv<B: Backend> {
    /// The q/k/v products without their biases: `[tokens, heads·d]`, `[tokens,
    /// kv_heads·d]`, `[tokens, kv_heads·d]`, the `n` columns of row `r` at tokens
    /// `r·n..(r + 1)·n`.
    pub q: Tensor<B, 2>,
    /// See `q`.
    pub k: Tensor<B, 2>,
    /// See `q`.
    pub v: Tensor<B, 2>,
    /// The biases `[heads·d]`, `[kv_heads·d]`, `[kv_heads·d]`, if the projections have them.
    pub bias: Option<[Tensor<B, 1>; 3]>,
    /// `(cos, sin)` of the queries, `[rows, n, heads, d]` (query scale included).
    pub q_tables: [Tensor<B, 4>; 2],
    /// `(cos, sin)` of the keys, `[rows, n, kv_heads, d]`.
    pub k_tables: [Tensor<B, 4>; 2],
    /// The cache's key buffer `[rows, kv_heads, capacity, d]`, written in place where it
    /// is not shared.
    pub keys: Tensor<B, 4>,
    /// The cache's value buffer, shaped as `keys`.
    pub values: Tensor<B, 4>,
    /// The first cache column to write (`column + n ≤ capacity`).
    pub column: usize,
}

/// What `KernelBackend::rotate_into_cache` gives back.
#[derive(Clone, Debug)]
pub struct RotatedQkv<B: Backend> {
    /// The rotated, scaled queries, `[rows, n, heads, d]`.
    pub q: Tensor<B, 4>,
    /// The key buffer with the new columns written.
    pub keys: Tensor<B, 4>,
    /// The value buffer with the new columns written.
    pub values: Tensor<B, 4>,
}

impl<B: Backend> CachedQkv<B> {
    /// `[rows, n, heads, d]` of the queries: the tables' shape.
    pub fn query_shape(&self) -> [usize; 4] {
        self.q_tables[0].dims()
    }

    /// Checks the shapes agree (one message naming them all where they do not).
    ///
    /// # Panics
    /// If any shape disagrees with the query tables' `[rows, n, heads, d]`, `d` is odd, or
    /// the new columns do not fit the buffers.
    pub fn check(&self) {
        let [rows, n, heads, d] = self.query_shape();
        let [_, _, kv_heads, _] = self.k_tables[0].dims();
        let [_, _, capacity, _] = self.keys.dims();
        let cache = [rows, kv_heads, capacity, d];
        let fits = self.q.dims() == [rows * n, heads * d]
            && self.k.dims() == [rows * n, kv_heads * d]
            && self.v.dims() == [rows * n, kv_heads * d]
            && self.q_tables[1].dims() == [rows, n, heads, d]
            && self
                .k_tables
                .iter()
                .all(|t| t.dims() == [rows, n, kv_heads, d])
            && self.bias.as_ref().is_none_or(|[bq, bk, bv]| {
                bq.dims() == [heads * d] && bk.dims() == [kv_heads * d] && bv.dims() == bk.dims()
            })
            && self.values.dims() == cache
            && self.column + n <= capacity
            && d % 2 == 0;
        assert!(
            fits,
            "rotate_into_cache: q {:?}, k {:?}, v {:?}, tables {:?} / {:?}, cache {:?} / {:?} \
             at column {} do not fit",
            self.q.dims(),
            self.k.dims(),
            self.v.dims(),
            self.q_tables[0].dims(),
            self.k_tables[0].dims(),
            self.keys.dims(),
            self.values.dims(),
            self.column
        );
    }
}
