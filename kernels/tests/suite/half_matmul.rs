//! Half-precision products with each of cubek's routines ([`roll_flow_kernels::HalfMatmul`])
//! against f64 on the host from the inputs as the device rounded them (f16 on wgpu, where
//! lavapipe refuses the tensor-core routines and burn's runs instead; bf16 on CUDA): plain
//! and transposed matrices, and the attention's batched products of strided views.
//!
//! Tolerance: a routine multiplies in the half type (each product exact in f32), sums in
//! f32 and rounds once, so one unit in the last place of the output type at the reference
//! value plus k·2⁻²³·Σ|a·b| for the f32 sum of k terms.
//!
//! The routine is one setting for the process: run the suite on one thread (`run.sh` does)
//! where other half-precision products run beside it on a GPU.

use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::{
    half_matmul, half_matmul_refusals, set_half_matmul, HalfMatmul, KernelBackend,
};

use super::half_logprob::ulp;
use super::{host, Rng};

/// (m, k, n, lhs given transposed).
const SHAPES: [(usize, usize, usize, bool); 3] = [
    (128, 256, 192, false),
    (64, 128, 64, true),
    (33, 70, 45, false),
];

/// Every routine on every shape; `format` is the type's (mantissa bits, min exponent).
pub fn half_products_match_f64<B: KernelBackend>(device: &B::Device, format: (i32, i32)) {
    let (mantissa, min_exp) = format;
    let mut rng = Rng::new(1709);
    let (refused_before, chosen) = (half_matmul_refusals(), half_matmul());
    for &(m, k, n, transposed) in &SHAPES {
        let mut values = |len: usize| (0..len).map(|_| rng.normal()).collect::<Vec<f32>>();
        let lhs = match transposed {
            true => Tensor::<B, 2>::from_data(TensorData::new(values(k * m), [k, m]), device)
                .transpose(),
            false => Tensor::<B, 2>::from_data(TensorData::new(values(m * k), [m, k]), device),
        };
        let rhs = Tensor::<B, 2>::from_data(TensorData::new(values(k * n), [k, n]), device);
        let (a, b) = (host(lhs.clone()), host(rhs.clone()));
        for choice in HalfMatmul::ALL {
            set_half_matmul(choice);
            let got = host(roll_flow_kernels::matmul(lhs.clone(), rhs.clone()));
            set_half_matmul(chosen);
            for (i, &g) in got.iter().enumerate() {
                let (row, col) = (i / n, i % n);
                let terms = (0..k).map(|l| a[row * k + l] as f64 * b[l * n + col] as f64);
                let (want, size) = terms.fold((0.0, 0.0), |(s, z), t| (s + t, z + t.abs()));
                let tol = ulp(want, mantissa, min_exp) + k as f64 * 2f64.powi(-23) * size;
                assert!(
                    (g as f64 - want).abs() <= tol,
                    "{choice:?} [{m}, {k}]·[{k}, {n}] at ({row}, {col}): {g} vs {want} (±{tol:.2e})"
                );
            }
        }
    }
    attention_products::<B>(device, format, &mut rng);
    let refused = half_matmul_refusals() - refused_before;
    let launched = (SHAPES.len() + 1) * (HalfMatmul::ALL.len() - 1);
    println!(
        "half products: {refused} of {launched} refused by their routine (a fallback ran them)"
    );
}

/// The attention's batched products: `[batch, heads, queries, d] · [batch, heads, d, keys]`
/// with both operands strided views (heads moved in front by `swap_dims`, the keys
/// transposed), as `qwen2/attention.rs` hands them over.
fn attention_products<B: KernelBackend>(device: &B::Device, format: (i32, i32), rng: &mut Rng) {
    let (mantissa, min_exp) = format;
    let (batch, heads, queries, keys, d) = (2, 3, 32, 48, 64);
    let mut values = |len: usize| (0..len).map(|_| rng.normal()).collect::<Vec<f32>>();
    let q = Tensor::<B, 4>::from_data(
        TensorData::new(
            values(batch * queries * heads * d),
            [batch, queries, heads, d],
        ),
        device,
    )
    .swap_dims(1, 2);
    let k = Tensor::<B, 4>::from_data(
        TensorData::new(values(batch * keys * heads * d), [batch, keys, heads, d]),
        device,
    )
    .swap_dims(1, 2)
    .swap_dims(2, 3);
    let (a, b) = (host(q.clone()), host(k.clone()));
    let chosen = half_matmul();
    for choice in HalfMatmul::ALL {
        set_half_matmul(choice);
        let got = host(roll_flow_kernels::matmul(q.clone(), k.clone()));
        set_half_matmul(chosen);
        for (i, &g) in got.iter().enumerate() {
            let (pair, row, col) = (i / (queries * keys), i / keys % queries, i % keys);
            let terms = (0..d).map(|l| {
                a[(pair * queries + row) * d + l] as f64 * b[(pair * d + l) * keys + col] as f64
            });
            let (want, size) = terms.fold((0.0, 0.0), |(s, z), t| (s + t, z + t.abs()));
            let tol = ulp(want, mantissa, min_exp) + d as f64 * 2f64.powi(-23) * size;
            assert!(
                (g as f64 - want).abs() <= tol,
                "{choice:?} attention scores [{pair}, {row}, {col}]: {g} vs {want} (±{tol:.2e})"
            );
        }
    }
}
