//! The tensors two RL kernels take or keep, as primitives: GAE's per-token inputs and what
//! the log-prob forward saves for its backward pass (re-exported by [`crate::backend`],
//! beside PPO's in [`crate::ppo_clip`]).

use burn::tensor::backend::Backend;
use burn::tensor::ops::{FloatTensor, IntTensor};

/// What the log-prob forward keeps for its backward pass (no `[N, V]` softmax: the
/// backward recomputes it from the row log-sum-exp).
#[derive(Debug, Clone)]
pub struct LogProbSaved<B: Backend> {
    /// `[N, V]`.
    pub logits: FloatTensor<B>,
    /// `[N]`.
    pub targets: IntTensor<B>,
    /// What the backward needs per row beyond `out`: the row log-sum-exp of
    /// `logits / temperature`, `[N]`, on the CPU; (log-sum-exp, entropy) `[N, 2]` in f32 on
    /// the CubeCL backends, unrounded by a half-precision `out` (`cube/logprob.rs`).
    pub lse: FloatTensor<B>,
    /// The forward output, `[N, 2]` rows of (logp, entropy); in f32 on the CubeCL backends
    /// whatever the logits' type.
    pub out: FloatTensor<B>,
    pub temperature: f32,
}

/// The per-token inputs of GAE, as primitives, each `[tokens]`.
#[derive(Debug, Clone)]
pub struct GaeTokens<B: Backend> {
    pub rewards: FloatTensor<B>,
    pub values: FloatTensor<B>,
    /// Response mask, 0/1.
    pub mask: FloatTensor<B>,
}

impl<B: Backend> GaeTokens<B> {
    /// The same tensors through `f` (e.g. unwrapping autodiff primitives).
    pub fn map<C: Backend>(self, f: impl Fn(FloatTensor<B>) -> FloatTensor<C>) -> GaeTokens<C> {
        GaeTokens {
            rewards: f(self.rewards),
            values: f(self.values),
            mask: f(self.mask),
        }
    }
}
