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
//!
//! With [`Scoring::prefix_grouped`] the sequences that share a prompt run as one row, the
//! prompt computed once ([`crate::prefix_grouped`]); every value is the same up to float
//! rounding.
//!
//! The log-softmax, gather and entropy run fused in one pass per row
//! ([`roll_flow_kernels::token_logprob_entropy`]: no `[responses, vocab]` log-softmax is
//! built, and the backward pass recomputes the softmax from the row statistics).
//!
//! Guided replies ([`crate::generate::AnswerChoices`]) were sampled from the policy
//! restricted to the allowed tokens at each position; [`response_logprobs_guided`] applies
//! the same restriction: the logits of ruled-out tokens are set to −∞ before the kernel,
//! which gives them probability 0, adds nothing to the entropy (`π log π` = 0, not NaN) and
//! no gradient. A forced token (the only one allowed) gets log-prob 0, entropy 0 and no
//! gradient exactly: it skips the vocabulary projection and the kernel altogether (in the
//! shipped answer guides three of a reply's four tokens are forced).
//!
//! On request ([`Scoring::uniform_kl`]) each token also gets `KL(U_A ‖ π)`, the divergence of
//! the uniform distribution over its allowed tokens `A` (the whole vocabulary without a
//! guide) from the policy: `−ln|A| − (1/|A|)·Σ_{a∈A} ln π(a)`, the actor's uniform-prior
//! regulariser (`roll_flow_algo::actor_loss`). It is plain burn ops on the decision tokens'
//! logits (a `[decisions, vocab]` log-softmax), which only that regulariser pays for.

use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Int, Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use super::error::ModelError;
use super::packed::PackedSequences;
use super::prefix_grouped::{pair_cost, ScoringBlock};
use super::qwen2::{Queries, Qwen2CausalLm};

/// Log-probs and entropies of the response tokens, in packed order.
#[derive(Clone, Debug)]
pub struct ResponseLogProbs<B: Backend> {
    /// `log π(token)` of each response token, `[responses]`.
    pub logprobs: Tensor<B, 1>,
    /// Entropy of the distribution each response token was drawn from, `[responses]`.
    pub entropy: Tensor<B, 1>,
    /// Packed index of each response token (where its values go in a token column).
    pub token_index: Vec<usize>,
    /// `KL(U_A ‖ π)` of each response token, `[responses]`, when [`Scoring::uniform_kl`]
    /// asked for it (0 at forced tokens).
    pub uniform_kl: Option<Tensor<B, 1>>,
}

/// How to score response tokens.
#[derive(Clone, Copy, Debug)]
pub struct Scoring<'a> {
    /// The rollout temperature `T` (logits are divided by it).
    pub temperature: f32,
    /// Per response token, the tokens its guide allowed (`None` inside: unconstrained);
    /// `None`: no guide at all.
    pub allowed: Option<&'a [Option<&'a [u32]>]>,
    /// Also compute `KL(U_A ‖ π)` per token.
    pub uniform_kl: bool,
    /// Run the sequences that share a prompt as one row, the prefix once
    /// ([`ScoringBlock::prefix_grouped`]); the same values up to float rounding. Ignored by a
    /// model with a sliding window, whose masks count columns as positions.
    pub prefix_grouped: bool,
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
pub fn response_logprobs<B: KernelBackend>(
    model: &Qwen2CausalLm<B>,
    packed: &PackedSequences,
    response_mask: &[bool],
    temperature: f32,
) -> Result<ResponseLogProbs<B>, ModelError> {
    let scoring = Scoring {
        temperature,
        allowed: None,
        uniform_kl: false,
        prefix_grouped: false,
    };
    response_scores(model, packed, response_mask, &scoring)
}

/// [`response_logprobs`] under guided decoding: `allowed` holds, for each marked token in
/// packed order, the tokens the guide allowed at that position (`None`: unconstrained), as
/// [`crate::generate::AnswerChoices::allowed_along`] gives them per reply. Each token's
/// distribution is the policy's restricted to its allowed set.
pub fn response_logprobs_guided<B: KernelBackend>(
    model: &Qwen2CausalLm<B>,
    packed: &PackedSequences,
    response_mask: &[bool],
    temperature: f32,
    allowed: &[Option<&[u32]>],
) -> Result<ResponseLogProbs<B>, ModelError> {
    let scoring = Scoring {
        temperature,
        allowed: Some(allowed),
        uniform_kl: false,
        prefix_grouped: false,
    };
    response_scores(model, packed, response_mask, &scoring)
}

