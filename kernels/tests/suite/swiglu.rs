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

/// A generating copy's gate and up are the two column halves of one `[.., 2·width]`
/// product: the forward on those views gives the same values as on contiguous copies of
/// them, bit for bit (the CubeCL kernel reads the views in place, through each row's
/// start), and matches the reference.
pub fn swiglu_reads_the_halves_of_one_product<B: KernelBackend>(device: &B::Device) {
    for (k, &(rows, width)) in SHAPES.iter().enumerate() {
        let mut rng = Rng::new(700 + k as u64);
        let values: Vec<f32> = (0..rows * 2 * width).map(|_| 3.0 * rng.normal()).collect();
        let both = Tensor::<B, 2>::from_data(TensorData::new(values, [rows, 2 * width]), device);
        // Also as `[2, rows, 2·width]` (a batch of two sequences, the second negated).
        let batched = Tensor::stack::<3>(vec![both.clone(), both.clone().neg()], 0);
        let what = format!("{rows}x{width}");
        let halves = |t: Tensor<B, 2>| {
            let (gate, up) = (t.clone().narrow(1, 0, width), t.narrow(1, width, width));
            let y = host(roll_flow_kernels::swiglu(gate.clone(), up.clone()));
            let copied = host(roll_flow_kernels::swiglu(
                roll_flow_kernels::contiguous(gate.clone()),
                roll_flow_kernels::contiguous(up.clone()),
            ));
            (y, copied, host(reference::swiglu(gate, up)))
        };
        let (y, copied, reference) = halves(both);
        assert_eq!(y, copied, "swiglu of views {what}");
        assert_close(
            &format!("swiglu of views {what}"),
            &y,
            &reference,
            1e-5,
            1e-4,
        );
        let (gate, up) = (
            batched.clone().narrow(2, 0, width),
            batched.narrow(2, width, width),
        );
        let y = host(roll_flow_kernels::swiglu(gate.clone(), up.clone()));
        let copied = host(roll_flow_kernels::swiglu(
            roll_flow_kernels::contiguous(gate),
            roll_flow_kernels::contiguous(up),
        ));
        assert_eq!(y, copied, "swiglu of batched views {what}");
    }
}
