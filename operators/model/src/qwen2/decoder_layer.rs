//! One pre-norm Qwen2 decoder layer (transformers' `Qwen2DecoderLayer`):
//! `h = x + attn(rms1(x))`, `y = h + mlp(rms2(h))`.

use burn::module::Module;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use roll_flow_kernels::KernelBackend;

use super::attention::{last_column, Attention};
use super::attention_mask::LayerMask;
use super::mlp::Mlp;
use super::rms_norm::RmsNorm;
use super::rotary::RotaryAngles;
use super::selected_queries::SelectedQueries;
use crate::config::Qwen2Config;
use crate::error::ModelError;
use crate::kv_cache::LayerKv;
use crate::weights::{TensorSink, WeightSource};

/// Attention and MLP sub-blocks, each with its own RMSNorm and residual.
#[derive(Module, Debug)]
pub struct DecoderLayer<B: Backend> {
    /// Norm before attention (`input_layernorm`).
    pub input_layernorm: RmsNorm<B>,
    /// Self-attention (`self_attn`).
    pub self_attn: Attention<B>,
    /// Norm before the MLP (`post_attention_layernorm`).
    pub post_attention_layernorm: RmsNorm<B>,
    /// Feed-forward block (`mlp`).
    pub mlp: Mlp<B>,
}

impl<B: Backend> DecoderLayer<B> {
    /// Loads `<name>.*` (e.g. `model.layers.3`).
    pub fn load(
        source: &mut dyn WeightSource,
        name: &str,
        config: &Qwen2Config,
        device: &B::Device,
    ) -> Result<Self, ModelError> {
        let (h, eps) = (config.hidden_size, config.rms_norm_eps);
        Ok(DecoderLayer {
            input_layernorm: RmsNorm::load(
                source,
                &format!("{name}.input_layernorm"),
                h,
                eps,
                device,
            )?,
            self_attn: Attention::load(source, &format!("{name}.self_attn"), config, device)?,
            post_attention_layernorm: RmsNorm::load(
                source,
                &format!("{name}.post_attention_layernorm"),
                h,
                eps,
                device,
            )?,
            mlp: Mlp::load(source, &format!("{name}.mlp"), config, device)?,
        })
    }

    /// Emits every tensor of the layer under `<name>`.
    pub fn save(&self, name: &str, sink: &mut TensorSink) {
        self.input_layernorm
            .save(&format!("{name}.input_layernorm"), sink);
        self.self_attn.save(&format!("{name}.self_attn"), sink);
        self.post_attention_layernorm
            .save(&format!("{name}.post_attention_layernorm"), sink);
        self.mlp.save(&format!("{name}.mlp"), sink);
    }
}

impl<B: KernelBackend> DecoderLayer<B> {
    /// `x: [batch, len, hidden] -> [batch, len, hidden]`.
    pub fn forward(
        &self,
        x: Tensor<B, 3>,
        rope: &RotaryAngles<B>,
        mask: &LayerMask<B>,
        cache: Option<&mut LayerKv<B>>,
    ) -> Tensor<B, 3> {
        let attended =
            self.self_attn
                .forward(self.input_layernorm.forward(x.clone()), rope, mask, cache);
        self.mlp_block(x.add(attended))
    }

    /// The layer's output at the [`SelectedQueries`] slots only: `[batch, per_row, hidden]`
    /// (the keys and values still come from every position of `x`).
    pub fn forward_at(
        &self,
        x: Tensor<B, 3>,
        rope: &RotaryAngles<B>,
        rope_at: &RotaryAngles<B>,
        at: &SelectedQueries<B>,
    ) -> Tensor<B, 3> {
        let normed = self.input_layernorm.forward(x.clone());
        let attended = self.self_attn.forward_at(normed, rope, rope_at, at);
        self.mlp_block(at.gather(x).add(attended))
    }

    /// [`forward`](Self::forward) for the last column only, `[batch, 1, hidden]`, with every
    /// new key and value still appended to `cache` (`Attention::forward_last`).
    pub fn forward_last(
        &self,
        x: Tensor<B, 3>,
        rope: &RotaryAngles<B>,
        mask: &LayerMask<B>,
        cache: Option<&mut LayerKv<B>>,
    ) -> Tensor<B, 3> {
        let normed = self.input_layernorm.forward(x.clone());
        let attended = self.self_attn.forward_last(normed, rope, mask, cache);
        self.mlp_block(last_column(x).add(attended))
    }

    /// The MLP sub-block with its norm and residual: `h + mlp(rms2(h))`, `h` the
    /// attention's output plus its residual (at whichever positions the layer was run).
    fn mlp_block(&self, h: Tensor<B, 3>) -> Tensor<B, 3> {
        let mlp_out = self
            .mlp
            .forward(self.post_attention_layernorm.forward(h.clone()));
        h.add(mlp_out)
    }
}
