//! Rotary position embeddings (Su et al. 2021, RoFormer) in Hugging Face's "rotate-half"
//! layout, as transformers' `Qwen2RotaryEmbedding` + `apply_rotary_pos_emb`:
//!
//! `inv_freq_i = rope_theta^(-2i/d)` for `i < d/2` (or Llama 3's rescaling of them,
//! [`crate::rope_scaling`]), angle `θ = pos · inv_freq`,
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
//!   forward call and shared by all layers) rather than broadcast over heads, so the
//!   rotation reads three arrays of one shape in flat loops;
//! - the rotation is the fused kernel of `roll-flow-kernels` (one pass each way) instead
//!   of two narrows, a negation, a concatenation, two products and a sum;
//! - the query tables carry the attention scale `1/sqrt(head_dim)`, which saves scaling the
//!   `[queries, keys]` scores (a rotation is linear, so scaling before or after is exact up
//!   to rounding).

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use crate::host_transfer::upload;

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
}

impl<B: Backend> RotaryAngles<B> {
    /// Angles for `positions[b][t]` (all rows the same length) at the frequencies
    /// `inv_freq` (`head_dim / 2` of them: `Qwen2Config::rope_inv_freq`); `heads` = (query
    /// heads, key/value heads).
    pub fn new(
        positions: &[Vec<usize>],
        head_dim: usize,
        heads: (usize, usize),
        inv_freq: &[f32],
        device: &B::Device,
    ) -> Self {
        let batch = positions.len();
        let len = positions.first().map_or(0, Vec::len);
        let half = head_dim / 2;
        assert_eq!(inv_freq.len(), half, "one frequency per pair of features");
        let (mut cos, mut sin) = (Vec::new(), Vec::new());
        cos.reserve(batch * len * head_dim);
        sin.reserve(batch * len * head_dim);
        for &pos in positions.iter().flatten() {
            let start = cos.len();
            for f in inv_freq {
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
            upload(TensorData::new(out, [batch, len, n, head_dim]), device)
        };
        let (q_heads, kv_heads) = heads;
        RotaryAngles {
            cos_scaled: table(&cos, q_heads, scale),
            sin_scaled: table(&sin, q_heads, scale),
            cos: table(&cos, kv_heads, 1.0),
            sin: table(&sin, kv_heads, 1.0),
        }
    }

    /// The tables of the last position of every row only (`[batch, 1, .., head_dim]`).
    pub fn last_column(&self) -> Self {
        let last = |t: &Tensor<B, 4>| {
            let len = t.dims()[1];
            t.clone().narrow(1, len - 1, 1)
        };
        RotaryAngles {
            cos: last(&self.cos),
            sin: last(&self.sin),
            cos_scaled: last(&self.cos_scaled),
            sin_scaled: last(&self.sin_scaled),
        }
    }
}

impl<B: KernelBackend> RotaryAngles<B> {
    /// Rotates keys `x: [batch, len, heads, head_dim]`.
    pub fn apply(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        roll_flow_kernels::rotary(x, self.cos.clone(), self.sin.clone())
    }

    /// Rotates queries `x: [batch, len, heads, head_dim]` and scales them by
    /// `1/sqrt(head_dim)`.
    pub fn apply_scaled(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        roll_flow_kernels::rotary(x, self.cos_scaled.clone(), self.sin_scaled.clone())
    }
}
