//! The log-prob + entropy kernel on half-precision logits (f16 on wgpu, where lavapipe has
//! it; bf16 on CUDA): every sum in f32 (`cube/logprob.rs`), the log-prob and entropy
//! written in f32, dlogits rounded once to the logits' type.
//!
//! Reference: f64 on the host from the logits as the device holds them. Tolerance: log-prob
//! and entropy 2e-5·(1 + |ref|) (f32 sums over up to 151,936 terms; a half-precision output
//! would be off by up to 0.03), dlogits one unit in the last place of the logits' type at
//! the reference value, plus 1e-5 for the target token's cancellation.

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{DType, Int, Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use super::{host, Rng};

/// The shapes: a small row, a 32k vocabulary, Qwen2.5's 151,936.
const SHAPES: [(usize, usize); 3] = [(3, 7), (4, 32_000), (2, 151_936)];

/// One unit in the last place at `x` of a float with `mantissa` stored bits (10 for f16,
/// 7 for bf16) and smallest normal exponent `min_exp` (−14, −126).
pub fn ulp(x: f64, mantissa: i32, min_exp: i32) -> f64 {
    let e = x.abs().log2().floor().max(min_exp as f64) as i32;
    2f64.powi(e - mantissa)
}

/// Log-prob, entropy and dlogits on `B`'s half-precision logits against f64;
/// `(mantissa, min_exp)` of the logits' type.
pub fn half_logprob_matches_f64<B: KernelBackend + AutodiffBackend>(
    device: &B::Device,
    (mantissa, min_exp): (i32, i32),
) {
    let temperature = 0.8f64;
    for (k, &(rows, vocab)) in SHAPES.iter().enumerate() {
        // Drawn on the host: the device's generator is shared with tests running beside.
        let mut rng = Rng::new(300 + k as u64);
        let z: Vec<f32> = (0..rows * vocab).map(|_| 3.0 * rng.normal()).collect();
        let logits = Tensor::<B, 2>::from_data(TensorData::new(z, [rows, vocab]), device);
        let targets: Vec<i64> = (0..rows).map(|_| rng.below(vocab) as i64).collect();
        let w_lp: Vec<f32> = (0..rows).map(|_| rng.normal()).collect();
        let w_h: Vec<f32> = (0..rows).map(|_| rng.normal()).collect();

        let x = logits.clone().detach().require_grad();
        let ids = Tensor::<B, 1, Int>::from_data(TensorData::new(targets.clone(), [rows]), device);
        let out =
            roll_flow_kernels::token_logprob_entropy(x.clone(), ids, temperature as f32).unwrap();
        // The weights in the outputs' f32, made so (not cast from the logits' type, which
        // would round them): burn 0.21's binary ops do not promote, and an f32 × f16
        // product is an f32-labelled buffer of f16 values.
        let weights = |w: &[f32]| {
            let data = TensorData::new(w.to_vec(), [w.len()]);
            Tensor::<B, 1>::from_data(data, (device, DType::F32))
        };
        let loss =
            (out.logprob.clone() * weights(&w_lp) + out.entropy.clone() * weights(&w_h)).sum();
        let grad = host(x.grad(&loss.backward()).unwrap());
        let (lp, h) = (host(out.logprob), host(out.entropy));

        // The logits as the device holds them (rounded to its type).
        let z = host(logits);
        let tol = |want: f64, floor: f64| ulp(want, mantissa, min_exp) + floor;
        for r in 0..rows {
            let s: Vec<f64> = z[r * vocab..(r + 1) * vocab]
                .iter()
                .map(|&v| v as f64 / temperature)
                .collect();
            let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let lse = m + s.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
            let y = targets[r] as usize;
            let want_lp = s[y] - lse;
            let want_h = -s.iter().map(|v| (v - lse).exp() * (v - lse)).sum::<f64>();
            let what = format!("{rows}x{vocab} row {r}");
            let f32_tol = |want: f64| 2e-5 * (1.0 + want.abs());
            assert!(
                (lp[r] as f64 - want_lp).abs() <= f32_tol(want_lp),
                "logp {what}: {} vs {want_lp}",
                lp[r]
            );
            assert!(
                (h[r] as f64 - want_h).abs() <= f32_tol(want_h),
                "entropy {what}: {} vs {want_h}",
                h[r]
            );
            // dz_v = (g_lp(δ_vy − p_v) − g_H p_v(log p_v + H)) / T.
            let (a, b) = (w_lp[r] as f64, w_h[r] as f64);
            for (v, &sv) in s.iter().enumerate() {
                let log_p = sv - lse;
                let p = log_p.exp();
                let want =
                    ((v == y) as u8 as f64 * a - p * (a + b * (log_p + want_h))) / temperature;
                let got = grad[r * vocab + v] as f64;
                assert!(
                    (got - want).abs() <= tol(want, 1e-5),
                    "dlogits {what} token {v}: {got} vs {want}"
                );
            }
        }
    }
}
