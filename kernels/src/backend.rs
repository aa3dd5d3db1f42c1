//! The backend extension trait: the fused ops on burn tensor primitives.
//!
//! Implemented for the CPU backend `Flex` (fused Rust twins, [`crate::cpu`]), for
//! `CubeBackend<R, …>` with the `cube` feature (CubeCL kernels, wgpu and CUDA), and for
//! `Autodiff<B>` of any of them (backward passes registered with burn's autodiff). Callers
//! use the tensor-level functions in the crate root; this trait is the plumbing.

use burn::tensor::backend::Backend;
use burn::tensor::ops::{FloatTensor, IntTensor};
use burn::tensor::Tensor;

use crate::cached_qkv::{CachedQkv, RotatedQkv};
use crate::dropout_mask::MaskDraw;
use crate::float_primitive::{float, wrap};
use crate::unfused::{self, DenseGradients, MatrixProduct, RowSum};

use crate::ppo_clip::ClipSettings;
pub use crate::ppo_clip::{PpoForward, PpoSaved, PpoTokens};
pub use crate::rl_tensors::{GaeTokens, LogProbSaved};

/// One tensor's Σ x² (`KernelBackend::square_sum`): known on the host, or a one-element
/// tensor still on its device, read with others at once by `SquareSums`.
pub enum SquareSum<B: Backend> {
    Host(f64),
    Device(FloatTensor<B>),
}

/// A burn backend with roll-flow's fused kernels.
pub trait KernelBackend: Backend {
    /// Whether tensors live in memory of their own (a GPU's), so that reading one on the
    /// host is a transfer worth avoiding; false where they already are host memory (the
    /// CPU backends).
    const DEVICE_MEMORY: bool = false;

