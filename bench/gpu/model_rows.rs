//! The model rows of `bench/gpu.rs`: the Qwen2.5-0.5B shape (24 layers, dim 896, 14 heads,
//! 2 KV heads, FFN 4,864, vocab 151,936, tied embeddings) with random weights built on the
//! device; forward + backward tokens/s of −mean log π over packed sequences and KV-cache
//! generation tokens/s, each with its FLOP/s and the fraction of the peak; and where the
//! seconds go: a training step's host queuing, sync wait and CubeCL device-thread CPU
//! time, and the generation's device-thread CPU time (run 6 found 1.8 s of kernel time in
//! a 6.5 s step).

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
    // Where a step's seconds go, which CubeCL's profiler (kernel times) cannot say: this
    // thread queuing the forward, then the backward (an op is handed to CubeCL's device
    // thread and returns before its kernel runs, so these are host time, plus waits where
    // that thread's queue is full), then waiting at the sync; and the CPU seconds of
    // CubeCL's device threads (`DS…`, which launch every op) while this thread queued and
    // while it waited (CUDA may spin a thread that waits for the device, so the second is
    // not all work).
    let phases = std::cell::RefCell::new(Vec::<[f64; 5]>::new());
    let step = || {
        let (started, device_cpu) = (Instant::now(), device_threads_cpu_s());
        let out = response_logprobs(&model, &packed, &mask, 1.0).expect("log-probs");
        let forward = started.elapsed().as_secs_f64();
        let grads = out.logprobs.mean().neg().backward();
        let backward = started.elapsed().as_secs_f64() - forward;
        let queued_cpu = device_threads_cpu_s();
        black_box(grads);
        sync::<B>(device);
        let wait = started.elapsed().as_secs_f64() - forward - backward;
        let waiting_cpu = device_threads_cpu_s() - queued_cpu;
        let queuing_cpu = queued_cpu - device_cpu;
        phases
            .borrow_mut()
            .push([forward, backward, wait, queuing_cpu, waiting_cpu]);
    };
    let train_s = median_s(s.reps.min(3), step);
    let phases = median_phases(&phases.borrow()[1..]);
    println!(
        "| train fwd+bwd {label}: queuing the forward {:.3} s, the backward {:.3} s, waiting at the sync {:.3} s; CubeCL's device threads on the CPU {:.3} s while queuing, {:.3} s while waiting (medians) |",
        phases[0], phases[1], phases[2], phases[3], phases[4]
    );
    let train_tokens = (batch * len) as f64;
    let train_flops = 3.0 * train_tokens * forward_flops_per_token(&config, len / 2);
    drop(model);
    // Generation as a pipeline's rollout runs it: on the published copy, whose weights are
    // stored in the compute dtype.
    let model = Qwen2CausalLm::<B>::random(&config, 0, device)
        .with_compute_dtype(shapes.compute)
        .for_generation();
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
    let (started, device_cpu) = (Instant::now(), device_threads_cpu_s());
    let generated = generate(new);
    sync::<B>(device);
    let generate_s = started.elapsed().as_secs_f64();
    let generate_device_cpu = device_threads_cpu_s() - device_cpu;
    println!(
        "| generate {label}: CubeCL's device threads on the CPU {generate_device_cpu:.3} s of the {generate_s:.3} s |"
    );
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
        .chain([
            json!({"what": "train fwd+bwd phases", "dtype": label,
                       "forward_queue_s": phases[0], "backward_queue_s": phases[1],
                       "sync_wait_s": phases[2], "device_threads_cpu_queuing_s": phases[3],
                       "device_threads_cpu_waiting_s": phases[4]}),
            json!({"what": "generate phases", "dtype": label, "seconds": generate_s,
                       "device_threads_cpu_s": generate_device_cpu}),
        ])
        .collect()
}

/// CPU seconds so far of this process's CubeCL device threads (cubecl-common names each
/// `DS{U|D}-{type}-{index}`), from Linux's `/proc/self/task/*/schedstat` (its first field:
/// nanoseconds on a CPU); NaN where that cannot be read.
fn device_threads_cpu_s() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    let read = |task: &std::path::Path, file: &str| std::fs::read_to_string(task.join(file));
    tasks
        .flatten()
        .map(|task| task.path())
        .filter(|task| read(task, "comm").is_ok_and(|name| name.starts_with("DS")))
        .map(|task| {
            let stat = read(&task, "schedstat").unwrap_or_default();
            let ns = stat
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<f64>().ok());
            ns.map_or(f64::NAN, |ns| ns / 1e9)
        })
        .sum()
}

/// Each part's median over the timed steps (the first, which compiles, left out).
fn median_phases(steps: &[[f64; 5]]) -> [f64; 5] {
    std::array::from_fn(|k| {
        let mut part: Vec<f64> = steps.iter().map(|p| p[k]).collect();
        part.sort_by(f64::total_cmp);
        part.get(part.len() / 2).copied().unwrap_or(f64::NAN)
    })
}
