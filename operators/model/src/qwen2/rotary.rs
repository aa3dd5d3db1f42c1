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
//! handed to the device once per forward pass and shared by all layers. On a backend with
//! device memory ([`KernelBackend::DEVICE_MEMORY`]) only `cos θ` and `sin θ` of each
//! position cross, in one upload (`2 · positions · head_dim/2` floats); the halves, the
//! heads and the query scale are expanded there, to the same values as the host expansion
//! (a copy, and a product rounded once as on the host). At Qwen2.5-0.5B's shape (14 + 2
//! heads of 64) a decode step of 128 rows uploads 32 KB instead of 1 MB (issue 59).
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
use burn::tensor::{DType, Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use super::compute_dtype::like;
use roll_flow_kernels::host_transfer::upload;

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

impl<B: KernelBackend> RotaryAngles<B> {
    /// Angles for `positions[b][t]` (all rows the same length) at the frequencies
    /// `inv_freq` (`head_dim / 2` of them: `Qwen2Config::rope_inv_freq`); `heads` = (query
    /// heads, key/value heads). Expanded on the host, or on the device where the backend
    /// has device memory (the same values, fewer bytes across); in `dtype` where given (a
    /// model's compute dtype, [`super::compute_dtype`]), on the device cast before the
    /// expansion, while the angles are one head of half the features.
    pub fn new(
        positions: &[Vec<usize>],
        head_dim: usize,
        heads: (usize, usize),
        inv_freq: &[f32],
        dtype: Option<DType>,
        device: &B::Device,
    ) -> Self {
        assert_eq!(
            inv_freq.len(),
            head_dim / 2,
            "one frequency per pair of features"
        );
        let angles = HalfAngles::new(positions, inv_freq);
        match (B::DEVICE_MEMORY, dtype) {
            (true, _) => Self::expanded_on_device(angles, heads, dtype, device),
            (false, None) => Self::expanded_on_host(angles, heads, device),
            (false, Some(dtype)) => {
                let t = Self::expanded_on_host(angles, heads, device);
                let cast = |t: Tensor<B, 4>| like(t, dtype);
                RotaryAngles {
                    cos: cast(t.cos),
                    sin: cast(t.sin),
                    cos_scaled: cast(t.cos_scaled),
                    sin_scaled: cast(t.sin_scaled),
                }
            }
        }
    }

    /// The tables built on the host and uploaded whole (four uploads of
    /// `positions · heads · head_dim` floats).
    fn expanded_on_host(
        a: HalfAngles,
        (q_heads, kv_heads): (usize, usize),
        device: &B::Device,
    ) -> Self {
        let (batch, len, half, head_dim) = (a.batch, a.len, a.half, 2 * a.half);
        let table = |values: &[f32], n: usize, scale: f32| {
            let mut out = Vec::with_capacity(values.len() * 2 * n);
            for row in values.chunks(half.max(1)) {
                for _ in 0..n {
                    // `[cos θ, cos θ]`: the half, twice.
                    out.extend(row.iter().chain(row).map(|v| v * scale));
                }
            }
            upload(TensorData::new(out, [batch, len, n, head_dim]), device)
        };
        let scale = query_scale(head_dim);
        RotaryAngles {
            cos_scaled: table(&a.cos, q_heads, scale),
            sin_scaled: table(&a.sin, q_heads, scale),
            cos: table(&a.cos, kv_heads, 1.0),
            sin: table(&a.sin, kv_heads, 1.0),
        }
    }

    /// The tables expanded on the device from one upload of `cos θ` and `sin θ` per
    /// position (`[2, batch, len, 1, head_dim/2]`): the half repeated twice along the
    /// feature axis, then over the heads, the query tables times the scale.
    fn expanded_on_device(
        a: HalfAngles,
        (q_heads, kv_heads): (usize, usize),
        dtype: Option<DType>,
        device: &B::Device,
    ) -> Self {
        let (batch, len, half, head_dim) = (a.batch, a.len, a.half, 2 * a.half);
        let mut angles = a.cos;
        angles.extend(a.sin);
        let angles: Tensor<B, 5> =
            upload(TensorData::new(angles, [2, batch, len, 1, half]), device);
        let angles = match dtype {
            Some(dtype) => like(angles, dtype),
            None => angles,
        };
        let full = |i: usize| {
            let t = angles
                .clone()
                .narrow(0, i, 1)
                .reshape([batch, len, 1, half]);
            t.repeat_dim(3, 2)
        };
        let (cos, sin) = (full(0), full(1));
        let scale = query_scale(head_dim);
        RotaryAngles {
            cos_scaled: cos.clone().repeat_dim(2, q_heads).mul_scalar(scale),
            sin_scaled: sin.clone().repeat_dim(2, q_heads).mul_scalar(scale),
            cos: cos.repeat_dim(2, kv_heads),
            sin: sin.repeat_dim(2, kv_heads),
        }
    }

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

/// `cos θ` and `sin θ` of every position of one call and every frequency (half a head's
/// features), row-major over `[batch, len, half]`: what both expansions start from.
#[derive(Clone)]
struct HalfAngles {
    batch: usize,
    len: usize,
    half: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl HalfAngles {
    /// HF computes the angle in f32 before taking cos/sin; these are taken in f64 and
    /// rounded once.
    fn new(positions: &[Vec<usize>], inv_freq: &[f32]) -> Self {
        let n = positions.iter().map(Vec::len).sum::<usize>() * inv_freq.len();
        let (mut cos, mut sin) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for &pos in positions.iter().flatten() {
            for f in inv_freq {
                let angle = (pos as f32 * f) as f64;
                cos.push(angle.cos() as f32);
                sin.push(angle.sin() as f32);
            }
        }
        HalfAngles {
            batch: positions.len(),
            len: positions.first().map_or(0, Vec::len),
            half: inv_freq.len(),
            cos,
            sin,
        }
    }
}

/// The attention scale `1/sqrt(head_dim)` the query tables carry.
fn query_scale(head_dim: usize) -> f32 {
    1.0 / (head_dim as f32).sqrt()
}

impl<B: Backend> RotaryAngles<B> {
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

#[cfg(test)]
mod tests {
    use super::*;

    type B = burn::backend::Flex;

    /// The device's expansion gives the host's tables, value for value (a copy, and the
    /// query scale rounded once on both), for rows at different positions.
    #[test]
    fn the_tables_expanded_on_the_device_are_the_host_tables() {
        let positions = vec![vec![0, 1, 2], vec![7, 8, 9], vec![4093, 4094, 4095]];
        let inv_freq: Vec<f32> = (0..8).map(|i| 10_000f32.powf(-(i as f32) / 8.0)).collect();
        let device = Default::default();
        let angles = HalfAngles::new(&positions, &inv_freq);
        let host = RotaryAngles::<B>::expanded_on_host(angles.clone(), (6, 2), &device);
        let dev = RotaryAngles::<B>::expanded_on_device(angles, (6, 2), None, &device);
        let values = |t: &Tensor<B, 4>| (t.dims(), t.to_data().to_vec::<f32>().unwrap());
        for (h, d) in [
            (&host.cos, &dev.cos),
            (&host.sin, &dev.sin),
            (&host.cos_scaled, &dev.cos_scaled),
            (&host.sin_scaled, &dev.sin_scaled),
        ] {
            assert_eq!(values(d), values(h));
        }
        // The layout: `[row, position, head, feature]`, the half twice, keys unscaled.
        let (dims, cos) = values(&host.cos);
        assert_eq!(dims, [3, 3, 2, 16]);
        let at = |b: usize, t: usize, h: usize, f: usize| cos[((b * 3 + t) * 2 + h) * 16 + f];
        let want = ((8.0f32 * inv_freq[3]) as f64).cos() as f32;
        assert_eq!((at(1, 1, 1, 3), at(1, 1, 0, 11)), (want, want));
    }
}
