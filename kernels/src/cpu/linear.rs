//! A dense layer on the CPU, y = x·W + b, and its backward, on row-major slices, through
//! `cpu::ordered_product` (every output summed over its inner axis in order, the same
//! bits on every CPU) or, for a few rows on AVX-512, the few-rows kernels, which sum in the
//! same order.
//!
//! Shapes: x `[n, k]`, W `[k, m]` (burn's `Linear` layout, in × out), b `[m]`, y `[n, m]`.
//! Backward, for the incoming gradient dy `[n, m]`:
//! - dx = dy·Wᵀ `[n, k]`;
//! - dW = xᵀ·dy `[k, m]`;
//! - db = Σ over rows of dy `[m]`.
//!
//! W may also be stored as its transpose, `[m, k]` row-major ([`WeightLayout::OutIn`]): a
//! tied output head reads the `[vocab, hidden]` token embedding as `[hidden, vocab]`. The
//! product reads it through strides, and dW comes back in the same storage order (dWᵀ =
//! dyᵀ·x), so neither direction copies the matrix. (Copying it into `[k, m]` order on every
//! call cost 31% of a decode step's time at dim 512 and vocab 8192.)
//!
//! Why not burn's `linear`: burn-flex creates every matmul output with
//! `FlexTensor::empty`, which zero-fills a byte vector and then copies it into a 16-byte
//! aligned allocation (cubecl's `Bytes::from_bytes_vec` re-aligns any byte vector), so each
//! product pays a memset and a memcpy of its output; its product (the `gemm` crate) sums in
//! an order that depends on the CPU. The bias is then one more broadcast pass, and its
//! gradient one more reduction. Here the product writes an uninitialised output once
//! (`accumulate = false`), or starts each output's sum from the bias rows
//! (`accumulate = true`), and the transposes of the backward are strides, not copies.

use super::buffer;
use super::few_rows::FEW_ROWS;
use super::few_rows::{few_rows_kernels_run, few_rows_product, panels_product, Operand};
use super::ordered_product::ordered_product;
use super::weight_panels::WeightPanels;

/// (n, k, m): rows, input features, output features.
pub type LinearDims = (usize, usize, usize);

/// How the weight W `[k, m]` lies in its slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightLayout {
    /// Row-major `[k, m]` (in × out), burn's `Linear` layout.
    InOut,
    /// Row-major `[m, k]` (out × in, Hugging Face's layout): W's transpose.
    OutIn,
}

impl WeightLayout {
    /// W `[k, m]` as an operand over `w`.
    fn weight(self, w: &[f32], (_, k, m): LinearDims) -> Operand<'_> {
        match self {
            WeightLayout::InOut => (w, m as isize, 1),
            WeightLayout::OutIn => (w, 1, k as isize),
        }
    }

    /// Wᵀ `[m, k]` as an operand over `w`.
    fn transposed(self, w: &[f32], (_, k, m): LinearDims) -> Operand<'_> {
        match self {
            WeightLayout::InOut => (w, 1, m as isize),
            WeightLayout::OutIn => (w, k as isize, 1),
        }
    }
}

/// dst `[rows, cols]` (row-major, uninitialised unless `accumulate`) := (dst +) a·b, each
/// output's sum started from dst's value (`accumulate`) or 0 and taken over the inner axis
/// in order ([`super::ordered_product`]).
///
/// # Safety
/// `dst` must hold `rows · cols` writable floats; `a` and `b` must be valid for
/// `rows × inner` and `inner × cols` reads at their strides (the callers check lengths).
pub(super) unsafe fn product(
    dst: *mut f32,
    dims: (usize, usize, usize),
    a: Operand<'_>,
    b: Operand<'_>,
    accumulate: bool,
) {
    // SAFETY: as the caller guarantees.
    unsafe {
        if !few_rows_product(dst, dims, a, b, accumulate) {
            ordered_product(dst, dims, a, b, accumulate);
        }
    }
}

