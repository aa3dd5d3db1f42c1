//! The model ops in plain burn ops: the defaults of [`crate::KernelBackend`]'s SwiGLU,
//! masked softmax, RMSNorm and rotary methods, which backends without a fused version
//! (ndarray) run. Forward and backward follow the formulas of the CPU twins
//! ([`crate::cpu::swiglu`], [`crate::cpu::softmax`], [`crate::cpu::rms_norm`],
//! [`crate::cpu::rotary`]), written out so that the backward is an op of its own, as the
//! autodiff registration needs.
//!
//! Inputs have any rank; the row ops work on the last axis, on a `[rows, last]` view
//! (`float_reshape`), and return the input's shape.

use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Shape, Tensor, TensorMetadata, TensorPrimitive};

/// The matrix product the dense layer uses (`KernelBackend::matmul_forward`).
pub(crate) type MatrixProduct<B> = fn(FloatTensor<B>, FloatTensor<B>) -> FloatTensor<B>;
/// Σ over the rows of a matrix (`KernelBackend::column_sums`).
pub(crate) type RowSum<B> = fn(FloatTensor<B>) -> FloatTensor<B>;

/// The gradients of a dense layer: (dx, dweight, dbias when it has a bias).
pub type DenseGradients<B> = (FloatTensor<B>, FloatTensor<B>, Option<FloatTensor<B>>);

/// `t` as `[rows, last axis]`, with its shape.
fn rows<B: Backend>(t: FloatTensor<B>) -> (Tensor<B, 2>, Shape) {
    let shape = t.shape();
    let dims = shape.to_vec();
    let last = dims.last().copied().unwrap_or(1);
    let count = dims.iter().product::<usize>();
    let flat = B::float_reshape(t, Shape::from(vec![count / last.max(1), last]));
    (Tensor::from_primitive(TensorPrimitive::Float(flat)), shape)
}

/// A `[rows, last]` result back in `shape`.
fn restore<B: Backend>(t: Tensor<B, 2>, shape: Shape) -> FloatTensor<B> {
    B::float_reshape(t.into_primitive().tensor(), shape)
}

/// A `[rows, last]` view of `t` (a second operand of the first one's shape).
fn rows_like<B: Backend>(t: FloatTensor<B>) -> Tensor<B, 2> {
    rows::<B>(t).0
}

pub(crate) fn swiglu_forward<B: Backend>(
    gate: FloatTensor<B>,
    up: FloatTensor<B>,
) -> FloatTensor<B> {
    let silu = B::float_mul(gate.clone(), B::sigmoid(gate));
    B::float_mul(silu, up)
}

/// (dgate, dup) = (dy·u·(s + g·s·(1 − s)), dy·g·s), s = σ(g).
pub(crate) fn swiglu_backward<B: Backend>(
    gate: FloatTensor<B>,
    up: FloatTensor<B>,
    grad: FloatTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let s = B::sigmoid(gate.clone());
    let gs = B::float_mul(gate, s.clone());
    let dup = B::float_mul(grad.clone(), gs.clone());
    let one_minus_s = B::float_add_scalar(B::float_neg(s.clone()), 1.0.into());
    let ds = B::float_add(s, B::float_mul(gs, one_minus_s));
    (B::float_mul(B::float_mul(grad, up), ds), dup)
}

pub(crate) fn masked_softmax_forward<B: Backend>(
    scores: FloatTensor<B>,
    mask: FloatTensor<B>,
) -> FloatTensor<B> {
    let (x, shape) = rows::<B>(scores);
    let y = burn::tensor::activation::softmax(x.add(rows_like::<B>(mask)), 1);
    restore(y, shape)
}

/// dscores = y ⊙ (dy − Σ dy·y).
pub(crate) fn masked_softmax_backward<B: Backend>(
    probs: FloatTensor<B>,
    grad: FloatTensor<B>,
) -> FloatTensor<B> {
    let (y, shape) = rows::<B>(probs);
    let dy = rows_like::<B>(grad);
    let dot = y.clone().mul(dy.clone()).sum_dim(1);
    restore(y.mul(dy.sub(dot)), shape)
}

/// 1 / sqrt(mean(x²) + eps) per row, `[rows, 1]`.
fn inv_rms<B: Backend>(x: &Tensor<B, 2>, eps: f32) -> Tensor<B, 2> {
    x.clone()
        .square()
        .mean_dim(1)
        .add_scalar(eps)
        .sqrt()
        .recip()
}

fn scale<B: Backend>(weight: FloatTensor<B>) -> Tensor<B, 2> {
    Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(weight)).unsqueeze()
}

pub(crate) fn rms_norm_forward<B: Backend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    eps: f32,
) -> FloatTensor<B> {
    let (x, shape) = rows::<B>(x);
    let r = inv_rms(&x, eps);
    restore(x.mul(r).mul(scale::<B>(weight)), shape)
}

/// dx = r·g − r³·x·(Σ g·x)/H with g = dy ⊙ w; dw = Σ_rows dy ⊙ x·r.
pub(crate) fn rms_norm_backward<B: Backend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    grad: FloatTensor<B>,
    eps: f32,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let (x, shape) = rows::<B>(x);
    let dy = rows_like::<B>(grad);
    let [_, h] = x.dims();
    let r = inv_rms(&x, eps);
    let dw = dy
        .clone()
        .mul(x.clone())
        .mul(r.clone())
        .sum_dim(0)
        .reshape([h]);
    let g = dy.mul(scale::<B>(weight));
    let dot = g.clone().mul(x.clone()).sum_dim(1);
    let c = r.clone().powi_scalar(3).mul(dot).div_scalar(h as f32);
    let dx = g.mul(r).sub(x.mul(c));
    (restore(dx, shape), dw.into_primitive().tensor())
}

