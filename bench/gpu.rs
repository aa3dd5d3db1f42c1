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
//! - Kernels against the physical limit and against the unfused burn-ops path: the RL
//!   kernels (`gpu/kernel_rows.rs`: log-prob + entropy at 8,192 × 151,936 in f32 and bf16,
//!   GAE at 256 × 8,192, the PPO clip loss at 16M tokens), the model's row and elementwise
//!   ops at the training shape (`gpu/model_ops.rs`: RMSNorm, masked softmax, SwiGLU,
//!   rotary) and a decode step's attention over 128 rows × 1,024 cached keys
//!   (`gpu/decode_attention.rs`). The bytes are the fewest each must move (inputs read
//!   once, outputs written once).
//! - The Qwen2.5-0.5B shape with random weights built on the device (`gpu/model_rows.rs`):
//!   forward + backward tokens/s of −mean log π and KV-cache generation tokens/s, with the
//!   fraction of peak FLOP/s; in f32 over 8 × 512 tokens and at batch 64 (16-token prompts,
//!   64 greedy tokens), the shapes of the earlier runs, and in bf16 (CUDA) at issue 59's
//!   target shapes, 8 × 2,048 and batch 128 with 128 new tokens.
//!
//! - `--only profile` (asked for by name alone): the target-shape rows once more, for a run
//!   with CubeCL's profiler on (`bench/gpu/run.sh`'s `profile` part writes the
//!   `cubecl.toml` that turns it on), which sums each kernel's device time by name between
//!   syncs: where a training step's and a generation's time goes.
//! - `--only once` (CUDA, asked for by name alone): each RL kernel launched once at full
//!   size and nothing else, for Nsight Compute (`run.sh`'s `ncu` part).
//! - `--only matmul` (CUDA, asked for by name alone): bf16 products at the model's sizes
//!   with each of cubek's tensor-core routines (`gpu/matmul_rows.rs`).
//!
//! Every timing is the median of several runs after a warm-up, each ended by a device
//! sync (generation at the target shape: one run after a short one). Results go to stdout
//! (a table) and `DIR/gpu_bench.json`, written again after each part so that a run cut
//! short by its time limit keeps what it measured.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use burn::tensor::backend::Backend;
use burn::tensor::{DType, Distribution, Tensor};
use roll_flow_kernels::KernelBackend;
use serde_json::{json, Value};

#[path = "gpu/decode_attention.rs"]
mod decode_attention;
#[path = "gpu/kernel_rows.rs"]
mod kernel_rows;
// CUDA's alone, as are `kernel_rows::kernels_once` and `probe::kernel_source_probe`.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
#[path = "gpu/matmul_rows.rs"]
mod matmul_rows;
#[path = "gpu/model_ops.rs"]
mod model_ops;
#[path = "gpu/model_rows.rs"]
mod model_rows;
#[path = "gpu/probe.rs"]
mod probe;

use model_rows::{model_rows, ModelShapes};

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
    /// f32 training (sequences, length) and generation (batch, prompt, new tokens), the
    /// shapes of the earlier runs.
    train: (usize, usize),
    generate: (usize, usize, usize),
    /// The same at issue 59's targets (bf16 on CUDA; also the model ops' shape).
    train_target: (usize, usize),
    generate_target: (usize, usize, usize),
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
    train_target: (8, 2048),
    generate_target: (128, 16, 128),
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
    train_target: (2, 128),
    generate_target: (8, 8, 16),
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

