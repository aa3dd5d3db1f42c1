//! roll-flow's fused kernels: token log-prob + entropy, the GAE reverse scan, the
//! clipped PPO loss, and the model's dense layers, RMSNorm, rotary embedding, SwiGLU
//! activation and masked attention softmax, each in one pass over its inputs, with
//! backward passes.
//!
//! # Public API (burn tensors in, burn tensors out)
//!
//! ```text
//! token_logprob_entropy<B: KernelBackend>(logits: Tensor<B, 2>, targets: Tensor<B, 1, Int>,
//!     temperature: f32) -> Result<LogProbEntropy<B>, KernelError>     // .logprob, .entropy: [N]
//! gae<B: KernelBackend>(rewards, values, mask: Tensor<B, 1>, offsets: &[usize],
//!     gamma: f32, lambda: f32) -> Result<(Tensor<B, 1>, Tensor<B, 1>), KernelError>
//! ppo_clip_loss<B: KernelBackend>(logp, old_logp, advantages, mask: Tensor<B, 1>,
//!     offsets: &[usize], config: &ClipSettings) -> Result<PpoClipOutput<B>, KernelError>
//! ppo_clip_loss_weighted(…, mask, weight: Option<Tensor<B, 1>>, offsets, config)
//! swiglu<B: KernelBackend, const D: usize>(gate: Tensor<B, D>, up: Tensor<B, D>) -> Tensor<B, D>
//! masked_softmax<B: KernelBackend, const D: usize>(scores, mask: Tensor<B, D>) -> Tensor<B, D>
//! decode_attention<B: KernelBackend>(q, k, v, mask: Tensor<B, 4>) -> Option<Tensor<B, 3>>
//! rms_norm<B: KernelBackend, const D: usize>(x: Tensor<B, D>, weight: Tensor<B, 1>, eps: f32)
//! rotary<B: KernelBackend, const D: usize>(x, cos, sin: Tensor<B, D>) -> Tensor<B, D>
//! rotate_into_cache<B: KernelBackend>(step: CachedQkv<B>) -> RotatedQkv<B>
//! linear<B: KernelBackend, const D: usize>(x: Tensor<B, D>, weight: Tensor<B, 2>,
//!     bias: Option<Tensor<B, 1>>) -> Tensor<B, D>
//! ```
//!
//! - `offsets` are packed-sequence boundaries `[0, end₀, end₁, …, tokens]` (roll-flow's
//!   `Batch` offsets); `mask` is the response mask as 0/1 floats.
//! - Under `Autodiff<B>` the log-prob/entropy outputs are differentiable w.r.t. `logits`
//!   and the PPO loss w.r.t. `logp` (old log-probs, advantages, mask are constants); GAE is
//!   never differentiable.
//! - These are the numerics of `roll-flow-operators`' `model::logprob` (logits already
//!   gathered at response positions), `algo::gae` (response tokens only; masked tokens
//!   get 0) and `algo::ppo_loss` + `algo::aggregation` (all four [`LossAgg`] modes), which
//!   call these functions. [`reference`](mod@reference) restates the same formulas unfused in burn ops
//!   (and GAE as an f64 host loop, [`reference::gae_sequence`]): the oracles of the tests
//!   and the benchmark's baseline.
//!
//! # Backends ([`KernelBackend`])
//!
//! - `burn::backend::Flex` (CPU): fused multi-threaded Rust ([`cpu`]), reading tensor
//!   storage in place;
//! - `CubeBackend<R, F, I, BT>` (feature `cube`, on with `wgpu`/`cuda`): CubeCL kernels
//!   (`cube` module), e.g. `burn::backend::wgpu::CubeBackend<WgpuRuntime, f32, i32, u32>`
//!   (the `Wgpu` alias when burn's `fusion` feature is off);
//! - `burn::backend::NdArray` (feature `ndarray`): the CPU twins through a host copy, so
//!   kernel-routed code also runs there (backend comparisons);
//! - `Autodiff<B>` for any of those, with the backward passes registered.

