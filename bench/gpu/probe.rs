//! A look inside the log-prob kernel on a device (`gpu --only probe`): small logits made
//! on the host, the forward kernel's raw outputs (log p, H per row; lse) for targets of
//! each integer type, and the same quantities in f64 on the host. Where the kernel is
//! wrong, the numbers show which row, target or sum it used.

use burn::tensor::{DType, Int, Tensor, TensorData};
use roll_flow_kernels::{ClipSettings, KernelBackend, PpoTokens};
use serde_json::{json, Value};

/// (logp, entropy, lse) of one row at temperature 1, in f64.
fn reference_row(row: &[f32], target: usize) -> (f64, f64, f64) {
    let m = row.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b as f64));
    let s0: f64 = row.iter().map(|&z| (z as f64 - m).exp()).sum();
    let lse = m + s0.ln();
    let h = -row
        .iter()
        .map(|&z| {
            let lp = z as f64 - lse;
            lp.exp() * lp
        })
        .sum::<f64>();
    (row[target] as f64 - lse, h, lse)
}

fn host<B: KernelBackend>(t: burn::tensor::ops::FloatTensor<B>) -> Vec<f32> {
    Tensor::<B, 1>::from_primitive(burn::tensor::TensorPrimitive::Float(t))
        .flatten::<1>(0, 0)
        .into_data()
        .convert::<f32>()
        .into_vec::<f32>()
        .unwrap_or_default()
}

fn probe_shape<B: KernelBackend>(device: &B::Device, rows: usize, vocab: usize) -> Value {
    let mut seed = 17u64 + rows as u64;
    let logits: Vec<f32> = (0..rows * vocab)
        .map(|_| 6.0 * super::lcg(&mut seed) - 3.0)
        .collect();
    let targets: Vec<i64> = (0..rows).map(|r| ((r * 5 + 3) % vocab) as i64).collect();
    let want: Vec<(f64, f64, f64)> = (0..rows)
        .map(|r| reference_row(&logits[r * vocab..(r + 1) * vocab], targets[r] as usize))
        .collect();
    let x = Tensor::<B, 2>::from_data(TensorData::new(logits, [rows, vocab]), device);
    let mut variants = Vec::new();
    for dtype in [None, Some(DType::I64), Some(DType::I32), Some(DType::U32)] {
        let data = TensorData::new(targets.clone(), [rows]);
        let t = match dtype {
            None => Tensor::<B, 1, Int>::from_data(data, device),
            Some(d) => Tensor::<B, 1, Int>::from_data(data, (device, d)),
        };
        let made = format!("{:?}", t.dtype());
        let (out, lse) = B::logprob_entropy_forward(
            x.clone().into_primitive().tensor(),
            t.into_primitive(),
            1.0,
        );
        variants.push(json!({
            "targets_asked": format!("{dtype:?}"),
            "targets_dtype": made,
            "out_logp_entropy": host::<B>(out),
            "lse": host::<B>(lse),
        }));
    }
    json!({
        "rows": rows,
        "vocab": vocab,
        "targets": targets,
        "want_logp": want.iter().map(|w| w.0).collect::<Vec<_>>(),
        "want_entropy": want.iter().map(|w| w.1).collect::<Vec<_>>(),
        "want_lse": want.iter().map(|w| w.2).collect::<Vec<_>>(),
        "kernel": variants,
    })
}

/// The probe's report: the 3 × 7 shape the suite fails on, and a wider one.
pub fn logprob_probe<B: KernelBackend>(device: &B::Device) -> Value {
    json!([
        probe_shape::<B>(device, 3, 7),
        probe_shape::<B>(device, 4, 300)
    ])
}

/// The bf16 log-prob kernels at a vocabulary of 304 (8 lanes a load), forward then
/// backward, and the PPO kernels on two sequences, once each on host-made inputs. With
/// CubeCL's full logger on (`run.sh`'s `probe` part) their CUDA sources land in
/// `kernel_sources.log`: run 6 left the bf16 log-prob kernel at 10–15% of the copy ceiling
/// whatever its load width (the f32 one at 97%) and the PPO kernels at 19%, and the source
/// is where the two types' code differs. Reported: the bf16 log-probs against f64 over the
/// bf16-rounded logits, and the PPO loss and gradient.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub fn kernel_source_probe<B: KernelBackend>(device: &B::Device) -> Value {
    let (rows, vocab) = (4, 304);
    let mut seed = 29u64;
    let logits: Vec<f32> = (0..rows * vocab)
        .map(|_| 6.0 * super::lcg(&mut seed) - 3.0)
        .collect();
    let targets: Vec<i64> = (0..rows).map(|r| ((r * 37 + 5) % vocab) as i64).collect();
    let x =
        Tensor::<B, 2>::from_data(TensorData::new(logits, [rows, vocab]), device).cast(DType::BF16);
    let rounded = host::<B>(x.clone().into_primitive().tensor());
    let want: Vec<f64> = (0..rows)
        .map(|r| reference_row(&rounded[r * vocab..(r + 1) * vocab], targets[r] as usize).0)
        .collect();
    let t = Tensor::<B, 1, Int>::from_data(TensorData::new(targets, [rows]), device);
    let (out, dlogits) = super::kernel_rows::logprob_kernels(x, t);
    let (out, dlogits) = (host::<B>(out), host::<B>(dlogits));
    let got: Vec<f32> = out.iter().step_by(2).copied().collect();

    let (tokens, offsets) = (16usize, [0usize, 7, 16]);
    let column = |f: &dyn Fn(usize) -> f32| {
        let v: Vec<f32> = (0..tokens).map(f).collect();
        Tensor::<B, 1>::from_data(TensorData::new(v, [tokens]), device)
            .into_primitive()
            .tensor()
    };
    let ppo_tokens = || PpoTokens::<B> {
        logp: column(&|i| -1.0 - 0.05 * i as f32),
        old_logp: column(&|i| -1.0 - 0.04 * i as f32),
        advantages: column(&|i| if i % 3 == 0 { -0.5 } else { 0.7 }),
        mask: column(&|i| f32::from(i % 5 != 4)),
        weight: None,
    };
    let config = ClipSettings::default();
    let forward = B::ppo_clip_forward(ppo_tokens(), &offsets, &config);
    let loss = host::<B>(forward.loss.clone());
    let grad = Tensor::<B, 1>::ones([1], device).into_primitive().tensor();
    let dlogp = host::<B>(B::ppo_clip_backward(
        ppo_tokens(),
        &offsets,
        forward,
        grad,
        &config,
    ));
    json!({
        "bf16_logprob": {"rows": rows, "vocab": vocab, "want_logp": want, "kernel_logp": got,
                         "dlogits_sum": dlogits.iter().map(|&d| d as f64).sum::<f64>()},
        "ppo": {"offsets": offsets, "loss": loss, "dlogp": dlogp},
    })
}
