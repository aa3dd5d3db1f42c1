//! RMSNorm on the CPU (Zhang & Sennrich 2019; transformers' `Qwen2RMSNorm`), over rows of
//! `H` features, with the learned scale w and `eps` (Qwen2: `rms_norm_eps`, 1e-6):
//!
//! - forward: r_i = 1 / sqrt(mean_j x_ij² + eps), y_ij = x_ij·r_i·w_j;
//! - backward, with g_ij = dy_ij·w_j:
//!   dx_ij = r_i·g_ij − r_i³·x_ij·(Σ_k g_ik·x_ik) / H,
//!   dw_j = Σ_i dy_ij·x_ij·r_i.
//!
//! Why a fused op: in burn ops the norm is square, mean, add, sqrt, recip and two
//! broadcast products; burn-flex walks a broadcast operand element by element, and the
//! products' backward (a broadcast product, then a sum over the broadcast axes) was the
//! largest cost outside the matrix products in a training step of the Tiny model. Here
//! the forward is one pass per row and the backward one pass producing dx, with dw summed
//! per parallel task and then across tasks (in f64).

use rayon::prelude::*;

use super::simd::{dispatch, isa_copies, lane_dot, Isa};

/// Rows per parallel task.
const ROWS_PER_TASK: usize = 64;

/// r = 1 / sqrt(mean(x²) + eps) of one row.
#[inline(always)]
fn inv_rms(x: &[f32], eps: f32) -> f32 {
    1.0 / (lane_dot(x, x) / x.len() as f32 + eps).sqrt()
}

#[inline(always)]
fn forward_rows<const FMA: bool>(x: &[f32], w: &[f32], y: &mut [f32], eps: f32) {
    let h = w.len();
    for (x, y) in x.chunks_exact(h).zip(y.chunks_exact_mut(h)) {
        let r = inv_rms(x, eps);
        for ((y, &x), &w) in y.iter_mut().zip(x).zip(w) {
            *y = x * r * w;
        }
    }
}

/// dx of the rows, and their dw added to `dw`.
#[inline(always)]
fn backward_rows<const FMA: bool>(
    x: &[f32],
    w: &[f32],
    dy: &[f32],
    dx: &mut [f32],
    dw: &mut [f32],
    eps: f32,
) {
    let h = w.len();
    for ((x, dy), dx) in x
        .chunks_exact(h)
        .zip(dy.chunks_exact(h))
        .zip(dx.chunks_exact_mut(h))
    {
        let r = inv_rms(x, eps);
        // dx holds g = dy·w for the dot product first.
        for ((g, &dy), &w) in dx.iter_mut().zip(dy).zip(w) {
            *g = dy * w;
        }
        let c = r * r * r * lane_dot(dx, x) / h as f32;
        for ((g, &x), (dw, &dy)) in dx.iter_mut().zip(x).zip(dw.iter_mut().zip(dy)) {
            *dw += dy * x * r;
            *g = r * *g - c * x;
        }
    }
}

isa_copies!(avx512, "avx512f,avx2,fma":
    forward_rows(x: &[f32], w: &[f32], y: &mut [f32], eps: f32);
    backward_rows(x: &[f32], w: &[f32], dy: &[f32], dx: &mut [f32], dw: &mut [f32], eps: f32);
);
isa_copies!(avx2, "avx2,fma":
    forward_rows(x: &[f32], w: &[f32], y: &mut [f32], eps: f32);
    backward_rows(x: &[f32], w: &[f32], dy: &[f32], dx: &mut [f32], dw: &mut [f32], eps: f32);
);

fn check(x: usize, w: usize, what: &str) {
    assert!(
        w > 0 && x.is_multiple_of(w),
        "{what}: {x} values do not form rows of the scale's {w} features"
    );
}

/// RMSNorm of the rows of `x` (`x.len()` a multiple of `w.len()`).
pub fn rms_norm_forward(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    check(x.len(), w.len(), "rms_norm");
    let isa = Isa::detect();
    let task = ROWS_PER_TASK * w.len();
    let mut y = vec![0.0f32; x.len()];
    y.par_chunks_mut(task)
        .zip(x.par_chunks(task))
        .for_each(|(y, x)| dispatch!(isa, forward_rows(x, w, y, eps)));
    y
}

/// (dx, dw) for the incoming gradient `dy`.
pub fn rms_norm_backward(x: &[f32], w: &[f32], dy: &[f32], eps: f32) -> (Vec<f32>, Vec<f32>) {
    check(x.len(), w.len(), "rms_norm backward");
    assert_eq!(
        x.len(),
        dy.len(),
        "rms_norm backward: x and dy differ in length"
    );
    let isa = Isa::detect();
    let (h, task) = (w.len(), ROWS_PER_TASK * w.len());
    let mut dx = vec![0.0f32; x.len()];
    let partials: Vec<Vec<f32>> = dx
        .par_chunks_mut(task)
        .zip(x.par_chunks(task).zip(dy.par_chunks(task)))
        .map(|(dx, (x, dy))| {
            let mut dw = vec![0.0f32; h];
            dispatch!(isa, backward_rows(x, w, dy, dx, &mut dw, eps));
            dw
        })
        .collect();
    let mut dw = vec![0.0f64; h];
    for p in &partials {
        dw.iter_mut().zip(p).for_each(|(a, &b)| *a += b as f64);
    }
    (dx, dw.into_iter().map(|v| v as f32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_row() {
        // x = [3, 4]: mean x² = 12.5, r = 1/sqrt(12.5) (eps 0); w = [1, 2].
        let r = 1.0 / 12.5f32.sqrt();
        let y = rms_norm_forward(&[3.0, 4.0], &[1.0, 2.0], 0.0);
        assert!((y[0] - 3.0 * r).abs() < 1e-6 && (y[1] - 8.0 * r).abs() < 1e-6);
        // dy = [1, 0]: g = [1, 0], Σ g·x = 3, c = 3·r³/2;
        // dx = [r − 3c, −4c], dw = [3r, 0].
        let (dx, dw) = rms_norm_backward(&[3.0, 4.0], &[1.0, 2.0], &[1.0, 0.0], 0.0);
        let c = 3.0 * r * r * r / 2.0;
        assert!((dx[0] - (r - 3.0 * c)).abs() < 1e-6, "{dx:?}");
        assert!((dx[1] + 4.0 * c).abs() < 1e-6, "{dx:?}");
        assert!((dw[0] - 3.0 * r).abs() < 1e-6 && dw[1] == 0.0, "{dw:?}");
    }
}
