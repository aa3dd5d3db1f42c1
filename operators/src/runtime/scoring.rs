//! Scoring a batch with a model: the log-probs and entropies of its response tokens under
//! a causal LM, and the values of its tokens under a critic.
//!
//! - Log-probs use the rollout's temperature (`logits / T`, as verl and ROLL do) and the
//!   env tag's answer guide when replies were constrained, so the recomputed π_old equals
//!   the behaviour log-prob of an unchanged model and the PPO ratio starts at 1.
//! - Values follow verl's critic layout: the value of the state before response token t is
//!   the critic's output at position t − 1 (the same shift as the log-probs).

use std::collections::BTreeMap;
use std::sync::Arc;

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use roll_flow_engine::batch::column::{ENV_TAG, RESPONSE_MASK};
use roll_flow_engine::Batch;

use roll_flow_model::generate::AnswerChoices;
use roll_flow_model::logprob::{response_scores, ResponseLogProbs, Scoring};
use roll_flow_model::packed::PackedSequences;
use roll_flow_model::{Qwen2CausalLm, Qwen2ValueModel};

use super::concurrent::in_order;

/// The batch's tokens as packed sequences.
pub fn packed(batch: &Batch) -> PackedSequences {
    PackedSequences {
        tokens: batch.tokens().to_vec(),
        offsets: batch.offsets().to_vec(),
    }
}

/// For each response token (in packed order), the tokens its env tag's guide allowed at
/// that point of the reply; `None` for unconstrained replies.
pub fn allowed_tokens<'g>(
    batch: &Batch,
    guides: &'g BTreeMap<String, Arc<AnswerChoices>>,
) -> Result<Vec<Option<&'g [u32]>>, String> {
    let mask = batch.bools(&RESPONSE_MASK).map_err(|e| e.to_string())?;
    let tags = batch.strs(&ENV_TAG).ok();
    let tokens = batch.tokens();
    let mut allowed = Vec::new();
    for i in 0..batch.num_samples() {
        let guide = tags.and_then(|t| guides.get(&t[i]));
        let range = batch.sample_range(i);
        let mut t = range.start;
        while t < range.end {
            if !mask[t] {
                t += 1;
                continue;
            }
            let reply_end = (t..range.end).find(|&u| !mask[u]).unwrap_or(range.end);
            match guide {
                Some(g) => allowed.extend(g.allowed_along(&tokens[t..reply_end])),
                None => allowed.extend((t..reply_end).map(|_| None)),
            }
            t = reply_end;
        }
    }
    Ok(allowed)
}

/// What [`score_responses`] computes besides log-probs and entropies, and how.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScoreOptions {
    /// Also each token's uniform-prior KL ([`Scoring::uniform_kl`]).
    pub uniform_kl: bool,
    /// The samples that share a prompt run as one row, the prompt once
    /// ([`Scoring::prefix_grouped`]).
    pub prefix_grouped: bool,
}

/// Log-probs and entropies of the batch's response tokens under `model`, with what
/// `options` asks for.
pub fn score_responses<B: roll_flow_kernels::KernelBackend>(
    model: &Qwen2CausalLm<B>,
    batch: &Batch,
    temperature: f32,
    guides: &BTreeMap<String, Arc<AnswerChoices>>,
    options: ScoreOptions,
) -> Result<ResponseLogProbs<B>, String> {
    let mask = batch.bools(&RESPONSE_MASK).map_err(|e| e.to_string())?;
    let packed = packed(batch);
    let allowed = match guides.is_empty() {
        true => None,
        false => Some(allowed_tokens(batch, guides)?),
    };
    let scoring = Scoring {
        temperature,
        allowed: allowed.as_deref(),
        uniform_kl: options.uniform_kl,
        prefix_grouped: options.prefix_grouped,
    };
    response_scores(model, &packed, mask, &scoring).map_err(|e| e.to_string())
}

