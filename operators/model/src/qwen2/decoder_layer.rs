//! One pre-norm decoder layer (transformers' `Qwen2DecoderLayer`, `LlamaDecoderLayer`,
//! `Qwen3DecoderLayer`):
//! `h = x + attn(rms1(x))`, `y = h + mlp(rms2(h))`, the last add left to the next layer's
//! norm (or the final one).

use burn::module::Module;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use roll_flow_kernels::KernelBackend;

use super::attention::{last_column, Attention};
use super::mlp::Mlp;
use super::queries::QueryRows;
use super::rms_norm::RmsNorm;
use super::rotary::RotaryAngles;
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
    /// The layer's output at the queries `rows` asks for ([`QueryRows`]: every column,
    /// the last one, or the selected slots), the keys and values coming from every column
    /// of the residual stream (and appended to `cache`). The stream comes as `x: [batch,
    /// len, hidden]` plus the last layer's MLP output `delta` not yet added, and goes out
    /// the same way, `(h, mlp(rms2(h)))`: each add is then one kernel with the norm after it
    /// on a GPU ([`RmsNorm::add_then_forward`]), and the same ops in the same order
    /// elsewhere.
    pub fn forward(
        &self,
        x: Tensor<B, 3>,
        delta: Option<Tensor<B, 3>>,
        rope: &RotaryAngles<B>,
        cache: Option<&mut LayerKv<B>>,
        rows: &QueryRows<'_, B>,
    ) -> (Tensor<B, 3>, Tensor<B, 3>) {
        let (x, normed) = self.input_layernorm.add_then_forward(x, delta);
        let attended = self.self_attn.forward(normed, rope, cache, rows);
        let residual = match rows {
            QueryRows::All(_) => x,
            QueryRows::Last(_) => last_column(x),
            QueryRows::At(at, _) => at.gather(x),
        };
        let (h, normed) = self
            .post_attention_layernorm
            .add_then_forward(residual, Some(attended));
        (h, self.mlp.forward(normed))
    }
}
