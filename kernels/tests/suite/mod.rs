//! The backend-generic test suite: each fused kernel against the unfused burn-ops
//! reference (`roll_flow_kernels::reference`) on fresh random inputs, forward values and
//! gradients (autodiff of the reference). `tests/kernels.rs` instantiates it per backend.
//!
//! Tolerances (f32 everywhere; the references accumulate in a different order):
//! - log-prob, entropy: |fused − ref| ≤ 2e-4·(1 + |ref|) (also on rows that lie apart,
//!   `logprob_row_stride.rs`);
//! - dlogits: max |Δ| ≤ 1e-6 + 2e-3·max |ref|;
//! - GAE: ≤ 1e-4·(1 + |ref|) against both the burn-ops loop and the f64 host oracle;
//! - PPO loss, stats and dlogp: ≤ 1e-5 + 1e-4·|ref| (dlogp against max |ref|);
//! - SwiGLU and its two gradients: ≤ 1e-5 + 1e-4·|ref| (`swiglu.rs`);
//! - masked softmax and its gradient: ≤ 1e-6 + 1e-4·|ref| (`masked_softmax.rs`);
//! - RMSNorm: y, dx ≤ 1e-5 + 1e-4·|ref|, dweight against max |ref| (`rms_norm.rs`);
//! - rotary embedding and its gradient: ≤ 1e-6 + 1e-5·|ref| (`rotary.rs`);
//! - a cached step's biases, rotations and cache writes: ≤ 1e-6 + 1e-5·|ref| against f64,
//!   and the same bits as the unfused ops (`rotate_into_cache.rs`);
//! - dense layer: y ≤ 1e-5 + 1e-4·|ref|, dx, dweight, dbias against max |ref|, the
//!   reference in f64 on the host (`linear.rs`);
//! - decode attention (one query a row, fused where the backend has it): ≤ 1e-5 + 1e-4·|ref|
//!   against f64 on the host (`decode_attention.rs`);
//! - batched matrix product and its gradients: ≤ 2e-5·max |ref|, against f64 on the host
//!   (`matmul.rs`; TF32 products would be off by about 1e-3);
//! - Σ over a matrix's rows (a bias gradient): ≤ 1e-5·Σ|x| against f64 (`column_sums.rs`);
//! - Σ x² of several tensors: ≤ 1e-6·(1 + ref) against f64 on the host (`square_sums.rs`).
//!
//! On half-precision backends (f16 on wgpu, bf16 on CUDA; `half_logprob.rs`,
//! `half_model_ops.rs`): one unit in the last place of the type at the f64 value, from the
//! inputs as the device rounded them.

use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use roll_flow_kernels::{reference, ClipSettings, KernelBackend, LossAgg, PpoStats};

pub mod block_write;
pub mod column_sums;
pub mod contiguous;
pub mod decode_attention;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod half_logprob;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod half_matmul;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod half_model_ops;
pub mod linear;
pub mod logprob_row_stride;
pub mod masked_softmax;
pub mod matmul;
pub mod rms_norm;
pub mod rotary;
pub mod rotate_into_cache;
pub mod row_sampling;
pub mod square_sums;
pub mod swiglu;

/// xorshift64*: reproducible host randomness without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    pub fn normal(&mut self) -> f32 {
        let (u, v) = (self.unit().max(1e-7), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
    }
}

fn host<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().into_vec::<f32>().unwrap()
}

fn vector<B: Backend>(v: Vec<f32>, device: &B::Device) -> Tensor<B, 1> {
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), device)
}

fn assert_close(what: &str, got: &[f32], want: &[f32], abs: f32, rel: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= abs + rel * w.abs(),
            "{what}[{i}]: fused {g} vs reference {w}"
        );
    }
}

/// `a [n, k] · b [k, m]`, row-major, accumulated in f64.
fn host_matmul(a: &[f32], b: &[f32], n: usize, k: usize, m: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; n * m];
    for i in 0..n {
        for j in 0..m {
            let dot: f64 = (0..k)
                .map(|l| a[i * k + l] as f64 * b[l * m + j] as f64)
                .sum();
            out[i * m + j] = dot as f32;
        }
    }
    out
}

/// `a [rows, cols]` transposed, row-major.
fn transpose(a: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..cols * rows)
        .map(|i| a[(i % rows) * cols + i / rows])
        .collect()
}

