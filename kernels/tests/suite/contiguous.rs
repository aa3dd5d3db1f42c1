//! `contiguous` on the attention layouts, values and the gradient of x against the same
//! ops without it: heads moved back with `swap_dims` and merged by a reshape (a strided
//! view in, its gradient out through `swap_dims`), and the values' path, a row-major
//! tensor whose gradient comes back strided through `swap_dims`.
//! Exact: values are copied, not computed.

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use super::{host, Rng};

pub fn contiguous_forward_backward<B: KernelBackend + AutodiffBackend>(device: &B::Device) {
    for (k, [b, h, q, d]) in [[1, 1, 1, 2], [2, 3, 5, 4], [3, 8, 33, 64]]
        .into_iter()
        .enumerate()
    {
        let mut rng = Rng::new(1300 + k as u64);
        let n = b * h * q * d;
        let x = Tensor::<B, 4>::from_data(
            TensorData::new(
                (0..n).map(|_| rng.normal()).collect::<Vec<f32>>(),
                [b, h, q, d],
            ),
            device,
        );
        let probe = Tensor::<B, 3>::from_data(
            TensorData::new(
                (0..n).map(|_| rng.normal()).collect::<Vec<f32>>(),
                [b, q, h * d],
            ),
            device,
        );
        let run = |merge: fn(Tensor<B, 4>) -> Tensor<B, 4>, before_swap: bool| {
            let xg = x.clone().require_grad();
            let heads_last = match before_swap {
                true => merge(xg.clone()).swap_dims(1, 2),
                false => merge(xg.clone().swap_dims(1, 2)),
            };
            let y = heads_last.reshape([b, q, h * d]);
            let grads = (y.clone() * probe.clone()).sum().backward();
            (host(y), host(xg.grad(&grads).unwrap()))
        };
        for before_swap in [false, true] {
            let (y, dx) = run(roll_flow_kernels::contiguous, before_swap);
            let (want_y, want_dx) = run(|t| t, before_swap);
            let what = format!("{:?}, before the swap: {before_swap}", [b, h, q, d]);
            assert_eq!(y, want_y, "values of {what}");
            assert_eq!(dx, want_dx, "gradient of {what}");
        }
    }
}
