//! Self-attention of the decoder families: grouped-query attention (Ainslie et al. 2023)
//! with rotary positions and an optional KV cache; transformers' `Qwen2Attention`,
//! `LlamaAttention` and `Qwen3Attention` with eager attention:
//!
//! `softmax(q kᵀ / sqrt(head_dim) + mask) v`, query head `h` reading key/value head
//! `h / (heads / kv_heads)`. The family decides the projection biases (Qwen2: q/k/v only;
//! Llama, Qwen3: all four or none, `attention_bias`) and whether queries and keys are
//! RMS-normalised per head before the rotation (Qwen3's `q_norm`, `k_norm`;
//! [`crate::family`]).
//!
//! GQA without copying keys: the `heads / kv_heads` query heads that share a key/value head are
//! stacked along the query axis (`[b, kv, rep·q, d]`), so one batched matmul per key/value head
//! serves them all, instead of materialising repeated keys as `repeat_kv` does.

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use roll_flow_kernels::KernelBackend;

use super::attention_mask::LayerMask;
use super::banded_attention::banded_attention;
use super::lora_adapter::{project_adapted, LoraAdapter};
use super::queries::QueryRows;
use super::rms_norm::RmsNorm;
use super::rotary::RotaryAngles;
#[cfg(doc)]
use super::selected_queries::SelectedQueries;
use crate::config::Qwen2Config;
use crate::error::ModelError;
use crate::kv_cache::LayerKv;
use crate::weights::{linear, TensorSink, WeightSource};

/// Multi-head attention with grouped key/value heads.
#[derive(Module, Debug)]
pub struct Attention<B: Backend> {
    /// Query projection `hidden -> heads·head_dim` (with a bias in Qwen2).
    pub q_proj: Linear<B>,
    /// Key projection `hidden -> kv_heads·head_dim` (with a bias in Qwen2).
    pub k_proj: Linear<B>,
    /// Value projection `hidden -> kv_heads·head_dim` (with a bias in Qwen2).
    pub v_proj: Linear<B>,
    /// Output projection `heads·head_dim -> hidden` (no bias in Qwen2).
    pub o_proj: Linear<B>,
    /// LoRA adapters of the four projections (`None` without `lora:` or when not
    /// targeted; [`LoraAdapter`]).
    pub q_lora: Option<LoraAdapter<B>>,
    /// See `q_lora`.
    pub k_lora: Option<LoraAdapter<B>>,
    /// See `q_lora`.
    pub v_lora: Option<LoraAdapter<B>>,
    /// See `q_lora`.
    pub o_lora: Option<LoraAdapter<B>>,
    /// Qwen3's per-head RMSNorm of the queries (`q_norm`, weight `[head_dim]`).
    pub q_norm: Option<RmsNorm<B>>,
    /// Qwen3's per-head RMSNorm of the keys (`k_norm`, weight `[head_dim]`).
    pub k_norm: Option<RmsNorm<B>>,
    /// Number of query heads.
    pub heads: usize,
    /// Number of key/value heads.
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// The q, k and v weights side by side, `[hidden, (heads + 2·kv_heads)·head_dim]`, in a
    /// copy that generates on a device ([`Attention::fuse_projections`]): its cached steps
    /// run one product where they ran three. Not a parameter (neither trained, saved nor
    /// recorded); `None` everywhere else.
    #[module(skip)]
    pub qkv_weight: Option<Tensor<B, 2>>,
}

impl<B: Backend> Attention<B> {
    /// Loads `<name>.{q,k,v,o}_proj` (and `<name>.{q,k}_norm` in Qwen3).
    pub fn load(
        source: &mut dyn WeightSource,
        name: &str,
        config: &Qwen2Config,
        device: &B::Device,
    ) -> Result<Self, ModelError> {
        let (hidden, d) = (config.hidden_size, config.head_dim());
        let (heads, kv_heads) = (config.num_attention_heads, config.kv_heads());
        let (qkv_bias, o_bias) = (config.qkv_bias(), config.o_bias());
        let mut head_norm = |which: &str| -> Result<Option<RmsNorm<B>>, ModelError> {
            match config.qk_norm() {
                true => {
                    let name = format!("{name}.{which}");
                    RmsNorm::load(source, &name, d, config.rms_norm_eps, device).map(Some)
                }
                false => Ok(None),
            }
        };
        let (q_norm, k_norm) = (head_norm("q_norm")?, head_norm("k_norm")?);
        Ok(Attention {
            q_proj: linear(
                source,
                &format!("{name}.q_proj"),
                hidden,
                heads * d,
                qkv_bias,
                device,
            )?,
            k_proj: linear(
                source,
                &format!("{name}.k_proj"),
                hidden,
                kv_heads * d,
                qkv_bias,
                device,
            )?,
            v_proj: linear(
                source,
                &format!("{name}.v_proj"),
                hidden,
                kv_heads * d,
                qkv_bias,
                device,
            )?,
            o_proj: linear(
                source,
                &format!("{name}.o_proj"),
                heads * d,
                hidden,
                o_bias,
                device,
            )?,
            q_lora: None,
            k_lora: None,
            v_lora: None,
            o_lora: None,
            q_norm,
            k_norm,
            heads,
            kv_heads,
            head_dim: d,
            qkv_weight: None,
        })
    }

