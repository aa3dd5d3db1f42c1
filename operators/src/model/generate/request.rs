//! What a caller asks the generator for and what it gets back.

use std::sync::Arc;

use super::guide::AnswerChoices;
use super::sampler::SamplingParams;

/// Identifies a submitted request within one [`super::ContinuousBatcher`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// One sequence to continue.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerationRequest {
    /// Prompt token ids (non-empty).
    pub prompt: Vec<u32>,
    /// Most tokens to generate (at least 1).
    pub max_new_tokens: usize,
    /// Temperature, top-p, top-k.
    pub sampling: SamplingParams,
    /// Generation ends after any of these tokens (which is kept in the output). Not used
    /// when `guide` is set: a guided reply ends when it completes a choice.
    pub stop_tokens: Vec<u32>,
    /// Seed of this request's own RNG.
    pub seed: u64,
    /// Constrains the reply to one of these token sequences (guided choice): each token is
    /// sampled among the tokens the trie allows after the reply so far, and its log-prob is
    /// the one under that restricted distribution. The reply ends with
    /// [`FinishReason::Stop`] once it is a whole choice, or with [`FinishReason::Length`] if
    /// `max_new_tokens` (smaller than [`AnswerChoices::longest`]) runs out first.
    pub guide: Option<Arc<AnswerChoices>>,
}

/// Why a sequence stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// A stop token was generated, or a guided reply completed a choice.
    Stop,
    /// `max_new_tokens` were generated, or the model's context is full.
    Length,
    /// The caller cancelled the request.
    Cancelled,
}

/// A finished request.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerationOutput {
    /// The request this answers.
    pub id: RequestId,
    /// Generated token ids (without the prompt).
    pub tokens: Vec<u32>,
    /// Behaviour log-prob of each generated token.
    pub logprobs: Vec<f32>,
    /// Why generation ended.
    pub finish: FinishReason,
}