/// y = x·W (+ b) for at most 64 rows (`FEW_ROWS`) of x `[n, k]`, W packed in panels; `None`
/// (nothing computed) where the few-rows kernels do not run (no AVX-512, or more rows).
/// The same values as [`linear_forward`] on the unpacked W, bit for bit.
///
/// # Panics
/// If a slice's length disagrees with the panels' dims and `n`.
pub fn linear_forward_panels(
    x: &[f32],
    panels: &WeightPanels,
    bias: Option<&[f32]>,
    n: usize,
) -> Option<Vec<f32>> {
    let (k, m) = panels.dims();
    check("x", x.len(), n * k);
    if let Some(b) = bias {
        check("bias", b.len(), m);
    }
    if !few_rows_kernels_run() || n > FEW_ROWS || n == 0 || k == 0 || m == 0 {
        return None;
    }
    // SAFETY: `with_bias` hands n·m floats; AVX-512 was detected and x's length checked.
    Some(with_bias(n, m, bias, |dst, accumulate| unsafe {
        panels_product(dst, x, panels, n, accumulate)
    }))
}

/// y `[rows, cols]` from `product(dst, accumulate)`: onto `rows` copies of the bias
/// (`accumulate` true), or into an uninitialised buffer it writes whole (false). `product`
/// must write (or add to) all `rows · cols` floats at `dst`.
fn with_bias(
    rows: usize,
    cols: usize,
    bias: Option<&[f32]>,
    product: impl FnOnce(*mut f32, bool),
) -> Vec<f32> {
    let Some(b) = bias else {
        return filled(rows, cols, |dst| product(dst, false));
    };
    let mut y = buffer::uninit(rows * cols);
    for _ in 0..rows {
        y.extend_from_slice(b);
    }
    product(y.as_mut_ptr(), true);
    y
}

/// `rows × cols` floats computed by `fill` into an uninitialised buffer.
fn filled(rows: usize, cols: usize, fill: impl FnOnce(*mut f32)) -> Vec<f32> {
    let len = rows * cols;
    let mut out = buffer::uninit(len);
    fill(out.as_mut_ptr());
    // SAFETY: `fill` wrote all `len` elements (the product writes every output element).
    unsafe { out.set_len(len) };
    out
}

fn check(what: &str, got: usize, want: usize) {
    assert_eq!(
        got, want,
        "linear: {what} has {got} values, expected {want}"
    );
}

/// y = x·W (+ b), W stored as `layout` says.
///
/// # Panics
/// If a slice's length disagrees with `dims` (the tensor-level caller checks shapes).
pub fn linear_forward(
    x: &[f32],
    (w, layout): (&[f32], WeightLayout),
    bias: Option<&[f32]>,
    dims: LinearDims,
) -> Vec<f32> {
    let (n, k, m) = dims;
    check("x", x.len(), n * k);
    check("weight", w.len(), k * m);
    if let Some(b) = bias {
        check("bias", b.len(), m);
    }
    let (xs, ws) = ((x, k as isize, 1), layout.weight(w, dims));
    if k == 0 || n == 0 || m == 0 {
        // Nothing to multiply: the bias rows, or zeros.
        return match bias {
            Some(b) => b.repeat(n),
            None => vec![0.0; n * m],
        };
    }
    // SAFETY: `with_bias` hands n·m floats; x and w were checked.
    with_bias(n, m, bias, |dst, accumulate| unsafe {
        product(dst, (n, k, m), xs, ws, accumulate)
    })
}

/// The gradients of [`linear_forward`] for the incoming `dy`: (dx, dW, db), db only
/// `with_bias`; dW in the weight's own `layout` (`[m, k]`, i.e. dWᵀ, for `OutIn`).
///
/// # Panics
/// If a slice's length disagrees with `dims`.
pub fn linear_backward(
    x: &[f32],
    (w, layout): (&[f32], WeightLayout),
    dy: &[f32],
    dims: LinearDims,
    with_bias: bool,
) -> (Vec<f32>, Vec<f32>, Option<Vec<f32>>) {
    let (n, k, m) = dims;
    check("x", x.len(), n * k);
    check("weight", w.len(), k * m);
    check("grad", dy.len(), n * m);
    let (dx, dw) = if m == 0 || n == 0 {
        (vec![0.0; n * k], vec![0.0; k * m])
    } else {
        let dys = (dy, m as isize, 1);
        let wt = layout.transposed(w, dims);
        // SAFETY: `filled` hands buffers of n·k and k·m floats; the operands were checked.
        let dx = filled(n, k, |dst| unsafe {
            product(dst, (n, m, k), dys, wt, false)
        });
        let dw = match layout {
            // dW = xᵀ·dy `[k, m]`; xᵀ: row stride 1, column stride k.
            WeightLayout::InOut => filled(k, m, |dst| unsafe {
                product(dst, (k, n, m), (x, 1, k as isize), dys, false)
            }),
            // dWᵀ = dyᵀ·x `[m, k]`; dyᵀ: row stride 1, column stride m.
            WeightLayout::OutIn => filled(m, k, |dst| unsafe {
                product(
                    dst,
                    (m, n, k),
                    (dy, 1, m as isize),
                    (x, k as isize, 1),
                    false,
                )
            }),
        };
        (dx, dw)
    };
    let db = with_bias.then(|| column_sums(dy, m));
    (dx, dw, db)
}