    /// Token log-prob + entropy forward: `logits [N, V]`, `targets [N]` →
    /// (`[N, 2]` rows of (logp, entropy), what the backward needs per row:
    /// [`LogProbSaved::lse`]).
    fn logprob_entropy_forward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        temperature: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// Its backward: `dlogits [N, V]` from what the forward saved and the incoming
    /// gradient `grad` (`[N, 2]`: g_logp, g_entropy).
    fn logprob_entropy_backward(
        saved: LogProbSaved<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self>;

    /// The differentiable op: `[N, 2]` (logp, entropy). Autodiff backends record the
    /// backward pass; the others just run the forward.
    fn logprob_entropy(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        temperature: f32,
    ) -> FloatTensor<Self> {
        Self::logprob_entropy_forward(logits, targets, temperature).0
    }

    /// GAE over packed sequences: (advantages, returns), each `[tokens]`. Not
    /// differentiable (an autodiff backend returns untracked tensors).
    fn gae(
        tokens: GaeTokens<Self>,
        offsets: &[usize],
        gamma: f32,
        lambda: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// Clipped PPO loss forward: loss, stats and what its backward needs ([`PpoSaved`]).
    fn ppo_clip_forward(
        tokens: PpoTokens<Self>,
        offsets: &[usize],
        config: &ClipSettings,
    ) -> PpoForward<Self>;

    /// Its backward from the forward's results: dlogp `[tokens]` for the incoming loss
    /// gradient `grad` (`[1]`).
    fn ppo_clip_backward(
        tokens: PpoTokens<Self>,
        offsets: &[usize],
        forward: PpoForward<Self>,
        grad: FloatTensor<Self>,
        config: &ClipSettings,
    ) -> FloatTensor<Self>;

    /// The differentiable op: (loss `[1]`, stats `[4]`); the loss is differentiable with
    /// respect to `tokens.logp` (the other inputs are constants).
    fn ppo_clip_loss(
        tokens: PpoTokens<Self>,
        offsets: &[usize],
        config: &ClipSettings,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let f = Self::ppo_clip_forward(tokens, offsets, config);
        (f.loss, f.stats)
    }

    /// SwiGLU's gate `silu(gate) ⊙ up` (elementwise, equal shapes; see [`crate::cpu::swiglu`]
    /// for the formulas). The default is burn's own ops (`crate::unfused`, which backends
    /// without a fused version, e.g. ndarray, run); `Flex` and the CubeCL backends
    /// (`cube/swiglu.rs`) override it.
    fn swiglu_forward(gate: FloatTensor<Self>, up: FloatTensor<Self>) -> FloatTensor<Self> {
        unfused::swiglu_forward::<Self>(gate, up)
    }

    /// Its backward: (dgate, dup) for the incoming gradient `grad`.
    fn swiglu_backward(
        gate: FloatTensor<Self>,
        up: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        unfused::swiglu_backward::<Self>(gate, up, grad)
    }

    /// The differentiable op (autodiff backends record the backward pass).
    fn swiglu(gate: FloatTensor<Self>, up: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::swiglu_forward(gate, up)
    }

    /// Attention's `softmax(scores + mask)` over the last axis (see [`crate::cpu::softmax`]);
    /// the mask is additive, constant and of the scores' shape. Default: burn's ops
    /// (`crate::unfused`, for backends without a fused version); `Flex` and the CubeCL
    /// backends (`cube/masked_softmax.rs`) override it.
    fn masked_softmax_forward(
        scores: FloatTensor<Self>,
        mask: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        unfused::masked_softmax_forward::<Self>(scores, mask)
    }

    /// Its backward: dscores = y ⊙ (dy − Σ dy·y) from the output `probs` and `grad`.
    fn masked_softmax_backward(
        probs: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        unfused::masked_softmax_backward::<Self>(probs, grad)
    }

    /// The differentiable op (w.r.t. `scores`; autodiff backends record the backward).
    fn masked_softmax(scores: FloatTensor<Self>, mask: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::masked_softmax_forward(scores, mask)
    }

    /// RMSNorm over the last axis of `x` (`[…, H]`) with the scale `weight` (`[H]`); see
    /// [`crate::cpu::rms_norm`]. Default: burn's ops; `Flex` and the CubeCL backends
    /// (`cube/rms_norm.rs`) override it.
    fn rms_norm_forward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self> {
        unfused::rms_norm_forward::<Self>(x, weight, eps)
    }

    /// Its backward: (dx, dweight) for the incoming gradient `grad`.
    fn rms_norm_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        eps: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        unfused::rms_norm_backward::<Self>(x, weight, grad, eps)
    }

    /// The differentiable op (w.r.t. `x` and `weight`).
    fn rms_norm(x: FloatTensor<Self>, weight: FloatTensor<Self>, eps: f32) -> FloatTensor<Self> {
        Self::rms_norm_forward(x, weight, eps)
    }

    /// `x + delta` and the RMSNorm of that sum over the last axis, `(sum, normed)`, in one
    /// pass where the backend has a kernel for it (the CubeCL ones: `cube/rms_norm.rs`), so
    /// that a decoder layer's residual add and the norm after it are one launch on a GPU;
    /// `weight` (`[H]`) in any float dtype, cast to `x`'s there.
    /// Default `None`: the caller adds, then calls [`KernelBackend::rms_norm`] (the CPU
    /// backends, whose ops are not launches, and autodiff, whose sum and norm must be
    /// differentiable).
    fn add_rms_norm(
        _x: FloatTensor<Self>,
        _delta: FloatTensor<Self>,
        _weight: FloatTensor<Self>,
        _eps: f32,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        None
    }

    /// Attention of one query per row (a decode step), fused where the backend has a kernel
    /// for it (the CubeCL ones: `cube/decode_attention.rs`): `q [b, heads, 1, d]` (already
    /// scaled), `k`, `v [b, kv_heads, keys, d]` (`heads` a multiple of `kv_heads`), the
    /// additive `mask [b, heads, 1, keys]` → `softmax(q kᵀ + mask) v`, `[b, heads, d]`
    /// row-major. Default `None`: the caller composes it from matmuls and
    /// [`KernelBackend::masked_softmax`] (the CPU backends, whose products are already
    /// fused, and autodiff: training does not decode).
    fn decode_attention(
        _q: FloatTensor<Self>,
        _k: FloatTensor<Self>,
        _v: FloatTensor<Self>,
        _mask: FloatTensor<Self>,
    ) -> Option<FloatTensor<Self>> {
        None
    }

    /// A cached attention step's prologue: the q/k/v biases added, queries and keys
    /// rotated, keys and values written into the cache buffers at `column`
    /// ([`crate::cached_qkv`] has the formulas). Default: [`CachedQkv::unfused`], seven
    /// ops; the CubeCL backends override it with one kernel (`cube/rotate_into_cache.rs`),
    /// so that a decode step's layer launches one where it launched seven.
    fn rotate_into_cache(step: CachedQkv<Self>) -> RotatedQkv<Self> {
        step.unfused()
    }

    /// The batched matrix product over the last two axes, `lhs [.., n, k] · rhs [.., k, m]`
    /// with equal leading axes, f32 products kept in f32. Default: burn's matmul. The
    /// CubeCL backends override it on devices with TF32 tensor cores (CUDA from Ampere on),
    /// where burn's matmul multiplies f32 in TF32 (10-bit mantissas; `cube/f32_matmul.rs`),
    /// unless the run opts in to TF32 ([`crate::allow_tf32`]).
    fn matmul_forward(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::float_matmul(lhs, rhs)
    }

    /// The differentiable op (w.r.t. both): d lhs = g·rhsᵀ, d rhs = lhsᵀ·g, each by
    /// [`KernelBackend::matmul_forward`].
    fn matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::matmul_forward(lhs, rhs)
    }

