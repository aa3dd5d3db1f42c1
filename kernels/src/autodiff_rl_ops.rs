//! The autodiff `Backward` steps of the RL ops, registered by [`KernelBackend`]'s
//! `Autodiff<B>` implementation (`autodiff.rs`):
//!
//! - log-prob + entropy: one parent (logits); the state holds the logits, targets, the
//!   row log-sum-exp and the (logp, entropy) output, so the backward recomputes softmax
//!   row by row instead of keeping a `[N, V]` tensor.
//! - PPO loss: one parent (logp); old log-probs, advantages, mask and token weights are
//!   constants, kept with the forward's results.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::autodiff::Autodiff;

use crate::backend::{KernelBackend, LogProbSaved, PpoForward, PpoTokens};
use crate::ppo_clip::ClipSettings;

#[derive(Debug)]
pub(crate) struct LogProbBackward;

impl<B: KernelBackend> Backward<B, 1> for LogProbBackward {
    type State = LogProbSaved<B>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        if let Some(node) = parent {
            let d = B::logprob_entropy_backward(ops.state, grad);
            grads.register::<B>(node.id, d);
        }
    }
}

#[derive(Debug)]
pub(crate) struct PpoBackward;

#[derive(Debug, Clone)]
pub(crate) struct PpoState<B: KernelBackend> {
    pub tokens: PpoTokens<B>,
    pub offsets: Vec<usize>,
    pub forward: PpoForward<B>,
    pub config: ClipSettings,
}

impl<B: KernelBackend> Backward<B, 1> for PpoBackward {
    type State = PpoState<B>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let s = ops.state;
        if let Some(node) = parent {
            let d = B::ppo_clip_backward(s.tokens, &s.offsets, s.forward, grad, &s.config);
            grads.register::<B>(node.id, d);
        }
    }
}

/// The inner backend's primitives of autodiff PPO inputs (all constants but `logp`).
pub(crate) fn inner_tokens<B: KernelBackend, C: CheckpointStrategy>(
    tokens: PpoTokens<Autodiff<B, C>>,
) -> PpoTokens<B> {
    tokens.map(|t| t.primitive)
}