pub mod aggregation;
mod autodiff;
mod autodiff_linear;
mod autodiff_model_ops;
mod autodiff_rl_ops;
pub mod backend;
pub mod cached_qkv;
pub mod cpu;
#[cfg(feature = "cube")]
mod cube;
pub mod dropout_mask;
pub mod dtype_cast;
mod flex;
mod float_primitive;
pub mod half_matmul;
pub mod host_transfer;
mod kernel_error;
#[cfg(feature = "ndarray")]
mod ndarray;
mod packed_weights;
pub mod ppo_clip;
pub mod reference;
mod rl_kernels;
mod rl_tensors;
pub mod row_sampling;
pub mod square_sums;
mod tf32;
mod unfused;

use burn::tensor::ops::FloatTensor;
use burn::tensor::Tensor;

pub use aggregation::{loss_normalizer, sequence_weights, LossAgg};
pub use backend::{
    GaeTokens, KernelBackend, LogProbSaved, PpoForward, PpoSaved, PpoTokens, SquareSum,
};
pub use cached_qkv::{CachedQkv, RotatedQkv};
pub use dtype_cast::like;
use float_primitive::{float, wrap};
pub use half_matmul::{half_matmul, half_matmul_refusals, set_half_matmul, HalfMatmul};
pub use kernel_error::KernelError;
pub use packed_weights::{with_packed_weights, PackedWeights};
pub use ppo_clip::{ClipSettings, PpoStats};
pub use rl_kernels::{
    gae, ppo_clip_loss, ppo_clip_loss_weighted, token_logprob_entropy, LogProbEntropy,
    PpoClipOutput,
};
pub use square_sums::SquareSums;
pub use tf32::{allow_tf32, tf32_allowed};
pub use unfused::DenseGradients;

/// SwiGLU's gate `silu(gate) ⊙ up` (Qwen2's MLP activation), differentiable w.r.t. both
/// inputs under autodiff; see [`cpu::swiglu`] for the formulas.
///
/// # Panics
/// If the shapes differ (the caller's two projections of the same tokens always agree).
pub fn swiglu<B: KernelBackend, const D: usize>(
    gate: Tensor<B, D>,
    up: Tensor<B, D>,
) -> Tensor<B, D> {
    assert_eq!(gate.dims(), up.dims(), "swiglu: gate and up shapes differ");
    let out = B::swiglu(float(gate), float(up));
    wrap(out)
}

/// RMSNorm over the last axis with the scale `weight` (`[H]`), differentiable w.r.t. both;
/// see [`cpu::rms_norm`].
///
/// # Panics
/// If `weight`'s length is not the last dimension of `x`.
pub fn rms_norm<B: KernelBackend, const D: usize>(
    x: Tensor<B, D>,
    weight: Tensor<B, 1>,
    eps: f32,
) -> Tensor<B, D> {
    assert_eq!(
        weight.dims(),
        [x.dims()[D - 1]],
        "rms_norm: the scale does not match the feature axis"
    );
    let out = B::rms_norm(float(x), float(weight), eps);
    wrap(out)
}

/// `(x + delta, rms_norm(x + delta))` in one pass where the backend has a kernel for it
/// ([`KernelBackend::add_rms_norm`]; `weight` is cast to `x`'s dtype there); `None` where it
/// has not (then add, and call [`rms_norm`]).
///
/// # Panics
/// If `x` and `delta` differ in shape or `weight`'s length is not the last dimension.
pub fn add_rms_norm<B: KernelBackend, const D: usize>(
    x: Tensor<B, D>,
    delta: Tensor<B, D>,
    weight: Tensor<B, 1>,
    eps: f32,
) -> Option<(Tensor<B, D>, Tensor<B, D>)> {
    assert!(
        x.dims() == delta.dims() && weight.dims() == [x.dims()[D - 1]],
        "add_rms_norm: x {:?}, delta {:?} and the scale {:?} do not fit",
        x.dims(),
        delta.dims(),
        weight.dims()
    );
    let (sum, y) = B::add_rms_norm(float(x), float(delta), float(weight), eps)?;
    Some((wrap::<B, D>(sum), wrap::<B, D>(y)))
}

