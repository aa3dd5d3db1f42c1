//! The text-in, text-out generation behind `roll-flow generate`: load a model directory or a
//! GGUF file, optionally wrap the prompt in the chat template, generate, decode. It is the
//! check a user runs on a model before training with it.

use std::path::Path;

use super::build::load_model_path;
use super::chat_template::ChatMessage;
use super::error::ModelError;
use super::generate::{ContinuousBatcher, GenerationOutput, GenerationRequest, SamplingParams};
use super::tokenizer::TextTokenizer;

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct QuickGenerate {
    /// The prompt text.
    pub prompt: String,
    /// Render the prompt as one user message with the chat template (and the assistant
    /// generation prompt) before tokenizing.
    pub chat: bool,
    /// Most tokens to generate.
    pub max_new_tokens: usize,
    /// Temperature and truncation; temperature 0 is greedy.
    pub sampling: SamplingParams,
    /// Seed of the sampler.
    pub seed: u64,
}

/// The completion and what produced it.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    /// The exact text fed to the tokenizer (after the chat template).
    pub prompt_text: String,
    /// Number of prompt tokens.
    pub prompt_tokens: usize,
    /// The generated text, special tokens removed.
    pub text: String,
    /// The raw generation (token ids, log-probs, finish reason).
    pub output: GenerationOutput,
}

/// The text to tokenize: `prompt`, or with `chat` the chat template rendering it as one
/// user message followed by the assistant's generation prompt.
pub fn prompt_text(
    tokenizer: &TextTokenizer,
    prompt: &str,
    chat: bool,
) -> Result<String, ModelError> {
    if chat {
        tokenizer.apply_chat_template(&[ChatMessage::new("user", prompt)], true)
    } else {
        Ok(prompt.to_string())
    }
}

/// The token ids of `text`, a [`prompt_text`]: the chat template's rendering as it is
/// written, or a raw prompt with the tokens its tokenizer adds around a text (a Llama 2
/// vocabulary's bos), as transformers tokenizes each.
pub fn prompt_ids(
    tokenizer: &TextTokenizer,
    text: &str,
    chat: bool,
) -> Result<Vec<u32>, ModelError> {
    match chat {
        true => tokenizer.encode(text),
        false => tokenizer.encode_adding_special_tokens(text),
    }
}

/// Loads `dir` (a model directory or a GGUF file) and completes the prompt.
pub fn complete_in_model_dir<B: roll_flow_kernels::KernelBackend>(
    dir: &Path,
    request: &QuickGenerate,
    device: &B::Device,
) -> Result<Completion, ModelError> {
    let (model, tokenizer) = load_model_path::<B>(dir, device)?;
    let prompt_text = prompt_text(&tokenizer, &request.prompt, request.chat)?;
    let prompt = prompt_ids(&tokenizer, &prompt_text, request.chat)?;
    let mut stop_tokens = tokenizer.stop_tokens();
    stop_tokens.extend(model.config.eos_token_ids());
    let mut batcher = ContinuousBatcher::<B>::new(1, device);
    batcher.submit(
        &model,
        GenerationRequest {
            prompt: prompt.clone(),
            max_new_tokens: request.max_new_tokens,
            sampling: request.sampling.clone(),
            stop_tokens,
            seed: request.seed,
            guide: None,
        },
    )?;
    let output = batcher
        .run_to_completion(&model)
        .pop()
        .expect("one request, one output");
    let text = tokenizer.decode(&output.tokens, true)?;
    Ok(Completion {
        prompt_text,
        prompt_tokens: prompt.len(),
        text,
        output,
    })
}
