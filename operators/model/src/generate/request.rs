//! What a caller asks the generator for and what it gets back.

use std::sync::Arc;

use burn::tensor::backend::Backend;

use crate::error::ModelError;
use crate::qwen2::Qwen2CausalLm;

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
    /// The model's logits for the next token were not finite (NaN or infinite: its
    /// weights have diverged); the reply holds the tokens before.
    NonFinite,
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

impl GenerationRequest {
    /// Checks the request against the model: a non-empty prompt and token budget, token ids
    /// inside the vocabulary (the guide's too), and room in the model's context.
    pub fn validate<B: Backend>(&self, model: &Qwen2CausalLm<B>) -> Result<(), ModelError> {
        let request = self;
        let bad = |message: String| Err(ModelError::Request { message });
        request.sampling.validate()?;
        if request.prompt.is_empty() {
            return bad("the prompt is empty".into());
        }
        if request.max_new_tokens == 0 {
            return bad("max_new_tokens must be at least 1".into());
        }
        let vocab = model.config.vocab_size;
        if let Some(t) = request.prompt.iter().find(|&&t| t as usize >= vocab) {
            return bad(format!(
                "prompt token id {t} is outside the vocabulary (size {vocab})"
            ));
        }
        if let Some(guide) = &request.guide {
            let mut tokens = guide.choices().iter().flatten();
            if let Some(t) = tokens.find(|&&t| t as usize >= vocab) {
                return bad(format!(
                    "guided choice token id {t} is outside the vocabulary (size {vocab})"
                ));
            }
        }
        let context = model.config.max_position_embeddings;
        if (request.prompt.len()).saturating_add(request.max_new_tokens) > context {
            return bad(format!(
                "prompt ({} tokens) + max_new_tokens ({}) exceeds the model's context of {context} positions",
                request.prompt.len(),
                request.max_new_tokens
            ));
        }
        Ok(())
    }
}