fn assert_close_scaled(what: &str, got: &[f32], want: &[f32], abs: f32, rel: f32) {
    let scale = want.iter().fold(0.0f32, |a, &b| a.max(b.abs()));
    assert_close(what, got, want, abs + rel * scale, 0.0);
}

const LOGPROB_SHAPES: [(usize, usize); 6] = [
    (1, 1),
    (3, 7),
    (5, 1000),
    (33, 4097),
    (4, 32000),
    (2, 151_936),
];

fn logits_and_targets<B: Backend>(
    rows: usize,
    vocab: usize,
    seed: u64,
    device: &B::Device,
) -> (Tensor<B, 2>, Tensor<B, 1, Int>) {
    B::seed(device, seed);
    let logits = Tensor::random([rows, vocab], Distribution::Normal(0.0, 3.0), device);
    let mut rng = Rng::new(seed);
    let targets: Vec<i64> = (0..rows).map(|_| rng.below(vocab) as i64).collect();
    (
        logits,
        Tensor::from_data(TensorData::new(targets, [rows]), device),
    )
}

pub fn logprob_forward<B: KernelBackend>(device: &B::Device) {
    for (k, &(rows, vocab)) in LOGPROB_SHAPES.iter().enumerate() {
        for temperature in [1.0, 0.7] {
            let (logits, targets) = logits_and_targets::<B>(rows, vocab, 11 + k as u64, device);
            let fused = roll_flow_kernels::token_logprob_entropy(
                logits.clone(),
                targets.clone(),
                temperature,
            )
            .unwrap();
            let (lp, h) = reference::logprob_entropy(logits, targets, temperature);
            let what = format!("{rows}x{vocab} T={temperature}");
            assert_close(
                &format!("logp {what}"),
                &host(fused.logprob),
                &host(lp),
                2e-4,
                2e-4,
            );
            assert_close(
                &format!("entropy {what}"),
                &host(fused.entropy),
                &host(h),
                2e-4,
                2e-4,
            );
        }
    }
}

pub fn logprob_backward<B: KernelBackend + AutodiffBackend>(device: &B::Device) {
    for (k, &(rows, vocab)) in LOGPROB_SHAPES.iter().enumerate() {
        let temperature = 0.8;
        let (logits, targets) = logits_and_targets::<B>(rows, vocab, 40 + k as u64, device);
        let mut rng = Rng::new(k as u64);
        let weights =
            |rng: &mut Rng| vector::<B>((0..rows).map(|_| rng.normal()).collect(), device);
        let (w_lp, w_h) = (weights(&mut rng), weights(&mut rng));

        let x = logits.clone().detach().require_grad();
        // Odd shapes hand the kernel logits nothing else holds (the output of an op, as in
        // the model), which a backend may overwrite with their gradient.
        let input = if k % 2 == 1 {
            x.clone().mul_scalar(1.0)
        } else {
            x.clone()
        };
        let fused =
            roll_flow_kernels::token_logprob_entropy(input, targets.clone(), temperature).unwrap();
        let loss = (fused.logprob * w_lp.clone() + fused.entropy * w_h.clone()).sum();
        let got = host(x.grad(&loss.backward()).unwrap());

        let x = logits.detach().require_grad();
        let (lp, h) = reference::logprob_entropy(x.clone(), targets, temperature);
        let loss = (lp * w_lp + h * w_h).sum();
        let want = host(x.grad(&loss.backward()).unwrap());
        assert_close_scaled(&format!("dlogits {rows}x{vocab}"), &got, &want, 1e-6, 2e-3);
    }
}

