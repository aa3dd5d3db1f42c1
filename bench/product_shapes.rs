//! The CPU matrix product (`roll_flow_kernels::matmul` on `Flex`, the ordered product of
//! `kernels/src/cpu/ordered_product.rs`) at the shapes one SmolLM2-135M training step
//! multiplies (8 × 128 tokens; bench/model_throughput.rs's `smollm2` shape), each operand
//! row-major or transposed as the step lays it out, beside PyTorch's `a @ b` on the same
//! shapes (`bench/product_shapes_torch.py`, run it in the same sitting).
//!
//! `RAYON_NUM_THREADS=2 cargo bench -p roll-flow-kernels --bench product_shapes`
//!
//! Prints, per shape, the best and the median GFLOP/s of nine timed runs of about 0.2 s.

use std::time::Instant;

use burn::backend::Flex;
use burn::tensor::{Distribution, Tensor};

/// (name, rows, inner, cols, a transposed, b transposed): a step's products in both passes.
const SHAPES: [(&str, usize, usize, usize, bool, bool); 12] = [
    ("attention scores q·kᵀ", 128, 64, 128, false, true),
    ("attention p·v", 128, 128, 64, false, false),
    ("attention dv = pᵀ·do", 128, 128, 64, true, false),
    ("q projection x·W", 1024, 576, 576, false, false),
    ("up projection x·W", 1024, 576, 1536, false, false),
    ("down projection x·W", 1024, 1536, 576, false, false),
    ("down dx = dy·Wᵀ", 1024, 576, 1536, false, true),
    ("up dW = xᵀ·dy", 576, 1024, 1536, true, false),
    ("tied head x·Eᵀ", 1024, 576, 49_152, false, true),
    ("head dx = dy·E", 1024, 49_152, 576, false, false),
    ("head dE = dyᵀ·x", 49_152, 1024, 576, true, false),
    ("square", 1024, 1024, 1024, false, false),
];

fn main() {
    roll_flow_kernels::cpu::keep_freed_buffers_for_reuse();
    println!("threads {}", rayon::current_num_threads());
    let device = Default::default();
    for (name, m, k, n, a_t, b_t) in SHAPES {
        let random = |rows, cols, transposed| match transposed {
            true => {
                Tensor::<Flex, 2>::random([cols, rows], Distribution::Default, &device).transpose()
            }
            false => Tensor::<Flex, 2>::random([rows, cols], Distribution::Default, &device),
        };
        let (a, b) = (random(m, k, a_t), random(k, n, b_t));
        let flop = 2.0 * (m * k * n) as f64;
        let reps = ((6e10 / flop) as usize).clamp(3, 2000);
        let mut rates: Vec<f64> = (0..10)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..reps {
                    std::hint::black_box(roll_flow_kernels::matmul(a.clone(), b.clone()));
                }
                reps as f64 * flop / start.elapsed().as_secs_f64() / 1e9
            })
            .skip(1)
            .collect();
        rates.sort_by(f64::total_cmp);
        println!(
            "{name:<24} {m:>6} × {k:>6} × {n:>6}  best {:6.1}  median {:6.1} GFLOP/s",
            rates[8], rates[4]
        );
    }
}
