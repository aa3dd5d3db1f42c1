//! The model's row and elementwise ops on half-precision tensors (f16 on wgpu, where
//! lavapipe has it; bf16 on CUDA): RMSNorm, the masked softmax, SwiGLU and the rotary
//! embedding, forward and backward. The CubeCL kernels compute in f32 and round once
//! (`cube/rms_norm.rs`, `cube/masked_softmax.rs`, `cube/swiglu.rs`, `cube/rotary.rs`), so
//! each output is its exact value from the same rounded inputs, rounded to the type.
//!
//! Reference: f64 on the host from the inputs as the device holds them. Tolerance: one unit
//! in the last place of the output type at the reference value, plus 1e-5·max |ref| over
//! the tensor for f32's own error where a value is a difference of larger terms (dx of the
//! norm and of the softmax). Sums kept in the half type would miss it by a unit of the
//! largest terms.

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use super::half_logprob::ulp;
use super::{host, Rng};

/// `got` against `want` within one unit in the last place plus 1e-5·max |want|.
fn assert_half_close(what: &str, got: &[f32], want: &[f64], (mantissa, min_exp): (i32, i32)) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0.0f64, |a, b| a.max(b.abs()));
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let tol = ulp(w, mantissa, min_exp) + 1e-5 * scale;
        assert!(
            (g as f64 - w).abs() <= tol,
            "{what}[{i}]: {g} vs {w} (±{tol:.2e})"
        );
    }
}

/// A tensor of `shape` from host values, and those values as the device rounded them.
fn upload<B: AutodiffBackend, const D: usize>(
    values: Vec<f32>,
    shape: [usize; D],
    device: &B::Device,
) -> (Tensor<B, D>, Vec<f64>) {
    let t = Tensor::<B, D>::from_data(TensorData::new(values, shape), device);
    let rounded = host(t.clone()).into_iter().map(f64::from).collect();
    (t, rounded)
}

/// Every op, forward and backward, against f64; `format` is (mantissa bits, min exponent).
pub fn half_model_ops_match_f64<B: KernelBackend + AutodiffBackend>(
    device: &B::Device,
    format: (i32, i32),
) {
    rms_norm::<B>(device, format);
    masked_softmax::<B>(device, format);
    swiglu::<B>(device, format);
    rotary::<B>(device, format);
}

fn rms_norm<B: KernelBackend + AutodiffBackend>(device: &B::Device, format: (i32, i32)) {
    let (rows, h, eps) = (300, 70, 1e-6f32);
    let mut rng = Rng::new(1301);
    let (x, xs) = upload::<B, 2>(
        (0..rows * h).map(|_| 2.0 * rng.normal()).collect(),
        [rows, h],
        device,
    );
    let (w, ws) = upload::<B, 1>(
        (0..h).map(|_| 1.0 + 0.3 * rng.normal()).collect(),
        [h],
        device,
    );
    let (dy, dys) = upload::<B, 2>(
        (0..rows * h).map(|_| rng.normal()).collect(),
        [rows, h],
        device,
    );
    let (xg, wg) = (x.require_grad(), w.require_grad());
    let y = roll_flow_kernels::rms_norm(xg.clone(), wg.clone(), eps);
    let grads = (y.clone() * dy).sum().backward();
    let (mut want_y, mut want_dx, mut want_dw) = (vec![], vec![], vec![0.0; h]);
    for i in 0..rows {
        let row = &xs[i * h..(i + 1) * h];
        let d = &dys[i * h..(i + 1) * h];
        let r = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / h as f64 + eps as f64).sqrt();
        let dot: f64 = (0..h).map(|j| d[j] * ws[j] * row[j]).sum();
        for j in 0..h {
            want_y.push(row[j] * r * ws[j]);
            want_dx.push(r * d[j] * ws[j] - r * r * r * row[j] * dot / h as f64);
            want_dw[j] += d[j] * row[j] * r;
        }
    }
    assert_half_close("rms_norm y", &host(y), &want_y, format);
    assert_half_close(
        "rms_norm dx",
        &host(xg.grad(&grads).unwrap()),
        &want_dx,
        format,
    );
    assert_half_close(
        "rms_norm dw",
        &host(wg.grad(&grads).unwrap()),
        &want_dw,
        format,
    );
}

