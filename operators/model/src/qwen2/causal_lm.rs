//! The causal language model (transformers' `Qwen2ForCausalLM`, `LlamaForCausalLM`,
//! `Qwen3ForCausalLM`): the backbone plus an output projection to vocabulary logits, either
//! its own `lm_head.weight` or, with `tie_word_embeddings`, the token embedding matrix (as
//! Qwen2.5-0.5B/1.5B and SmolLM2 do). It serves as policy and reference model, for the Tiny
//! preset, a user's Hugging Face directory and a GGUF file alike.

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};
use roll_flow_kernels::KernelBackend;

use super::attention_mask::AttentionLayout;
use super::backbone::Qwen2Backbone;
use super::dense::{project, project_with};
use super::queries::Queries;
use crate::config::Qwen2Config;
use crate::error::ModelError;
use crate::kv_cache::KvCache;
use crate::lora_spec::LoraSpec;
use crate::weights::{linear, RandomInit, TensorSink, WeightSource};

/// Backbone plus vocabulary projection.
#[derive(Module, Debug)]
pub struct Qwen2CausalLm<B: Backend> {
    /// The transformer body (`model.*`).
    pub model: Qwen2Backbone<B>,
    /// Untied output projection (`lm_head`); `None` when tied to the embedding.
    pub lm_head: Option<Linear<B>>,
    /// The architecture this model was built for (saved as config.json).
    #[module(skip)]
    pub config: Qwen2Config,
    /// The LoRA settings the adapters were attached with ([`crate::lora::attach_lora`]);
    /// `None` for a model without adapters (and after [`crate::lora::merge_lora`]).
    #[module(skip)]
    pub lora: Option<LoraSpec>,
}

impl<B: Backend> Qwen2CausalLm<B> {
    /// The model computing its activations in `dtype` (bf16 mixed precision; the
    /// parameters stay as they are, [`super::compute_dtype`]), or in the parameters' own
    /// dtype with `None` (the default).
    pub fn with_compute_dtype(mut self, dtype: Option<burn::tensor::DType>) -> Self {
        self.model.compute = dtype;
        self
    }

    /// The model with gradient checkpointing by layer on or off
    /// ([`super::layer_checkpoints`]; off by default).
    pub fn with_gradient_checkpointing(mut self, on: bool) -> Self {
        self.model.checkpoint_layers = on;
        self
    }

    /// The same model with its parameters stored in its compute dtype, for a copy that only
    /// generates (the inference copy a trainer publishes): it casts them once, here, where
    /// every forward call would (a decode step reading each f32 weight and writing its bf16
    /// copy, 3 GB a step at Qwen2.5-0.5B's size). The same outputs: each op's cast of a
    /// cast weight is the identity. Not for a model that trains (its parameters are the f32
    /// master weights); the model itself without a compute dtype.
    pub fn with_params_in_compute_dtype(self) -> Self {
        match self.model.compute {
            Some(dtype) => self.map(&mut super::compute_dtype::CastParams(dtype)),
            None => self,
        }
    }

    /// Builds the model from named weights (a checkpoint or [`RandomInit`]).
    pub fn load(
        source: &mut dyn WeightSource,
        config: &Qwen2Config,
        device: &B::Device,
    ) -> Result<Self, ModelError> {
        let model = Qwen2Backbone::load(source, config, device)?;
        let lm_head = if config.tie_word_embeddings {
            None
        } else {
            let (h, v) = (config.hidden_size, config.vocab_size);
            Some(linear(source, "lm_head", h, v, false, device)?)
        };
        Ok(Qwen2CausalLm {
            model,
            lm_head,
            config: config.clone(),
            lora: None,
        })
    }

    /// A freshly initialised model (Hugging Face's initialisation, seeded).
    pub fn random(config: &Qwen2Config, seed: u64, device: &B::Device) -> Self {
        let mut init = RandomInit::new(seed, config.initializer_range);
        Self::load(&mut init, config, device).expect("random initialisation cannot fail")
    }