    /// A dense layer y = x·W (+ b): x `[n, k]`, `weight` `[k, m]` (burn's `Linear` layout),
    /// `bias` `[m]`; see [`crate::cpu::linear`]. Default: burn's matmul and add; `Flex`
    /// overrides it. (Named `dense` so as not to collide with burn's `ModuleOps::linear`.)
    fn dense_forward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self> {
        unfused::linear_forward::<Self>(x, weight, bias, Self::matmul_forward)
    }

    /// Its backward: (dx, dweight, dbias) for the incoming gradient `grad` (`[n, m]`);
    /// dbias only `with_bias`.
    fn dense_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        with_bias: bool,
    ) -> DenseGradients<Self> {
        let ops = (
            Self::matmul_forward as MatrixProduct<Self>,
            Self::column_sums as RowSum<Self>,
        );
        unfused::linear_backward::<Self>(x, weight, grad, with_bias, ops)
    }

    /// Σ over the rows of `x [n, m]` (n ≥ 1), `[m]`: a dense layer's bias gradient.
    /// Default: burn's `sum_dim(0)`; the CubeCL backends override it
    /// (`cube/column_sums.rs`: burn's reduction runs one unit per column there).
    fn column_sums(x: FloatTensor<Self>) -> FloatTensor<Self> {
        unfused::column_sums::<Self>(x)
    }

    /// The differentiable op (w.r.t. `x`, `weight` and `bias`).
    fn dense(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self> {
        Self::dense_forward(x, weight, bias)
    }

    /// Rotary embedding over the last axis of `x` (`[…, head_dim]`) with tables `cos`,
    /// `sin` of `x`'s shape, rotate-half layout; see [`crate::cpu::rotary`]. Default:
    /// burn's ops; `Flex` and the CubeCL backends (`cube/rotary.rs`) override it.
    fn rotary_forward(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        unfused::rotary_forward::<Self>(x, cos, sin)
    }

    /// Its backward: dx = dy ⊙ cos + rotate_halfᵀ(dy ⊙ sin) (the tables are constants).
    fn rotary_backward(
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        unfused::rotary_backward::<Self>(cos, sin, grad)
    }

    /// The differentiable op (w.r.t. `x`).
    fn rotary(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        Self::rotary_forward(x, cos, sin)
    }

    /// `x` laid out row-major: a copy of a strided view (e.g. after `swap_dims`), so that a
    /// reshape after it is a view; the gradient of the op is the incoming one laid out the
    /// same way. Default: `x` as it is (the backend's reshape copies a view itself); `Flex`
    /// copies whole rows on every thread ([`crate::cpu::strided_copy`]) where burn-flex
    /// would walk the view element by element on one.
    fn contiguous(x: FloatTensor<Self>) -> FloatTensor<Self> {
        x
    }

    /// One next token per row, drawn where the logits live (not differentiable): `logits
    /// [R, V]` and `params [R, 3]` rows of (1/T, u, greedy) → `[R, 3]` rows of (token,
    /// log π(token), count of non-finite logits); see [`crate::row_sampling`]. Default: on
    /// the host ([`crate::cpu::row_sample`]), which reads the logits back.
    fn sample_rows(logits: FloatTensor<Self>, params: FloatTensor<Self>) -> FloatTensor<Self> {
        unfused::sample_rows_on_host::<Self>(logits, params)
    }

    /// An inverted-dropout mask shaped and typed like `like` (not differentiable; its
    /// values depend on `draw` alone, [`crate::dropout_mask`]). Default: made on the host
    /// and uploaded; the CubeCL backends make it on the device.
    fn dropout_mask(like: FloatTensor<Self>, draw: MaskDraw) -> FloatTensor<Self> {
        crate::dropout_mask::host_mask::<Self>(like, draw)
    }

    /// `x ⊙ mask` for `draw`'s mask; under autodiff the backward pass makes the mask again
    /// instead of keeping it.
    fn dropout(x: FloatTensor<Self>, draw: MaskDraw) -> FloatTensor<Self> {
        let mask = Self::dropout_mask(x.clone(), draw);
        Self::float_mul(x, mask)
    }

    /// `dropout(x) · weight` for `x [n, k]`, `weight [k, m]`: a LoRA adapter's first
    /// product `dropout(x) A`. Under autodiff one op that keeps `x` (which the layer's own
    /// product keeps anyway) and drops it again for the backward pass, where
    /// `dense(dropout(x), weight)` would keep the dropped copy; the same values and
    /// gradients.
    fn dropout_dense(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        draw: MaskDraw,
    ) -> FloatTensor<Self> {
        Self::dense(Self::dropout(x, draw), weight, None)
    }

    /// Σ x² over every value of `x` (not differentiable), for `SquareSums`. Default:
    /// burn's `square().sum()`, left on the device; `Flex` sums on the host in an order
    /// fixed by the element count, the same on every CPU and at every thread count
    /// ([`crate::cpu::sum_of_squares`]).
    fn square_sum(x: FloatTensor<Self>) -> SquareSum<Self> {
        let x: Tensor<Self, 1> = wrap(x);
        SquareSum::Device(float(x.square().sum()))
    }

    /// `tensor` with `value` written at offsets `starts` (one per axis). Default: burn's
    /// `slice_assign` (tracked under autodiff); `Flex` writes in place when `tensor` owns
    /// its contiguous storage alone ([`crate::cpu::block_write`]).
    fn block_write(
        tensor: FloatTensor<Self>,
        starts: &[usize],
        value: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        unfused::slice_assign_block::<Self>(tensor, starts, value)
    }
}

