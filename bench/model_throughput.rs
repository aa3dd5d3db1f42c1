//! Model throughput on CPU: training (forward + backward tokens/s) and KV-cache generation
//! (tokens/s at batch 32) of the Tiny Qwen2, on burn's `flex` and `ndarray` backends.
//! `bench/model_throughput_torch.py` measures PyTorch/transformers on the same config,
//! shapes and thread count; bench/README.md records both.
//!
//! Run: `cargo bench -p roll-flow --bench model_throughput` (RAYON_NUM_THREADS sets flex's
//! thread count; pass the same number to the PyTorch script).

use std::time::Instant;

use burn::backend::{Autodiff, Flex, NdArray};
use burn::tensor::backend::{AutodiffBackend, Backend};
use roll_flow_operators::model::config::{Qwen2Config, TinyArch};
use roll_flow_operators::model::generate::{ContinuousBatcher, GenerationRequest, SamplingParams};
use roll_flow_operators::model::logprob::response_logprobs;
use roll_flow_operators::model::packed::PackedSequences;
use roll_flow_operators::model::weights::to_f32_vec;
use roll_flow_operators::model::Qwen2CausalLm;

/// The shared shape (mirrored in model_throughput_torch.py).
const VOCAB: usize = 516;
const TRAIN_BATCH: usize = 8;
const TRAIN_LEN: usize = 128;
const TRAIN_ITERS: usize = 5;
const GEN_BATCH: usize = 32;
const GEN_PROMPT: usize = 16;
const GEN_NEW: usize = 64;

fn config() -> Qwen2Config {
    Qwen2Config::tiny(&TinyArch::default(), VOCAB)
}

/// Deterministic pseudo-random token ids.
fn tokens(n: usize, salt: usize) -> Vec<u32> {
    (0..n)
        .map(|i| ((i * 7919 + salt * 104_729) % (VOCAB - 3) + 3) as u32)
        .collect()
}

/// Forward + backward tokens/s of `-mean log π(token)` over every predicted token.
fn train_throughput<B: AutodiffBackend + roll_flow_kernels::KernelBackend>() -> f64 {
    let model = Qwen2CausalLm::<B>::random(&config(), 0, &Default::default());
    let sequences: Vec<Vec<u32>> = (0..TRAIN_BATCH).map(|s| tokens(TRAIN_LEN, s)).collect();
    let packed = PackedSequences::from_sequences(&sequences);
    let mask: Vec<bool> = (0..packed.tokens.len())
        .map(|t| packed.locate(t).1 > 0)
        .collect();
    let step = || {
        let out = response_logprobs(&model, &packed, &mask, 1.0).unwrap();
        let loss = out.logprobs.mean().neg();
        let grads = loss.backward();
        let g = model.model.norm.weight.grad(&grads).unwrap();
        to_f32_vec(&g)[0]
    };
    step();
    let start = Instant::now();
    for _ in 0..TRAIN_ITERS {
        std::hint::black_box(step());
    }
    (TRAIN_ITERS * TRAIN_BATCH * TRAIN_LEN) as f64 / start.elapsed().as_secs_f64()
}

/// Generated tokens/s: 32 prompts of 16 tokens, 64 greedy tokens each, KV cache.
fn generation_throughput<B: Backend>() -> f64 {
    let device = Default::default();
    let model = Qwen2CausalLm::<B>::random(&config(), 0, &device);
    let run = || {
        let mut batcher = ContinuousBatcher::<B>::new(GEN_BATCH, &device);
        for i in 0..GEN_BATCH {
            let request = GenerationRequest {
                prompt: tokens(GEN_PROMPT, i),
                max_new_tokens: GEN_NEW,
                sampling: SamplingParams::greedy(),
                stop_tokens: vec![],
                seed: i as u64,
                guide: None,
            };
            batcher.submit(&model, request).unwrap();
        }
        let outputs = batcher.run_to_completion(&model);
        outputs.iter().map(|o| o.tokens.len()).sum::<usize>()
    };
    run();
    let start = Instant::now();
    let generated = run();
    generated as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "all cores".into());
    println!("Tiny Qwen2 (layers 2, dim 128, heads 4, ffn 512, vocab {VOCAB}), threads: {threads}");
    println!("backend  train fwd+bwd tok/s ({TRAIN_BATCH}x{TRAIN_LEN})  generate tok/s (batch {GEN_BATCH}, {GEN_PROMPT}+{GEN_NEW})");
    let flex = (
        train_throughput::<Autodiff<Flex>>(),
        generation_throughput::<Flex>(),
    );
    println!("flex     {:>10.0}  {:>10.0}", flex.0, flex.1);
    let ndarray = (
        train_throughput::<Autodiff<NdArray>>(),
        generation_throughput::<NdArray>(),
    );
    println!("ndarray  {:>10.0}  {:>10.0}", ndarray.0, ndarray.1);
}
