//! The backend extension trait: the fused ops on burn tensor primitives.
//!
//! Implemented for the CPU backend `Flex` (fused Rust twins, [`crate::cpu`]), for
//! `CubeBackend<R, …>` with the `cube` feature (CubeCL kernels, wgpu and CUDA), and for
//! `Autodiff<B>` of any of them (backward passes registered with burn's autodiff). Callers
//! use the tensor-level functions in the crate root; this trait is the plumbing.

use burn::tensor::backend::Backend;
use burn::tensor::ops::{FloatTensor, IntTensor};

use crate::PpoClipConfig;

/// Forward results of the fused PPO loss, as primitives.
#[derive(Debug, Clone)]
pub struct PpoForward<B: Backend> {
    /// Aggregated loss, `[1]`.
    pub loss: FloatTensor<B>,
    /// `[4]`: clipfrac, clipfrac_lower, approx_kl, response tokens (see [`crate::PpoStats`]).
    pub stats: FloatTensor<B>,
    /// Per-sequence weight w_s with loss = Σ_s w_s Σ_{t∈s} m_t l_t, `[sequences]`.
    pub seq_weight: FloatTensor<B>,
}

/// A burn backend with roll-flow's fused kernels.
pub trait KernelBackend: Backend {
    /// Token log-prob + entropy forward: `logits [N, V]`, `targets [N]` →
    /// (`[N, 2]` rows of (logp, entropy), `lse [N]` = log-sum-exp of `logits / temperature`).
    fn logprob_entropy_forward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        temperature: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// Its backward: `dlogits [N, V]` from the forward's `lse`, `out` (`[N, 2]`) and the
    /// incoming gradient `grad` (`[N, 2]`: g_logp, g_entropy).
    fn logprob_entropy_backward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        lse: FloatTensor<Self>,
        out: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        temperature: f32,
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
        rewards: FloatTensor<Self>,
        values: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        offsets: &[usize],
        gamma: f32,
        lambda: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// Clipped PPO loss forward: loss, stats and per-sequence weights.
    fn ppo_clip_forward(
        logp: FloatTensor<Self>,
        old_logp: FloatTensor<Self>,
        advantages: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        offsets: &[usize],
        config: &PpoClipConfig,
    ) -> PpoForward<Self>;

    /// Its backward: dlogp `[tokens]` for the incoming loss gradient `grad` (`[1]`).
    #[allow(clippy::too_many_arguments)]
    fn ppo_clip_backward(
        logp: FloatTensor<Self>,
        old_logp: FloatTensor<Self>,
        advantages: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        offsets: &[usize],
        seq_weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        config: &PpoClipConfig,
    ) -> FloatTensor<Self>;

    /// The differentiable op: (loss `[1]`, stats `[4]`); the loss is differentiable with
    /// respect to `logp` (old log-probs, advantages and mask are constants).
    fn ppo_clip_loss(
        logp: FloatTensor<Self>,
        old_logp: FloatTensor<Self>,
        advantages: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        offsets: &[usize],
        config: &PpoClipConfig,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let f = Self::ppo_clip_forward(logp, old_logp, advantages, mask, offsets, config);
        (f.loss, f.stats)
    }
}
