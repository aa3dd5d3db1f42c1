//! The kernel and model figures of a GPU in one run (`bench/gpu/run.sh` runs it on the
//! lent GPU; the same command checks it on the CPU or wgpu with smaller sizes):
//!
//! ```sh
//! cargo bench --bench gpu --features cuda -- --device cuda --out DIR
//! cargo bench --bench gpu -- --device cpu --small --out DIR
//! ```
//!
//! - A memory-bandwidth ceiling measured in the same run: one elementwise pass over a large
//!   tensor (bytes read plus bytes written over its time).
//! - Kernels against the physical limit and against the unfused burn-ops path: the fused
//!   log-prob + entropy forward and forward + backward at 8,192 × 151,936 (f32 and bf16
//!   logits), GAE at 256 × 8,192, the PPO clip loss forward + backward at 16M tokens, a
//!   decode step's attention over 128 rows × 1,024 cached keys (`gpu/decode_attention.rs`).
//!   The bytes are the fewest each must move (inputs read once, outputs written once).
//! - The Qwen2.5-0.5B shape (24 layers, dim 896, 14 heads, 2 KV heads, FFN 4,864, vocab
//!   151,936, tied embeddings) with random weights built on the device: forward + backward
//!   tokens/s of −mean log π over 8 × 512 tokens, and KV-cache generation tokens/s at batch
//!   64 (16-token prompts, 64 greedy tokens), with the fraction of peak FLOP/s.
//!
//! Every timing is the median of several runs after a warm-up, each ended by a device
//! sync. Results go to stdout (a table) and `DIR/gpu_bench.json`.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use burn::tensor::{DType, Distribution, Int, Tensor, TensorData};
use roll_flow_kernels::{reference, ClipSettings, KernelBackend, LogProbSaved, PpoTokens};
use roll_flow_model::config::{Qwen2Config, TinyArch};
use roll_flow_model::generate::{ContinuousBatcher, GenerationRequest, SamplingParams};
use roll_flow_model::logprob::response_logprobs;
use roll_flow_model::packed::PackedSequences;
use roll_flow_model::Qwen2CausalLm;
use serde_json::{json, Value};

#[path = "gpu/decode_attention.rs"]
mod decode_attention;
#[path = "gpu/probe.rs"]
mod probe;

/// Problem sizes: the issue's full sizes, or small ones for checking the run on a CPU.
#[derive(Clone, Copy)]
struct Sizes {
    rows: usize,
    vocab: usize,
    gae_sequences: usize,
    gae_len: usize,
    ppo_tokens: usize,
    copy_floats: usize,
    /// The model: (layers, dim, heads, kv_heads, ffn, vocab).
    model: (usize, usize, usize, usize, usize, usize),
    train: (usize, usize),
    generate: (usize, usize, usize),
    /// The decode attention: (rows, cached keys).
    decode: (usize, usize),
    reps: usize,
}

const FULL: Sizes = Sizes {
    rows: 8192,
    vocab: 151_936,
    gae_sequences: 256,
    gae_len: 8192,
    ppo_tokens: 16 << 20,
    copy_floats: 1 << 30,
    model: (24, 896, 14, 2, 4864, 151_936),
    train: (8, 512),
    generate: (64, 16, 64),
    decode: (128, 1024),
    reps: 7,
};

const SMALL: Sizes = Sizes {
    rows: 256,
    vocab: 4096,
    gae_sequences: 16,
    gae_len: 512,
    ppo_tokens: 1 << 16,
    copy_floats: 1 << 22,
    model: (2, 128, 4, 2, 512, 4096),
    train: (2, 64),
    generate: (4, 8, 8),
    decode: (4, 64),
    reps: 3,
};

/// Peak dense FLOP/s of the H100 SXM by its datasheet: TF32 (CUDA runs f32 matmuls on the
/// tensor cores as TF32) and bf16. On other devices the fractions are against the same.
const PEAK_TF32: f64 = 494.7e12;
#[cfg(feature = "cuda")]
const PEAK_BF16: f64 = 989.4e12;

/// Times `f` (which must end in a device sync): the median of `reps` runs after one
/// warm-up, in seconds.
fn median_s(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[reps / 2]
}

fn sync<B: Backend>(device: &B::Device) {
    B::sync(device).expect("the device finishes its work");
}

/// One kernel figure: fused and unfused seconds, and the bytes the fused one must move.
fn kernel_row(name: &str, fused: f64, unfused: Option<f64>, bytes: f64, ceiling: f64) -> Value {
    let rate = bytes / fused;
    println!(
        "| {name} | {:.3} | {} | {:.0} | {:.0}% |",
        fused * 1e3,
        unfused.map_or("–".into(), |u| format!(
            "{:.3} ({:.1}x)",
            u * 1e3,
            u / fused
        )),
        rate / 1e9,
        100.0 * rate / ceiling
    );
    json!({
        "name": name, "fused_ms": fused * 1e3, "unfused_ms": unfused.map(|u| u * 1e3),
        "bytes": bytes, "gb_per_s": rate / 1e9, "fraction_of_copy": rate / ceiling,
    })
}

