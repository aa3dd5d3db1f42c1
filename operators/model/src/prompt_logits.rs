//! The logits a model gives every position of a prompt: `roll-flow generate --print-logits`,
//! the number a user compares against another implementation (transformers) to check that
//! a model directory, such as an `export --hf` one, means the same model there.

use std::path::Path;

use burn::tensor::{Int, Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use super::build::load_model_path;
use super::error::ModelError;
use super::quick_generate::{prompt_ids, prompt_text};
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
    let (model, tokenizer) = load_model_path::<B>(dir, device)?;
    let prompt_ids = prompt_ids(&tokenizer, &prompt_text(&tokenizer, prompt, chat)?, chat)?;
    Ok(PromptLogits {
        logits: logits_of(&model, &prompt_ids, device),
        prompt_ids,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// transformers' prompt ids and logits of the `tiny_qwen2` fixture (`expected.json`,
    /// written by `tests/fixtures/make_tiny_qwen2.py`): the prompts as raw text, the first
    /// one already in chat form with its special tokens. Tolerance 1e-4 per logit.
    #[test]
    fn prompt_ids_and_logits_match_transformers() {
        type B = burn::backend::Flex;
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/tiny_qwen2");
        let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
        let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
        let prompts = expected["prompts"].as_array().unwrap();
        assert_eq!(prompts.len(), 3);
        for (k, prompt) in prompts.iter().enumerate() {
            let prompt = prompt.as_str().unwrap();
            let out =
                prompt_logits_in_model_dir::<B>(&dir, prompt, false, &Default::default()).unwrap();
            let ids: Vec<u32> = expected["prompt_ids"][k]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            assert_eq!(out.prompt_ids, ids, "prompt {k} ids");
            let rows = expected["logits"][k].as_array().unwrap();
            assert_eq!(
                out.logits.len(),
                rows.len(),
                "prompt {k}: one row per token"
            );
            for (t, (got, want)) in out.logits.iter().zip(rows).enumerate() {
                let want = want.as_array().unwrap();
                assert_eq!(got.len(), want.len(), "prompt {k} row {t}: vocabulary size");
                for (g, w) in got.iter().zip(want) {
                    let w = w.as_f64().unwrap() as f32;
                    assert!((g - w).abs() <= 1e-4, "prompt {k} row {t}: {g} vs HF {w}");
                }
            }
        }
    }
}
