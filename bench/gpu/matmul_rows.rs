//! bf16 matrix products at the Qwen2.5-0.5B shape's sizes, once per cubek routine
//! ([`roll_flow_kernels::HalfMatmul`]; `gpu --only matmul`): run 7 found burn's routine at
//! about 39 TFLOP/s in training and 20 ms of products per decode step, and these rows say
//! which routine to make the default. Each row: TFLOP/s (the median of a few runs, each
//! ended by a sync) and the fraction of the H100's dense bf16 peak, marked "refused" where
//! the routine could not be set up for the shapes (its fallback then ran them).

use std::hint::black_box;

use burn::tensor::{DType, Distribution, Tensor};
use roll_flow_kernels::{
    half_matmul, half_matmul_refusals, set_half_matmul, HalfMatmul, KernelBackend,
};
use serde_json::{json, Value};

use super::{median_s, sync};

/// (what, m, k, n, lhs transposed): a training step's products over 8 × 2,048 tokens (the
/// attention's query and key/value projections, the MLP's up and down projections, the
/// output layer, a weight gradient) and a decode step's at batch 128 (the same
/// projections): run 7 timed six of them, and at the two decode sizes it had another
/// routine was ahead of the default (`DoubleCyclicMma`), so the decode rows now cover
/// every projection a layer runs, for a rule by rows should the next run confirm it.
const SHAPES: [(&str, usize, usize, usize, bool); 11] = [
    ("train q", 16_384, 896, 896, false),
    ("train k/v", 16_384, 896, 128, false),
    ("train up", 16_384, 896, 4_864, false),
    ("train down", 16_384, 4_864, 896, false),
    ("train lm head", 16_384, 896, 151_936, false),
    ("train dW up", 896, 16_384, 4_864, true),
    ("decode q", 128, 896, 896, false),
    ("decode k/v", 128, 896, 128, false),
    ("decode up", 128, 896, 4_864, false),
    ("decode down", 128, 4_864, 896, false),
    ("decode lm head", 128, 896, 151_936, false),
];

pub fn matmul_rows<B: KernelBackend>(device: &B::Device, peak: f64) -> Vec<Value> {
    let operands: Vec<_> = SHAPES
        .iter()
        .map(|&(_, m, k, n, transposed)| {
            let normal = Distribution::Normal(0.0, 0.05);
            let lhs = match transposed {
                true => Tensor::<B, 2>::random([k, m], normal, device)
                    .cast(DType::BF16)
                    .transpose(),
                false => Tensor::<B, 2>::random([m, k], normal, device).cast(DType::BF16),
            };
            (
                lhs,
                Tensor::<B, 2>::random([k, n], normal, device).cast(DType::BF16),
            )
        })
        .collect();
    println!("| bf16 product | routine | ms | TFLOP/s | of the bf16 peak |");
    println!("|---|---|---|---|---|");
    let (mut rows, chosen) = (Vec::new(), half_matmul());
    for choice in HalfMatmul::ALL {
        set_half_matmul(choice);
        for (&(what, m, k, n, _), (lhs, rhs)) in SHAPES.iter().zip(&operands) {
            let refused = half_matmul_refusals();
            let seconds = median_s(3, || {
                black_box(roll_flow_kernels::matmul(lhs.clone(), rhs.clone()));
                sync::<B>(device);
            });
            let refused = half_matmul_refusals() > refused;
            let flops = 2.0 * (m * k * n) as f64 / seconds;
            let shape = format!("{what} [{m}, {k}]·[{k}, {n}]");
            match refused {
                true => println!(
                    "| {shape} | {choice:?} refused: its fallback's {:.3} | | |",
                    seconds * 1e3
                ),
                false => println!(
                    "| {shape} | {choice:?} | {:.3} | {:.1} | {:.1}% |",
                    seconds * 1e3,
                    flops / 1e12,
                    100.0 * flops / peak
                ),
            }
            rows.push(json!({
                "shape": shape, "routine": format!("{choice:?}"), "refused": refused,
                "seconds": seconds, "flops_per_s": flops,
            }));
        }
    }
    set_half_matmul(chosen);
    rows
}