/// Guided decoding rules tokens out by masking their logits to −∞ before the kernel.
/// Forward values and gradients must match the reference on the same logits masked to a
/// finite −1e9 (whose softmax weight is exactly 0 in f32), including a row where only the
/// target is allowed (log-prob 0, entropy 0, zero gradient).
pub fn logprob_masked_logits<B: KernelBackend + AutodiffBackend>(device: &B::Device) {
    for (k, &(rows, vocab)) in [(4, 9), (6, 1000), (3, 151_936)].iter().enumerate() {
        let temperature = 0.7;
        let (logits, targets) = logits_and_targets::<B>(rows, vocab, 70 + k as u64, device);
        let target_ids: Vec<i64> = targets.to_data().convert::<i64>().to_vec().unwrap();
        let mut rng = Rng::new(80 + k as u64);
        let ruled_out: Vec<bool> = (0..rows * vocab)
            .map(|i| {
                let (row, v) = (i / vocab, i % vocab);
                v as i64 != target_ids[row] && (row == 0 || rng.below(3) != 0)
            })
            .collect();
        let ruled_out = Tensor::<B, 2, burn::tensor::Bool>::from_data(
            TensorData::new(ruled_out, [rows, vocab]),
            device,
        );
        let mut rng = Rng::new(90 + k as u64);
        let (w_lp, w_h) = (
            vector::<B>((0..rows).map(|_| rng.normal()).collect(), device),
            vector::<B>((0..rows).map(|_| rng.normal()).collect(), device),
        );
        let run = |fused: bool| {
            let x = logits.clone().detach().require_grad();
            let (lp, h) = if fused {
                let masked = x.clone().mask_fill(ruled_out.clone(), f32::NEG_INFINITY);
                let out =
                    roll_flow_kernels::token_logprob_entropy(masked, targets.clone(), temperature)
                        .unwrap();
                (out.logprob, out.entropy)
            } else {
                let masked = x.clone().mask_fill(ruled_out.clone(), -1e9);
                reference::logprob_entropy(masked, targets.clone(), temperature)
            };
            let loss = (lp.clone() * w_lp.clone() + h.clone() * w_h.clone()).sum();
            let grad = host(x.grad(&loss.backward()).unwrap());
            (host(lp), host(h), grad)
        };
        let (lp, h, grad) = run(true);
        let (ref_lp, ref_h, ref_grad) = run(false);
        let what = format!("{rows}x{vocab} masked");
        assert!(
            lp.iter().chain(&h).chain(&grad).all(|x| x.is_finite()),
            "{what}: not finite"
        );
        assert!(
            lp[0].abs() < 1e-6 && h[0].abs() < 1e-6,
            "{what}: forced row {} {}",
            lp[0],
            h[0]
        );
        assert_close(&format!("logp {what}"), &lp, &ref_lp, 2e-4, 2e-4);
        assert_close(&format!("entropy {what}"), &h, &ref_h, 2e-4, 2e-4);
        assert_close_scaled(&format!("dlogits {what}"), &grad, &ref_grad, 1e-6, 2e-3);
    }
}

/// Random packed sequences: a prompt (masked out), then turns of response tokens separated
/// by observation tokens; some sequences are empty or have no response token, and about one
/// in four is response tokens only (a single-turn reply, which the CPU GAE scans in place).
pub fn packed(rng: &mut Rng, sequences: usize, max_len: usize) -> (Vec<usize>, Vec<f32>) {
    let mut offsets = vec![0];
    let mut mask = Vec::new();
    for _ in 0..sequences {
        let len = match rng.below(10) {
            0 => 0,
            1 => 1,
            _ => 1 + rng.below(max_len),
        };
        let dense = rng.below(4) == 0;
        let prompt = if dense { 0 } else { rng.below(len.max(1)) };
        let no_response = !dense && rng.below(12) == 0;
        for t in 0..len {
            let response = dense || (!no_response && t >= prompt && rng.below(6) != 0);
            mask.push(if response { 1.0 } else { 0.0 });
        }
        offsets.push(mask.len());
    }
    (offsets, mask)
}

