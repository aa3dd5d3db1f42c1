//! Qwen2's SwiGLU feed-forward block (Shazeer 2020, "GLU Variants Improve Transformer"), as
//! transformers' `Qwen2MLP`: `down(silu(gate(x)) ⊙ up(x))`, no biases.

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::activation::silu;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use super::dense::project;
use crate::model::config::Qwen2Config;
use crate::model::error::ModelError;
use crate::model::weights::{linear, TensorSink, WeightSource};

/// Gated MLP with SiLU activation.
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    /// `hidden -> intermediate`, passed through SiLU.
    pub gate_proj: Linear<B>,
    /// `hidden -> intermediate`, the linear branch.
    pub up_proj: Linear<B>,
    /// `intermediate -> hidden`.
    pub down_proj: Linear<B>,
}

impl<B: Backend> Mlp<B> {
    /// Loads `<name>.{gate,up,down}_proj`.
    pub fn load(
        source: &mut dyn WeightSource,
        name: &str,
        config: &Qwen2Config,
        device: &B::Device,
    ) -> Result<Self, ModelError> {
        let (h, i) = (config.hidden_size, config.intermediate_size);
        Ok(Mlp {
            gate_proj: linear(source, &format!("{name}.gate_proj"), h, i, false, device)?,
            up_proj: linear(source, &format!("{name}.up_proj"), h, i, false, device)?,
            down_proj: linear(source, &format!("{name}.down_proj"), i, h, false, device)?,
        })
    }

    /// Emits the three projections under `<name>`.
    pub fn save(&self, name: &str, sink: &mut TensorSink) {
        sink.put_linear(&format!("{name}.gate_proj"), &self.gate_proj);
        sink.put_linear(&format!("{name}.up_proj"), &self.up_proj);
        sink.put_linear(&format!("{name}.down_proj"), &self.down_proj);
    }

    /// `x: [batch, len, hidden] -> [batch, len, hidden]`.
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let gate = silu(project(&self.gate_proj, x.clone()));
        project(&self.down_proj, gate.mul(project(&self.up_proj, x)))
    }
}
