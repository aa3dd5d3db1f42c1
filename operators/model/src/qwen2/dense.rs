//! Dense projections: the fused dense layer of `roll-flow-kernels` ([`roll_flow_kernels::linear`]).
//!
//! It computes on the tokens flattened to `[batch·len, in]`: burn's `Linear::forward` on a
//! `[batch, len, in]` input broadcasts the `[in, out]` weight over the batch, so burn-flex
//! ran one small gemm per sequence and the weight gradient as a batch of per-sequence
//! products summed afterwards (and a decode step's `[rows, 1, in]` input as `rows` vector
//! products). On the CPU the fused op also writes each output once, with the bias, instead
//! of burn-flex's zero-fill, re-aligning copy and separate bias pass (see
//! `roll_flow_kernels::cpu::linear`).

use burn::nn::Linear;
use burn::tensor::Tensor;
use roll_flow_kernels::dropout_mask::MaskDraw;
use roll_flow_kernels::KernelBackend;

use super::compute_dtype::like;

/// `linear(x)` for `x: [..., in]`.
pub fn project<B: KernelBackend, const D: usize>(
    linear: &Linear<B>,
    x: Tensor<B, D>,
) -> Tensor<B, D> {
    let weight = linear.weight.val();
    let bias = linear.bias.as_ref().map(|b| b.val());
    project_with(x, weight, bias)
}

/// `x · weight (+ bias)` for `x: [..., in]`, `weight: [in, out]`, the parameters in `x`'s
/// dtype ([`super::compute_dtype`]).
pub fn project_with<B: KernelBackend, const D: usize>(
    x: Tensor<B, D>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
) -> Tensor<B, D> {
    let dtype = x.dtype();
    let bias = bias.map(|b| like(b, dtype));
    roll_flow_kernels::linear(x, like(weight, dtype), bias)
}

/// `dropout(x) · weight` for `draw`'s mask, `x: [..., in]`, `weight: [in, out]` in `x`'s
/// dtype: a LoRA adapter's first product as one op that keeps `x`, not the dropped copy,
/// for the backward pass ([`roll_flow_kernels::dropout_linear`]).
pub fn project_dropped<B: KernelBackend, const D: usize>(
    x: Tensor<B, D>,
    weight: Tensor<B, 2>,
    draw: MaskDraw,
) -> Tensor<B, D> {
    let dtype = x.dtype();
    roll_flow_kernels::dropout_linear(x, like(weight, dtype), draw)
}
