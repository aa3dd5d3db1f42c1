//! Model throughput on CPU: training (forward + backward tokens/s, the batch in one pass and
//! as two micro-batches trained concurrently, as `ActorStep` runs micro-batches) and
//! KV-cache generation (tokens/s at batch 32) of the Tiny Qwen2, on burn's `flex` and
//! `ndarray` backends.
//! `bench/model_throughput_torch.py` measures PyTorch/transformers on the same config,
//! shapes and thread count; bench/history/model_throughput.md records both.
//!
//! Run: `cargo bench -p roll-flow --bench model_throughput` (RAYON_NUM_THREADS sets flex's
//! thread count; pass the same number to the PyTorch script). `MODEL_BENCH_BACKENDS=flex` (or
//! `ndarray`) runs one backend only, e.g. under `perf record`.
//!
//! Each figure is given twice: per wall-clock second (what the README compares) and per
//! second of process CPU time (user + system, from `/proc/self/stat`), which other jobs on a
//! shared machine disturb far less; rayon's idle spinning is included in the latter.

use std::time::Instant;

use burn::backend::{Autodiff, Flex, NdArray};
use burn::optim::GradientsAccumulator;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use roll_flow_model::config::{Qwen2Config, TinyArch};
use roll_flow_model::generate::{ContinuousBatcher, GenerationRequest, SamplingParams};
use roll_flow_model::logprob::response_logprobs;
use roll_flow_model::packed::PackedSequences;
use roll_flow_model::weights::to_f32_vec;
use roll_flow_model::Qwen2CausalLm;
use roll_flow_operators::runtime::concurrent::part_gradients;

/// The shared shape (mirrored in model_throughput_torch.py).
const VOCAB: usize = 516;
const TRAIN_BATCH: usize = 8;
const TRAIN_LEN: usize = 128;
const TRAIN_ITERS: usize = 20;
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

/// Wall-clock and CPU throughput of `items` processed by `f`.
#[derive(Clone, Copy)]
struct Rate {
    wall: f64,
    cpu: f64,
}

fn measure(items: impl FnOnce() -> usize) -> Rate {
    let (start, cpu_start) = (Instant::now(), cpu_seconds());
    let n = items() as f64;
    let (wall, cpu) = (start.elapsed().as_secs_f64(), cpu_seconds() - cpu_start);
    Rate {
        wall: n / wall,
        cpu: if cpu > 0.0 { n / cpu } else { f64::NAN },
    }
}

/// User + system CPU seconds of this process (0 where `/proc` is missing).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<f64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse().ok())
        .collect();
    // Linux reports clock ticks; USER_HZ is 100 on every mainstream configuration.
    fields.iter().sum::<f64>() / 100.0
}

/// The batch in `parts` packed micro-batches, each with its response mask (every token
/// after the first of its sequence).
fn micro_batches(parts: usize) -> Vec<(PackedSequences, Vec<bool>)> {
    let sequences: Vec<Vec<u32>> = (0..TRAIN_BATCH).map(|s| tokens(TRAIN_LEN, s)).collect();
    sequences
        .chunks(TRAIN_BATCH / parts)
        .map(|chunk| {
            let packed = PackedSequences::from_sequences(chunk);
            let mask = (0..packed.tokens.len())
                .map(|t| packed.locate(t).1 > 0)
                .collect();
            (packed, mask)
        })
        .collect()
}

/// Forward + backward tokens/s of `-mean log π(token)` over every predicted token, the
/// batch in `parts` micro-batches trained concurrently as `ActorStep` does
/// (`training::concurrent::part_gradients`; equal parts, so each is scaled by 1/parts and
/// the summed gradient is the whole batch's).
fn train_throughput<B>(parts: usize) -> Rate
where
    B: AutodiffBackend + roll_flow_kernels::KernelBackend,
    Qwen2CausalLm<B>: Sync,
{
    let model = Qwen2CausalLm::<B>::random(&config(), 0, &Default::default());
    let batches = micro_batches(parts);
    let scales = vec![1.0 / parts as f32; parts];
    let loss = |m: &Qwen2CausalLm<B>, (packed, mask): &(PackedSequences, Vec<bool>)| {
        let out = response_logprobs(m, packed, mask, 1.0).map_err(|e| e.to_string())?;
        Ok((out.logprobs.mean().neg(), ()))
    };
    let step = || {
        let grads = part_gradients(&model, &batches, &scales, true, loss).unwrap();
        let mut sum = GradientsAccumulator::<Qwen2CausalLm<B>>::new();
        for (g, ()) in grads {
            sum.accumulate(&model, g);
        }
        let g: Tensor<B::InnerBackend, 1> = sum.grads().get(model.model.norm.weight.id).unwrap();
        to_f32_vec(&g)[0]
    };
    step();
    measure(|| {
        for _ in 0..TRAIN_ITERS {
            std::hint::black_box(step());
        }
        TRAIN_ITERS * TRAIN_BATCH * TRAIN_LEN
    })
}

/// Generated tokens/s: 32 prompts of 16 tokens, 64 greedy tokens each, KV cache.
fn generation_throughput<B: roll_flow_kernels::KernelBackend>() -> Rate {
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
    measure(run)
}

fn main() {
    // glibc with raised mmap/trim thresholds (ROLL_FLOW_DEFAULT_MALLOC=1 keeps its defaults);
    // the roll-flow binary itself uses mimalloc (src/allocator.rs).
    roll_flow_kernels::cpu::keep_freed_buffers_for_reuse();
    let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "all cores".into());
    println!("Tiny Qwen2 (layers 2, dim 128, heads 4, ffn 512, vocab {VOCAB}), threads: {threads}");
    println!("backend  train fwd+bwd tok/s ({TRAIN_BATCH}x{TRAIN_LEN}: one pass, 2 concurrent micro-batches)  generate tok/s (batch {GEN_BATCH}, {GEN_PROMPT}+{GEN_NEW})   [per CPU-second: the same three]");
    let only = std::env::var("MODEL_BENCH_BACKENDS").unwrap_or_default();
    let run = |name: &str| only.is_empty() || only.split(',').any(|b| b == name);
    if run("flex") {
        let flex = (
            train_throughput::<Autodiff<Flex>>(1),
            train_throughput::<Autodiff<Flex>>(2),
            generation_throughput::<Flex>(),
        );
        report("flex", flex);
    }
    if run("ndarray") {
        let ndarray = (
            train_throughput::<Autodiff<NdArray>>(1),
            train_throughput::<Autodiff<NdArray>>(2),
            generation_throughput::<NdArray>(),
        );
        report("ndarray", ndarray);
    }
}

fn report(name: &str, (train, train_parts, generate): (Rate, Rate, Rate)) {
    println!(
        "{name:<8} {:>10.0}  {:>10.0}  {:>10.0}   [{:.0}, {:.0}, {:.0}]",
        train.wall, train_parts.wall, generate.wall, train.cpu, train_parts.cpu, generate.cpu
    );
}
