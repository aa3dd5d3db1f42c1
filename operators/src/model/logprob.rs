//! Per-token log-probabilities and entropies of packed sequences, response tokens only:
//! what the old_logprob, ref_logprob and actor_step operators compute.
//!
//! For response token `t` at position `p > 0` of its sequence,
//! `logprob_t = log_softmax(z_{p-1} / T)[token_t]` and
//! `entropy_t = -Σ_v π_v log π_v` with `π = softmax(z_{p-1} / T)`, where `z_{p-1}` are the
//! logits after the preceding token and `T` the rollout temperature (verl's and ROLL's
//! `logits.div_(temperature)` before `log_softmax`). Only the hidden states that predict
//! response tokens go through the vocabulary projection, so prompt tokens cost no
//! `[tokens, vocab]` logits. The results are burn tensors, differentiable under `Autodiff`.

use burn::tensor::activation::log_softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

use super::error::ModelError;
use super::packed::PackedSequences;
use super::qwen2::{AttentionLayout, Qwen2CausalLm};

/// Log-probs and entropies of the response tokens, in packed order.
#[derive(Clone, Debug)]
pub struct ResponseLogProbs<B: Backend> {
    /// `log π(token)` of each response token, `[responses]`.
    pub logprobs: Tensor<B, 1>,
    /// Entropy of the distribution each response token was drawn from, `[responses]`.
    pub entropy: Tensor<B, 1>,
    /// Packed index of each response token (where its values go in a token column).
    pub token_index: Vec<usize>,
}

impl<B: Backend> ResponseLogProbs<B> {
    /// Spreads per-response values into a packed token column of `len` (0 elsewhere).
    pub fn scatter(&self, values: &[f32], len: usize) -> Vec<f32> {
        let mut column = vec![0.0; len];
        for (&t, &v) in self.token_index.iter().zip(values) {
            column[t] = v;
        }
        column
    }
}

/// Log-probs and entropies of the tokens marked in `response_mask` (one flag per packed
/// token). The first token of a sequence has no predecessor and cannot be a response token.
pub fn response_logprobs<B: Backend>(
    model: &Qwen2CausalLm<B>,
    packed: &PackedSequences,
    response_mask: &[bool],
    temperature: f32,
) -> Result<ResponseLogProbs<B>, ModelError> {
    packed.validate()?;
    check_inputs(packed, response_mask, temperature, model.config.vocab_size)?;
    let device = model.model.embed_tokens.weight.device();
    let (rows, width) = (packed.len(), packed.max_len());
    let mut source_rows = Vec::new();
    let mut targets = Vec::new();
    let mut token_index = Vec::new();
    for (t, _) in response_mask.iter().enumerate().filter(|(_, m)| **m) {
        let (seq, pos) = packed.locate(t);
        if pos == 0 {
            return Err(ModelError::Request {
                message: format!("token {t} starts sequence {seq} and cannot be a response token"),
            });
        }
        source_rows.push((seq * width + pos - 1) as i64);
        targets.push(packed.tokens[t] as i64);
        token_index.push(t);
    }
    let n = token_index.len();
    if n == 0 {
        let empty = Tensor::<B, 1>::zeros([0], &device);
        return Ok(ResponseLogProbs {
            logprobs: empty.clone(),
            entropy: empty,
            token_index,
        });
    }
    let hidden = model.hidden(
        packed.right_padded::<B>(&device),
        &AttentionLayout::right_padded(rows, width),
        None,
    );
    let hidden_dim = hidden.dims()[2];
    let rows_index = Tensor::<B, 1, Int>::from_data(TensorData::new(source_rows, [n]), &device);
    let selected = hidden
        .reshape([rows * width, hidden_dim])
        .select(0, rows_index);
    let logits = model.logits(selected).div_scalar(temperature as f64);
    let log_probs = log_softmax(logits, 1);
    let targets = Tensor::<B, 2, Int>::from_data(TensorData::new(targets, [n, 1]), &device);
    let logprobs = log_probs.clone().gather(1, targets).reshape([n]);
    let entropy = log_probs
        .clone()
        .exp()
        .mul(log_probs)
        .sum_dim(1)
        .neg()
        .reshape([n]);
    Ok(ResponseLogProbs {
        logprobs,
        entropy,
        token_index,
    })
}

fn check_inputs(
    packed: &PackedSequences,
    mask: &[bool],
    temperature: f32,
    vocab: usize,
) -> Result<(), ModelError> {
    if let Some(t) = packed.tokens.iter().find(|&&t| t as usize >= vocab) {
        return Err(ModelError::Request {
            message: format!("token id {t} is outside the vocabulary (size {vocab})"),
        });
    }
    if mask.len() != packed.tokens.len() {
        return Err(ModelError::Request {
            message: format!(
                "response mask has {} flags for {} tokens",
                mask.len(),
                packed.tokens.len()
            ),
        });
    }
    if !(temperature > 0.0 && temperature.is_finite()) {
        return Err(ModelError::Request {
            message: format!("temperature {temperature} must be positive"),
        });
    }
    Ok(())
}