/// Σ over the rows of a row-major `[_, cols]` matrix.
fn column_sums(values: &[f32], cols: usize) -> Vec<f32> {
    let mut sums = vec![0.0f32; cols];
    if cols == 0 {
        return sums;
    }
    for row in values.chunks_exact(cols) {
        for (s, &v) in sums.iter_mut().zip(row) {
            *s += v;
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    /// y and all three gradients of a 2×3 · 3×2 case, by hand.
    #[test]
    fn hand_computed_case() {
        let x = [1.0, 2.0, 3.0, -1.0, 0.5, 2.0];
        let w = [1.0, 0.0, 0.0, 1.0, 2.0, -1.0];
        let b = [0.5, -0.5];
        let w = (&w[..], WeightLayout::InOut);
        let y = linear_forward(&x, w, Some(&b), (2, 3, 2));
        // Row 0: [1 + 0 + 6, 0 + 2 − 3] + b; row 1: [−1 + 0 + 4, 0 + 0.5 − 2] + b.
        assert_eq!(y, vec![7.5, -1.5, 3.5, -2.0]);
        assert_eq!(
            linear_forward(&x, w, None, (2, 3, 2)),
            vec![7.0, -1.0, 3.0, -1.5]
        );

        let dy = [1.0, 2.0, -1.0, 0.5];
        let (dx, dw, db) = linear_backward(&x, w, &dy, (2, 3, 2), true);
        // dx = dy·Wᵀ, with Wᵀ rows [1, 0, 2] and [0, 1, −1].
        assert_eq!(dx, vec![1.0, 2.0, 0.0, -1.0, 0.5, -2.5]);
        // dW = xᵀ·dy.
        assert_eq!(dw, vec![2.0, 1.5, 1.5, 4.25, 1.0, 7.0]);
        assert_eq!(db, Some(vec![0.0, 2.5]));

        // The same W stored out × in: the same y and dx, dW transposed.
        let w_out_in = [1.0, 0.0, 2.0, 0.0, 1.0, -1.0];
        let w = (&w_out_in[..], WeightLayout::OutIn);
        assert_eq!(linear_forward(&x, w, Some(&b), (2, 3, 2)), y);
        let (dx_t, dwt, db_t) = linear_backward(&x, w, &dy, (2, 3, 2), true);
        assert_eq!((dx_t, db_t), (dx, db));
        assert_eq!(dwt, vec![2.0, 1.5, 1.0, 1.5, 4.25, 7.0]);
    }

    #[test]
    fn no_rows_give_empty_outputs_and_zero_gradients() {
        let (y, (dx, dw, db)) = (
            linear_forward(
                &[],
                (&[1.0; 6], WeightLayout::InOut),
                Some(&[1.0, 2.0]),
                (0, 3, 2),
            ),
            linear_backward(&[], (&[1.0; 6], WeightLayout::OutIn), &[], (0, 3, 2), true),
        );
        assert!(y.is_empty() && dx.is_empty());
        assert_eq!((dw, db), (vec![0.0; 6], Some(vec![0.0; 2])));
    }

    #[test]
    fn empty_inner_dimension_gives_the_bias() {
        assert_eq!(
            linear_forward(
                &[],
                (&[], WeightLayout::InOut),
                Some(&[1.0, 2.0]),
                (2, 0, 2)
            ),
            vec![1.0, 2.0, 1.0, 2.0]
        );
        let none = linear_forward(&[], (&[], WeightLayout::OutIn), None, (1, 0, 3));
        assert_eq!(none, vec![0.0; 3]);
    }
}
