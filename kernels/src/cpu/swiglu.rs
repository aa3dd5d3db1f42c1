//! SwiGLU's gate on the CPU: y = silu(g) ⊙ u = g·σ(g)·u, elementwise (Shazeer 2020, "GLU
//! Variants Improve Transformer"; transformers' `Qwen2MLP`: `act_fn(gate_proj(x)) *
//! up_proj(x)`, act_fn = SiLU).
//!
//! Backward, with s = σ(g) and the incoming gradient dy:
//! - du = dy·g·s;
//! - dg = dy·u·s·(1 + g·(1 − s))   (d/dg g·σ(g) = σ(g) + g·σ(g)(1 − σ(g))).
//!
//! Why a fused op: burn 0.21 computes `silu` as x·sigmoid(x) and its default sigmoid as
//! exp(−log(1 + exp(−x))), each step a pass over the tensor with a libm call per element,
//! and autodiff records every step; the MLP's activation was about a tenth of a training
//! step of the Tiny model. Here σ uses the polynomial `exp` of `super::simd` (relative
//! error ≈ 2e-7; for g < −88 the exp is clamped, so σ(g) stays at e^{−88} ≈ 6e-39 and
//! SiLU's value there is below 1e-30·|g|),
//! the forward is one pass and the backward one pass producing both gradients.

use rayon::prelude::*;

use super::simd::{dispatch, exp, isa_copies, Isa};

/// Elements per parallel task.
const CHUNK: usize = 1 << 14;

/// σ(g) with the polynomial exp.
#[inline(always)]
fn sigmoid<const FMA: bool>(g: f32) -> f32 {
    1.0 / (1.0 + exp::<FMA>(-g))
}

#[inline(always)]
fn forward_chunk<const FMA: bool>(gate: &[f32], up: &[f32], out: &mut [f32]) {
    for ((y, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        *y = g * sigmoid::<FMA>(g) * u;
    }
}

#[inline(always)]
fn backward_chunk<const FMA: bool>(
    gate: &[f32],
    up: &[f32],
    grad: &[f32],
    dgate: &mut [f32],
    dup: &mut [f32],
) {
    let inputs = gate.iter().zip(up).zip(grad);
    for ((dg, du), ((&g, &u), &dy)) in dgate.iter_mut().zip(dup.iter_mut()).zip(inputs) {
        let s = sigmoid::<FMA>(g);
        let gs = g * s;
        *du = dy * gs;
        *dg = dy * u * (s + gs * (1.0 - s));
    }
}

isa_copies!(avx512, "avx512f,avx2,fma":
    forward_chunk(gate: &[f32], up: &[f32], out: &mut [f32]);
    backward_chunk(gate: &[f32], up: &[f32], grad: &[f32], dgate: &mut [f32], dup: &mut [f32]);
);
isa_copies!(avx2, "avx2,fma":
    forward_chunk(gate: &[f32], up: &[f32], out: &mut [f32]);
    backward_chunk(gate: &[f32], up: &[f32], grad: &[f32], dgate: &mut [f32], dup: &mut [f32]);
);

/// silu(gate) ⊙ up.
pub fn swiglu_forward(gate: &[f32], up: &[f32]) -> Vec<f32> {
    assert_eq!(gate.len(), up.len(), "swiglu: gate and up differ in length");
    let isa = Isa::detect();
    let mut out = vec![0.0f32; gate.len()];
    out.par_chunks_mut(CHUNK)
        .zip(gate.par_chunks(CHUNK).zip(up.par_chunks(CHUNK)))
        .for_each(|(y, (g, u))| dispatch!(isa, forward_chunk(g, u, y)));
    out
}

/// (dgate, dup) for the incoming gradient `grad`.
pub fn swiglu_backward(gate: &[f32], up: &[f32], grad: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let n = gate.len();
    assert!(
        up.len() == n && grad.len() == n,
        "swiglu backward: gate, up and grad differ in length"
    );
    let isa = Isa::detect();
    let (mut dgate, mut dup) = (vec![0.0f32; n], vec![0.0f32; n]);
    dgate
        .par_chunks_mut(CHUNK)
        .zip(dup.par_chunks_mut(CHUNK))
        .zip(gate.par_chunks(CHUNK).zip(up.par_chunks(CHUNK)))
        .zip(grad.par_chunks(CHUNK))
        .for_each(|(((dg, du), (g, u)), dy)| dispatch!(isa, backward_chunk(g, u, dy, dg, du)));
    (dgate, dup)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f64 SwiGLU and its analytic derivatives.
    fn oracle(g: f64, u: f64) -> (f64, f64, f64) {
        let s = 1.0 / (1.0 + (-g).exp());
        (g * s * u, u * (s + g * s * (1.0 - s)), g * s)
    }

    #[test]
    fn matches_the_f64_formula_and_its_derivatives() {
        let gate: Vec<f32> = (0..40_001).map(|i| (i as f32 - 20_000.0) * 1e-3).collect();
        let up: Vec<f32> = (0..gate.len())
            .map(|i| ((i % 7) as f32 - 3.0) * 0.5)
            .collect();
        let grad: Vec<f32> = (0..gate.len()).map(|i| 1.0 + (i % 3) as f32).collect();
        let y = swiglu_forward(&gate, &up);
        let (dg, du) = swiglu_backward(&gate, &up, &grad);
        for i in 0..gate.len() {
            let (ey, edg, edu) = oracle(gate[i] as f64, up[i] as f64);
            let dy = grad[i] as f64;
            let close = |a: f32, b: f64| (a as f64 - b).abs() <= 1e-5 * (1.0 + b.abs());
            assert!(close(y[i], ey), "y at g={}: {} vs {ey}", gate[i], y[i]);
            assert!(close(dg[i], dy * edg), "dg at g={}", gate[i]);
            assert!(close(du[i], dy * edu), "du at g={}", gate[i]);
        }
    }

    #[test]
    fn saturates_without_overflow() {
        let gate = [-1e4f32, -100.0, 100.0, 1e4];
        let up = [1.0f32; 4];
        let y = swiglu_forward(&gate, &up);
        // True values −1e4·e^{−1e4} and −100·e^{−100}; the clamped exp gives ≤ e^{−87}·|g|.
        assert!(y[0].abs() < 1e-30 && y[1].abs() < 1e-30);
        assert_eq!(y[2], 100.0);
        assert_eq!(y[3], 1e4);
        let (dg, du) = swiglu_backward(&gate, &up, &[1.0; 4]);
        assert!(dg.iter().chain(&du).all(|v| v.is_finite()));
        assert_eq!((dg[3], du[3]), (1.0, 1e4));
    }
}