/// rotate_half([x₁, x₂]) = [−x₂, x₁] over the last axis (`forward`), or its transpose
/// [x₂, −x₁].
fn rotate_half<B: Backend>(x: Tensor<B, 2>, forward: bool) -> Tensor<B, 2> {
    let [n, d] = x.dims();
    let (x1, x2) = (x.clone().slice([0..n, 0..d / 2]), x.slice([0..n, d / 2..d]));
    if forward {
        Tensor::cat(vec![x2.neg(), x1], 1)
    } else {
        Tensor::cat(vec![x2, x1.neg()], 1)
    }
}

pub(crate) fn rotary_forward<B: Backend>(
    x: FloatTensor<B>,
    cos: FloatTensor<B>,
    sin: FloatTensor<B>,
) -> FloatTensor<B> {
    let (x, shape) = rows::<B>(x);
    let rotated = rotate_half(x.clone(), true);
    let y = x
        .mul(rows_like::<B>(cos))
        .add(rotated.mul(rows_like::<B>(sin)));
    restore(y, shape)
}

/// dx = dy ⊙ cos + rotate_halfᵀ(dy ⊙ sin).
pub(crate) fn rotary_backward<B: Backend>(
    cos: FloatTensor<B>,
    sin: FloatTensor<B>,
    grad: FloatTensor<B>,
) -> FloatTensor<B> {
    let (dy, shape) = rows::<B>(grad);
    let back = rotate_half(dy.clone().mul(rows_like::<B>(sin)), false);
    restore(dy.mul(rows_like::<B>(cos)).add(back), shape)
}

fn matrix<B: Backend>(t: FloatTensor<B>) -> Tensor<B, 2> {
    Tensor::from_primitive(TensorPrimitive::Float(t))
}

/// y = x·W (+ b) for x `[n, k]`, W `[k, m]`, b `[m]`.
pub(crate) fn linear_forward<B: Backend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    matmul: MatrixProduct<B>,
) -> FloatTensor<B> {
    let y = matrix::<B>(matmul(x, weight));
    // (CubeCL refuses to broadcast the bias row over zero rows.)
    let y = match bias {
        Some(b) if y.dims()[0] > 0 => {
            y.add(Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(b)).unsqueeze())
        }
        _ => y,
    };
    y.into_primitive().tensor()
}

/// Σ over the rows of `x [n, m]`, `[m]`: burn's `sum_dim(0)`.
pub(crate) fn column_sums<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let x = matrix::<B>(x);
    let m = x.dims()[1];
    x.sum_dim(0).reshape([m]).into_primitive().tensor()
}

/// (dx, dW, db) = (dy·Wᵀ, xᵀ·dy, Σ_rows dy).
pub(crate) fn linear_backward<B: Backend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    grad: FloatTensor<B>,
    with_bias: bool,
    (matmul, column_sums): (MatrixProduct<B>, RowSum<B>),
) -> DenseGradients<B> {
    let dx = matrix::<B>(matmul(
        grad.clone(),
        matrix::<B>(weight).transpose().into_primitive().tensor(),
    ));
    let dw = matrix::<B>(matmul(
        matrix::<B>(x).transpose().into_primitive().tensor(),
        grad.clone(),
    ));
    let dy = matrix::<B>(grad);
    let [n, m] = dy.dims();
    let db = with_bias.then(|| match n {
        0 => B::float_zeros([m].into(), &dy.device(), dy.dtype().into()),
        _ => column_sums(dy.into_primitive().tensor()),
    });
    (
        dx.into_primitive().tensor(),
        dw.into_primitive().tensor(),
        db,
    )
}

/// One next token per row on the host (`KernelBackend::sample_rows`' default): reads the
/// logits back and runs [`crate::cpu::row_sample::sample_rows`].
pub(crate) fn sample_rows_on_host<B: Backend>(
    logits: FloatTensor<B>,
    params: FloatTensor<B>,
) -> FloatTensor<B> {
    use burn::tensor::TensorData;
    let (logits, params) = (matrix::<B>(logits), matrix::<B>(params));
    let ([rows, vocab], device) = (logits.dims(), logits.device());
    let host = |t: Tensor<B, 2>| t.into_data().convert::<f32>().to_vec::<f32>();
    let (Ok(logits), Ok(params)) = (host(logits), host(params)) else {
        unreachable!("float tensors convert to f32")
    };
    let out = crate::cpu::row_sample::sample_rows(&logits, &params, vocab);
    let out = Tensor::<B, 2>::from_data(TensorData::new(out, [rows, 3]), &device);
    out.into_primitive().tensor()
}

/// burn's `slice_assign` of `value` at offsets `starts`.
pub(crate) fn slice_assign_block<B: Backend>(
    tensor: FloatTensor<B>,
    starts: &[usize],
    value: FloatTensor<B>,
) -> FloatTensor<B> {
    use burn::tensor::TensorMetadata;
    let ranges: Vec<burn::tensor::Slice> = starts
        .iter()
        .zip(value.shape().iter())
        .map(|(&s, &n)| burn::tensor::Slice::from(s..s + n))
        .collect();
    B::float_slice_assign(tensor, &ranges, value)
}
