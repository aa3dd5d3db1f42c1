//! The model rows of `bench/gpu.rs`: the Qwen2.5-0.5B shape (24 layers, dim 896, 14 heads,
//! 2 KV heads, FFN 4,864, vocab 151,936, tied embeddings) with random weights built on the
//! device; forward + backward tokens/s of −mean log π over packed sequences and KV-cache
//! generation tokens/s, each with its FLOP/s and the fraction of the peak.

use std::hint::black_box;
use std::time::Instant;

use burn::backend::Autodiff;
use burn::tensor::DType;
use roll_flow_kernels::KernelBackend;
use roll_flow_model::config::{Qwen2Config, TinyArch};
use roll_flow_model::generate::{ContinuousBatcher, GenerationRequest, SamplingParams};
use roll_flow_model::logprob::response_logprobs;
use roll_flow_model::packed::PackedSequences;
use roll_flow_model::Qwen2CausalLm;
use serde_json::{json, Value};

use super::{median_s, sync, Sizes};

/// The model config at the given shape with random weights.
fn model_config(s: Sizes) -> Qwen2Config {
    let (layers, dim, heads, kv_heads, ffn, vocab) = s.model;
    let arch = TinyArch {
        layers,
        dim,
        heads,
        kv_heads: Some(kv_heads),
        ffn_dim: Some(ffn),
        vocab: Some(vocab),
        max_positions: 4096,
        rope_theta: 1e6,
        tie_embeddings: true,
        ..TinyArch::default()
    };
    Qwen2Config::tiny(&arch, vocab)
}

/// Multiply-adds of one token's forward pass through the matrices (attention projections,
/// MLP, the output projection) plus attention over `context` earlier tokens: FLOPs are
/// twice that.
fn forward_flops_per_token(c: &Qwen2Config, context: usize) -> f64 {
    let (d, l) = (c.hidden_size as f64, c.num_hidden_layers as f64);
    let head_dim = c.head_dim() as f64;
    let kv = c.kv_heads() as f64 * head_dim;
    let per_layer = d * d * 2.0 + 2.0 * d * kv + 3.0 * d * c.intermediate_size as f64;
    let attention = 2.0 * context as f64 * d;
    2.0 * (l * (per_layer + attention) + d * c.vocab_size as f64)
}

fn tokens(n: usize, salt: usize, vocab: usize) -> Vec<u32> {
    (0..n)
        .map(|i| ((i * 7919 + salt * 104_729) % (vocab - 3) + 3) as u32)
        .collect()
}

/// The shapes of one model measurement: training (sequences, length) and generation
/// (batch, prompt length, new tokens), and the compute dtype (`None`: f32; bf16 or f16:
/// mixed precision, the weights in f32, as a pipeline's `precision: Bf16` runs).
#[derive(Clone, Copy)]
pub struct ModelShapes {
    pub train: (usize, usize),
    pub generate: (usize, usize, usize),
    pub compute: Option<DType>,
}

/// Forward + backward tokens/s of −mean log π over `shapes.train` sequences, and generation
/// tokens/s, on backend `B` (autodiff over it for training).
pub fn model_rows<B: KernelBackend>(
    device: &B::Device,
    s: Sizes,
    shapes: ModelShapes,
    label: &str,
    peak_flops: f64,
) -> Vec<Value> {
    let config = model_config(s);
    let (batch, len) = shapes.train;
    let model =
        Qwen2CausalLm::<Autodiff<B>>::random(&config, 0, device).with_compute_dtype(shapes.compute);
    let sequences: Vec<Vec<u32>> = (0..batch)
        .map(|i| tokens(len, i, config.vocab_size))
        .collect();
    let packed = PackedSequences::from_sequences(&sequences);
    let mask: Vec<bool> = (0..packed.tokens.len())
        .map(|t| packed.locate(t).1 > 0)
        .collect();
    let step = || {
        let out = response_logprobs(&model, &packed, &mask, 1.0).expect("log-probs");
        let grads = out.logprobs.mean().neg().backward();
        black_box(grads);
        sync::<B>(device);
    };
    let train_s = median_s(s.reps.min(3), step);
    let train_tokens = (batch * len) as f64;
    let train_flops = 3.0 * train_tokens * forward_flops_per_token(&config, len / 2);
    drop(model);
    // Generation as a pipeline's rollout runs it: on the published copy, whose weights are
    // stored in the compute dtype.
    let model = Qwen2CausalLm::<B>::random(&config, 0, device)
        .with_compute_dtype(shapes.compute)
        .with_params_in_compute_dtype();
    let (gen_batch, prompt, new) = shapes.generate;
    let generate = |new: usize| {
        let mut batcher = ContinuousBatcher::<B>::new(gen_batch, device);
        for i in 0..gen_batch {
            let request = GenerationRequest {
                prompt: tokens(prompt, i, config.vocab_size),
                max_new_tokens: new,
                sampling: SamplingParams::greedy(),
                stop_tokens: vec![],
                seed: i as u64,
                guide: None,
            };
            batcher.submit(&model, request).expect("a request");
        }
        let outputs = batcher.run_to_completion(&model);
        outputs.iter().map(|o| o.tokens.len()).sum::<usize>()
    };
    // A short run compiles the kernels; the measured one is timed once (at batch 128 and
    // 128 new tokens a second run would cost as much as the rest of the bench).
    generate(4);
    sync::<B>(device);
    let started = Instant::now();
    let generated = generate(new);
    sync::<B>(device);
    let generate_s = started.elapsed().as_secs_f64();
    let gen_flops = generated as f64 * forward_flops_per_token(&config, prompt + new / 2);
    let rows = [
        (
            "train fwd+bwd",
            train_tokens / train_s,
            train_flops / train_s,
            format!("{batch}×{len}"),
        ),
        (
            "generate",
            generated as f64 / generate_s,
            gen_flops / generate_s,
            format!("batch {gen_batch}, {prompt}+{new}"),
        ),
    ];
    rows.into_iter()
        .map(|(what, tokens_per_s, flops, shape)| {
            println!(
                "| {what} {label} ({shape}) | {tokens_per_s:.0} tok/s | {:.1} TFLOP/s | {:.1}% |",
                flops / 1e12,
                100.0 * flops / peak_flops
            );
            json!({"what": what, "dtype": label, "shape": shape, "tokens_per_s": tokens_per_s,
                   "tflops": flops / 1e12, "fraction_of_peak": flops / peak_flops})
        })
        .collect()
}
