//! Qwen2's SwiGLU feed-forward block (Shazeer 2020, "GLU Variants Improve Transformer"), as
//! transformers' `Qwen2MLP`: `down(silu(gate(x)) ⊙ up(x))`, no biases.

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use roll_flow_kernels::KernelBackend;

use super::dense::project_with;
use super::lora_adapter::{project_adapted, LoraAdapter};
use crate::config::Qwen2Config;
use crate::error::ModelError;
use crate::weights::{linear, TensorSink, WeightSource};

/// Gated MLP with SiLU activation.
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    /// `hidden -> intermediate`, passed through SiLU.
    pub gate_proj: Linear<B>,
    /// `hidden -> intermediate`, the linear branch.
    pub up_proj: Linear<B>,
    /// `intermediate -> hidden`.
    pub down_proj: Linear<B>,
    /// LoRA adapters of the three projections (`None` without `lora:` or when not
    /// targeted; [`LoraAdapter`]).
    pub gate_lora: Option<LoraAdapter<B>>,
    /// See `gate_lora`.
    pub up_lora: Option<LoraAdapter<B>>,
    /// See `gate_lora`.
    pub down_lora: Option<LoraAdapter<B>>,
    /// The gate and up weights side by side, `[hidden, 2·intermediate]`, in a copy that
    /// generates on a device ([`Mlp::fuse_projections`]): one product where there were two,
    /// the SwiGLU kernel reading its two halves in place. Not a parameter (neither
    /// trained, saved nor recorded); `None` everywhere else.
    #[module(skip)]
    pub gate_up_weight: Option<Tensor<B, 2>>,
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
            gate_lora: None,
            up_lora: None,
            down_lora: None,
            gate_up_weight: None,
        })
    }

    /// Emits the three projections under `<name>`.
    pub fn save(&self, name: &str, sink: &mut TensorSink) {
        sink.put_linear(&format!("{name}.gate_proj"), &self.gate_proj);
        sink.put_linear(&format!("{name}.up_proj"), &self.up_proj);
        sink.put_linear(&format!("{name}.down_proj"), &self.down_proj);
    }
}

impl<B: KernelBackend> Mlp<B> {
    /// `x: [batch, len, hidden] -> [batch, len, hidden]`; the activation is the fused
    /// SwiGLU of `roll-flow-kernels` (one pass forward and one backward, instead of burn's
    /// six-op `silu` and a product).
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let act = match &self.gate_up_weight {
            Some(weight) => {
                let both = project_with(x, weight.clone(), None);
                let width = weight.dims()[1] / 2;
                let gate = both.clone().narrow(2, 0, width);
                roll_flow_kernels::swiglu(gate, both.narrow(2, width, width))
            }
            None => {
                let gate = project_adapted(&self.gate_proj, &self.gate_lora, x.clone());
                let up = project_adapted(&self.up_proj, &self.up_lora, x);
                roll_flow_kernels::swiglu(gate, up)
            }
        };
        project_adapted(&self.down_proj, &self.down_lora, act)
    }

    /// Stores the gate and up weights side by side ([`Mlp::gate_up_weight`]) when neither
    /// has an adapter: for a copy that only generates, on a device backend (the CPU keeps
    /// its separate products and their results). Call after the weights are final.
    pub fn fuse_projections(&mut self) {
        if B::DEVICE_MEMORY && self.gate_lora.is_none() && self.up_lora.is_none() {
            let weights = vec![self.gate_proj.weight.val(), self.up_proj.weight.val()];
            self.gate_up_weight = Some(Tensor::cat(weights, 1));
        }
    }
}
