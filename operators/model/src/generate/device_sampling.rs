//! A decode step's draw on the device that holds the logits: one small upload (each row's
//! temperature and uniform draw) and one read of three numbers per row, where the host path
//! reads the whole `[rows, vocab]` logits back (151,936 floats a row at Qwen2.5's
//! vocabulary). The kernel and its formula: `roll_flow_kernels::row_sampling`.
//!
//! Rows that need top-k, top-p or a guide's mask are sampled on the host
//! ([`super::sampler`]); a step runs on the device only when none of its rows does. The
//! draw u is the one the host sampler would take from the row's generator, so a request
//! gets the same tokens either way up to f32 rounding at a boundary between two tokens.

use burn::tensor::Tensor;
use roll_flow_kernels::row_sampling::{row_params, row_samples, sample_rows, RowDraw};
use roll_flow_kernels::KernelBackend;

use super::request::GenerationRequest;
use super::sampler::Sampled;
use roll_flow_kernels::host_transfer::{download_f32, upload};

/// Whether `request`'s next token can be drawn on the device: no guide, no top-k below the
/// vocabulary, no top-p below 1.
pub(crate) fn on_device(request: &GenerationRequest, vocab: usize) -> bool {
    let s = &request.sampling;
    request.guide.is_none() && (s.top_k == 0 || s.top_k >= vocab) && s.top_p >= 1.0
}

/// One token per row of `logits [rows, 1, vocab]` drawn on their device with `draws`; `None`
/// for a row whose logits were not all finite.
pub(crate) fn sample_on_device<B: KernelBackend>(
    logits: Tensor<B, 3>,
    draws: &[RowDraw],
) -> Vec<Option<Sampled>> {
    let [rows, _, vocab] = logits.dims();
    let params = upload(row_params(draws), &logits.device());
    let drawn = sample_rows(logits.reshape([rows, vocab]), params);
    row_samples(&download_f32(drawn))
        .into_iter()
        .map(|s| {
            s.finite.then_some(Sampled {
                token: s.token,
                logprob: s.logprob,
            })
        })
        .collect()
}
