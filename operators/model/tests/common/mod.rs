//! Shared helpers of the model tests: the CPU backend, fixture paths, running the model on
//! one sequence, generating one request on its own, and transformers' greedy continuations.
#![allow(dead_code)]

pub mod gguf_writer;

use std::path::PathBuf;

use roll_flow_model::generate::{
    ContinuousBatcher, GenerationOutput, GenerationRequest, SamplingParams,
};
use roll_flow_model::hf::load_causal_lm;
use roll_flow_model::qwen2::Qwen2CausalLm;

/// The backend the model tests run on: the CPU, or CUDA device 0 in a build with the
/// `cuda` feature (`bench/gpu/run.sh` runs the HF parity test that way on a GPU).
#[cfg(not(feature = "cuda"))]
pub type B = burn::backend::Flex;
#[cfg(feature = "cuda")]
pub type B = burn::backend::Cuda;

/// The device of [`B`].
#[cfg(not(feature = "cuda"))]
pub fn device() -> burn::tensor::Device<B> {
    Default::default()
}

/// The device of [`B`].
#[cfg(feature = "cuda")]
pub fn device() -> burn::tensor::Device<B> {
    burn::backend::cuda::CudaDevice { index: 0 }
}

/// The `tiny_qwen2` fixture model.
pub fn tiny_qwen2() -> Qwen2CausalLm<B> {
    load_causal_lm::<B>(&fixture("tiny_qwen2"), &device()).unwrap()
}

/// The `tiny_qwen2` weights with sliding-window attention as
/// `tests/fixtures/tiny_qwen2/expected_sliding_window.json` configures it, loaded from a copy
/// of the fixture whose config.json carries those fields (and no `layer_types`, so the layer
/// rule comes from `max_window_layers`); also returns that file's expectations.
pub fn tiny_qwen2_sliding_window() -> (Qwen2CausalLm<B>, serde_json::Value) {
    let (dir, expected) = sliding_window_fixture();
    let model = load_causal_lm::<B>(dir.path(), &device()).unwrap();
    (model, expected)
}

/// The copy of `tiny_qwen2` that [`tiny_qwen2_sliding_window`] loads (any backend can load
/// it while the directory lives), and the expectations file.
pub fn sliding_window_fixture() -> (tempfile::TempDir, serde_json::Value) {
    let source = fixture("tiny_qwen2");
    let text = std::fs::read_to_string(source.join("expected_sliding_window.json")).unwrap();
    let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    let config_path = dir.path().join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    let object = config.as_object_mut().unwrap();
    object.remove("layer_types");
    for (key, value) in expected["config"].as_object().unwrap() {
        object.insert(key.clone(), value.clone());
    }
    std::fs::write(&config_path, config.to_string()).unwrap();
    (dir, expected)
}

/// An unguided request with no stop tokens.
pub fn request(
    prompt: &[u32],
    max_new_tokens: usize,
    sampling: SamplingParams,
    seed: u64,
) -> GenerationRequest {
    GenerationRequest {
        prompt: prompt.to_vec(),
        max_new_tokens,
        sampling,
        stop_tokens: vec![],
        seed,
        guide: None,
    }
}

/// `request` generated on its own: a batch of one, nothing cached before it.
pub fn alone(model: &Qwen2CausalLm<B>, request: GenerationRequest) -> GenerationOutput {
    let mut batcher = ContinuousBatcher::<B>::new(1, &device());
    batcher.submit(model, request).unwrap();
    batcher.run_to_completion(model).pop().unwrap()
}

/// The fixture's prompts (`prompt_ids`), batched, each given `greedy_new_tokens` greedy
/// tokens: exactly transformers' `greedy` continuations.
pub fn greedy_generation_matches(model: &Qwen2CausalLm<B>, expected: &serde_json::Value) {
    let new_tokens = expected["greedy_new_tokens"].as_u64().unwrap() as usize;
    let mut batcher = ContinuousBatcher::<B>::new(8, &device());
    for prompt in expected["prompt_ids"].as_array().unwrap() {
        let request = request(&ids(prompt), new_tokens, SamplingParams::greedy(), 0);
        batcher.submit(model, request).unwrap();
    }
    let outputs = batcher.run_to_completion(model);
    let greedy = expected["greedy"].as_array().unwrap();
    assert!(!greedy.is_empty());
    assert_eq!(outputs.len(), greedy.len(), "one output per prompt");
    for (output, hf) in outputs.iter().zip(greedy) {
        assert_eq!(ids(hf).len(), new_tokens);
        assert_eq!(output.tokens, ids(hf));
    }
}

/// `tests/fixtures/<name>` of the workspace.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

/// The fixture's `expected.json`.
pub fn expected(name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(fixture(name).join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A JSON array of integers.
pub fn ids(value: &serde_json::Value) -> Vec<u32> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect()
}

/// A JSON matrix of numbers, flattened row-major.
pub fn matrix(value: &serde_json::Value) -> Vec<f32> {
    value
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| {
            row.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
        })
        .collect()
}

/// Logits `[len * vocab]` of one sequence, computed without a cache.
pub fn logits_of(model: &Qwen2CausalLm<B>, tokens: &[u32]) -> Vec<f32> {
    roll_flow_model::prompt_logits::logits_of(model, tokens, &device()).concat()
}

/// Largest absolute difference of two equally long slices.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The chat a reference file lists (`[{"role": .., "content": ..}, ..]`) as messages.
pub fn chat_messages(list: &serde_json::Value) -> Vec<roll_flow_model::chat_template::ChatMessage> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|m| {
            roll_flow_model::chat_template::ChatMessage::new(
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
            )
        })
        .collect()
}

/// Each of `got` within `tolerance` of `want`, relative to |want| where it exceeds 1.
pub fn assert_close(got: &[f32], want: &[f32], tolerance: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tolerance * w.abs().max(1.0),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}
