//! Rotary embedding against `reference::rotary` (transformers' rotate-half: narrow,
//! negate, concatenate): forward values and the gradient of x (autodiff of the reference),
//! on `[batch, len, heads, head_dim]` shapes with random angles and a scale folded into the
//! tables, as the model's query tables carry 1/sqrt(head_dim). As in the model, x is a
//! `swap_dims` view in one case and a permuted view with a strided last axis in another,
//! and the output is read through `swap_dims`, so the gradient reaching the op is a
//! strided view; in the third the tables repeat one head with stride 0 (`expand`), as the
//! model's key tables do.
//! Tolerance: ≤ 1e-6 + 1e-5·|ref| (a handful of products per value).

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::{reference, KernelBackend};

use super::{assert_close, host, Rng};

const SHAPES: [[usize; 4]; 3] = [[1, 1, 1, 2], [2, 3, 4, 8], [3, 17, 2, 64]];

pub fn rotary_forward_backward<B: KernelBackend + AutodiffBackend>(device: &B::Device) {
    for (k, &shape) in SHAPES.iter().enumerate() {
        let mut rng = Rng::new(1100 + k as u64);
        let n = shape.iter().product::<usize>();
        let tensor = |v: Vec<f32>| Tensor::<B, 4>::from_data(TensorData::new(v, shape), device);
        let [b, t, h, d] = shape;
        let scale = 0.25;
        // Case 2's tables repeat one head with stride 0, as the model's key tables do.
        let (cos, sin) = match k {
            2 => {
                let angles: Vec<f32> = (0..n / h).map(|_| 6.0 * rng.normal()).collect();
                let one_head = |v: Vec<f32>| {
                    Tensor::<B, 4>::from_data(TensorData::new(v, [b, t, 1, d]), device)
                        .expand(shape)
                };
                (
                    one_head(angles.iter().map(|a| scale * a.cos()).collect()),
                    one_head(angles.iter().map(|a| scale * a.sin()).collect()),
                )
            }
            _ => {
                let angles: Vec<f32> = (0..n).map(|_| 6.0 * rng.normal()).collect();
                (
                    tensor(angles.iter().map(|a| scale * a.cos()).collect()),
                    tensor(angles.iter().map(|a| scale * a.sin()).collect()),
                )
            }
        };
        let swapped = |v: Vec<f32>| {
            Tensor::<B, 4>::from_data(TensorData::new(v, [b, h, t, d]), device).swap_dims(1, 2)
        };
        let x_values: Vec<f32> = (0..n).map(|_| rng.normal()).collect();
        // Case 2: x is read with head_dim strided and the length axis contiguous, the
        // layout of a gradient out of a transposed matmul.
        let x = match k {
            1 => swapped(x_values),
            2 => Tensor::<B, 4>::from_data(TensorData::new(x_values, [b, h, d, t]), device)
                .permute([0, 3, 1, 2]),
            _ => tensor(x_values),
        };
        let probe = swapped((0..n).map(|_| rng.normal()).collect());
        let what = format!("{shape:?}");

        let run = |f: fn(Tensor<B, 4>, Tensor<B, 4>, Tensor<B, 4>) -> Tensor<B, 4>| {
            let xg = x.clone().require_grad();
            let y = f(xg.clone(), cos.clone(), sin.clone());
            let grads = (y.clone().swap_dims(1, 2) * probe.clone().swap_dims(1, 2))
                .sum()
                .backward();
            (host(y), host(xg.grad(&grads).unwrap()))
        };
        let (y, dx) = run(roll_flow_kernels::rotary);
        let (ry, rdx) = run(reference::rotary);
        assert_close(&format!("rotary {what}"), &y, &ry, 1e-6, 1e-5);
        assert_close(&format!("dx {what}"), &dx, &rdx, 1e-6, 1e-5);
    }
}