/// A reproducible pseudo-random number in [0, 1) (an LCG's top 24 bits).
fn lcg(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 40) as f32 / (1u64 << 24) as f32
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
    let mut rows = kernel_rows::logprob_rows::<B>(device, s, DType::F32, ceiling);
    if bf16 {
        rows.extend(or_failure("bf16 log-prob", || {
            kernel_rows::logprob_rows::<B>(device, s, DType::BF16, ceiling)
        }));
    }
    rows.push(kernel_rows::gae_row::<B>(device, s, ceiling));
    rows.extend(kernel_rows::ppo_rows::<B>(device, s, ceiling));
    rows.extend(or_failure("model ops", || {
        model_ops::model_op_rows::<B>(device, s, ceiling)
    }));
    rows.extend(or_failure("decode attention", || {
        // The cache's length at the bench's size, then 4× it (a long agentic context).
        [1, 4]
            .map(|times| decode_attention::decode_attention_row::<B>(device, s, times, ceiling))
            .to_vec()
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

/// The report so far, kept in `DIR/gpu_bench.json` (rewritten after each part).
struct Report {
    parts: BTreeMap<&'static str, Value>,
    out: Option<PathBuf>,
}

impl Report {
    fn insert(&mut self, part: &'static str, value: Value) {
        self.parts.insert(part, value);
        if let Some(out) = &self.out {
            std::fs::create_dir_all(out).expect("the output folder");
            let text = serde_json::to_string_pretty(&self.parts).expect("JSON");
            std::fs::write(out.join("gpu_bench.json"), text).expect("the report file");
        }
    }
}

/// The f32 shapes of the earlier runs.
fn f32_shapes(s: Sizes) -> ModelShapes {
    ModelShapes {
        train: s.train,
        generate: s.generate,
        compute: None,
    }
}

/// Issue 59's target shapes, computed in `compute` (bf16 mixed precision on CUDA).
fn target_shapes(s: Sizes, compute: Option<DType>) -> ModelShapes {
    ModelShapes {
        train: s.train_target,
        generate: s.generate_target,
        compute,
    }
}

/// The f32 kernel and model figures of backend `B`, those `wants` asks for; the target
/// shapes in `half` mixed precision where given (f16 on wgpu, so that a check run there
/// takes that path too).
fn figures<B: KernelBackend>(
    device: &B::Device,
    s: Sizes,
    half: Option<DType>,
    wants: &dyn Fn(&str) -> bool,
    report: &mut Report,
) {
    if wants("probe") {
        report.insert("probe", probe::logprob_probe::<B>(device));
    }
    if wants("kernels") {
        report.insert("kernels", kernel_figures::<B>(device, s, false));
    }
    if wants("model") {
        // Both shapes, so that a check run on wgpu or the CPU takes every path.
        let label = if half.is_some() { "f16 mixed" } else { "f32" };
        let mut rows = model_rows::<B>(device, s, f32_shapes(s), "f32", PEAK_TF32);
        rows.extend(model_rows::<B>(
            device,
            s,
            target_shapes(s, half),
            label,
            PEAK_TF32,
        ));
        report.insert("model", json!(rows));
    }
    if wants("profile") {
        let label = if half.is_some() {
            "half mixed, profiled"
        } else {
            "f32, profiled"
        };
        let rows = model_rows::<B>(device, s, target_shapes(s, half), label, PEAK_TF32);
        report.insert("profile", json!(rows));
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
    // Every part but `profile`, `once` and `matmul`, which run only when asked for by name.
    let wants = |part: &str| match args.only.as_deref() {
        None => !matches!(part, "profile" | "once" | "matmul"),
        Some(only) => only == part,
    };
    let mut report = Report {
        parts: BTreeMap::new(),
        out: args.out.clone(),
    };
    report.insert("device", json!(args.device));
    match args.device.as_str() {
        "cpu" => figures::<burn::backend::Flex>(&Default::default(), s, None, &wants, &mut report),
        #[cfg(feature = "wgpu")]
        "wgpu" => figures::<
            burn::backend::wgpu::CubeBackend<burn::backend::wgpu::WgpuRuntime, f32, i32, u32>,
        >(
            &Default::default(),
            s,
            Some(DType::F16),
            &wants,
            &mut report,
        ),
        #[cfg(feature = "cuda")]
        "cuda" => {
            type B = burn::backend::Cuda;
            let device = burn::backend::cuda::CudaDevice { index: 0 };
            if wants("probe") {
                report.insert("probe", probe::logprob_probe::<B>(&device));
                report.insert("kernel_sources", probe::kernel_source_probe::<B>(&device));
            }
            if wants("once") {
                kernel_rows::kernels_once::<B>(&device, s);
            }
            if wants("matmul") {
                let rows = or_failure("bf16 products", || {
                    matmul_rows::matmul_rows::<B>(&device, PEAK_BF16)
                });
                report.insert("matmul", json!(rows));
            }
            if wants("kernels") {
                report.insert("kernels", kernel_figures::<B>(&device, s, true));
            }
            if wants("model") {
                // bf16 mixed precision at the targets first: the figures the issue asks
                // for, on the path a pipeline's `precision: Bf16` runs.
                let target = target_shapes(s, Some(DType::BF16));
                let mut rows = or_failure("bf16 model", || {
                    model_rows::<B>(&device, s, target, "bf16 mixed", PEAK_BF16)
                });
                report.insert("model", json!(rows));
                rows.extend(model_rows::<B>(&device, s, f32_shapes(s), "f32", PEAK_TF32));
                report.insert("model", json!(rows));
            }
            if wants("profile") {
                let target = target_shapes(s, Some(DType::BF16));
                let rows = or_failure("bf16 model, profiled", || {
                    model_rows::<B>(&device, s, target, "bf16 mixed, profiled", PEAK_BF16)
                });
                report.insert("profile", json!(rows));
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
}
