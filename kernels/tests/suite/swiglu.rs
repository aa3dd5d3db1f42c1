//! SwiGLU (`silu(gate) ⊙ up`) against `reference::swiglu` in burn ops: forward values and
//! both input gradients (autodiff of the reference), on shapes with odd sizes, a size past
//! the CPU twin's parallel chunk (16,384), and inputs from −100 to 100 (saturated σ).
//! Tolerance: |fused − ref| ≤ 1e-5 + 1e-4·|ref| (the polynomial exp's relative error is
//! ≈ 2e-7; burn's sigmoid goes through exp(−log(1 + exp(−x)))).

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::{reference, KernelBackend};

use super::{assert_close, host, Rng};

const SHAPES: [(usize, usize); 4] = [(1, 1), (7, 33), (64, 512), (5, 8_009)];

fn matrix<B: AutodiffBackend>(
    rng: &mut Rng,
    (rows, cols): (usize, usize),
    scale: f32,
    device: &B::Device,
) -> Tensor<B, 2> {
    let mut v: Vec<f32> = (0..rows * cols).map(|_| scale * rng.normal()).collect();
    // A few saturated gates in every shape.
    for (i, x) in v.iter_mut().enumerate().take(4) {
        *x = [-100.0, 100.0, -30.0, 30.0][i];
    }
    Tensor::from_data(TensorData::new(v, [rows, cols]), device)
}

pub fn swiglu_forward_backward<B: KernelBackend + AutodiffBackend>(device: &B::Device) {
    for (k, &shape) in SHAPES.iter().enumerate() {
        let mut rng = Rng::new(500 + k as u64);
        let gate = matrix::<B>(&mut rng, shape, 4.0, device);
        let up = matrix::<B>(&mut rng, shape, 1.0, device);
        let weight = matrix::<B>(&mut rng, shape, 1.0, device);
        let what = format!("{}x{}", shape.0, shape.1);

        let run = |f: fn(Tensor<B, 2>, Tensor<B, 2>) -> Tensor<B, 2>| {
            let (g, u) = (gate.clone().require_grad(), up.clone().require_grad());
            let y = f(g.clone(), u.clone());
            let grads = (y.clone() * weight.clone()).sum().backward();
            let (dg, du) = (g.grad(&grads).unwrap(), u.grad(&grads).unwrap());
            (host(y), host(dg), host(du))
        };
        let (y, dg, du) = run(roll_flow_kernels::swiglu);
        let (ry, rdg, rdu) = run(reference::swiglu);
        assert_close(&format!("swiglu {what}"), &y, &ry, 1e-5, 1e-4);
        assert_close(&format!("dgate {what}"), &dg, &rdg, 1e-5, 1e-4);
        assert_close(&format!("dup {what}"), &du, &rdu, 1e-5, 1e-4);
    }
}