/// Rotary position embedding in the rotate-half layout over the last axis (head_dim,
/// even), with `cos`/`sin` tables of `x`'s shape; differentiable w.r.t. `x` (the tables
/// are constants). See [`cpu::rotary`].
///
/// # Panics
/// If the shapes differ or the last axis is odd.
pub fn rotary<B: KernelBackend, const D: usize>(
    x: Tensor<B, D>,
    cos: Tensor<B, D>,
    sin: Tensor<B, D>,
) -> Tensor<B, D> {
    let dims = x.dims();
    assert!(
        cos.dims() == dims && sin.dims() == dims && dims[D - 1].is_multiple_of(2),
        "rotary: x {dims:?}, cos {:?} and sin {:?} must agree, with an even last axis",
        cos.dims(),
        sin.dims()
    );
    let out = B::rotary(float(x), float(cos), float(sin));
    wrap(out)
}

/// `x` laid out row-major, the same values and shape: a strided view (e.g. heads moved
/// back with `swap_dims`) is copied so that a reshape after it is a view; the gradient
/// flows through unchanged, laid out row-major too. See [`KernelBackend::contiguous`].
pub fn contiguous<B: KernelBackend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    wrap(B::contiguous(float(x)))
}

/// `tensor` with `value` written at offsets `starts`, like `slice_assign` with the ranges
/// `starts[d]..starts[d] + value.dims()[d]`; on `Flex`, in place when `tensor` owns its
/// storage alone (a KV cache's append then copies only the new columns). See
/// [`cpu::block_write`].
///
/// # Panics
/// If the block does not fit.
pub fn block_write<B: KernelBackend, const D: usize>(
    tensor: Tensor<B, D>,
    starts: [usize; D],
    value: Tensor<B, D>,
) -> Tensor<B, D> {
    let (dims, block) = (tensor.dims(), value.dims());
    assert!(
        (0..D).all(|d| starts[d] + block[d] <= dims[d]),
        "block_write: a {block:?} block at {starts:?} does not fit {dims:?}"
    );
    let out = B::block_write(float(tensor), &starts, float(value));
    wrap(out)
}

/// The batched matrix product `lhs · rhs` over the last two axes (`[.., n, k] · [.., k,
/// m]`, the leading axes equal), differentiable w.r.t. both, with f32 products kept in f32
/// on every backend ([`KernelBackend::matmul_forward`]).
///
/// # Panics
/// If the shapes do not fit.
pub fn matmul<B: KernelBackend, const D: usize>(
    lhs: Tensor<B, D>,
    rhs: Tensor<B, D>,
) -> Tensor<B, D> {
    let (l, r) = (lhs.dims(), rhs.dims());
    assert!(
        D >= 2 && l[..D - 2] == r[..D - 2] && l[D - 1] == r[D - 2],
        "matmul: {l:?} · {r:?} do not fit"
    );
    wrap(B::matmul(float(lhs), float(rhs)))
}

/// Σ_i values_i · weights_i as a `[1]` tensor, differentiable w.r.t. both: the product
/// `[1, n] · [n, 1]`, so on the CPU the sum runs in index order, one fused multiply-add per
/// value, the same bits on every CPU (burn's `sum` adds across as many partials as the
/// CPU's SIMD width).
pub fn weighted_sum<B: KernelBackend>(values: Tensor<B, 1>, weights: Tensor<B, 1>) -> Tensor<B, 1> {
    let n = values.dims()[0];
    matmul(values.reshape([1, n]), weights.reshape([n, 1])).reshape([1])
}

/// A dense layer `x·weight (+ bias)` on the last axis of `x` (`[…, k]`), with `weight`
/// `[k, m]` (burn's `Linear` layout) and `bias` `[m]`, computed on the tokens flattened to
/// `[tokens, k]` (one matrix product, not one per sequence); differentiable w.r.t. all
/// three. See [`cpu::linear`].
///
/// # Panics
/// If `weight` or `bias` do not fit `x`'s last axis.
pub fn linear<B: KernelBackend, const D: usize>(
    x: Tensor<B, D>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
) -> Tensor<B, D> {
    let (dims, [k, m]) = (x.dims(), weight.dims());
    assert!(
        dims[D - 1] == k && bias.as_ref().is_none_or(|b| b.dims() == [m]),
        "linear: x {dims:?}, weight [{k}, {m}] and bias {:?} do not fit",
        bias.as_ref().map(|b| b.dims())
    );
    on_tokens(x, m, |flat| B::dense(flat, float(weight), bias.map(float)))
}

