//! What one decode step copies between host and device (`roll_flow_kernels::host_transfer`),
//! on the CPU backend and, with `--features wgpu`, on wgpu (Mesa's lavapipe where there is
//! no GPU): the host path uploads the rotary tables and the mask whole and reads the
//! `[rows, vocab]` logits back; on a device the tables and the mask are built there from a
//! few hundred bytes, the draw runs there and one read of three numbers per row comes
//! back, with the same tokens.

mod common;

use common::{fixture, request};
use roll_flow_kernels::host_transfer::{transfers, Transfers};
use roll_flow_kernels::KernelBackend;
use roll_flow_model::generate::{ContinuousBatcher, GenerationOutput, SamplingParams};
use roll_flow_model::hf::load_causal_lm;

const PROMPTS: [&[u32]; 4] = [
    &[1, 337, 262, 201, 50, 301],
    &[50, 500, 482],
    &[25],
    &[7, 8, 9],
];
const NEW_TOKENS: usize = 6;

/// Four requests (two greedy, two sampled) on `device`, on the copy a pipeline generates
/// with (`for_generation`: on a device the projections that share an input side by side)
/// or, without `fused`, the loaded model itself: the copies of the second step (a decode
/// step with every row running and none finishing), the logits' width, and the outputs
/// once all finish.
fn decode_step<B: KernelBackend>(
    device: &B::Device,
    fused: bool,
) -> (Transfers, usize, Vec<GenerationOutput>) {
    let model = load_causal_lm::<B>(&fixture("tiny_qwen2"), device).unwrap();
    let model = match fused {
        true => model.for_generation(),
        false => model,
    };
    let attention = &model.model.layers[0].self_attn;
    assert_eq!(attention.qkv_weight.is_some(), fused && B::DEVICE_MEMORY);
    let mut batcher = ContinuousBatcher::<B>::new(PROMPTS.len(), device);
    for (i, prompt) in PROMPTS.iter().enumerate() {
        let sampling = match i % 2 {
            0 => SamplingParams::greedy(),
            _ => SamplingParams::default(),
        };
        let r = request(prompt, NEW_TOKENS, sampling, 40 + i as u64);
        batcher.submit(&model, r).unwrap();
    }
    assert!(
        batcher.step(&model).is_empty(),
        "first step: prefill and one decode"
    );
    let before = transfers();
    assert!(batcher.step(&model).is_empty(), "second step: one decode");
    let step = transfers().since(before);
    let mut outputs = batcher.run_to_completion(&model);
    outputs.sort_by_key(|o| o.id);
    (step, model.config.vocab_size, outputs)
}

/// The uploads of a decode step of the `tiny_qwen2` fixture (4 query and 2 key-value
/// heads of 16, no sliding window) over `rows` rows whose cache holds `keys` columns, as the
/// forward makes them on the host: the input ids (i64), the four rotary tables (cos and sin
/// for the query and the key heads, each `[rows, 1, heads, 16]`) and the attention mask
/// `[rows, 4, 1, keys]`.
fn host_forward_uploads(rows: u64, keys: u64) -> (u64, u64) {
    let (q_heads, kv_heads, head_dim) = (4, 2, 16);
    let ids = rows * 8;
    let rotary = rows * (2 * q_heads + 2 * kv_heads) * head_dim * 4;
    let mask = rows * q_heads * keys * 4;
    (6, ids + rotary + mask)
}

/// The same forward on a device, which expands the tables and computes the mask there: the
/// ids, one upload of cos and sin per row (`[2, rows, 1, 1, 8]` f32) and one of the mask's
/// columns (each row's first key, the `keys` key columns and the query's own, i64).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn device_forward_uploads(rows: u64, keys: u64) -> (u64, u64) {
    let ids = rows * 8;
    let rotary = 2 * rows * 8 * 4;
    let mask_columns = (rows + keys + 1) * 8;
    (3, ids + rotary + mask_columns)
}

/// The second step's cache: the longest prompt (6) and the two tokens decoded so far.
const KEYS: u64 = 8;

#[test]
fn the_host_path_reads_the_logits_back_once_per_decode_step() {
    let (step, vocab, outputs) = decode_step::<burn::backend::Flex>(&Default::default(), true);
    let rows = PROMPTS.len() as u64;
    let (uploads, upload_bytes) = host_forward_uploads(rows, KEYS);
    let want = Transfers {
        uploads,
        upload_bytes,
        downloads: 1,
        download_bytes: rows * vocab as u64 * 4,
    };
    assert_eq!(step, want);
    assert!(outputs.iter().all(|o| o.tokens.len() == NEW_TOKENS));
}

/// On a GPU backend the step builds its rotary tables and mask on the device (three uploads
/// of a few hundred bytes, not six of the full tables) and draws there: one more upload
/// (each row's 1/T, u and greedy flag) and one download of (token, log-prob, non-finite count) per row, not the logits;
/// every request gets the tokens the CPU's host sampler gives it, with log-probs within
/// 1e-4, and the generating copy's side-by-side products the separate products' tokens.
#[cfg(feature = "wgpu")]
#[test]
fn on_wgpu_a_decode_step_reads_back_three_numbers_a_row() {
    type W = burn::backend::wgpu::CubeBackend<burn::backend::wgpu::WgpuRuntime, f32, i32, u32>;
    a_device_decode_step_reads_back_three_numbers_a_row::<W>(&Default::default());
}

/// The same on CUDA device 0 (`bench/gpu/run.sh` runs it where a GPU is lent).
#[cfg(feature = "cuda")]
#[test]
fn on_cuda_a_decode_step_reads_back_three_numbers_a_row() {
    let device = burn::backend::cuda::CudaDevice { index: 0 };
    a_device_decode_step_reads_back_three_numbers_a_row::<burn::backend::Cuda>(&device);
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn a_device_decode_step_reads_back_three_numbers_a_row<D: KernelBackend>(device: &D::Device) {
    let (step, _, outputs) = decode_step::<D>(device, true);
    let rows = PROMPTS.len() as u64;
    let (uploads, upload_bytes) = device_forward_uploads(rows, KEYS);
    let want = Transfers {
        uploads: uploads + 1,
        upload_bytes: upload_bytes + rows * 3 * 4,
        downloads: 1,
        download_bytes: rows * 3 * 4,
    };
    assert_eq!(step, want);
    let (_, _, on_cpu) = decode_step::<burn::backend::Flex>(&Default::default(), true);
    for (gpu, cpu) in outputs.iter().zip(&on_cpu) {
        assert_eq!(gpu.tokens, cpu.tokens, "request {:?}", gpu.id);
        for (a, b) in gpu.logprobs.iter().zip(&cpu.logprobs) {
            assert!((a - b).abs() < 1e-4, "request {:?}: {a} vs {b}", gpu.id);
        }
    }
    // The side-by-side products give what the separate ones give: the same tokens,
    // log-probs within 1e-5 (each output column is the same dot product; the products'
    // tiles may split it differently).
    let (_, _, separate) = decode_step::<D>(device, false);
    for (fused, separate) in outputs.iter().zip(&separate) {
        assert_eq!(fused.tokens, separate.tokens, "request {:?}", fused.id);
        for (a, b) in fused.logprobs.iter().zip(&separate.logprobs) {
            assert!((a - b).abs() < 1e-5, "request {:?}: {a} vs {b}", fused.id);
        }
    }
}