impl<B: KernelBackend> CachedQkv<B> {
    /// The step in burn's ops and the backend's rotary op: bias adds, two rotations
    /// ([`KernelBackend::rotary`]) and two block writes ([`KernelBackend::block_write`]);
    /// [`KernelBackend::rotate_into_cache`]'s default.
    pub fn unfused(self) -> RotatedQkv<B> {
        let [rows, n, heads, d] = self.query_shape();
        let kv_heads = self.k_tables[0].dims()[2];
        let [bq, bk, bv] = self.bias.map_or([None, None, None], |b| b.map(Some));
        let biased = |x: Tensor<B, 2>, b: Option<Tensor<B, 1>>, h: usize| {
            let x = match b {
                Some(b) => x.add(b.unsqueeze()),
                None => x,
            };
            x.reshape([rows, n, h, d])
        };
        let rotate = |x: Tensor<B, 4>, [cos, sin]: [Tensor<B, 4>; 2]| {
            wrap(B::rotary(float(x), float(cos), float(sin)))
        };
        let at = [0, 0, self.column, 0];
        let write = |buffer: Tensor<B, 4>, new: Tensor<B, 4>| {
            let new = float(new.swap_dims(1, 2));
            wrap(B::block_write(float(buffer), &at, new))
        };
        let k = rotate(biased(self.k, bk, kv_heads), self.k_tables);
        RotatedQkv {
            q: rotate(biased(self.q, bq, heads), self.q_tables),
            keys: write(self.keys, k),
            values: write(self.values, biased(self.v, bv, kv_heads)),
        }
    }
}
