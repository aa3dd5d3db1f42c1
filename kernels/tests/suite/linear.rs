//! The dense layer against an f64 computation on the host (y = x·W + b, dx = g·Wᵀ,
//! dW = xᵀ·g, db = Σ_rows g for the probe gradient g): forward values and the gradients of
//! x, the weight and the bias, with and without a bias, on `[batch, len, k]` inputs
//! including one past the CPU's parallel threshold (1,024 tokens · 96 · 80 ≈ 7.9M
//! multiply-adds ≥ 192³), and with a transposed (strided) weight as the model's tied LM
//! head passes. f64, not burn's own matmul, because on a TF32 device (CUDA) burn's f32
//! matmul is itself off by about 1e-3 (`KernelBackend::matmul_forward`). (Empty inputs are
//! unit-tested on the CPU: burn's own `sum` backward refuses them on CubeCL.)
//! Tolerance: ≤ 1e-5 + 1e-4·|ref|, the gradients against max |ref| (sums of up to a few
//! hundred f32 products).

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use super::{assert_close, assert_close_scaled, host, host_matmul, transpose, Rng};

/// (leading dims of x, k, m).
const SHAPES: [(&[usize], usize, usize); 4] = [
    (&[1], 1, 1),
    (&[7], 5, 3),
    (&[2, 9], 33, 17),
    (&[8, 128], 96, 80),
];

fn random(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.normal()).collect()
}

pub fn linear_forward_backward<B: KernelBackend + AutodiffBackend>(device: &B::Device) {
    for (case, &(lead, k, m)) in SHAPES.iter().enumerate() {
        for (with_bias, transposed) in [(true, false), (false, false), (false, true)] {
            let mut rng = Rng::new(1300 + case as u64);
            let dims = [lead[0], lead.get(1).copied().unwrap_or(1), k];
            let tokens = dims[0] * dims[1];
            let x = Tensor::<B, 3>::from_data(
                TensorData::new(random(&mut rng, tokens * k), dims),
                device,
            );
            let w_values = random(&mut rng, k * m);
            // The weight as [k, m] row-major, whichever way it is stored.
            let w_km = if transposed {
                transpose(&w_values, m, k)
            } else {
                w_values.clone()
            };
            let weight = if transposed {
                // Stored [m, k] and read through a transpose, like a tied embedding.
                Tensor::<B, 2>::from_data(TensorData::new(w_values, [m, k]), device).transpose()
            } else {
                Tensor::<B, 2>::from_data(TensorData::new(w_values, [k, m]), device)
            };
            let b_values = random(&mut rng, m);
            let bias = Tensor::<B, 1>::from_data(TensorData::new(b_values.clone(), [m]), device);
            let g = random(&mut rng, tokens * m);
            let probe = Tensor::<B, 3>::from_data(
                TensorData::new(g.clone(), [dims[0], dims[1], m]),
                device,
            );
            let (xg, wg, bg) = (
                x.clone().require_grad(),
                weight.clone().require_grad(),
                bias.clone().require_grad(),
            );
            let y =
                roll_flow_kernels::linear(xg.clone(), wg.clone(), with_bias.then(|| bg.clone()));
            let grads = (y.clone() * probe).sum().backward();
            let (y, dx, dw) = (
                host(y),
                host(xg.grad(&grads).unwrap()),
                host(wg.grad(&grads).unwrap()),
            );
            let x_values = host(x.clone());
            let mut ry = host_matmul(&x_values, &w_km, tokens, k, m);
            if with_bias {
                for (i, v) in ry.iter_mut().enumerate() {
                    *v += b_values[i % m];
                }
            }
            let rdx = host_matmul(&g, &transpose(&w_km, k, m), tokens, m, k);
            let rdw = host_matmul(&transpose(&x_values, tokens, k), &g, k, tokens, m);
            let rdb: Vec<f32> = (0..m)
                .map(|j| (0..tokens).map(|t| g[t * m + j]).sum())
                .collect();
            let what = format!("{dims:?}·[{k}, {m}] bias {with_bias} transposed {transposed}");
            assert_close(&format!("y {what}"), &y, &ry, 1e-5, 1e-4);
            assert_close_scaled(&format!("dx {what}"), &dx, &rdx, 1e-5, 1e-4);
            assert_close_scaled(&format!("dweight {what}"), &dw, &rdw, 1e-5, 1e-4);
            if with_bias {
                let db = host(bg.grad(&grads).unwrap());
                assert_close_scaled(&format!("dbias {what}"), &db, &rdb, 1e-5, 1e-4);
            }
        }
    }
}
