//! The critic: the Qwen2 backbone with a scalar value head instead of the vocabulary
//! projection, one value per token (as transformers' `Qwen2ForTokenClassification` with one
//! label, the layout verl and OpenRLHF use for PPO critics: `score: Linear(hidden, 1)`).
//!
//! Initialised from a causal LM checkpoint, the backbone is loaded and the head starts fresh
//! (weight ~ N(0, initializer_range²), bias 0).

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};
use roll_flow_kernels::KernelBackend;

use super::attention_mask::AttentionLayout;
use super::backbone::Qwen2Backbone;
use super::dense::project;
use super::queries::Queries;
use crate::config::Qwen2Config;
use crate::error::ModelError;
use crate::weights::{linear, Init, RandomInit, TensorSink, WeightSource};

/// Backbone plus a per-token scalar head.
#[derive(Module, Debug)]
pub struct Qwen2ValueModel<B: Backend> {
    /// The transformer body (`model.*`).
    pub model: Qwen2Backbone<B>,
    /// Value head `hidden -> 1` with bias (`score`).
    pub score: Linear<B>,
    /// The architecture of the backbone.
    #[module(skip)]
    pub config: Qwen2Config,
}

/// Serves the backbone from one source and the head from another (for a critic that starts
/// from a causal LM checkpoint, which has no `score` tensors).
struct HeadFromInit<'a> {
    backbone: &'a mut dyn WeightSource,
    head: RandomInit,
}

impl WeightSource for HeadFromInit<'_> {
    fn take(&mut self, name: &str, shape: &[usize], init: Init) -> Result<Vec<f32>, ModelError> {
        if name.starts_with("score.") {
            self.head.take(name, shape, init)
        } else {
            self.backbone.take(name, shape, init)
        }
    }
}

impl<B: Backend> Qwen2ValueModel<B> {
    /// The value model computing its activations in `dtype` (mixed precision; values come
    /// back in the parameters' dtype, [`super::compute_dtype`]), or in the parameters' own
    /// with `None`.
    pub fn with_compute_dtype(mut self, dtype: Option<burn::tensor::DType>) -> Self {
        self.model.compute = dtype;
        self
    }

    /// The value model with gradient checkpointing by layer on or off
    /// ([`super::layer_checkpoints`]; off by default).
    pub fn with_gradient_checkpointing(mut self, on: bool) -> Self {
        self.model.checkpoint_layers = on;
        self
    }

    /// Builds the critic from named weights that include `score.weight`/`score.bias`.
    pub fn load(
        source: &mut dyn WeightSource,
        config: &Qwen2Config,
        device: &B::Device,
    ) -> Result<Self, ModelError> {
        let model = Qwen2Backbone::load(source, config, device)?;
        let score = linear(source, "score", config.hidden_size, 1, true, device)?;
        Ok(Qwen2ValueModel {
            model,
            score,
            config: config.clone(),
        })
    }

    /// Builds the critic from a causal LM's weights (`model.*`) and a fresh seeded head.
    ///
    /// The caller should not require the checkpoint's `lm_head.weight` to be consumed.
    pub fn from_causal_lm_weights(
        source: &mut dyn WeightSource,
        config: &Qwen2Config,
        head_seed: u64,
        device: &B::Device,
    ) -> Result<Self, ModelError> {
        let mut split = HeadFromInit {
            backbone: source,
            head: RandomInit::new(head_seed, config.initializer_range),
        };
        Self::load(&mut split, config, device)
    }

    /// A freshly initialised critic.
    pub fn random(config: &Qwen2Config, seed: u64, device: &B::Device) -> Self {
        let mut init = RandomInit::new(seed, config.initializer_range);
        Self::load(&mut init, config, device).expect("random initialisation cannot fail")
    }

    /// The device the weights live on.
    pub fn device(&self) -> B::Device {
        self.score.weight.device()
    }

    /// Emits every tensor under its Hugging Face name and layout.
    pub fn save(&self, sink: &mut TensorSink) {
        self.model.save(sink);
        sink.put_linear("score", &self.score);
    }
}

impl<B: KernelBackend> Qwen2ValueModel<B> {
    /// Per-token values `[batch, len]` of right-padded `tokens: [batch, len]`.
    pub fn forward(&self, tokens: Tensor<B, 2, Int>, layout: &AttentionLayout) -> Tensor<B, 2> {
        let [batch, len] = tokens.dims();
        let hidden = self.model.hidden_rows(tokens, layout, None, Queries::All);
        self.in_parameter_dtype(project(&self.score, hidden))
            .reshape([batch, len])
    }

    /// Values `[at.len()]` at the `(row, column)` pairs `at` of whole right-padded
    /// sequences, in the order asked: `forward`'s entries there, with the last layer run at
    /// those positions only (`Queries::At`).
    pub fn values_at(&self, tokens: Tensor<B, 2, Int>, at: &[(usize, usize)]) -> Tensor<B, 1> {
        let [batch, len] = tokens.dims();
        let layout = AttentionLayout::right_padded(batch, len);
        let hidden = self
            .model
            .hidden_rows(tokens, &layout, None, Queries::At(at));
        self.in_parameter_dtype(project(&self.score, hidden))
            .reshape([at.len()])
    }

    /// Values back in the parameters' dtype (f32) from a mixed-precision forward
    /// ([`super::compute_dtype`]).
    fn in_parameter_dtype<const D: usize>(&self, values: Tensor<B, D>) -> Tensor<B, D> {
        super::compute_dtype::like(values, self.score.weight.val().dtype())
    }
}
