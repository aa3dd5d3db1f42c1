//! Rotary position embeddings (Su et al. 2021, RoFormer) in Hugging Face's "rotate-half"
//! layout, as transformers' `Qwen2RotaryEmbedding` + `apply_rotary_pos_emb`:
//!
//! `inv_freq_i = rope_theta^(-2i/d)` for `i < d/2`, angle `θ = pos · inv_freq`,
//! `cos = [cos θ, cos θ]`, `sin = [sin θ, sin θ]` (the halves concatenated, not interleaved),
//! `rope(x) = x ⊙ cos + rotate_half(x) ⊙ sin` with `rotate_half([x1, x2]) = [-x2, x1]`.
//!
//! Angles are computed on the host in f64 for the exact positions of a call (every sequence of
//! a batch has its own positions: packed prompts, left-padded prefill, per-row decode), then
//! handed to the device once per forward pass and shared by all layers.
//!
//! Few ops per call, because every op is a full pass over the activations (and, under
//! autodiff, a graph node with its own backward):
//! - the tables are applied to the projections in their natural
//!   `[batch, len, heads, head_dim]` layout (before heads are moved in front), so nothing is
//!   transposed or copied for the rotation;
//! - the tables are materialised per head (`[batch, len, heads, head_dim]`, built once per
//!   forward call and shared by all layers) rather than broadcast over heads: burn-flex runs
//!   same-shape products as flat SIMD loops but a broadcast over a middle axis through a
//!   per-element strided iterator, several times slower;
//! - `rotate_half` is one `[rows, d] × [d, d]` matmul with a signed permutation matrix
//!   instead of two narrows, a negation and a concatenation;
//! - the query tables carry the attention scale `1/sqrt(head_dim)`, which saves scaling the
//!   `[queries, keys]` scores (a rotation is linear, so scaling before or after is exact up
//!   to rounding).

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

/// `cos`/`sin` tables for one forward call: `[batch, len, kv_heads, head_dim]` for keys,
/// `[batch, len, heads, head_dim]` for queries.
#[derive(Clone, Debug)]
pub struct RotaryAngles<B: Backend> {
    /// `cos θ` repeated over both halves of the head dimension, for keys.
    pub cos: Tensor<B, 4>,
    /// `sin θ` repeated over both halves of the head dimension, for keys.
    pub sin: Tensor<B, 4>,
    /// `cos` times the attention scale, for queries.
    pub cos_scaled: Tensor<B, 4>,
    /// `sin` times the attention scale, for queries.
    pub sin_scaled: Tensor<B, 4>,
    /// `rotate_half` as a `[head_dim, head_dim]` matrix: `rotate_half(x) = x · R`.
    pub rotate: Tensor<B, 2>,
}

impl<B: Backend> RotaryAngles<B> {
    /// Angles for `positions[b][t]` (all rows the same length); `heads` = (query heads,
    /// key/value heads).
    pub fn new(
        positions: &[Vec<usize>],
        head_dim: usize,
        heads: (usize, usize),
        theta: f64,
        device: &B::Device,
    ) -> Self {
        let batch = positions.len();
        let len = positions.first().map_or(0, Vec::len);
        let half = head_dim / 2;
        let inv_freq: Vec<f32> = (0..half)
            .map(|i| (1.0 / theta.powf((2 * i) as f64 / head_dim as f64)) as f32)
            .collect();
        let (mut cos, mut sin) = (Vec::new(), Vec::new());
        cos.reserve(batch * len * head_dim);
        sin.reserve(batch * len * head_dim);
        for &pos in positions.iter().flatten() {
            let start = cos.len();
            for f in &inv_freq {
                // HF computes the angle in f32 before taking cos/sin.
                let angle = (pos as f32 * f) as f64;
                cos.push(angle.cos() as f32);
                sin.push(angle.sin() as f32);
            }
            cos.extend_from_within(start..start + half);
            sin.extend_from_within(start..start + half);
        }
        let scale = 1.0 / (head_dim as f32).sqrt();
        let table = |values: &[f32], n: usize, scale: f32| {
            let mut out = Vec::with_capacity(values.len() * n);
            for row in values.chunks(head_dim.max(1)) {
                for _ in 0..n {
                    out.extend(row.iter().map(|v| v * scale));
                }
            }
            Tensor::from_data(TensorData::new(out, [batch, len, n, head_dim]), device)
        };
        let (q_heads, kv_heads) = heads;
        RotaryAngles {
            cos_scaled: table(&cos, q_heads, scale),
            sin_scaled: table(&sin, q_heads, scale),
            cos: table(&cos, kv_heads, 1.0),
            sin: table(&sin, kv_heads, 1.0),
            rotate: rotate_half_matrix(head_dim, device),
        }
    }

    /// Rotates keys `x: [batch, len, heads, head_dim]`.
    pub fn apply(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        self.rotate_with(x, &self.cos, &self.sin)
    }

    /// Rotates queries `x: [batch, len, heads, head_dim]` and scales them by
    /// `1/sqrt(head_dim)`.
    pub fn apply_scaled(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        self.rotate_with(x, &self.cos_scaled, &self.sin_scaled)
    }

    fn rotate_with(&self, x: Tensor<B, 4>, cos: &Tensor<B, 4>, sin: &Tensor<B, 4>) -> Tensor<B, 4> {
        let dims = x.dims();
        let rows = dims[0] * dims[1] * dims[2];
        let rotated = x
            .clone()
            .reshape([rows, dims[3]])
            .matmul(self.rotate.clone())
            .reshape(dims);
        x.mul(cos.clone()).add(rotated.mul(sin.clone()))
    }
}

/// `R` with `x · R = [-x2, x1]` for `x = [x1, x2]`.
fn rotate_half_matrix<B: Backend>(head_dim: usize, device: &B::Device) -> Tensor<B, 2> {
    let half = head_dim / 2;
    let mut r = vec![0.0f32; head_dim * head_dim];
    for j in 0..half {
        r[(j + half) * head_dim + j] = -1.0;
        r[j * head_dim + j + half] = 1.0;
    }
    Tensor::from_data(TensorData::new(r, [head_dim, head_dim]), device)
}
