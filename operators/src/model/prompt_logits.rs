//! The logits a model gives every position of a prompt: `roll-flow generate --print-logits`,
//! the number a user compares against another implementation (transformers) to check that
//! a model directory, such as an `export --hf` one, means the same model there.

use std::path::Path;

use burn::tensor::{Int, Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use super::error::ModelError;
use super::hf::load_model_dir;
use super::quick_generate::prompt_text;
use super::qwen2::{AttentionLayout, Qwen2CausalLm};
use super::weights::to_f32_vec;

/// A prompt's token ids and the logits after each of them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PromptLogits {
    pub prompt_ids: Vec<u32>,
    /// `[prompt length][vocab size]`.
    pub logits: Vec<Vec<f32>>,
}

/// Logits of one sequence, every position, without a KV cache.
pub fn logits_of<B: KernelBackend>(
    model: &Qwen2CausalLm<B>,
    tokens: &[u32],
    device: &B::Device,
) -> Vec<Vec<f32>> {
    if tokens.is_empty() {
        return Vec::new();
    }
    let ids: Vec<i64> = tokens.iter().map(|&t| i64::from(t)).collect();
    let input = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [1, tokens.len()]), device);
    let logits = model.forward(input, &AttentionLayout::right_padded(1, tokens.len()), None);
    let flat = to_f32_vec(&logits);
    flat.chunks(flat.len() / tokens.len())
        .map(<[f32]>::to_vec)
        .collect()
}

/// Loads `dir` and returns the logits of `prompt` (wrapped in the chat template as one
/// user message when `chat`).
pub fn prompt_logits_in_model_dir<B: KernelBackend>(
    dir: &Path,
    prompt: &str,
    chat: bool,
    device: &B::Device,
) -> Result<PromptLogits, ModelError> {
    let (model, tokenizer) = load_model_dir::<B>(dir, device)?;
    let prompt_ids = tokenizer.encode(&prompt_text(&tokenizer, prompt, chat)?)?;
    Ok(PromptLogits {
        logits: logits_of(&model, &prompt_ids, device),
        prompt_ids,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_of_vocabulary_logits_per_prompt_token() {
        type B = burn::backend::Flex;
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny_qwen2");
        let out = prompt_logits_in_model_dir::<B>(&dir, "Hello world", false, &Default::default())
            .unwrap();
        assert!(!out.prompt_ids.is_empty());
        assert_eq!(out.logits.len(), out.prompt_ids.len());
        let config = crate::model::hf::read_config(&dir).unwrap();
        assert!(out.logits.iter().all(|row| row.len() == config.vocab_size));
    }
}
