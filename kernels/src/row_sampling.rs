//! One decode step's next tokens, drawn where the logits are, so that a step on a GPU
//! reads back three numbers per row instead of the `[rows, vocab]` logits.
//!
//! Per row, with logits x, inverse temperature 1/T (1 for a greedy row) and a uniform draw
//! u ∈ [0, 1) that the caller takes from the row's own seeded generator:
//! - m = max x/T over the finite logits; w_i = e^{x_i/T − m}; Z = Σ w_i;
//! - greedy: the first index of the largest logit (`torch.argmax`'s choice on ties);
//!   otherwise the first i whose running mass w_0 + … + w_i passes u·Z (inverse-CDF
//!   sampling; the token with the last nonzero weight if rounding keeps the sum below);
//! - log π(i) = x_i/T − m − ln Z, the behaviour log-prob before any truncation;
//! - the count of non-finite logits (a row with any is not to be trusted).
//!
//! This is the model's host sampler (`roll_flow_model::generate::sampler`, transformers'
//! order of logits processors) for rows without top-k, top-p or a guide: the same draw u
//! gives the same token unless u·Z falls within rounding of a boundary between two tokens
//! (the host sums in f64, the GPU kernel in f32). Kernels: [`crate::cpu::row_sample`] (the
//! host twin and test oracle) and the CubeCL one (one cube per row: a max reduction, a scan
//! of chunk masses, one chunk walked).

use burn::tensor::{Tensor, TensorData, TensorPrimitive};

use crate::backend::KernelBackend;
use crate::cpu::row_sample::ROW_FIELDS;

/// How one row draws: its temperature (0: greedy) and its uniform draw (ignored when greedy).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowDraw {
    /// Softmax temperature; 0 means greedy.
    pub temperature: f32,
    /// u ∈ [0, 1).
    pub draw: f32,
}

/// What a row drew.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowSample {
    /// The token id.
    pub token: u32,
    /// Its log-prob under the temperature-scaled distribution (T = 1 when greedy).
    pub logprob: f32,
    /// Whether every logit of the row was finite.
    pub finite: bool,
}

/// The `[rows, 3]` parameters [`sample_rows`] reads: (1/T, u, greedy) per row.
pub fn row_params(draws: &[RowDraw]) -> TensorData {
    let values: Vec<f32> = draws
        .iter()
        .flat_map(|d| match d.temperature > 0.0 {
            true => [1.0 / d.temperature, d.draw, 0.0],
            false => [1.0, 0.0, 1.0],
        })
        .collect();
    TensorData::new(values, [draws.len(), ROW_FIELDS])
}

/// Draws one token per row of `logits [rows, vocab]` with `params` from [`row_params`]:
/// `[rows, 3]`, to be read back with [`row_samples`].
pub fn sample_rows<B: KernelBackend>(logits: Tensor<B, 2>, params: Tensor<B, 2>) -> Tensor<B, 2> {
    let out = B::sample_rows(
        logits.into_primitive().tensor(),
        params.into_primitive().tensor(),
    );
    Tensor::from_primitive(TensorPrimitive::Float(out))
}

/// The rows of [`sample_rows`]'s result, read back as f32 values.
pub fn row_samples(values: &[f32]) -> Vec<RowSample> {
    values
        .chunks(ROW_FIELDS)
        .map(|r| RowSample {
            token: r[0] as u32,
            logprob: r[1],
            finite: r[2] == 0.0,
        })
        .collect()
}
