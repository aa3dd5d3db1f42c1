//! One LoRA adapter of a linear layer (Hu et al. 2021; PEFT's `peft/tuners/lora/layer.py`,
//! `Linear.forward` and `get_delta_weight`):
//!
//! `y = x W + b + s · (dropout(x) A) B`, `s = alpha / rank`, with `A: [in, rank]` and `B:
//! [rank, out]` in burn's `[in, out]` layout (PEFT's `lora_A.weight` `[rank, in]` is `Aᵀ`,
//! `lora_B.weight` `[out, rank]` is `Bᵀ`). A fresh adapter has PEFT's initialisation
//! (`reset_lora_parameters` with `init_lora_weights=True`): `A` Kaiming-uniform with `a =
//! √5`, i.e. uniform on `±1/√in`, and `B = 0`, so the layer starts as the base layer.
//! Merging folds the update into the weight: `W' = W + s · A B`.

use burn::module::{Module, Param};
use burn::nn::Linear;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use rand::rngs::StdRng;
use rand::Rng;
use roll_flow_kernels::KernelBackend;

use super::dense::{project, project_dropped, project_with};
use super::dropout_masks::next_draw;
use crate::weights::{transpose, TensorSink};

/// The low-rank pair `A`, `B` of one linear layer and its scale.
#[derive(Module, Debug)]
pub struct LoraAdapter<B: Backend> {
    /// `A: [in, rank]` (PEFT's `lora_A.weight` transposed).
    pub a: Param<Tensor<B, 2>>,
    /// `B: [rank, out]` (PEFT's `lora_B.weight` transposed).
    pub b: Param<Tensor<B, 2>>,
    /// `alpha / rank`.
    pub scale: f64,
    /// Dropout probability on the adapter's input, applied only under autodiff, i.e.
    /// while training ([`super::dropout_masks`]).
    pub dropout: f64,
}

impl<B: Backend> LoraAdapter<B> {
    /// A fresh adapter for a `[d_in, d_out]` layer: `A` uniform on `±1/√d_in` from `rng`,
    /// `B = 0` (module doc).
    pub fn fresh(
        d_in: usize,
        d_out: usize,
        rank: usize,
        scale: f64,
        dropout: f64,
        rng: &mut StdRng,
        device: &B::Device,
    ) -> Self {
        let bound = 1.0 / (d_in as f64).sqrt();
        let a: Vec<f32> = (0..d_in * rank)
            .map(|_| ((rng.random::<f64>() * 2.0 - 1.0) * bound) as f32)
            .collect();
        let a = Tensor::from_data(TensorData::new(a, [d_in, rank]), device);
        let b = Tensor::zeros([rank, d_out], device);
        LoraAdapter {
            a: Param::from_tensor(a),
            b: Param::from_tensor(b),
            scale,
            dropout,
        }
    }

    /// `W + s · A B` for the base layer's weight `W: [in, out]`.
    pub fn merged_weight(&self, weight: Tensor<B, 2>) -> Tensor<B, 2> {
        let update = self.a.val().matmul(self.b.val()).mul_scalar(self.scale);
        weight.add(update)
    }

    /// The base layer with the update folded into its weight (bias unchanged).
    pub fn merge_into(&self, base: &Linear<B>) -> Linear<B> {
        let weight = self.merged_weight(base.weight.val());
        Linear {
            weight: Param::initialized(base.weight.id, weight),
            bias: base.bias.clone(),
        }
    }

    /// Emits PEFT's `<name>.lora_A.weight` `[rank, in]` and `<name>.lora_B.weight` `[out,
    /// rank]` (e.g. `name` = `base_model.model.model.layers.0.self_attn.q_proj`).
    pub fn save(&self, name: &str, sink: &mut TensorSink) {
        for (which, param) in [("lora_A", &self.a), ("lora_B", &self.b)] {
            let [rows, cols] = param.val().dims();
            let values = transpose(&crate::weights::to_f32_vec(&param.val()), rows, cols);
            sink.tensors
                .push((format!("{name}.{which}.weight"), vec![cols, rows], values));
        }
    }
}

/// `linear(x)`, plus the adapter's update when there is one; without an adapter this is
/// exactly [`project`].
pub fn project_adapted<B: KernelBackend, const D: usize>(
    linear: &Linear<B>,
    adapter: &Option<LoraAdapter<B>>,
    x: Tensor<B, D>,
) -> Tensor<B, D> {
    match adapter {
        None => project(linear, x),
        Some(lora) => {
            let base = project(linear, x.clone());
            let low = match next_draw::<B>(&x.device(), lora.dropout) {
                Some(draw) => project_dropped(x, lora.a.val(), draw),
                None => project_with(x, lora.a.val(), None),
            };
            let update = project_with(low, lora.b.val(), None).mul_scalar(lora.scale);
            base.add(update)
        }
    }
}