/// The critic's value of every response token (0 elsewhere), as a packed token tensor
/// that carries the autodiff graph. A token id outside the critic's vocabulary is an error
/// (the embedding lookup would panic on the CPU and read other memory on a GPU).
pub fn token_values<B: roll_flow_kernels::KernelBackend>(
    model: &Qwen2ValueModel<B>,
    batch: &Batch,
) -> Result<Tensor<B, 1>, String> {
    let mask = batch.bools(&RESPONSE_MASK).map_err(|e| e.to_string())?;
    let packed = packed(batch);
    let vocab = model.config.vocab_size;
    if let Some(t) = packed.tokens.iter().find(|&&t| t as usize >= vocab) {
        return Err(format!(
            "token id {t} is outside the critic's vocabulary (size {vocab}); the critic needs \
             the policy's tokenizer"
        ));
    }
    let device = model.score.weight.device();
    let n = batch.num_tokens();
    if n == 0 {
        return Ok(Tensor::zeros([0], &device));
    }
    // Token t of sample i reads the output at (i, position − 1); prompt tokens read the 0
    // appended after the `read` values.
    let mut read = Vec::new();
    let mut source = Vec::with_capacity(n);
    for (t, &m) in mask.iter().enumerate() {
        let (seq, pos) = packed.locate(t);
        if m && pos > 0 {
            source.push(Some(read.len() as i64));
            read.push((seq, pos - 1));
        } else {
            source.push(None);
        }
    }
    let zero = read.len() as i64;
    let source: Vec<i64> = source.into_iter().map(|s| s.unwrap_or(zero)).collect();
    let values = match read.is_empty() {
        true => Tensor::zeros([0], &device),
        false => model.values_at(packed.right_padded::<B>(&device), &read),
    };
    let values = Tensor::cat(vec![values, Tensor::zeros([1], &device)], 0);
    let index = Tensor::<B, 1, Int>::from_data(TensorData::new(source, [n]), &device);
    Ok(values.select(0, index))
}

/// Spreads per-response values (in `token_index` order) over a packed token tensor of
/// `num_tokens`, 0 elsewhere; differentiable.
pub fn token_column<B: Backend>(
    values: Tensor<B, 1>,
    token_index: &[usize],
    num_tokens: usize,
) -> Tensor<B, 1> {
    let device = values.device();
    if token_index.is_empty() {
        return Tensor::zeros([num_tokens], &device);
    }
    let index: Vec<i64> = token_index.iter().map(|&t| t as i64).collect();
    let index =
        Tensor::<B, 1, Int>::from_data(TensorData::new(index, [token_index.len()]), &device);
    Tensor::zeros([num_tokens], &device).select_assign(
        0,
        index,
        values,
        burn::tensor::IndexingUpdateOp::Add,
    )
}

/// The samples of `batch` in chunks of at most `max_tokens` tokens each (a longer sample
/// gets a chunk of its own), to bound the memory of one forward pass. Samples are taken
/// shortest first ([`Batch::indices_by_length`]), so each chunk, padded to its longest
/// sample, wastes little.
pub fn sample_chunks(batch: &Batch, max_tokens: usize) -> Vec<Vec<usize>> {
    let lengths: Vec<usize> = batch.lengths().collect();
    let mut chunks = Vec::new();
    let mut current = Vec::new();
    let mut tokens = 0;
    for i in batch.indices_by_length() {
        if !current.is_empty() && tokens + lengths[i] > max_tokens {
            chunks.push(std::mem::take(&mut current));
            tokens = 0;
        }
        current.push(i);
        tokens += lengths[i];
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// Where each token of `batch.select(chunk)` sits in `batch`: the samples' token ranges
/// back to back, to write a chunk's per-token scores into a column of the whole batch.
pub fn token_positions(batch: &Batch, chunk: &[usize]) -> Vec<usize> {
    chunk.iter().flat_map(|&i| batch.sample_range(i)).collect()
}

/// `score` of every chunk of [`sample_chunks`], the chunks scored concurrently when
/// `concurrent` (one per rayon thread; on the CPU a forward pass splits only its matrix
/// products over threads; see [`super::backend::RunBackend::CONCURRENT_PASSES`]), with
/// each chunk's sample indices, in chunk order. The first error, in chunk order, is
/// returned.
pub fn score_chunks<R: Send>(
    batch: &Batch,
    max_tokens: usize,
    concurrent: bool,
    score: impl Fn(&Batch) -> Result<R, String> + Sync,
) -> Result<Vec<(Vec<usize>, R)>, String> {
    in_order(sample_chunks(batch, max_tokens), concurrent, |chunk| {
        score(&batch.select(&chunk)).map(|scored| (chunk, scored))
    })
}

#[cfg(test)]
#[path = "scoring_tests.rs"]
mod tests;
