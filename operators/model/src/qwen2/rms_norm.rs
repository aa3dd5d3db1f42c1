//! RMSNorm (Zhang & Sennrich 2019), as in transformers' `Qwen2RMSNorm`:
//! `y = w ⊙ x / sqrt(mean(x²) + eps)` over the last dimension, eps from `rms_norm_eps`
//! (Qwen2 default 1e-6). No mean subtraction and no bias.

use burn::module::{Module, Param};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use roll_flow_kernels::KernelBackend;

use super::compute_dtype::like;

use crate::error::ModelError;
use crate::weights::{vector_param, Init, TensorSink, WeightSource};

/// Root-mean-square layer normalisation with a learned scale.
#[derive(Module, Debug)]
pub struct RmsNorm<B: Backend> {
    /// Per-channel scale `w`, HF name `<prefix>.weight`.
    pub weight: Param<Tensor<B, 1>>,
    /// Epsilon added to the mean square.
    pub eps: f64,
}

impl<B: Backend> RmsNorm<B> {
    /// Loads `<name>.weight` of width `dim`.
    pub fn load(
        source: &mut dyn WeightSource,
        name: &str,
        dim: usize,
        eps: f64,
        device: &B::Device,
    ) -> Result<Self, ModelError> {
        let weight = vector_param(source, &format!("{name}.weight"), dim, Init::Ones, device)?;
        Ok(RmsNorm { weight, eps })
    }

    /// Emits `<name>.weight`.
    pub fn save(&self, name: &str, sink: &mut TensorSink) {
        sink.put(&format!("{name}.weight"), &self.weight.val());
    }
}

impl<B: KernelBackend> RmsNorm<B> {
    /// Normalises over the last dimension, with the fused kernel of `roll-flow-kernels`
    /// (one pass each way instead of seven ops, two of them broadcast products).
    pub fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        let weight = like(self.weight.val(), x.dtype());
        roll_flow_kernels::rms_norm(x, weight, self.eps as f32)
    }

    /// `(x + delta, forward(x + delta))`, a residual stream's sum and its norm, in one
    /// kernel where the backend has it (a GPU outside autodiff:
    /// [`roll_flow_kernels::add_rms_norm`]), else the add and then [`forward`](Self::forward).
    /// Without a `delta`, `(x, forward(x))`.
    pub fn add_then_forward<const D: usize>(
        &self,
        x: Tensor<B, D>,
        delta: Option<Tensor<B, D>>,
    ) -> (Tensor<B, D>, Tensor<B, D>) {
        let Some(delta) = delta else {
            return (x.clone(), self.forward(x));
        };
        let eps = self.eps as f32;
        match roll_flow_kernels::add_rms_norm(x.clone(), delta.clone(), self.weight.val(), eps) {
            Some(fused) => fused,
            None => {
                let sum = x.add(delta);
                (sum.clone(), self.forward(sum))
            }
        }
    }
}