/// Bytes read + written per second by one elementwise pass over `n` floats.
fn copy_ceiling<B: Backend>(device: &B::Device, s: Sizes) -> f64 {
    let x = Tensor::<B, 1>::random([s.copy_floats], Distribution::Default, device);
    let seconds = median_s(s.reps, || {
        black_box(x.clone().add_scalar(1.0));
        sync::<B>(device);
    });
    (2 * 4 * s.copy_floats) as f64 / seconds
}

fn lcg(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 40) as f32 / (1u64 << 24) as f32
}

/// The fused log-prob + entropy (forward; forward + backward under autodiff) on logits of
/// `dtype`, and the unfused reference on f32.
fn logprob_rows<B: KernelBackend>(
    device: &B::Device,
    s: Sizes,
    dtype: DType,
    ceiling: f64,
) -> Vec<Value> {
    type A<B> = Autodiff<B>;
    let (n, v) = (s.rows, s.vocab);
    let elem = if dtype == DType::BF16 { 2 } else { 4 };
    let logits = Tensor::<B, 2>::random([n, v], Distribution::Normal(0.0, 3.0), device).cast(dtype);
    let targets: Vec<i64> = (0..n).map(|i| ((i * 7919) % v) as i64).collect();
    let targets = Tensor::<B, 1, Int>::from_data(TensorData::new(targets, [n]), device);
    let label = if dtype == DType::BF16 { "bf16" } else { "f32" };
    let fwd = median_s(s.reps, || {
        let out = roll_flow_kernels::token_logprob_entropy(logits.clone(), targets.clone(), 1.0)
            .expect("fused log-prob");
        black_box(out);
        sync::<B>(device);
    });
    let unfused = (dtype != DType::BF16).then(|| {
        median_s(s.reps.min(3), || {
            black_box(reference::logprob_entropy(
                logits.clone(),
                targets.clone(),
                1.0,
            ));
            sync::<B>(device);
        })
    });
    let bytes = (n * v * elem) as f64;
    let mut rows = vec![kernel_row(
        &format!("log-prob + entropy fwd, {n}×{v} {label}"),
        fwd,
        unfused,
        bytes,
        ceiling,
    )];
    // The kernels alone (the backend's primitives, no autodiff bookkeeping around them).
    let raw = median_s(s.reps, || {
        let (out, lse) = B::logprob_entropy_forward(
            logits.clone().into_primitive().tensor(),
            targets.clone().into_primitive(),
            1.0,
        );
        let grad = Tensor::<B, 2>::ones([n, 2], device)
            .into_primitive()
            .tensor();
        let saved = LogProbSaved {
            logits: logits.clone().into_primitive().tensor(),
            targets: targets.clone().into_primitive(),
            lse,
            out,
            temperature: 1.0,
        };
        black_box(B::logprob_entropy_backward(saved, grad));
        sync::<B>(device);
    });
    rows.push(kernel_row(
        &format!("log-prob + entropy kernels fwd then bwd, {n}×{v} {label}"),
        raw,
        None,
        3.0 * bytes,
        ceiling,
    ));
    let logits_a = Tensor::<A<B>, 2>::from_inner(logits.clone());
    let targets_a = Tensor::<A<B>, 1, Int>::from_inner(targets.clone());
    let backward = |fused: bool| {
        let x = logits_a.clone().require_grad();
        let (lp, h) = if fused {
            let out = roll_flow_kernels::token_logprob_entropy(x.clone(), targets_a.clone(), 1.0)
                .expect("fused log-prob");
            (out.logprob, out.entropy)
        } else {
            reference::logprob_entropy(x.clone(), targets_a.clone(), 1.0)
        };
        let g = (lp + h.mul_scalar(0.01)).sum().backward();
        black_box(x.grad(&g));
        sync::<B>(device);
    };
    let fwd_bwd = median_s(s.reps, || backward(true));
    let unfused_bwd = (dtype != DType::BF16).then(|| median_s(s.reps.min(3), || backward(false)));
    rows.push(kernel_row(
        &format!("log-prob + entropy fwd+bwd, {n}×{v} {label}"),
        fwd_bwd,
        unfused_bwd,
        3.0 * bytes,
        ceiling,
    ));
    rows
}

