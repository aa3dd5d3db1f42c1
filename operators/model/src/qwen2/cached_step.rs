//! A cached attention step on a device: a decode step, or a prefill that scores every
//! column. The projections run without their biases (as one product in a copy that
//! generates, [`Attention::fuse_projections`]) and one call adds the biases, rotates
//! queries and keys and writes keys and values into the KV cache
//! ([`roll_flow_kernels::rotate_into_cache`]): on a GPU two launches where the unfused
//! step launches ten (three products, three bias adds, two rotations, two cache writes).

use burn::nn::Linear;
use burn::tensor::Tensor;
use roll_flow_kernels::{CachedQkv, KernelBackend};

use super::attention::Attention;
use super::compute_dtype::like;
use super::dense::project_with;
use super::rotary::RotaryAngles;
use crate::kv_cache::{Columns, LayerKv};

impl<B: KernelBackend> Attention<B> {
    /// Stores the q, k and v weights side by side ([`Attention::qkv_weight`]) when the
    /// projections are plain (no LoRA adapter, no per-head norm, all three biases or
    /// none): for a copy that only generates, on a device backend (on the CPU a step's
    /// products cost the same split or whole, and its results stay those of the separate
    /// products). Call after the weights are final (merged adapters, compute dtype): the
    /// side-by-side copy is not updated with them.
    pub fn fuse_projections(&mut self) {
        if B::DEVICE_MEMORY && self.plain() {
            let weights = [&self.q_proj, &self.k_proj, &self.v_proj].map(|p| p.weight.val());
            self.qkv_weight = Some(Tensor::cat(weights.to_vec(), 1));
        }
    }

    /// Whether the projections are plain products (no LoRA adapter, which the generating
    /// copy has folded in; no per-head norm, Qwen3's) with all three q/k/v biases or none,
    /// which [`Self::rotate_into_cache`] takes.
    pub(super) fn plain(&self) -> bool {
        let adapters = [&self.q_lora, &self.k_lora, &self.v_lora];
        let biases = [&self.q_proj, &self.k_proj, &self.v_proj].map(|p| p.bias.is_some());
        adapters.iter().all(|a| a.is_none())
            && self.q_norm.is_none()
            && self.k_norm.is_none()
            && (biases.iter().all(|&b| b) || biases.iter().all(|&b| !b))
    }

    /// A cached step on a device (a decode step, or a prefill that scores every column):
    /// the three products without their biases (one, over [`Attention::qkv_weight`], in a
    /// fused copy), then one call that adds the biases, rotates queries and keys and writes
    /// keys and values into `cache` ([`roll_flow_kernels::rotate_into_cache`], one kernel
    /// on a GPU where the unfused path launches seven). Returns the queries `[batch, heads,
    /// len, d]` and the live keys and values, as the unfused path.
    pub(super) fn rotate_into_cache(
        &self,
        x: Tensor<B, 3>,
        rope: &RotaryAngles<B>,
        cache: &mut LayerKv<B>,
    ) -> (Tensor<B, 4>, Tensor<B, 4>, Tensor<B, 4>) {
        let [batch, len, hidden] = x.dims();
        let x = x.reshape([batch * len, hidden]);
        let dtype = x.dtype();
        let (q, k, v) = match &self.qkv_weight {
            Some(weight) => {
                let qkv = project_with(x, weight.clone(), None);
                let (q, kv) = (self.heads * self.head_dim, self.kv_heads * self.head_dim);
                (
                    qkv.clone().narrow(1, 0, q),
                    qkv.clone().narrow(1, q, kv),
                    qkv.narrow(1, q + kv, kv),
                )
            }
            None => {
                let product = |p: &Linear<B>| project_with(x.clone(), p.weight.val(), None);
                (
                    product(&self.q_proj),
                    product(&self.k_proj),
                    product(&self.v_proj),
                )
            }
        };
        let bias = match [&self.q_proj, &self.k_proj, &self.v_proj].map(|p| p.bias.as_ref()) {
            [Some(bq), Some(bk), Some(bv)] => Some([bq, bk, bv].map(|b| like(b.val(), dtype))),
            _ => None,
        };
        let columns = Columns {
            shape: [batch, self.kv_heads, len, self.head_dim],
            dtype: k.dtype(),
            device: k.device(),
        };
        let (keys, values, q) = cache.append_with(columns, |keys, values, column| {
            let out = roll_flow_kernels::rotate_into_cache(CachedQkv {
                q,
                k,
                v,
                bias,
                q_tables: [rope.cos_scaled.clone(), rope.sin_scaled.clone()],
                k_tables: [rope.cos.clone(), rope.sin.clone()],
                keys,
                values,
                column,
            });
            (out.keys, out.values, out.q)
        });
        (q.swap_dims(1, 2), keys, values)
    }
}
