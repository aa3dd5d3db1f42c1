//! Model throughput on CPU: training (forward + backward tokens/s, the batch in one pass and
//! as two micro-batches trained concurrently, as `ActorStep` runs micro-batches) and
//! KV-cache generation (tokens/s at batch 32) of a Qwen2 of a given shape, on burn's `flex`
//! (and, for the Tiny shape, `ndarray`) backend, with the achieved GFLOP/s of each figure
//! beside the machine's GEMM rate measured in the same run.
//! `bench/model_throughput_torch.py` measures PyTorch/transformers on the same config,
//! shapes and thread count; bench/history/model_throughput.md records both.
//!
//! Run: `cargo bench -p roll-flow --bench model_throughput -- SHAPE` with SHAPE `tiny` (the
//! default), `medium`, `qwen0.5b` or `smollm2` ([`Shape`]); RAYON_NUM_THREADS sets flex's thread count;
//! pass the same shape and number to the PyTorch script. `MODEL_BENCH_BACKENDS=flex` (or
//! `ndarray`) runs one backend only, e.g. under `perf record`; `MODEL_BENCH_PARTS=gen` (or
//! `train`) runs generation (or training) only; `MODEL_BENCH_GRADIENT_CHECKPOINTING=1`
//! trains with gradient checkpointing (`gradient_checkpointing: true`).
//!
//! Each figure is given twice: per wall-clock second (what the README compares) and per
//! second of process CPU time (user + system, from `/proc/self/stat`), which other jobs on a
//! shared machine disturb far less; rayon's idle spinning is included in the latter.

use std::time::Instant;

/// The roll-flow binary's allocator (mimalloc, freed pages kept), so the figures are the
/// binary's; `ROLL_FLOW_SYSTEM_MALLOC=1` measures glibc's malloc instead.
#[path = "../src/allocator.rs"]
mod allocator;

#[global_allocator]
static ALLOCATOR: allocator::BinaryAllocator = allocator::BinaryAllocator::new();

use burn::backend::{Autodiff, Flex, NdArray};
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, Tensor};
use roll_flow_model::config::{Qwen2Config, TinyArch};
use roll_flow_model::generate::{ContinuousBatcher, GenerationRequest, SamplingParams};
use roll_flow_model::logprob::response_logprobs;
use roll_flow_model::packed::PackedSequences;
use roll_flow_model::weights::to_f32_vec;
use roll_flow_model::Qwen2CausalLm;
use roll_flow_operators::runtime::concurrent::part_gradients;

/// The batch shapes, the same at every model shape (mirrored in model_throughput_torch.py).
const TRAIN_BATCH: usize = 8;
const TRAIN_LEN: usize = 128;
const GEN_BATCH: usize = 32;
const GEN_PROMPT: usize = 16;
const GEN_NEW: usize = 64;

/// A model shape (mirrored in model_throughput_torch.py's `SHAPES`).
struct Shape {
    name: &'static str,
    config: Qwen2Config,
    /// Timed training iterations (after one warm-up): fewer for larger models, so that a
    /// figure takes seconds to tens of seconds.
    train_iters: usize,
}

impl Shape {
    fn named(name: &str) -> Option<Shape> {
        let arch = |layers, dim, heads, kv_heads, ffn_dim, rope_theta| TinyArch {
            layers,
            dim,
            heads,
            kv_heads: Some(kv_heads),
            ffn_dim: Some(ffn_dim),
            rope_theta,
            ..TinyArch::default()
        };
        let (name, arch, vocab, train_iters) = match name {
            // The Tiny preset's defaults over the built-in tokenizer's 516 ids.
            "tiny" => ("tiny", TinyArch::default(), 516, 20),
            // The width the model issue measured first (issue 41).
            "medium" => ("medium", arch(4, 512, 8, 8, 2048, 1e4), 8192, 5),
            // Qwen2.5-0.5B's config.json, random weights.
            "qwen0.5b" => ("qwen0.5b", arch(24, 896, 14, 2, 4864, 1e6), 151_936, 1),
            // SmolLM2-135M-Instruct's shape (the smollm2_*.ron pipelines' model), random
            // weights, tied head; Qwen2's q/k/v biases where the Llama family has none.
            "smollm2" => ("smollm2", arch(30, 576, 9, 3, 1536, 1e5), 49_152, 2),
            _ => return None,
        };
        let config = Qwen2Config::tiny(&arch, vocab);
        Some(Shape {
            name,
            config,
            train_iters,
        })
    }

    fn vocab(&self) -> usize {
        self.config.vocab_size
    }

    /// Multiply-adds × 2 of one token's forward pass through the projections (attention's
    /// four, the MLP's three, the output head), attention excluded.
    fn dense_flops_per_token(&self) -> f64 {
        let c = &self.config;
        let (hidden, d) = (c.hidden_size, c.head_dim());
        let q = c.num_attention_heads * d;
        let kv = c.kv_heads() * d;
        let layer = hidden * (q + 2 * kv) + q * hidden + 3 * hidden * c.intermediate_size;
        2.0 * (c.num_hidden_layers * layer + hidden * c.vocab_size) as f64
    }

