//! Attention's masked softmax on the CPU, row by row over the last axis:
//!
//! - forward: y = softmax(x + b), b the additive mask (0 where a key is visible, a large
//!   negative number elsewhere; transformers' eager attention, `softmax(q kᵀ/√d + mask)`);
//! - backward (b is a constant): dx = y ⊙ (dy − Σ_k dy_k·y_k).
//!
//! Why a fused op: burn 0.21's `softmax` is max, subtract, exp, sum and divide, five passes
//! with a libm `exp` per element, plus the mask add, and autodiff records each of them; the
//! backward then walks the same chain. Here the forward is one read of x and b (the row
//! stays in L1 for the exp and the scaling) and the backward one read of y and dy. `exp`
//! is the polynomial of `super::simd` (relative error ≈ 2e-7; arguments below −87 give
//! exactly 0, so a masked key contributes nothing). A row whose keys are all masked by a
//! finite value gets the uniform softmax, as burn and transformers give; a row of −∞ gets 0.

use rayon::prelude::*;

use super::simd::{dispatch, exp, isa_copies, lane_dot, lane_fold, Isa};

/// Elements per parallel task (whole rows).
const CHUNK: usize = 1 << 14;

#[inline(always)]
fn forward_rows<const FMA: bool>(x: &[f32], bias: &[f32], y: &mut [f32], keys: usize) {
    for ((x, b), y) in x
        .chunks_exact(keys)
        .zip(bias.chunks_exact(keys))
        .zip(y.chunks_exact_mut(keys))
    {
        for ((y, &x), &b) in y.iter_mut().zip(x).zip(b) {
            *y = x + b;
        }
        let max = lane_fold(y, f32::NEG_INFINITY, f32::max);
        if max == f32::NEG_INFINITY {
            y.fill(0.0);
            continue;
        }
        y.iter_mut().for_each(|y| *y = exp::<FMA>(*y - max));
        let inv = 1.0 / lane_fold(y, 0.0, |a, b| a + b);
        y.iter_mut().for_each(|y| *y *= inv);
    }
}

#[inline(always)]
fn backward_rows<const FMA: bool>(y: &[f32], dy: &[f32], dx: &mut [f32], keys: usize) {
    for ((y, dy), dx) in y
        .chunks_exact(keys)
        .zip(dy.chunks_exact(keys))
        .zip(dx.chunks_exact_mut(keys))
    {
        let dot = lane_dot(y, dy);
        for ((dx, &y), &dy) in dx.iter_mut().zip(y).zip(dy) {
            *dx = y * (dy - dot);
        }
    }
}

isa_copies!(avx512, "avx512f,avx2,fma":
    forward_rows(x: &[f32], bias: &[f32], y: &mut [f32], keys: usize);
    backward_rows(y: &[f32], dy: &[f32], dx: &mut [f32], keys: usize);
);
isa_copies!(avx2, "avx2,fma":
    forward_rows(x: &[f32], bias: &[f32], y: &mut [f32], keys: usize);
    backward_rows(y: &[f32], dy: &[f32], dx: &mut [f32], keys: usize);
);

/// Rows per parallel task for rows of `keys` elements.
fn task(keys: usize) -> usize {
    keys * (CHUNK / keys).max(1)
}

/// softmax(x + bias) over rows of `keys` elements (`x.len()` a multiple of `keys`).
pub fn masked_softmax_forward(x: &[f32], bias: &[f32], keys: usize) -> Vec<f32> {
    assert!(
        keys > 0 && x.len() == bias.len() && x.len().is_multiple_of(keys),
        "masked softmax: {} scores and {} mask values do not form rows of {keys}",
        x.len(),
        bias.len()
    );
    let isa = Isa::detect();
    let mut y = vec![0.0f32; x.len()];
    let n = task(keys);
    y.par_chunks_mut(n)
        .zip(x.par_chunks(n).zip(bias.par_chunks(n)))
        .for_each(|(y, (x, b))| dispatch!(isa, forward_rows(x, b, y, keys)));
    y
}

/// dx for the softmax output `y` and the incoming gradient `dy`.
pub fn masked_softmax_backward(y: &[f32], dy: &[f32], keys: usize) -> Vec<f32> {
    assert!(
        keys > 0 && y.len() == dy.len() && y.len().is_multiple_of(keys),
        "masked softmax backward: {} outputs and {} gradients do not form rows of {keys}",
        y.len(),
        dy.len()
    );
    let isa = Isa::detect();
    let mut dx = vec![0.0f32; y.len()];
    let n = task(keys);
    dx.par_chunks_mut(n)
        .zip(y.par_chunks(n).zip(dy.par_chunks(n)))
        .for_each(|(dx, (y, dy))| dispatch!(isa, backward_rows(y, dy, dx, keys)));
    dx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_row_with_a_masked_key() {
        // Row [ln 1, ln 3, 7 masked]: softmax of the visible keys is [1/4, 3/4].
        let y = masked_softmax_forward(&[0.0, 3f32.ln(), 7.0], &[0.0, 0.0, -1e30], 3);
        let want = [0.25, 0.75, 0.0];
        assert!(
            y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6),
            "{y:?}"
        );
        // dx = y ⊙ (dy − y·dy) with dy = [1, 0, 5]: y·dy = 0.25.
        let dx = masked_softmax_backward(&y, &[1.0, 0.0, 5.0], 3);
        let want = [0.25 * 0.75, 0.75 * -0.25, 0.0];
        assert!(
            dx.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6),
            "{dx:?}"
        );
    }

    #[test]
    fn fully_masked_rows() {
        // A finite mask everywhere: uniform; −∞ everywhere: zeros, not NaN.
        let y = masked_softmax_forward(&[1.0, 2.0, 0.5, 0.0], &[-1e30, -1e30, -1e30, -1e30], 2);
        assert_eq!(y, vec![0.5; 4]);
        let inf = f32::NEG_INFINITY;
        let y = masked_softmax_forward(&[1.0, 2.0], &[inf, inf], 2);
        assert_eq!(y, vec![0.0; 2]);
    }
}
