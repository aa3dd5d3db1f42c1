//! A tensor in a given float dtype, cast only where it is not already.

use burn::tensor::backend::Backend;
use burn::tensor::{DType, Tensor};

/// `t` in `dtype`: itself when it already is, else burn's (differentiable) cast. The
/// model's mixed precision casts each parameter to its activation's dtype with it
/// (`roll_flow_model::qwen2::compute_dtype`); reads bring device values to f32 with it
/// ([`crate::host_transfer::download_f32_each`]).
pub fn like<B: Backend, const D: usize>(t: Tensor<B, D>, dtype: DType) -> Tensor<B, D> {
    match t.dtype() == dtype {
        true => t,
        false => t.cast(dtype),
    }
}
