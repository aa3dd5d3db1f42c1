//! RMSNorm against `reference::rms_norm` (burn ops, as the model computed it): forward
//! values and the gradients of x and the scale (autodiff of the reference), on
//! `[batch, len, hidden]` shapes with odd widths, a width past 16 lanes with a tail, rows
//! of very different scales, more rows than one parallel task (64) and more than one of
//! the CubeCL kernel's blocks of dw (256 rows; 600 make two whole blocks and a part).
//! Tolerance: y and dx ≤ 1e-5 + 1e-4·|ref|; dw (a sum over rows) ≤ 1e-5 + 1e-4·max |ref|.

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::{reference, KernelBackend};

use super::{assert_close, assert_close_scaled, host, Rng};

const SHAPES: [[usize; 3]; 5] = [
    [1, 1, 1],
    [2, 3, 7],
    [3, 50, 128],
    [1, 70, 901],
    [2, 300, 33],
];
const EPS: f32 = 1e-6;

pub fn rms_norm_forward_backward<B: KernelBackend + AutodiffBackend>(device: &B::Device) {
    for (k, &shape) in SHAPES.iter().enumerate() {
        let mut rng = Rng::new(900 + k as u64);
        let [_, _, h] = shape;
        let n = shape.iter().product::<usize>();
        // Each row gets its own scale, from 1e-2 to 1e2 (RMS well above sqrt(eps)).
        let x: Vec<f32> = (0..n)
            .map(|i| rng.normal() * 10f32.powi((i / h % 5) as i32 - 2))
            .collect();
        let x = Tensor::<B, 3>::from_data(TensorData::new(x, shape), device);
        let w_values: Vec<f32> = (0..h).map(|_| 1.0 + 0.5 * rng.normal()).collect();
        let weight = Tensor::<B, 1>::from_data(TensorData::new(w_values, [h]), device);
        let probe: Vec<f32> = (0..n).map(|_| rng.normal()).collect();
        let probe = Tensor::<B, 3>::from_data(TensorData::new(probe, shape), device);
        let what = format!("{shape:?}");

        let run = |f: fn(Tensor<B, 3>, Tensor<B, 1>, f32) -> Tensor<B, 3>| {
            let (xg, wg) = (x.clone().require_grad(), weight.clone().require_grad());
            let y = f(xg.clone(), wg.clone(), EPS);
            let grads = (y.clone() * probe.clone()).sum().backward();
            let (dx, dw) = (xg.grad(&grads).unwrap(), wg.grad(&grads).unwrap());
            (host(y), host(dx), host(dw))
        };
        let (y, dx, dw) = run(roll_flow_kernels::rms_norm);
        let (ry, rdx, rdw) = run(reference::rms_norm);
        assert_close(&format!("rms_norm {what}"), &y, &ry, 1e-5, 1e-4);
        assert_close(&format!("dx {what}"), &dx, &rdx, 1e-5, 1e-4);
        assert_close_scaled(&format!("dweight {what}"), &dw, &rdw, 1e-5, 1e-4);
    }
}

/// The residual add fused with the norm after it (`roll_flow_kernels::add_rms_norm`, a
/// CubeCL kernel; `None` on the CPU backend, whose caller adds and norms): the same bits as
/// burn's add and then the RMSNorm kernel, the sum and the norm, in f32 and in f16 with an
/// f32 scale (cast to f16 as the model's `like` does). Same bits because each unit sums
/// the same squares in the same order and the add rounds alike.
pub fn add_rms_norm_is_add_then_rms_norm<B: KernelBackend>(device: &B::Device) {
    use burn::tensor::DType;
    for (k, &shape) in SHAPES.iter().enumerate() {
        let mut rng = Rng::new(950 + k as u64);
        let [_, _, h] = shape;
        let n = shape.iter().product::<usize>();
        let mut values = |scale: f32| (0..n).map(|_| scale * rng.normal()).collect::<Vec<_>>();
        let x = Tensor::<B, 3>::from_data(TensorData::new(values(3.0), shape), device);
        let delta = Tensor::<B, 3>::from_data(TensorData::new(values(0.5), shape), device);
        let w: Vec<f32> = (0..h).map(|_| 1.0 + 0.5 * rng.normal()).collect();
        let weight = Tensor::<B, 1>::from_data(TensorData::new(w, [h]), device);
        for dtype in [DType::F32, DType::F16] {
            let (x, delta) = (x.clone().cast(dtype), delta.clone().cast(dtype));
            let fused =
                roll_flow_kernels::add_rms_norm(x.clone(), delta.clone(), weight.clone(), EPS);
            let Some((sum, y)) = fused else {
                assert!(
                    !B::DEVICE_MEMORY,
                    "a device backend fuses the add and the norm"
                );
                continue;
            };
            let want_sum = x.add(delta);
            let want_y =
                roll_flow_kernels::rms_norm(want_sum.clone(), weight.clone().cast(dtype), EPS);
            let what = format!("{shape:?} {dtype:?}");
            assert_eq!(host(sum), host(want_sum), "sum {what}");
            assert_eq!(host(y), host(want_y), "norm {what}");
        }
    }
}