    /// FLOPs of one query's attention over `keys` keys (q·kᵀ and p·v in every layer).
    fn attention_flops(&self, keys: usize) -> f64 {
        let c = &self.config;
        4.0 * (c.num_hidden_layers * c.num_attention_heads * c.head_dim() * keys) as f64
    }

    /// FLOPs of one training step: the forward over every position of every sequence
    /// (causal: query `i` reads `i + 1` keys) and a backward of twice that.
    fn train_flops(&self) -> f64 {
        let forward: f64 = (0..TRAIN_LEN)
            .map(|i| self.dense_flops_per_token() + self.attention_flops(i + 1))
            .sum();
        3.0 * forward * TRAIN_BATCH as f64
    }

    /// FLOPs of the generation run: the prefill's last column only needs the output head,
    /// every other prompt position runs the decoder; each new token but the last is fed back.
    fn generation_flops(&self) -> f64 {
        let c = &self.config;
        let head = 2.0 * (c.hidden_size * c.vocab_size) as f64;
        let decoder = self.dense_flops_per_token() - head;
        let prefill: f64 = (0..GEN_PROMPT)
            .map(|i| decoder + self.attention_flops(i + 1))
            .sum::<f64>()
            + head;
        let decode: f64 = (GEN_PROMPT..GEN_PROMPT + GEN_NEW - 1)
            .map(|i| self.dense_flops_per_token() + self.attention_flops(i + 1))
            .sum();
        (prefill + decode) * GEN_BATCH as f64
    }
}

