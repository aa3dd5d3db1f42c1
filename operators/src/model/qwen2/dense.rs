//! Dense projections as one matrix product over all tokens.
//!
//! burn's `Linear::forward` on a `[batch, len, in]` input broadcasts the `[in, out]` weight
//! over the batch: burn-flex then runs one small gemm per sequence, and the weight gradient
//! is a batch of per-sequence products followed by a sum over the batch. Flattening the
//! tokens to `[batch·len, in]` first (free for a contiguous tensor) turns both into a
//! single large gemm, which is markedly faster at this model's sizes (and a decode step's
//! `[rows, 1, in]` input into one `[rows, in]` product instead of `rows` vector products).

use burn::nn::Linear;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// `linear(x)` for `x: [..., in]`, computed on `x` flattened to `[tokens, in]`.
pub fn project<B: Backend, const D: usize>(linear: &Linear<B>, x: Tensor<B, D>) -> Tensor<B, D> {
    let weight = linear.weight.val();
    let bias = linear.bias.as_ref().map(|b| b.val());
    project_with(x, weight, bias)
}

/// `x · weight (+ bias)` for `x: [..., in]`, `weight: [in, out]`, on flattened tokens.
pub fn project_with<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
) -> Tensor<B, D> {
    if D <= 2 {
        return burn::tensor::module::linear(x, weight, bias);
    }
    let dims = x.dims();
    let features = dims[D - 1];
    let tokens = dims[..D - 1].iter().product::<usize>();
    let out = weight.dims()[1];
    let flat = burn::tensor::module::linear(x.reshape([tokens, features]), weight, bias);
    let mut out_dims = dims;
    out_dims[D - 1] = out;
    flat.reshape(out_dims)
}