fn gae_row<B: KernelBackend>(device: &B::Device, s: Sizes, ceiling: f64) -> Value {
    let (seqs, len) = (s.gae_sequences, s.gae_len);
    let n = seqs * len;
    let offsets: Vec<usize> = (0..=seqs).map(|i| i * len).collect();
    let mut seed = 5u64;
    let mut column = |m: f32| {
        let v: Vec<f32> = (0..n).map(|_| m * (lcg(&mut seed) - 0.5)).collect();
        Tensor::<B, 1>::from_data(TensorData::new(v, [n]), device)
    };
    let (r, v) = (column(1.0), column(1.0));
    let mask = Tensor::<B, 1>::ones([n], device);
    let fused = median_s(s.reps, || {
        black_box(
            roll_flow_kernels::gae(r.clone(), v.clone(), mask.clone(), &offsets, 1.0, 0.95)
                .expect("fused GAE"),
        );
        sync::<B>(device);
    });
    // The unfused scan runs sequence by sequence, token by token: seconds at full size.
    let unfused = median_s(1, || {
        black_box(reference::gae(
            r.clone(),
            v.clone(),
            mask.clone(),
            &offsets,
            1.0,
            0.95,
        ));
        sync::<B>(device);
    });
    kernel_row(
        &format!("GAE, {seqs}×{len}"),
        fused,
        Some(unfused),
        (5 * n * 4) as f64,
        ceiling,
    )
}

fn ppo_rows<B: KernelBackend>(device: &B::Device, s: Sizes, ceiling: f64) -> Vec<Value> {
    type A<B> = Autodiff<B>;
    let n = s.ppo_tokens;
    let len = 512;
    let offsets: Vec<usize> = (0..=n / len).map(|i| i * len).collect();
    let mut seed = 11u64;
    let old: Vec<f32> = (0..n).map(|_| -5.0 * lcg(&mut seed)).collect();
    let logp: Vec<f32> = old
        .iter()
        .map(|&o| o + 0.4 * (lcg(&mut seed) - 0.5))
        .collect();
    let adv: Vec<f32> = (0..n).map(|_| lcg(&mut seed) - 0.5).collect();
    let column = |v: Vec<f32>| Tensor::<A<B>, 1>::from_data(TensorData::new(v, [n]), device);
    let (lp, o, a) = (column(logp), column(old), column(adv));
    let m = Tensor::<A<B>, 1>::ones([n], device);
    let config = ClipSettings {
        high: 0.28,
        dual_clip: Some(3.0),
        ..Default::default()
    };
    let run = |fused: bool| {
        let x = lp.clone().require_grad();
        let loss = if fused {
            roll_flow_kernels::ppo_clip_loss(
                x.clone(),
                o.clone(),
                a.clone(),
                m.clone(),
                &offsets,
                &config,
            )
            .expect("fused PPO")
            .loss
        } else {
            reference::ppo_clip_loss(
                x.clone(),
                o.clone(),
                a.clone(),
                m.clone(),
                None,
                &offsets,
                &config,
            )
            .0
        };
        let g = loss.backward();
        black_box(x.grad(&g));
        sync::<B>(device);
    };
    let fused = median_s(s.reps, || run(true));
    let unfused = median_s(s.reps.min(3), || run(false));
    let primitive = |t: &Tensor<A<B>, 1>| t.clone().inner().into_primitive().tensor();
    let tokens = || PpoTokens::<B> {
        logp: primitive(&lp),
        old_logp: primitive(&o),
        advantages: primitive(&a),
        mask: primitive(&m),
        weight: None,
    };
    // The kernels alone: forward, then backward from its sequence weights.
    let raw = median_s(s.reps, || {
        let forward = B::ppo_clip_forward(tokens(), &offsets, &config);
        let grad = Tensor::<B, 1>::ones([1], device).into_primitive().tensor();
        black_box(B::ppo_clip_backward(
            tokens(),
            &offsets,
            forward.seq_weight,
            grad,
            &config,
        ));
        sync::<B>(device);
    });
    let million = n as f64 / 1e6;
    vec![
        kernel_row(
            &format!("PPO clip loss fwd+bwd, {million:.1}M tokens"),
            fused,
            Some(unfused),
            (9 * n * 4) as f64,
            ceiling,
        ),
        kernel_row(
            &format!("PPO clip loss kernels fwd then bwd, {million:.1}M tokens"),
            raw,
            None,
            (9 * n * 4) as f64,
            ceiling,
        ),
    ]
}

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

