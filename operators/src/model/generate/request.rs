//! What a caller asks the generator for and what it gets back.

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
    /// Generation ends after any of these tokens (which is kept in the output).
    pub stop_tokens: Vec<u32>,
    /// Seed of this request's own RNG.
    pub seed: u64,
}

/// Why a sequence stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// A stop token was generated.
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
