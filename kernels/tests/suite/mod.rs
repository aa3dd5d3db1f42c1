//! The backend-generic test suite: each fused kernel against the unfused burn-ops
//! reference (`roll_flow_kernels::reference`) on fresh random inputs, forward values and
//! gradients (autodiff of the reference). `tests/kernels.rs` instantiates it per backend.
//!
//! Tolerances (f32 everywhere; the references accumulate in a different order):
//! - log-prob, entropy: |fused − ref| ≤ 2e-4·(1 + |ref|) (`logprob.rs`; also on rows that
//!   lie apart, `logprob_row_stride.rs`);
//! - dlogits: max |Δ| ≤ 1e-6 + 2e-3·max |ref|;
//! - GAE: ≤ 1e-4·(1 + |ref|) against both the burn-ops loop and the f64 host oracle
//!   (`gae.rs`);
//! - PPO loss, stats and dlogp: ≤ 1e-5 + 1e-4·|ref| (dlogp against max |ref|; `ppo.rs`);
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
//! - Σ x² of several tensors: ≤ 1e-6·(1 + ref) against f64 on the host (`square_sums.rs`);
//! - LoRA's dropout mask: the host's bits exactly; dropout-then-dense as one op: the two ops'
//!   values and gradients exactly (`dropout_mask.rs`).
//!
//! On half-precision backends (f16 on wgpu, bf16 on CUDA; `half_logprob.rs`,
//! `half_model_ops.rs`): one unit in the last place of the type at the f64 value, from the
//! inputs as the device rounded them.

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::{ClipSettings, KernelBackend};

use logprob::logits_and_targets;

pub mod block_write;
pub mod column_sums;
pub mod contiguous;
pub mod decode_attention;
pub mod dropout_mask;
pub mod gae;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod half_logprob;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod half_matmul;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod half_model_ops;
pub mod linear;
pub mod logprob;
pub mod logprob_row_stride;
pub mod masked_softmax;
pub mod matmul;
pub mod ppo;
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