pub fn gae_forward<B: KernelBackend>(device: &B::Device) {
    // The last case's sequences run to 6,000 tokens: a CubeCL scan unit then walks a
    // chunk of up to 24 tokens, and chunks begin and end inside masked runs. The burn-ops
    // loop (one set of launches per time step) is too slow there; the f64 oracle checks it.
    let cases = [
        (1, 5, 1.0, 0.95),
        (7, 40, 0.99, 0.9),
        (64, 300, 1.0, 1.0),
        (256, 512, 0.95, 0.95),
        (6, 6000, 0.99, 0.95),
    ];
    for (k, &(sequences, max_len, gamma, lambda)) in cases.iter().enumerate() {
        let mut rng = Rng::new(100 + k as u64);
        let (offsets, mask) = packed(&mut rng, sequences, max_len);
        let n = mask.len();
        let rewards: Vec<f32> = mask.iter().map(|&m| m * rng.normal()).collect();
        let values: Vec<f32> = (0..n).map(|_| rng.normal()).collect();
        let (r, v, m) = (
            vector::<B>(rewards.clone(), device),
            vector::<B>(values.clone(), device),
            vector::<B>(mask.clone(), device),
        );
        let (adv, ret) =
            roll_flow_kernels::gae(r.clone(), v.clone(), m.clone(), &offsets, gamma, lambda)
                .unwrap();
        let (adv, ret) = (host(adv), host(ret));
        let what = format!("{sequences} seqs of up to {max_len}");
        if max_len <= 512 {
            // The unfused burn-ops loop (`reference::gae`, the benchmark's baseline).
            let (ref_adv, ref_ret) = reference::gae(r, v, m, &offsets, gamma, lambda);
            assert_close(
                &format!("adv vs burn ops {what}"),
                &adv,
                &host(ref_adv),
                1e-4,
                1e-4,
            );
            assert_close(
                &format!("ret vs burn ops {what}"),
                &ret,
                &host(ref_ret),
                1e-4,
                1e-4,
            );
        }
        // The f64 oracle of roll-flow-operators, over each sequence's response tokens.
        let (mut oracle_adv, mut oracle_ret) = (vec![0.0f32; n], vec![0.0f32; n]);
        for w in offsets.windows(2) {
            let pos: Vec<usize> = (w[0]..w[1]).filter(|&t| mask[t] != 0.0).collect();
            let r: Vec<f64> = pos.iter().map(|&t| rewards[t] as f64).collect();
            let v: Vec<f64> = pos.iter().map(|&t| values[t] as f64).collect();
            let (a, g) = reference::gae_sequence(&r, &v, gamma as f64, lambda as f64);
            for (j, &t) in pos.iter().enumerate() {
                oracle_adv[t] = a[j] as f32;
                oracle_ret[t] = g[j] as f32;
            }
        }
        assert_close(
            &format!("adv vs oracle {what}"),
            &adv,
            &oracle_adv,
            1e-4,
            1e-4,
        );
        assert_close(
            &format!("ret vs oracle {what}"),
            &ret,
            &oracle_ret,
            1e-4,
            1e-4,
        );
    }
}

fn ppo_configs() -> Vec<ClipSettings> {
    let mut configs = Vec::new();
    for agg in [
        LossAgg::TokenMean,
        LossAgg::SeqMeanTokenSum,
        LossAgg::SeqMeanTokenMean,
        LossAgg::SeqMeanTokenSumNorm,
    ] {
        for (dual_clip, high) in [(None, 0.2), (Some(3.0), 0.28)] {
            configs.push(ClipSettings {
                low: 0.2,
                high,
                dual_clip,
                agg,
                norm_length: None,
            });
        }
    }
    configs.push(ClipSettings {
        agg: LossAgg::SeqMeanTokenSumNorm,
        norm_length: Some(700),
        ..Default::default()
    });
    configs
}

pub fn ppo_forward_backward<B: KernelBackend + AutodiffBackend>(device: &B::Device) {
    // 700 sequences: more than one block of the CubeCL combine (256 a block).
    let shapes = [(1, 9), (13, 50), (200, 600), (700, 30)];
    for (k, &(sequences, max_len)) in shapes.iter().enumerate() {
        let mut rng = Rng::new(300 + k as u64);
        let (offsets, mask) = packed(&mut rng, sequences, max_len);
        let n = mask.len();
        let old: Vec<f32> = (0..n).map(|_| -rng.unit() * 5.0).collect();
        let logp: Vec<f32> = old.iter().map(|&o| o + 0.3 * rng.normal()).collect();
        let adv: Vec<f32> = (0..n).map(|_| rng.normal()).collect();
        // Token weights as decoupled PPO makes them: some masked to 0, the rest in [0, 2).
        let weight: Vec<f32> = (0..n)
            .map(|_| {
                if rng.below(5) == 0 {
                    0.0
                } else {
                    2.0 * rng.unit()
                }
            })
            .collect();
        for (c, config) in ppo_configs().into_iter().enumerate() {
            let weighted = c % 3 == 1;
            let what = format!("{sequences} seqs {config:?} weighted {weighted}");
            let run = |fused: bool| {
                let x = vector::<B>(logp.clone(), device).require_grad();
                let (o, a, m) = (
                    vector::<B>(old.clone(), device),
                    vector::<B>(adv.clone(), device),
                    vector::<B>(mask.clone(), device),
                );
                let w = weighted.then(|| vector::<B>(weight.clone(), device));
                let (loss, stats) = if fused {
                    let out = roll_flow_kernels::ppo_clip_loss_weighted(
                        x.clone(),
                        o,
                        a,
                        m,
                        w,
                        &offsets,
                        &config,
                    )
                    .unwrap();
                    (out.loss, PpoStats::from_tensor(out.stats))
                } else {
                    reference::ppo_clip_loss(x.clone(), o, a, m, w, &offsets, &config)
                };
                let grad = host(x.grad(&loss.clone().mul_scalar(1.5).backward()).unwrap());
                (host(loss), stats, grad)
            };
            let (loss, stats, grad) = run(true);
            let (ref_loss, ref_stats, ref_grad) = run(false);
            assert_close(&format!("loss {what}"), &loss, &ref_loss, 1e-5, 1e-4);
            assert_close(
                &format!("stats {what}"),
                &stats.to_vec(),
                &ref_stats.to_vec(),
                1e-5,
                1e-4,
            );
            assert_close_scaled(&format!("dlogp {what}"), &grad, &ref_grad, 1e-7, 1e-4);
        }
    }
}

