//! Shared helpers of the model tests: the CPU backend, fixture paths, and running the model
//! on one sequence.
#![allow(dead_code)]

use std::path::PathBuf;

use roll_flow_operators::model::qwen2::Qwen2CausalLm;

/// The default CPU backend.
pub type B = burn::backend::Flex;

/// The CPU device.
pub fn device() -> burn::tensor::Device<B> {
    Default::default()
}

/// `tests/fixtures/<name>` of the workspace.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
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
    roll_flow_operators::model::prompt_logits::logits_of(model, tokens, &device()).concat()
}

/// Largest absolute difference of two equally long slices.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}
