//! Rotary position embeddings on the CPU, Hugging Face's rotate-half layout (Su et al.
//! 2021; transformers' `apply_rotary_pos_emb`), over rows of `d` = head_dim features with
//! per-row tables `cos`, `sin` of the same shape (the caller folds positions, heads and
//! any scale into them):
//!
//! - forward: y = x ⊙ cos + rotate_half(x) ⊙ sin, rotate_half([x₁, x₂]) = [−x₂, x₁], i.e.
//!   y₁ = x₁·cos₁ − x₂·sin₁ and y₂ = x₂·cos₂ + x₁·sin₂ (halves of d/2);
//! - backward (the tables are constants): dx₁ = dy₁·cos₁ + dy₂·sin₂,
//!   dx₂ = dy₂·cos₂ − dy₁·sin₁.
//!
//! Why a fused op: in burn ops the rotation is a matmul with a signed permutation, two
//! products and a sum; under autodiff the gradient reaching it comes through the
//! `swap_dims` that moves heads in front, so burn-flex ran the products' backward through
//! its per-element strided iterator. Here each direction is one pass (a strided gradient
//! is made contiguous once, by the caller's backend).

use rayon::prelude::*;

use super::simd::{dispatch, isa_copies, Isa};

/// Elements per parallel task (whole rows).
const CHUNK: usize = 1 << 14;

#[inline(always)]
fn forward_rows<const FMA: bool>(x: &[f32], cos: &[f32], sin: &[f32], y: &mut [f32], d: usize) {
    let h = d / 2;
    let rows = x
        .chunks_exact(d)
        .zip(cos.chunks_exact(d))
        .zip(sin.chunks_exact(d));
    for (((x, c), s), y) in rows.zip(y.chunks_exact_mut(d)) {
        let (x1, x2) = x.split_at(h);
        let (y1, y2) = y.split_at_mut(h);
        for j in 0..h {
            y1[j] = x1[j] * c[j] - x2[j] * s[j];
            y2[j] = x2[j] * c[h + j] + x1[j] * s[h + j];
        }
    }
}

#[inline(always)]
fn backward_rows<const FMA: bool>(dy: &[f32], cos: &[f32], sin: &[f32], dx: &mut [f32], d: usize) {
    let h = d / 2;
    let rows = dy
        .chunks_exact(d)
        .zip(cos.chunks_exact(d))
        .zip(sin.chunks_exact(d));
    for (((dy, c), s), dx) in rows.zip(dx.chunks_exact_mut(d)) {
        let (dy1, dy2) = dy.split_at(h);
        let (dx1, dx2) = dx.split_at_mut(h);
        for j in 0..h {
            dx1[j] = dy1[j] * c[j] + dy2[j] * s[h + j];
            dx2[j] = dy2[j] * c[h + j] - dy1[j] * s[j];
        }
    }
}

isa_copies!(avx512, "avx512f,avx2,fma":
    forward_rows(x: &[f32], cos: &[f32], sin: &[f32], y: &mut [f32], d: usize);
    backward_rows(dy: &[f32], cos: &[f32], sin: &[f32], dx: &mut [f32], d: usize);
);
isa_copies!(avx2, "avx2,fma":
    forward_rows(x: &[f32], cos: &[f32], sin: &[f32], y: &mut [f32], d: usize);
    backward_rows(dy: &[f32], cos: &[f32], sin: &[f32], dx: &mut [f32], d: usize);
);

fn check(lens: [usize; 3], d: usize, what: &str) {
    assert!(
        d > 0 && d.is_multiple_of(2) && lens[0].is_multiple_of(d),
        "{what}: rows of {d} features must have an even width that divides {} values",
        lens[0]
    );
    assert!(
        lens[1] == lens[0] && lens[2] == lens[0],
        "{what}: the cos/sin tables must have one entry per value"
    );
}

/// y = x ⊙ cos + rotate_half(x) ⊙ sin over rows of `d` features.
pub fn rotary_forward(x: &[f32], cos: &[f32], sin: &[f32], d: usize) -> Vec<f32> {
    check([x.len(), cos.len(), sin.len()], d, "rotary");
    let isa = Isa::detect();
    let n = d * (CHUNK / d).max(1);
    let mut y = vec![0.0f32; x.len()];
    y.par_chunks_mut(n)
        .zip(
            x.par_chunks(n)
                .zip(cos.par_chunks(n).zip(sin.par_chunks(n))),
        )
        .for_each(|(y, (x, (c, s)))| dispatch!(isa, forward_rows(x, c, s, y, d)));
    y
}

/// dx for the incoming gradient `dy`.
pub fn rotary_backward(dy: &[f32], cos: &[f32], sin: &[f32], d: usize) -> Vec<f32> {
    check([dy.len(), cos.len(), sin.len()], d, "rotary backward");
    let isa = Isa::detect();
    let n = d * (CHUNK / d).max(1);
    let mut dx = vec![0.0f32; dy.len()];
    dx.par_chunks_mut(n)
        .zip(
            dy.par_chunks(n)
                .zip(cos.par_chunks(n).zip(sin.par_chunks(n))),
        )
        .for_each(|(dx, (dy, (c, s)))| dispatch!(isa, backward_rows(dy, c, s, dx, d)));
    dx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarter_turn_and_its_transpose() {
        // d = 4, θ = 90° in both frequencies: [x1, x2] → [−x2, x1].
        let (cos, sin) = ([0.0f32; 4], [1.0f32; 4]);
        let y = rotary_forward(&[1.0, 2.0, 3.0, 4.0], &cos, &sin, 4);
        assert_eq!(y, vec![-3.0, -4.0, 1.0, 2.0]);
        // The backward is the transpose: [dy1, dy2] → [dy2, −dy1].
        let dx = rotary_backward(&[1.0, 2.0, 3.0, 4.0], &cos, &sin, 4);
        assert_eq!(dx, vec![3.0, 4.0, -1.0, -2.0]);
    }
}