/// Forward + backward tokens/s of −mean log π over `train` sequences, and generation
/// tokens/s, on backend `B` (autodiff over it for training).
fn model_rows<B: KernelBackend>(
    device: &B::Device,
    s: Sizes,
    label: &str,
    peak_flops: f64,
) -> Vec<Value> {
    let config = model_config(s);
    let (batch, len) = s.train;
    let model = Qwen2CausalLm::<Autodiff<B>>::random(&config, 0, device);
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
    let model = Qwen2CausalLm::<B>::random(&config, 0, device);
    let (gen_batch, prompt, new) = s.generate;
    let mut generated = 0;
    let generate_s = median_s(1, || {
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
        generated = outputs.iter().map(|o| o.tokens.len()).sum::<usize>();
    });
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

/// The kernel figures on backend `B` (f32), with bf16 logits where the backend has bf16.
fn kernel_figures<B: KernelBackend>(device: &B::Device, s: Sizes, bf16: bool) -> Value {
    let ceiling = copy_ceiling::<B>(device, s);
    println!(
        "copy ceiling: {:.0} GB/s (read + write of {} floats)",
        ceiling / 1e9,
        s.copy_floats
    );
    println!("| kernel | fused ms | unfused ms (fused speed-up) | GB/s | of the copy ceiling |");
    println!("|---|---|---|---|---|");
    let mut rows = logprob_rows::<B>(device, s, DType::F32, ceiling);
    if bf16 {
        rows.extend(or_failure("bf16 log-prob", || {
            logprob_rows::<B>(device, s, DType::BF16, ceiling)
        }));
    }
    rows.push(gae_row::<B>(device, s, ceiling));
    rows.extend(ppo_rows::<B>(device, s, ceiling));
    rows.extend(or_failure("decode attention", || {
        vec![decode_attention::decode_attention_row::<B>(
            device, s, ceiling,
        )]
    }));
    json!({"copy_bytes_per_s": ceiling, "kernels": rows})
}

/// The rows `f` measures, or one row saying why it failed (a panic is caught, so the figures
/// after it are still taken).
fn or_failure(what: &str, f: impl FnOnce() -> Vec<Value>) -> Vec<Value> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(rows) => rows,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            println!("| {what} | failed: {message} |");
            vec![json!({"name": what, "failed": message})]
        }
    }
}

/// The f32 kernel and model figures of backend `B`, those `wants` asks for.
fn figures<B: KernelBackend>(
    device: &B::Device,
    s: Sizes,
    wants: &dyn Fn(&str) -> bool,
    report: &mut BTreeMap<&'static str, Value>,
) {
    if wants("probe") {
        report.insert("probe", probe::logprob_probe::<B>(device));
    }
    if wants("kernels") {
        report.insert("kernels", kernel_figures::<B>(device, s, false));
    }
    if wants("model") {
        report.insert("model", json!(model_rows::<B>(device, s, "f32", PEAK_TF32)));
    }
}

struct Args {
    device: String,
    small: bool,
    out: Option<PathBuf>,
    only: Option<String>,
}

fn args() -> Args {
    let mut args = Args {
        device: "cpu".into(),
        small: false,
        out: None,
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--device" => args.device = it.next().unwrap_or_default(),
            "--small" => args.small = true,
            "--out" => args.out = it.next().map(PathBuf::from),
            "--only" => args.only = it.next(),
            _ => {} // `cargo bench` passes `--bench`
        }
    }
    args
}

fn main() {
    let args = args();
    let s = if args.small { SMALL } else { FULL };
    let wants = |part: &str| args.only.as_deref().is_none_or(|o| o == part);
    let mut report = BTreeMap::new();
    report.insert("device", json!(args.device));
    match args.device.as_str() {
        "cpu" => figures::<burn::backend::Flex>(&Default::default(), s, &wants, &mut report),
        #[cfg(feature = "wgpu")]
        "wgpu" => figures::<
            burn::backend::wgpu::CubeBackend<burn::backend::wgpu::WgpuRuntime, f32, i32, u32>,
        >(&Default::default(), s, &wants, &mut report),
        #[cfg(feature = "cuda")]
        "cuda" => {
            type B = burn::backend::Cuda;
            type H = burn::backend::Cuda<burn::tensor::bf16>;
            let device = burn::backend::cuda::CudaDevice { index: 0 };
            if wants("probe") {
                report.insert("probe", probe::logprob_probe::<B>(&device));
            }
            if wants("kernels") {
                report.insert("kernels", kernel_figures::<B>(&device, s, true));
            }
            if wants("model") {
                let mut rows = model_rows::<B>(&device, s, "f32", PEAK_TF32);
                rows.extend(or_failure("bf16 model", || {
                    model_rows::<H>(&device, s, "bf16", PEAK_BF16)
                }));
                report.insert("model", json!(rows));
            }
        }
        other => {
            eprintln!(
                "--device {other}: this build has cpu{}{}",
                if cfg!(feature = "wgpu") { ", wgpu" } else { "" },
                if cfg!(feature = "cuda") { ", cuda" } else { "" }
            );
            std::process::exit(2);
        }
    }
    if let Some(out) = args.out {
        std::fs::create_dir_all(&out).expect("the output folder");
        let text = serde_json::to_string_pretty(&report).expect("JSON");
        std::fs::write(out.join("gpu_bench.json"), text).expect("the report file");
    }
}