    /// Emits the four projections (and the head norms) under `<name>`.
    pub fn save(&self, name: &str, sink: &mut TensorSink) {
        sink.put_linear(&format!("{name}.q_proj"), &self.q_proj);
        sink.put_linear(&format!("{name}.k_proj"), &self.k_proj);
        sink.put_linear(&format!("{name}.v_proj"), &self.v_proj);
        sink.put_linear(&format!("{name}.o_proj"), &self.o_proj);
        if let Some(norm) = &self.q_norm {
            norm.save(&format!("{name}.q_norm"), sink);
        }
        if let Some(norm) = &self.k_norm {
            norm.save(&format!("{name}.k_norm"), sink);
        }
    }
}

impl<B: KernelBackend> Attention<B> {
    /// Attention of the queries `rows` asks for over the keys of every column of `x:
    /// [batch, len, hidden]` (appended to `cache`, with the cached keys before them):
    /// - `All(mask)`: every column, `[batch, len, hidden]`; `mask` over the cached keys
    ///   plus these (a banded mask only without a cache);
    /// - `Last(mask)`: the last column only, `[batch, 1, hidden]` (a prefill needs every new
    ///   key and value in the cache but the next-token logits of the last column alone; a
    ///   banded mask has no cache and scores whole sequences, so it takes the full path);
    /// - `At(slots, rope_at)`: the [`SelectedQueries`] slots only, `[batch, per_row,
    ///   hidden]`, over whole right-padded sequences without a cache; `rope` rotates the
    ///   keys, `rope_at` the slots' queries.
    ///
    /// Layout: the projections stay `[batch, queries, heads, head_dim]` for the rotation and
    /// heads are moved in front by a stride change only (`swap_dims`, no copy: the matmuls
    /// read strided operands). Copies happen where they must: the cache write, and the
    /// head merge before the output projection. With one query head per key/value head
    /// (no GQA) no reshape of a transposed tensor, hence no copy, is needed at all.
    pub fn forward(
        &self,
        x: Tensor<B, 3>,
        rope: &RotaryAngles<B>,
        cache: Option<&mut LayerKv<B>>,
        rows: &QueryRows<'_, B>,
    ) -> Tensor<B, 3> {
        match rows {
            QueryRows::All(mask) => self.forward_queries(x, rope, mask, cache, false),
            QueryRows::Last(mask @ LayerMask::Dense { .. }) => {
                self.forward_queries(x, rope, mask, cache, true)
            }
            QueryRows::Last(mask @ LayerMask::Banded(_)) => {
                last_column(self.forward_queries(x, rope, mask, cache, false))
            }
            QueryRows::At(at, rope_at) => {
                let q = self.queries(at.gather(x.clone()), rope_at);
                let (k, v) = self.keys_values(x, rope);
                let out = self.attend(q, k, v, &at.mask);
                project_adapted(&self.o_proj, &self.o_lora, out)
            }
        }
    }

    /// Keys and values of every column of `x` (appended to `cache`), queries of every
    /// column or, with `last_only`, of the last one.
    fn forward_queries(
        &self,
        x: Tensor<B, 3>,
        rope: &RotaryAngles<B>,
        mask: &LayerMask<B>,
        cache: Option<&mut LayerKv<B>>,
        last_only: bool,
    ) -> Tensor<B, 3> {
        let queries = x.dims()[1];
        let (q, k, v) = match cache {
            Some(cache) if B::DEVICE_MEMORY && (queries == 1 || !last_only) && self.plain() => {
                self.rotate_into_cache(x, rope, cache)
            }
            cache => {
                let (k, v) = self.keys_values(x.clone(), rope);
                let (k, v) = match cache {
                    Some(cache) => cache.append(k, v),
                    None => (k, v),
                };
                let q = match last_only {
                    true => self.queries(last_column(x), &rope.last_column()),
                    false => self.queries(x, rope),
                };
                (q, k, v)
            }
        };
        let out = match mask {
            LayerMask::Dense { mask, first_key } => {
                // Keys before `first_key` are out of every query's window.
                let visible = |t: Tensor<B, 4>| match *first_key {
                    0 => t,
                    first => {
                        let keys = t.dims()[2];
                        t.narrow(2, first, keys - first)
                    }
                };
                let mask = match last_only {
                    true => mask.clone().narrow(2, queries - 1, 1),
                    false => mask.clone(),
                };
                self.attend(q, visible(k), visible(v), &mask)
            }
            LayerMask::Banded(band) => banded_attention(q, k, v, band),
        };
        project_adapted(&self.o_proj, &self.o_lora, out)
    }