    /// The device the weights live on.
    pub fn device(&self) -> B::Device {
        self.model.embed_tokens.weight.device()
    }

    /// Emits every tensor under its Hugging Face name and layout.
    pub fn save(&self, sink: &mut TensorSink) {
        self.model.save(sink);
        if let Some(head) = &self.lm_head {
            sink.put_linear("lm_head", head);
        }
    }
}

impl<B: KernelBackend> Qwen2CausalLm<B> {
    /// The copy rollout and evaluation generate with, from a model whose weights are final
    /// (LoRA adapters merged): its parameters stored in the compute dtype
    /// ([`Self::with_params_in_compute_dtype`]) and, on a device backend, each layer's q/k/v
    /// and gate/up weights also side by side ([`super::attention::Attention::fuse_projections`],
    /// [`super::mlp::Mlp::fuse_projections`]): a decode step's seven products a layer
    /// become four. On the CPU the same model as `with_params_in_compute_dtype`.
    pub fn for_generation(self) -> Self {
        let mut model = self.with_params_in_compute_dtype();
        for layer in &mut model.model.layers {
            layer.self_attn.fuse_projections();
            layer.mlp.fuse_projections();
        }
        model
    }

    /// Final hidden states at the positions `queries` asks for, one row each (`[rows,
    /// hidden]`; `Qwen2Backbone::hidden_rows`, the one entry point).
    pub fn hidden_rows(
        &self,
        tokens: Tensor<B, 2, Int>,
        layout: &AttentionLayout,
        cache: Option<&mut KvCache<B>>,
        queries: Queries<'_>,
    ) -> Tensor<B, 2> {
        self.model.hidden_rows(tokens, layout, cache, queries)
    }

    /// Final hidden states `[batch, len, hidden]` (every position).
    pub fn hidden(
        &self,
        tokens: Tensor<B, 2, Int>,
        layout: &AttentionLayout,
        cache: Option<&mut KvCache<B>>,
    ) -> Tensor<B, 3> {
        self.model.forward(tokens, layout, cache)
    }

    /// The final hidden state of every row's last column, `[batch, 1, hidden]`, with the
    /// cache grown by every column (`Queries::Last`): what a prefill reads.
    pub fn hidden_last(
        &self,
        tokens: Tensor<B, 2, Int>,
        layout: &AttentionLayout,
        cache: Option<&mut KvCache<B>>,
    ) -> Tensor<B, 3> {
        let batch = tokens.dims()[0];
        let rows = self.hidden_rows(tokens, layout, cache, Queries::Last);
        let hidden = rows.dims()[1];
        rows.reshape([batch, 1, hidden])
    }

    /// Final hidden states `[at.len(), hidden]` at the `(row, column)` pairs `at` of whole
    /// right-padded sequences, in the order asked (`Queries::At`).
    pub fn hidden_at(&self, tokens: Tensor<B, 2, Int>, at: &[(usize, usize)]) -> Tensor<B, 2> {
        let [batch, len] = tokens.dims();
        let layout = AttentionLayout::right_padded(batch, len);
        self.hidden_rows(tokens, &layout, None, Queries::At(at))
    }

    /// Vocabulary logits of hidden states `[..., hidden] -> [..., vocab]`.
    pub fn logits<const D: usize>(&self, hidden: Tensor<B, D>) -> Tensor<B, D> {
        match &self.lm_head {
            Some(head) => project(head, hidden),
            None => {
                let weight = self.model.embed_tokens.weight.val().transpose();
                project_with(hidden, weight, None)
            }
        }
    }

    /// Logits `[batch, len, vocab]` of `tokens: [batch, len]`.
    pub fn forward(
        &self,
        tokens: Tensor<B, 2, Int>,
        layout: &AttentionLayout,
        cache: Option<&mut KvCache<B>>,
    ) -> Tensor<B, 3> {
        self.logits(self.hidden(tokens, layout, cache))
    }
}