fn masked_softmax<B: KernelBackend + AutodiffBackend>(device: &B::Device, format: (i32, i32)) {
    let shape = [2, 3, 5, 300];
    let keys = shape[3];
    let n = shape.iter().product::<usize>();
    let mut rng = Rng::new(1302);
    let (x, xs) = upload::<B, 4>((0..n).map(|_| 3.0 * rng.normal()).collect(), shape, device);
    // Causal over the last 5 keys; −∞ (f16 has no −1e30).
    let mask: Vec<f32> = (0..n)
        .map(|i| {
            let (q, k) = (i / keys % 5, i % keys);
            if k <= keys - 5 + q {
                0.0
            } else {
                f32::NEG_INFINITY
            }
        })
        .collect();
    let (mask, ms) = upload::<B, 4>(mask, shape, device);
    let (dy, dys) = upload::<B, 4>((0..n).map(|_| rng.normal()).collect(), shape, device);
    let xg = x.require_grad();
    let y = roll_flow_kernels::masked_softmax(xg.clone(), mask);
    let grads = (y.clone() * dy).sum().backward();
    // The backward reads the probabilities as the forward rounded them.
    let ys: Vec<f64> = host(y.clone()).into_iter().map(f64::from).collect();
    let (mut want_y, mut want_dx) = (vec![], vec![]);
    for r in 0..n / keys {
        let s: Vec<f64> = (r * keys..(r + 1) * keys).map(|i| xs[i] + ms[i]).collect();
        let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let total: f64 = s.iter().map(|v| (v - m).exp()).sum();
        let p: Vec<f64> = s.iter().map(|v| (v - m).exp() / total).collect();
        let (d, y) = (
            &dys[r * keys..(r + 1) * keys],
            &ys[r * keys..(r + 1) * keys],
        );
        let dot: f64 = y.iter().zip(d).map(|(y, d)| y * d).sum();
        want_dx.extend(y.iter().zip(d).map(|(y, d)| y * (d - dot)));
        want_y.extend(p);
    }
    assert_half_close("softmax y", &host(y), &want_y, format);
    assert_half_close(
        "softmax dx",
        &host(xg.grad(&grads).unwrap()),
        &want_dx,
        format,
    );
}

fn swiglu<B: KernelBackend + AutodiffBackend>(device: &B::Device, format: (i32, i32)) {
    let shape = [7, 300];
    let n = shape[0] * shape[1];
    let mut rng = Rng::new(1303);
    let (g, gs) = upload::<B, 2>((0..n).map(|_| 4.0 * rng.normal()).collect(), shape, device);
    let (u, us) = upload::<B, 2>((0..n).map(|_| rng.normal()).collect(), shape, device);
    let (dy, dys) = upload::<B, 2>((0..n).map(|_| rng.normal()).collect(), shape, device);
    let (gg, ug) = (g.require_grad(), u.require_grad());
    let y = roll_flow_kernels::swiglu(gg.clone(), ug.clone());
    let grads = (y.clone() * dy).sum().backward();
    let sig = |g: f64| 1.0 / (1.0 + (-g).exp());
    let want_y: Vec<f64> = (0..n).map(|i| gs[i] * sig(gs[i]) * us[i]).collect();
    let want_du: Vec<f64> = (0..n).map(|i| dys[i] * gs[i] * sig(gs[i])).collect();
    let want_dg: Vec<f64> = (0..n)
        .map(|i| {
            let s = sig(gs[i]);
            dys[i] * us[i] * s * (1.0 + gs[i] * (1.0 - s))
        })
        .collect();
    assert_half_close("swiglu y", &host(y), &want_y, format);
    assert_half_close(
        "swiglu dgate",
        &host(gg.grad(&grads).unwrap()),
        &want_dg,
        format,
    );
    assert_half_close(
        "swiglu dup",
        &host(ug.grad(&grads).unwrap()),
        &want_du,
        format,
    );
}

fn rotary<B: KernelBackend + AutodiffBackend>(device: &B::Device, format: (i32, i32)) {
    let shape = [2, 3, 4, 16];
    let (n, d) = (shape.iter().product::<usize>(), shape[3]);
    let half = d / 2;
    let mut rng = Rng::new(1304);
    let angles: Vec<f32> = (0..n).map(|_| 6.0 * rng.normal()).collect();
    let (cos, cs) = upload::<B, 4>(angles.iter().map(|a| a.cos()).collect(), shape, device);
    let (sin, ss) = upload::<B, 4>(angles.iter().map(|a| a.sin()).collect(), shape, device);
    let (x, xs) = upload::<B, 4>((0..n).map(|_| rng.normal()).collect(), shape, device);
    let (dy, dys) = upload::<B, 4>((0..n).map(|_| rng.normal()).collect(), shape, device);
    let xg = x.require_grad();
    let y = roll_flow_kernels::rotary(xg.clone(), cos, sin);
    let grads = (y.clone() * dy).sum().backward();
    let (mut want_y, mut want_dx) = (vec![], vec![]);
    for i in 0..n {
        let (first, partner) = match i % d < half {
            true => (true, i + half),
            false => (false, i - half),
        };
        let sign = if first { -1.0 } else { 1.0 };
        want_y.push(xs[i] * cs[i] + sign * xs[partner] * ss[i]);
        want_dx.push(dys[i] * cs[i] - sign * dys[partner] * ss[partner]);
    }
    assert_half_close("rotary y", &host(y), &want_y, format);
    assert_half_close(
        "rotary dx",
        &host(xg.grad(&grads).unwrap()),
        &want_dx,
        format,
    );
}
