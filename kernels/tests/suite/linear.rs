//! The dense layer against `reference::linear` (burn's `linear`: matmul and broadcast
//! add): forward values and the gradients of x, the weight and the bias (autodiff of the
//! reference), with and without a bias, on `[batch, len, k]` inputs including one past the
//! CPU's parallel threshold (1,024 tokens · 96 · 80 ≈ 7.9M multiply-adds ≥ 192³), and with
//! a transposed (strided) weight as the model's tied LM head passes. (Empty inputs are
//! unit-tested on the CPU: burn's own `sum` backward refuses them on CubeCL.)
//! Tolerance: ≤ 1e-5 + 1e-4·|ref|, the gradients against max |ref| (sums of up to a few
//! hundred products, accumulated in a different order).

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::{reference, KernelBackend};

use super::{assert_close, assert_close_scaled, host, Rng};

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

type Linear<B> = fn(Tensor<B, 3>, Tensor<B, 2>, Option<Tensor<B, 1>>) -> Tensor<B, 3>;

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
            let weight = if transposed {
                // Stored [m, k] and read through a transpose, like a tied embedding.
                Tensor::<B, 2>::from_data(TensorData::new(w_values, [m, k]), device).transpose()
            } else {
                Tensor::<B, 2>::from_data(TensorData::new(w_values, [k, m]), device)
            };
            let bias = Tensor::<B, 1>::from_data(TensorData::new(random(&mut rng, m), [m]), device);
            let probe = Tensor::<B, 3>::from_data(
                TensorData::new(random(&mut rng, tokens * m), [dims[0], dims[1], m]),
                device,
            );
            let run = |f: Linear<B>| {
                let (xg, wg, bg) = (
                    x.clone().require_grad(),
                    weight.clone().require_grad(),
                    bias.clone().require_grad(),
                );
                let y = f(xg.clone(), wg.clone(), with_bias.then(|| bg.clone()));
                let grads = (y.clone() * probe.clone()).sum().backward();
                let db = with_bias.then(|| host(bg.grad(&grads).unwrap()));
                (
                    host(y),
                    host(xg.grad(&grads).unwrap()),
                    host(wg.grad(&grads).unwrap()),
                    db,
                )
            };
            let (y, dx, dw, db) = run(roll_flow_kernels::linear);
            let (ry, rdx, rdw, rdb) = run(reference::linear);
            let what = format!("{dims:?}·[{k}, {m}] bias {with_bias} transposed {transposed}");
            assert_close(&format!("y {what}"), &y, &ry, 1e-5, 1e-4);
            assert_close_scaled(&format!("dx {what}"), &dx, &rdx, 1e-5, 1e-4);
            assert_close_scaled(&format!("dweight {what}"), &dw, &rdw, 1e-5, 1e-4);
            if let (Some(db), Some(rdb)) = (db, rdb) {
                assert_close_scaled(&format!("dbias {what}"), &db, &rdb, 1e-5, 1e-4);
            }
        }
    }
}
