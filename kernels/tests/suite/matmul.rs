//! The batched matrix product (`roll_flow_kernels::matmul`, as attention calls it) against
//! f64 on the host: the product and the gradients of both factors for a probe gradient g
//! (d lhs = g·rhsᵀ, d rhs = lhsᵀ·g), on 4-D factors, one read through a transpose as
//! attention's keys are. Tolerance ≤ 2e-5·max |ref|: f32 products summed over up to 96
//! terms; TF32 products (10-bit mantissas) would miss it by two orders of magnitude.

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use super::{assert_close_scaled, host, host_matmul, transpose, Rng};

/// (leading dims, n, k, m).
const SHAPES: [([usize; 2], usize, usize, usize); 3] =
    [([1, 1], 1, 1, 1), ([2, 3], 5, 7, 4), ([2, 2], 40, 96, 33)];

/// Per leading index, the `[rows, cols]` block of `values` as its own vector.
fn blocks(values: &[f32], count: usize, size: usize) -> Vec<&[f32]> {
    (0..count)
        .map(|i| &values[i * size..(i + 1) * size])
        .collect()
}

pub fn matmul_forward_backward<B: KernelBackend + AutodiffBackend>(device: &B::Device) {
    for (case, &(lead, n, k, m)) in SHAPES.iter().enumerate() {
        let mut rng = Rng::new(1700 + case as u64);
        let count = lead[0] * lead[1];
        let mut random = |len: usize| -> Vec<f32> { (0..len).map(|_| rng.normal()).collect() };
        let (a, b_t, g) = (
            random(count * n * k),
            random(count * m * k),
            random(count * n * m),
        );
        let lhs =
            Tensor::<B, 4>::from_data(TensorData::new(a.clone(), [lead[0], lead[1], n, k]), device)
                .require_grad();
        // rhs stored [.., m, k] and read as [.., k, m] through a transpose.
        let rhs_stored = Tensor::<B, 4>::from_data(
            TensorData::new(b_t.clone(), [lead[0], lead[1], m, k]),
            device,
        )
        .require_grad();
        let probe =
            Tensor::<B, 4>::from_data(TensorData::new(g.clone(), [lead[0], lead[1], n, m]), device);
        let y = roll_flow_kernels::matmul(lhs.clone(), rhs_stored.clone().swap_dims(2, 3));
        let grads = (y.clone() * probe).sum().backward();
        let (y, da, db_t) = (
            host(y),
            host(lhs.grad(&grads).unwrap()),
            host(rhs_stored.grad(&grads).unwrap()),
        );
        let (mut ry, mut rda, mut rdb_t) = (Vec::new(), Vec::new(), Vec::new());
        let parts = blocks(&a, count, n * k)
            .into_iter()
            .zip(blocks(&b_t, count, m * k));
        for ((a, b_t), g) in parts.zip(blocks(&g, count, n * m)) {
            let b = transpose(b_t, m, k);
            ry.extend(host_matmul(a, &b, n, k, m));
            rda.extend(host_matmul(g, b_t, n, m, k));
            // d rhs [k, m] = aᵀ·g, stored transposed as [m, k] = gᵀ·a.
            rdb_t.extend(host_matmul(&transpose(g, n, m), a, m, n, k));
        }
        let what = format!("{lead:?}·[{n}, {k}]·[{k}, {m}]");
        assert_close_scaled(&format!("product {what}"), &y, &ry, 0.0, 2e-5);
        assert_close_scaled(&format!("d lhs {what}"), &da, &rda, 0.0, 2e-5);
        assert_close_scaled(&format!("d rhs {what}"), &db_t, &rdb_t, 0.0, 2e-5);
    }
}

/// The TF32 switch (`roll_flow_kernels::allow_tf32`) on a device with TF32 tensor cores:
/// a `[64, 256]·[256, 64]` product is within f32's 2e-5·max |ref| of f64 when TF32 is not
/// allowed, and further than 2e-4 (TF32's 10-bit mantissas give about 1e-3) when it is.
/// Flips a process-wide setting, so other products running beside it would see TF32:
/// `bench/gpu/run.sh` runs the suite with one test thread.
#[cfg(feature = "cuda")]
pub fn tf32_only_when_allowed<B: KernelBackend>(device: &B::Device) {
    let (n, k, m) = (64, 256, 64);
    let mut rng = Rng::new(1800);
    let mut random = |len: usize| -> Vec<f32> { (0..len).map(|_| rng.normal()).collect() };
    let (a, b) = (random(n * k), random(k * m));
    let want = host_matmul(&a, &b, n, k, m);
    let scale = want.iter().fold(0.0f32, |s, v| s.max(v.abs()));
    let product = |tf32: bool| {
        roll_flow_kernels::allow_tf32(tf32);
        let lhs = Tensor::<B, 4>::from_data(TensorData::new(a.clone(), [1, 1, n, k]), device);
        let rhs = Tensor::<B, 4>::from_data(TensorData::new(b.clone(), [1, 1, k, m]), device);
        let y = host(roll_flow_kernels::matmul(lhs, rhs));
        let err = y
            .iter()
            .zip(&want)
            .fold(0.0f32, |e, (g, w)| e.max((g - w).abs()));
        err / scale
    };
    let (with, without) = (product(true), product(false));
    assert!(
        without <= 2e-5,
        "TF32 not allowed: relative error {without}"
    );
    assert!(with > 2e-4, "TF32 allowed: relative error {with}, as f32's");
}