/// Log-probs, entropies and (on request) uniform-prior KLs of the tokens marked in
/// `response_mask`, as [`Scoring`] says.
pub fn response_scores<B: KernelBackend>(
    model: &Qwen2CausalLm<B>,
    packed: &PackedSequences,
    response_mask: &[bool],
    scoring: &Scoring<'_>,
) -> Result<ResponseLogProbs<B>, ModelError> {
    let (temperature, allowed) = (scoring.temperature, scoring.allowed);
    packed.validate()?;
    check_inputs(packed, response_mask, temperature, model.config.vocab_size)?;
    let device = model.model.embed_tokens.weight.device();
    let block = match scoring.prefix_grouped && model.model.windows.iter().all(Option::is_none) {
        true => {
            let config = &model.config;
            let pairs = pair_cost(config.num_attention_heads, config.intermediate_size);
            ScoringBlock::prefix_grouped(packed, response_mask, pairs)
        }
        false => ScoringBlock::one_per_row(packed),
    };
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
        source_rows.push(block.column(seq, pos - 1));
        targets.push(packed.tokens[t] as i64);
        token_index.push(t);
    }
    let n = token_index.len();
    let vocab = model.config.vocab_size;
    if let Some(allowed) = allowed {
        check_allowed(allowed, &targets, vocab)?;
    }
    // The tokens that are decisions (all of them without a guide); a batch of forced tokens
    // only keeps the general path, so the result stays attached to the model's graph.
    let decisions: Vec<usize> = match allowed {
        Some(allowed) => (0..n).filter(|&i| !is_forced(allowed[i])).collect(),
        None => (0..n).collect(),
    };
    let decisions = if decisions.is_empty() {
        (0..n).collect()
    } else {
        decisions
    };
    let source_rows: Vec<(usize, usize)> = decisions.iter().map(|&i| source_rows[i]).collect();
    let targets: Vec<i64> = decisions.iter().map(|&i| targets[i]).collect();
    let allowed: Option<Vec<Option<&[u32]>>> =
        allowed.map(|a| decisions.iter().map(|&i| a[i]).collect());
    let m = decisions.len();
    let ruled_out = match &allowed {
        Some(allowed) => guide_mask(allowed, &targets, vocab),
        None => None,
    };
    let allowed_counts: Vec<f64> = match &ruled_out {
        Some(r) => r
            .chunks(vocab)
            .map(|row| row.iter().filter(|&&out| !out).count() as f64)
            .collect(),
        None => vec![vocab as f64; m],
    };
    if n == 0 {
        let empty = Tensor::<B, 1>::zeros([0], &device);
        return Ok(ResponseLogProbs {
            logprobs: empty.clone(),
            entropy: empty.clone(),
            token_index,
            uniform_kl: scoring.uniform_kl.then_some(empty),
        });
    }
    // The final hidden state before each decision; the last layer runs at those positions
    // only (`Queries::At`).
    let queries = Queries::At(&source_rows);
    let selected = model.hidden_rows(block.ids(&device), &block.layout, None, queries);
    let mut logits = model.logits(selected);
    let ruled_out =
        ruled_out.map(|r| Tensor::<B, 2, Bool>::from_data(TensorData::new(r, [m, vocab]), &device));
    if let Some(ruled_out) = &ruled_out {
        logits = logits.mask_fill(ruled_out.clone(), f32::NEG_INFINITY);
    }
    let spread = Spread::new(&decisions, n, &device);
    let targets = Tensor::<B, 1, Int>::from_data(TensorData::new(targets, [m]), &device);
    let kl_inputs = scoring
        .uniform_kl
        .then(|| (logits.clone(), targets.clone(), ruled_out.clone()));
    let fused =
        roll_flow_kernels::token_logprob_entropy(logits, targets, temperature).map_err(|e| {
            ModelError::Request {
                message: e.to_string(),
            }
        })?;
    let uniform_kl = kl_inputs.map(|(logits, targets, ruled_out)| {
        let prior = UniformPrior {
            targets,
            logprob: fused.logprob.clone(),
            ruled_out,
            allowed_counts: allowed_counts.clone(),
            temperature,
        };
        spread.apply(uniform_prior_kl(logits, prior))
    });
    let (logprobs, entropy) = (spread.apply(fused.logprob), spread.apply(fused.entropy));
    Ok(ResponseLogProbs {
        logprobs,
        entropy,
        token_index,
        uniform_kl,
    })
}

/// What [`uniform_prior_kl`] needs besides the logits: each row's target and its log-prob
/// (from the fused kernel), the ruled-out tokens, and each row's allowed-token count |A|.
struct UniformPrior<B: Backend> {
    targets: Tensor<B, 1, Int>,
    logprob: Tensor<B, 1>,
    ruled_out: Option<Tensor<B, 2, Bool>>,
    allowed_counts: Vec<f64>,
    temperature: f32,
}

