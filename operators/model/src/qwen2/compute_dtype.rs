//! Mixed precision: the dtype a model computes in, apart from the dtype its parameters are
//! kept in.
//!
//! The parameters stay in the backend's float type (f32: the master weights, their
//! gradients and the optimizer's state). With a compute dtype of bf16 (or f16) set on the
//! backbone, the embedding's output is cast to it once, the rotary tables and the masks are
//! cast once per forward call, and every op casts its parameters (a dense layer's weight and
//! bias, a norm's scale) to the dtype of its activation, [`like`]: the products then run in
//! bf16 (on tensor cores on a GPU) and autodiff casts each parameter's gradient back to f32
//! (burn's `cast` is differentiable). PyTorch's autocast in its simplest form (Micikevicius
//! et al. 2018, "Mixed Precision Training"). Log-probs leave the log-prob kernel in f32
//! whatever the logits' type, and a value head's outputs are cast back to f32.
//!
//! When the compute dtype is the parameters' own (the default), [`like`] returns its input:
//! the f32 path runs exactly as without this module.
//!
//! A copy that only generates may hold its parameters in the compute dtype already
//! ([`CastParams`], `Qwen2CausalLm::with_params_in_compute_dtype`): each op's cast is then
//! the identity, and the outputs are the same, as a cast rounds alike wherever it runs.

use burn::module::{ModuleMapper, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{DType, Tensor};

/// `t` in `dtype`: itself when it already is, else burn's (differentiable) cast.
pub use roll_flow_kernels::like;

/// A hidden key's additive mask value in f16: its lowest finite value. The mask's −1e30
/// is below f16's range (its cast would be −∞, and a row whose keys are all hidden would
/// then be a softmax of −∞s, NaN); at −65,504 such a row stays the uniform softmax it is in
/// f32. bf16 holds −1e30.
pub const F16_MASKED: f32 = -65_504.0;

/// An additive attention mask in `dtype` (in f16 raised to [`F16_MASKED`] first).
pub fn mask_like<B: Backend, const D: usize>(mask: Tensor<B, D>, dtype: DType) -> Tensor<B, D> {
    match dtype {
        DType::F16 if mask.dtype() != dtype => mask.clamp_min(F16_MASKED).cast(dtype),
        _ => like(mask, dtype),
    }
}

/// Casts every float parameter of a module to its dtype (`Module::map`).
pub struct CastParams(pub DType);

impl<B: Backend> ModuleMapper<B> for CastParams {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        Param::from_mapped_value(id, like(tensor, self.0), mapper)
    }
}