/// Deterministic pseudo-random token ids below `vocab`.
fn tokens(n: usize, salt: usize, vocab: usize) -> Vec<u32> {
    (0..n)
        .map(|i| ((i * 7919 + salt * 104_729) % (vocab - 3) + 3) as u32)
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
fn micro_batches(parts: usize, vocab: usize) -> Vec<(PackedSequences, Vec<bool>)> {
    let sequences: Vec<Vec<u32>> = (0..TRAIN_BATCH)
        .map(|s| tokens(TRAIN_LEN, s, vocab))
        .collect();
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
fn train_throughput<B>(shape: &Shape, parts: usize) -> Rate
where
    B: AutodiffBackend + roll_flow_kernels::KernelBackend,
    Qwen2CausalLm<B>: Sync,
{
    let checkpointing = std::env::var("MODEL_BENCH_GRADIENT_CHECKPOINTING").is_ok_and(|v| v == "1");
    let model = Qwen2CausalLm::<B>::random(&shape.config, 0, &Default::default())
        .with_gradient_checkpointing(checkpointing);
    let batches = micro_batches(parts, shape.vocab());
    let scales = vec![1.0 / parts as f32; parts];
    let loss = |m: &Qwen2CausalLm<B>, (packed, mask): &(PackedSequences, Vec<bool>)| {
        let out = response_logprobs(m, packed, mask, 1.0).map_err(|e| e.to_string())?;
        Ok((out.logprobs.mean().neg(), ()))
    };
    let step = || {
        let mut sum = GradientsAccumulator::<Qwen2CausalLm<B>>::new();
        let add = |(g, ()): (GradientsParams, ())| sum.accumulate(&model, g);
        part_gradients(&model, &batches, &scales, true, loss, add).unwrap();
        let g: Tensor<B::InnerBackend, 1> = sum.grads().get(model.model.norm.weight.id).unwrap();
        to_f32_vec(&g)[0]
    };
    step();
    measure(|| {
        for _ in 0..shape.train_iters {
            std::hint::black_box(step());
        }
        shape.train_iters * TRAIN_BATCH * TRAIN_LEN
    })
}

/// Generated tokens/s: 32 prompts of 16 tokens, 64 greedy tokens each, KV cache.
fn generation_throughput<B: roll_flow_kernels::KernelBackend>(shape: &Shape) -> Rate {
    let device = Default::default();
    let model = Qwen2CausalLm::<B>::random(&shape.config, 0, &device);
    let run = || {
        let mut batcher = ContinuousBatcher::<B>::new(GEN_BATCH, &device);
        for i in 0..GEN_BATCH {
            let request = GenerationRequest {
                prompt: tokens(GEN_PROMPT, i, shape.vocab()),
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

/// GFLOP/s of the dense layer (`roll_flow_kernels::linear`, the model's own GEMM path) on a
/// 1024 × 1024 × 1024 product, best of five: the machine's attainable rate at this thread
/// count, the denominator of the utilisation figures.
fn gemm_rate() -> f64 {
    const N: usize = 1024;
    let device = Default::default();
    let x = Tensor::<Flex, 2>::random([N, N], Distribution::Default, &device);
    let w = Tensor::<Flex, 2>::random([N, N], Distribution::Default, &device);
    (0..6)
        .map(|_| {
            let start = Instant::now();
            let y = roll_flow_kernels::linear(x.clone(), w.clone(), None);
            std::hint::black_box(to_f32_vec(&y.narrow(0, 0, 1))[0]);
            2.0 * (N * N * N) as f64 / start.elapsed().as_secs_f64() / 1e9
        })
        .skip(1)
        .fold(0.0, f64::max)
}

fn main() {
    // Under ROLL_FLOW_SYSTEM_MALLOC=1: glibc with raised mmap/trim thresholds, as the binary
    // sets them (ROLL_FLOW_DEFAULT_MALLOC=1 keeps glibc's defaults).
    roll_flow_kernels::cpu::keep_freed_buffers_for_reuse();
    let shape_name = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .unwrap_or_else(|| "tiny".into());
    let Some(shape) = Shape::named(&shape_name) else {
        eprintln!("unknown shape `{shape_name}`: use tiny, medium, qwen0.5b or smollm2");
        std::process::exit(2);
    };
    let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "all cores".into());
    let c = &shape.config;
    println!(
        "{} Qwen2 (layers {}, dim {}, heads {}/{} kv, ffn {}, vocab {}), threads: {threads}",
        shape.name,
        c.num_hidden_layers,
        c.hidden_size,
        c.num_attention_heads,
        c.kv_heads(),
        c.intermediate_size,
        c.vocab_size
    );
    let peak = gemm_rate();
    println!("GEMM 1024^3 through the dense layer: {peak:.1} GFLOP/s");
    println!("backend  train fwd+bwd tok/s ({TRAIN_BATCH}x{TRAIN_LEN}: one pass, 2 concurrent micro-batches)  generate tok/s (batch {GEN_BATCH}, {GEN_PROMPT}+{GEN_NEW})   [GFLOP/s, % of GEMM] [per CPU-second]");
    let env = |key: &str| std::env::var(key).unwrap_or_default();
    let picked = |list: &str, name: &str| list.is_empty() || list.split(',').any(|b| b == name);
    let (backends, parts) = (env("MODEL_BENCH_BACKENDS"), env("MODEL_BENCH_PARTS"));
    let (train, generate) = (picked(&parts, "train"), picked(&parts, "gen"));
    // ndarray is the reference CPU backend, far slower at real widths: Tiny only by default.
    let ndarray = picked(&backends, "ndarray") && (!backends.is_empty() || shape.name == "tiny");
    if picked(&backends, "flex") {
        report("flex", &shape, peak, rates::<Flex>(&shape, train, generate));
    }
    if ndarray {
        report(
            "ndarray",
            &shape,
            peak,
            rates::<NdArray>(&shape, train, generate),
        );
    }
}

/// Training (one pass, 2 concurrent micro-batches) and generation rates on backend `B`,
/// NaN for a half not run.
fn rates<B: roll_flow_kernels::KernelBackend>(
    shape: &Shape,
    train: bool,
    generate: bool,
) -> (Rate, Rate, Rate)
where
    Autodiff<B>: roll_flow_kernels::KernelBackend,
    Qwen2CausalLm<Autodiff<B>>: Sync,
{
    let skipped = Rate {
        wall: f64::NAN,
        cpu: f64::NAN,
    };
    let train_rate = |parts| match train {
        true => train_throughput::<Autodiff<B>>(shape, parts),
        false => skipped,
    };
    let (one_pass, two_parts) = (train_rate(1), train_rate(2));
    let generation = match generate {
        true => generation_throughput::<B>(shape),
        false => skipped,
    };
    (one_pass, two_parts, generation)
}

fn report(name: &str, shape: &Shape, peak: f64, (train, parts, generate): (Rate, Rate, Rate)) {
    let train_tokens = (TRAIN_BATCH * TRAIN_LEN) as f64;
    let gen_tokens = (GEN_BATCH * GEN_NEW) as f64;
    let gflops = |flops: f64, rate: Rate, tokens: f64| flops * rate.wall / tokens / 1e9;
    let g = [
        gflops(shape.train_flops(), train, train_tokens),
        gflops(shape.train_flops(), parts, train_tokens),
        gflops(shape.generation_flops(), generate, gen_tokens),
    ];
    println!(
        "{name:<8} {:>10.0}  {:>10.0}  {:>10.0}   [{:.1} {:.1} {:.1} GFLOP/s; {:.0}% {:.0}% {:.0}%] [{:.0}, {:.0}, {:.0}]",
        train.wall,
        parts.wall,
        generate.wall,
        g[0],
        g[1],
        g[2],
        100.0 * g[0] / peak,
        100.0 * g[1] / peak,
        100.0 * g[2] / peak,
        train.cpu,
        parts.cpu,
        generate.cpu
    );
}