/// `KL(U_A ‖ π) = −ln|A| − (1/|A|)·Σ_{a∈A} ln π(a)` per row of `logits` (ruled-out entries
/// already −∞), `π = softmax(z / T)`; its gradient is `(π − 1/|A|) / T` on `A`.
///
/// With ln π(a) = z_a/T − lse and lse = z_y/T − ln π(y) for the row's target y (whose
/// log-prob the fused kernel already gives, with the gradient (δ_y − π)/T), this is
/// `lse − (1/|A|)·Σ_{a∈A} z_a/T − ln|A|`: the row sums of the logits are a matrix product
/// with a column of ones (summed in vocabulary order, the same bits on every CPU; burn's
/// `log_softmax` and `sum_dim` add across the CPU's SIMD width), and ln|A| is computed on
/// the host.
fn uniform_prior_kl<B: KernelBackend>(
    logits: Tensor<B, 2>,
    prior: UniformPrior<B>,
) -> Tensor<B, 1> {
    let [m, vocab] = logits.dims();
    let device = logits.device();
    let t = prior.temperature;
    // Half-precision logits (mixed precision) are summed in the log-probs' f32: a bf16 sum
    // over a vocabulary keeps 3 digits, an f16 one overflows past 65,504.
    let logits = crate::qwen2::compute_dtype::like(logits, prior.logprob.dtype());
    let target_logits = logits
        .clone()
        .gather(1, prior.targets.reshape([m, 1]))
        .reshape([m]);
    let lse = target_logits.div_scalar(t) - prior.logprob;
    // −∞ logits of ruled-out tokens become 0 (and get no gradient) before the sum.
    let logits = match prior.ruled_out {
        Some(ruled_out) => logits.mask_fill(ruled_out, 0.0),
        None => logits,
    };
    let sums = roll_flow_kernels::matmul(logits, Tensor::ones([vocab, 1], &device)).reshape([m]);
    let per_row = |f: fn(f64) -> f64| {
        let values: Vec<f32> = prior.allowed_counts.iter().map(|&c| f(c) as f32).collect();
        Tensor::<B, 1>::from_data(TensorData::new(values, [m]), &device)
    };
    lse - sums * per_row(|c| 1.0 / c).div_scalar(t) - per_row(f64::ln)
}

/// Whether a guide allows exactly one token here (a forced token, log-prob 0).
fn is_forced(allowed: Option<&[u32]>) -> bool {
    allowed.is_some_and(|a| a.len() == 1)
}

/// Places the values of the decision tokens at their packed response positions, 0 at the
/// forced ones: `[values, 0]` gathered by index, so the gradient flows back to `values`.
struct Spread<B: Backend> {
    index: Option<Tensor<B, 1, Int>>,
}

impl<B: Backend> Spread<B> {
    fn new(decisions: &[usize], n: usize, device: &B::Device) -> Self {
        if decisions.len() == n {
            return Spread { index: None };
        }
        let zero_slot = decisions.len() as i64;
        let mut index = vec![zero_slot; n];
        for (k, &i) in decisions.iter().enumerate() {
            index[i] = k as i64;
        }
        let index = Tensor::from_data(TensorData::new(index, [n]), device);
        Spread { index: Some(index) }
    }

    fn apply(&self, values: Tensor<B, 1>) -> Tensor<B, 1> {
        match &self.index {
            None => values,
            Some(index) => {
                let zero = Tensor::zeros([1], &values.device());
                Tensor::cat(vec![values, zero], 0).select(0, index.clone())
            }
        }
    }
}

/// Checks `allowed` (one entry per response token): as many sets as tokens, ids inside the
/// vocabulary, each token among its allowed set.
fn check_allowed(
    allowed: &[Option<&[u32]>],
    targets: &[i64],
    vocab: usize,
) -> Result<(), ModelError> {
    let bad = |message: String| Err(ModelError::Request { message });
    if allowed.len() != targets.len() {
        return bad(format!(
            "guided log-probs: {} allowed sets for {} response tokens",
            allowed.len(),
            targets.len()
        ));
    }
    for (i, (set, &target)) in allowed.iter().zip(targets).enumerate() {
        let Some(set) = set else { continue };
        if let Some(t) = set.iter().find(|&&t| t as usize >= vocab) {
            return bad(format!(
                "guided log-probs: allowed token id {t} is outside the vocabulary (size {vocab})"
            ));
        }
        if !set.contains(&(target as u32)) {
            return bad(format!(
                "guided log-probs: response token {i} (id {target}) is not among its allowed \
                 tokens {set:?}"
            ));
        }
    }
    Ok(())
}

/// The `[n * vocab]` ruled-out flags of checked `allowed` sets, or `None` when no token is
/// constrained.
fn guide_mask(allowed: &[Option<&[u32]>], targets: &[i64], vocab: usize) -> Option<Vec<bool>> {
    if allowed.iter().all(Option::is_none) {
        return None;
    }
    let mut mask = vec![false; targets.len() * vocab];
    for (i, set) in allowed.iter().enumerate() {
        let Some(set) = set else { continue };
        let row = &mut mask[i * vocab..(i + 1) * vocab];
        row.fill(true);
        for &t in *set {
            row[t as usize] = false;
        }
    }
    Some(mask)
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

#[cfg(test)]
#[path = "logprob_tests.rs"]
mod tests;