pub fn refuses_bad_input<B: KernelBackend>(device: &B::Device) {
    let x = vector::<B>(vec![0.0; 4], device);
    let err =
        roll_flow_kernels::gae(x.clone(), x.clone(), x.clone(), &[0, 3], 1.0, 0.95).unwrap_err();
    assert!(err.to_string().contains("offsets"), "{err}");
    let err = roll_flow_kernels::ppo_clip_loss(
        x.clone(),
        x.clone(),
        x.clone(),
        x,
        &[0, 4],
        &ClipSettings {
            dual_clip: Some(0.5),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("dual_clip"), "{err}");
    let (logits, targets) = logits_and_targets::<B>(2, 5, 1, device);
    let err = roll_flow_kernels::token_logprob_entropy(logits, targets, 0.0).unwrap_err();
    assert!(err.to_string().contains("temperature"), "{err}");
}

/// The PPO backward from a forward that carries per-sequence weights (`PpoSaved::
/// SequenceWeights`, as the CPU backends keep and a caller building the forward's results
/// by hand passes) equals the backward from the backend's own forward: the CubeCL backward,
/// whose forward keeps token gradients instead, runs the partials again for them.
pub fn ppo_backward_without_the_saved_gradient<B: KernelBackend>(device: &B::Device) {
    use burn::tensor::TensorPrimitive;
    use roll_flow_kernels::{PpoForward, PpoSaved, PpoTokens};
    let mut rng = Rng::new(390);
    let (offsets, mask) = packed(&mut rng, 40, 30);
    let n = mask.len();
    let old: Vec<f32> = (0..n).map(|_| -rng.unit() * 5.0).collect();
    let logp: Vec<f32> = old.iter().map(|&o| o + 0.3 * rng.normal()).collect();
    let adv: Vec<f32> = (0..n).map(|_| rng.normal()).collect();
    let column = |v: &[f32]| vector::<B>(v.to_vec(), device).into_primitive().tensor();
    let tokens = || PpoTokens::<B> {
        logp: column(&logp),
        old_logp: column(&old),
        advantages: column(&adv),
        mask: column(&mask),
        weight: None,
    };
    let config = ClipSettings {
        high: 0.28,
        dual_clip: Some(3.0),
        agg: LossAgg::SeqMeanTokenMean,
        ..Default::default()
    };
    let forward = B::ppo_clip_forward(tokens(), &offsets, &config);
    let counts: Vec<f64> = offsets
        .windows(2)
        .map(|w| mask[w[0]..w[1]].iter().map(|&m| f64::from(m)).sum())
        .collect();
    let weights = roll_flow_kernels::sequence_weights(&counts, config.agg, None);
    let weights: Vec<f32> = weights.iter().map(|&w| w as f32).collect();
    let by_hand = PpoForward {
        saved: PpoSaved::SequenceWeights(column(&weights)),
        ..forward.clone()
    };
    let backward = |f: PpoForward<B>| {
        let d = B::ppo_clip_backward(tokens(), &offsets, f, column(&[1.5]), &config);
        host(Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(d)))
    };
    let (own, given) = (backward(forward), backward(by_hand));
    assert_close_scaled("dlogp from given weights", &given, &own, 1e-7, 1e-6);
}
