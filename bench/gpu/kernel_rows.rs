//! The RL kernels' rows of `bench/gpu.rs`: the log-prob + entropy forward and forward +
//! backward at 8,192 × 151,936 (f32 and bf16 logits), GAE at 256 × 8,192 and the PPO clip
//! loss forward + backward at 16M tokens, each fused kernel against the unfused burn ops
//! (`roll_flow_kernels::reference`). The bytes are the fewest each must move (inputs read
//! once, outputs written once). The PPO rows count 7 passes of the tokens: the forward reads
//! logp, old logp, advantages and mask and writes each token's gradient, the backward reads
//! that and writes dlogp (before 2026-12-04 the backward read the four columns again, and
//! the rows counted 9). Each PPO call is timed alone (launch overhead and all, as the
//! issue's figure) and ten back to back with one sync (the device's pace when the host's
//! queuing hides behind it, as inside a training step).

use std::hint::black_box;

use burn::backend::Autodiff;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, Distribution, Int, Tensor, TensorData};
use roll_flow_kernels::{reference, ClipSettings, KernelBackend, LogProbSaved, PpoTokens};
use serde_json::Value;

use super::{kernel_row, lcg, median_s, sync, Sizes};

/// The fused log-prob + entropy (forward; forward + backward under autodiff) on logits of
/// `dtype`, and the unfused reference on f32.
pub fn logprob_rows<B: KernelBackend>(
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
        black_box(logprob_kernels(logits.clone(), targets.clone()));
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

/// The log-prob kernels alone (the backend's primitives, no autodiff around them) at
/// temperature 1: the forward's (out, lse), then dlogits for an incoming gradient of ones.
pub fn logprob_kernels<B: KernelBackend>(
    logits: Tensor<B, 2>,
    targets: Tensor<B, 1, Int>,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let grad = Tensor::<B, 2>::ones([logits.dims()[0], 2], &logits.device())
        .into_primitive()
        .tensor();
    let (logits, targets) = (logits.into_primitive().tensor(), targets.into_primitive());
    let (out, lse) = B::logprob_entropy_forward(logits.clone(), targets.clone(), 1.0);
    let saved = LogProbSaved {
        logits,
        targets,
        lse,
        out: out.clone(),
        temperature: 1.0,
    };
    (out, B::logprob_entropy_backward(saved, grad))
}

pub fn gae_row<B: KernelBackend>(device: &B::Device, s: Sizes, ceiling: f64) -> Value {
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

/// Calls of the PPO rows' back-to-back figure.
const BACK_TO_BACK: usize = 10;

pub fn ppo_rows<B: KernelBackend>(device: &B::Device, s: Sizes, ceiling: f64) -> Vec<Value> {
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
    // The kernels alone: forward, then backward from its results, `calls` times, then a
    // sync.
    let calls = |calls: usize| {
        for _ in 0..calls {
            let forward = B::ppo_clip_forward(tokens(), &offsets, &config);
            let grad = Tensor::<B, 1>::ones([1], device).into_primitive().tensor();
            black_box(B::ppo_clip_backward(
                tokens(),
                &offsets,
                forward,
                grad,
                &config,
            ));
        }
        sync::<B>(device);
    };
    let raw = median_s(s.reps, || calls(1));
    // The same, back to back with one sync at the end: the host queues the next call's
    // launches while the device runs this one's, as in a training step, so this is the
    // kernels' pace when launch overhead hides behind them (per call).
    let streamed = median_s(s.reps.min(5), || calls(BACK_TO_BACK)) / BACK_TO_BACK as f64;
    let million = n as f64 / 1e6;
    vec![
        kernel_row(
            &format!("PPO clip loss fwd+bwd, {million:.1}M tokens"),
            fused,
            Some(unfused),
            (7 * n * 4) as f64,
            ceiling,
        ),
        kernel_row(
            &format!("PPO clip loss kernels fwd then bwd, {million:.1}M tokens"),
            raw,
            None,
            (7 * n * 4) as f64,
            ceiling,
        ),
        kernel_row(
            &format!(
                "PPO clip loss kernels fwd then bwd, {million:.1}M tokens, \
                 {BACK_TO_BACK} back to back (per call)"
            ),
            streamed,
            None,
            (7 * n * 4) as f64,
            ceiling,
        ),
    ]
}

/// Each RL kernel launched once at the bench's full sizes, nothing else (`gpu --only
/// once`): what `run.sh`'s `ncu` part hands to Nsight Compute, whose counters say where a
/// kernel below the copy ceiling waits (the bf16 log-prob forward and backward, then the
/// f32 forward beside them, then the PPO kernels).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub fn kernels_once<B: KernelBackend>(device: &B::Device, s: Sizes) {
    let (n, v) = (s.rows, s.vocab);
    let logits = Tensor::<B, 2>::random([n, v], Distribution::Normal(0.0, 3.0), device);
    let targets: Vec<i64> = (0..n).map(|i| ((i * 7919) % v) as i64).collect();
    let targets = Tensor::<B, 1, Int>::from_data(TensorData::new(targets, [n]), device);
    for dtype in [DType::BF16, DType::F32] {
        black_box(logprob_kernels(logits.clone().cast(dtype), targets.clone()));
        sync::<B>(device);
    }
    let (tokens, len) = (s.ppo_tokens, 512);
    let offsets: Vec<usize> = (0..=tokens / len).map(|i| i * len).collect();
    let column = |m: f32| {
        Tensor::<B, 1>::random([tokens], Distribution::Uniform(-m as f64, 0.0), device)
            .into_primitive()
            .tensor()
    };
    let ppo_tokens = PpoTokens::<B> {
        logp: column(5.0),
        old_logp: column(5.0),
        advantages: column(1.0),
        mask: Tensor::<B, 1>::ones([tokens], device)
            .into_primitive()
            .tensor(),
        weight: None,
    };
    let config = ClipSettings::default();
    let forward = B::ppo_clip_forward(ppo_tokens.clone(), &offsets, &config);
    let grad = Tensor::<B, 1>::ones([1], device).into_primitive().tensor();
    black_box(B::ppo_clip_backward(
        ppo_tokens, &offsets, forward, grad, &config,
    ));
    sync::<B>(device);
}