    /// Rotated, scaled queries of `x: [batch, len, hidden]`, `[batch, heads, len, d]`.
    fn queries(&self, x: Tensor<B, 3>, rope: &RotaryAngles<B>) -> Tensor<B, 4> {
        let [batch, len, _] = x.dims();
        let q = project_adapted(&self.q_proj, &self.q_lora, x).reshape([
            batch,
            len,
            self.heads,
            self.head_dim,
        ]);
        rope.apply_scaled(per_head_norm(&self.q_norm, q))
            .swap_dims(1, 2)
    }

    /// Rotated keys and values of `x: [batch, len, hidden]`, each
    /// `[batch, kv_heads, len, d]`.
    fn keys_values(&self, x: Tensor<B, 3>, rope: &RotaryAngles<B>) -> (Tensor<B, 4>, Tensor<B, 4>) {
        let [batch, len, _] = x.dims();
        let shape = [batch, len, self.kv_heads, self.head_dim];
        let k = project_adapted(&self.k_proj, &self.k_lora, x.clone()).reshape(shape);
        let k = rope.apply(per_head_norm(&self.k_norm, k));
        // The values' gradient comes back through `swap_dims`, strided: `contiguous` lays it
        // out row-major before the reshape's backward would copy it value by value.
        let v = roll_flow_kernels::contiguous(
            project_adapted(&self.v_proj, &self.v_lora, x).reshape(shape),
        );
        (k.swap_dims(1, 2), v.swap_dims(1, 2))
    }

    /// `softmax(q kᵀ + mask) v` with the heads merged back: `q: [batch, heads, queries, d]`
    /// (already scaled), `k`, `v: [batch, kv_heads, keys, d]` -> `[batch, queries, heads·d]`.
    /// One query a row on a GPU backend is the fused decode kernel
    /// ([`roll_flow_kernels::decode_attention`]); otherwise matmuls and a masked softmax.
    fn attend(
        &self,
        q: Tensor<B, 4>,
        k: Tensor<B, 4>,
        v: Tensor<B, 4>,
        mask: &Tensor<B, 4>,
    ) -> Tensor<B, 3> {
        let [batch, heads, queries, d] = q.dims();
        // A decode step (one query a row) in one kernel on a GPU backend.
        if queries == 1 && B::DEVICE_MEMORY {
            let fused =
                roll_flow_kernels::decode_attention(q.clone(), k.clone(), v.clone(), mask.clone());
            if let Some(out) = fused {
                return out.reshape([batch, 1, heads * d]);
            }
        }
        let (kv, keys) = (self.kv_heads, k.dims()[2]);
        let rep = heads / kv;
        // With GQA the `rep` query heads of a key/value head are stacked along the query
        // axis (`[batch, kv, rep·queries, n]`) for the matmuls and split back per head
        // after: the same memory as `[batch, heads, queries, n]`. Without GQA both shapes
        // are the tensor's own and the reshape is skipped: under autodiff a reshape's
        // backward copies a strided gradient element by element.
        let regroup = |t: Tensor<B, 4>, shape: [usize; 4]| {
            if rep == 1 {
                t
            } else {
                t.reshape(shape)
            }
        };
        let grouped = |n: usize| [batch, kv, rep * queries, n];
        let per_head = |n: usize| [batch, heads, queries, n];
        let scores = regroup(
            roll_flow_kernels::matmul(regroup(q, grouped(d)), k.swap_dims(2, 3)),
            per_head(keys),
        );
        // Fused mask add + softmax (one pass each way; `roll-flow-kernels`).
        let probs = roll_flow_kernels::masked_softmax(scores, mask.clone());
        let out = regroup(
            roll_flow_kernels::matmul(regroup(probs, grouped(keys)), v),
            per_head(d),
        );
        roll_flow_kernels::contiguous(out.swap_dims(1, 2)).reshape([batch, queries, heads * d])
    }
}

/// `x: [batch, len, heads, head_dim]` RMS-normalised per head by `norm`, if there is one.
fn per_head_norm<B: KernelBackend>(norm: &Option<RmsNorm<B>>, x: Tensor<B, 4>) -> Tensor<B, 4> {
    match norm {
        Some(norm) => norm.forward(x),
        None => x,
    }
}

/// The last column of `x: [batch, len, hidden]`, `[batch, 1, hidden]`.
pub fn last_column<B: Backend>(x: Tensor<B, 3>) -> Tensor<B, 3> {
    let len = x.dims()[1];
    x.narrow(1, len - 1, 1)
}