/// `op` on `x: [..., k]` flattened to `[tokens, k]`, its `[tokens, m]` result given back as
/// `[..., m]` (both reshapes are views of row-major tensors).
fn on_tokens<B: KernelBackend, const D: usize>(
    x: Tensor<B, D>,
    m: usize,
    op: impl FnOnce(FloatTensor<B>) -> FloatTensor<B>,
) -> Tensor<B, D> {
    let dims = x.dims();
    let tokens = dims[..D - 1].iter().product::<usize>();
    let out = op(float(x.reshape([tokens, dims[D - 1]])));
    let mut out_dims = dims;
    out_dims[D - 1] = m;
    wrap::<B, 2>(out).reshape(out_dims)
}

/// `dropout(x) · weight` for `x: [..., k]`, `weight: [k, m]` and `draw`'s inverted-dropout
/// mask ([`dropout_mask`]): a LoRA adapter's `dropout(x) A`, differentiable w.r.t. `x` and
/// `weight`. Under autodiff one op that keeps `x` and makes the mask again in its backward
/// pass ([`KernelBackend::dropout_dense`]), so the dropped copy of `x` is not kept.
///
/// # Panics
/// If the shapes do not fit.
pub fn dropout_linear<B: KernelBackend, const D: usize>(
    x: Tensor<B, D>,
    weight: Tensor<B, 2>,
    draw: dropout_mask::MaskDraw,
) -> Tensor<B, D> {
    let (dims, [k, m]) = (x.dims(), weight.dims());
    assert!(
        dims[D - 1] == k,
        "dropout_linear: x {dims:?} and weight [{k}, {m}] do not fit"
    );
    on_tokens(x, m, |flat| B::dropout_dense(flat, float(weight), draw))
}

/// Attention's `softmax(scores + mask)` over the last axis, differentiable w.r.t. `scores`
/// (the additive mask is a constant); see [`cpu::softmax`].
///
/// # Panics
/// If the shapes differ (the attention mask is built for the scores' shape).
pub fn masked_softmax<B: KernelBackend, const D: usize>(
    scores: Tensor<B, D>,
    mask: Tensor<B, D>,
) -> Tensor<B, D> {
    assert_eq!(
        scores.dims(),
        mask.dims(),
        "masked_softmax: scores and mask shapes differ"
    );
    let out = B::masked_softmax(float(scores), float(mask));
    wrap(out)
}

/// One query per row against its keys and values (a decode step): `softmax(q kᵀ + mask) v`
/// for `q [b, heads, 1, d]` (scaled), `k`, `v [b, kv_heads, keys, d]` and `mask [b, heads,
/// 1, keys]`, as `[b, heads, d]`, in one fused kernel where the backend has one (see
/// [`KernelBackend::decode_attention`]); `None` where it has not, or for shapes it does
/// not take (more than one query, a head wider than 256), and the caller composes it.
pub fn decode_attention<B: KernelBackend>(
    q: Tensor<B, 4>,
    k: Tensor<B, 4>,
    v: Tensor<B, 4>,
    mask: Tensor<B, 4>,
) -> Option<Tensor<B, 3>> {
    B::decode_attention(float(q), float(k), float(v), float(mask)).map(wrap)
}

/// A cached attention step between the q/k/v products and the attention: biases added,
/// queries and keys rotated, keys and values written into the cache at `step.column`;
/// one kernel on the CubeCL backends, the unfused ops elsewhere (see
/// [`KernelBackend::rotate_into_cache`] and [`cached_qkv`] for the formulas).
///
/// # Panics
/// If the shapes disagree ([`CachedQkv::check`]).
pub fn rotate_into_cache<B: KernelBackend>(step: CachedQkv<B>) -> RotatedQkv<B> {
    step.check();
    B::rotate_into_cache(step)
}
