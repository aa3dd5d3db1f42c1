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

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

/// `cos`/`sin` tables for one forward call, shaped `[batch, 1, len, head_dim]`.
#[derive(Clone, Debug)]
pub struct RotaryAngles<B: Backend> {
    /// `cos θ` repeated over both halves of the head dimension.
    pub cos: Tensor<B, 4>,
    /// `sin θ` repeated over both halves of the head dimension.
    pub sin: Tensor<B, 4>,
}

impl<B: Backend> RotaryAngles<B> {
    /// Angles for `positions[b][t]` (all rows the same length).
    pub fn new(positions: &[Vec<usize>], head_dim: usize, theta: f64, device: &B::Device) -> Self {
        let batch = positions.len();
        let len = positions.first().map_or(0, Vec::len);
        let half = head_dim / 2;
        let inv_freq: Vec<f64> = (0..half)
            .map(|i| 1.0 / theta.powf((2 * i) as f64 / head_dim as f64))
            .collect();
        let mut cos = Vec::with_capacity(batch * len * head_dim);
        let mut sin = Vec::with_capacity(batch * len * head_dim);
        for row in positions {
            for &pos in row {
                for _ in 0..2 {
                    for f in &inv_freq {
                        // HF computes the angle in f32 before taking cos/sin.
                        let angle = (pos as f32 * *f as f32) as f64;
                        cos.push(angle.cos() as f32);
                        sin.push(angle.sin() as f32);
                    }
                }
            }
        }
        let shape = [batch, 1, len, head_dim];
        RotaryAngles {
            cos: Tensor::from_data(TensorData::new(cos, shape), device),
            sin: Tensor::from_data(TensorData::new(sin, shape), device),
        }
    }

    /// Rotates `x: [batch, heads, len, head_dim]`.
    pub fn apply(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let head_dim = x.dims()[3];
        let half = head_dim / 2;
        let x1 = x.clone().narrow(3, 0, half);
        let x2 = x.clone().narrow(3, half, half);
        let rotated = Tensor::cat(vec![x2.neg(), x1], 3);
        x.mul(self.cos.clone()).add(rotated.mul(self.sin.clone()))
    }
}
