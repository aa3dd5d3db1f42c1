//! [`KernelBackend`] for `Autodiff<B>`: the forward runs on `B`, the backward passes are
//! registered with burn's autodiff graph (burn's custom-kernel pattern: a `Backward`
//! step with a state saved in the forward).
//!
//! - log-prob + entropy: one parent (logits); the state holds the logits, targets, the
//!   row log-sum-exp and the (logp, entropy) output, so the backward recomputes softmax
//!   row by row instead of keeping a `[N, V]` tensor.
//! - PPO loss: one parent (logp); old log-probs, advantages and mask are constants.
//! - GAE: not differentiable; runs on `B` and returns untracked tensors.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::autodiff::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::{FloatTensor, IntTensor};

use crate::backend::{KernelBackend, PpoForward};
use crate::PpoClipConfig;

fn untracked<B: KernelBackend>(t: FloatTensor<B>) -> FloatTensor<Autodiff<B>> {
    Autodiff::<B>::from_inner(t)
}

#[derive(Debug)]
struct LogProbBackward;

impl<B: KernelBackend> Backward<B, 1> for LogProbBackward {
    /// (logits, targets, lse, out, temperature)
    type State = (
        FloatTensor<B>,
        IntTensor<B>,
        FloatTensor<B>,
        FloatTensor<B>,
        f32,
    );

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (logits, targets, lse, out, temperature) = ops.state;
        if let Some(node) = parent {
            let d = B::logprob_entropy_backward(logits, targets, lse, out, grad, temperature);
            grads.register::<B>(node.id, d);
        }
    }
}

#[derive(Debug)]
struct PpoBackward;

#[derive(Debug, Clone)]
struct PpoState<B: KernelBackend> {
    logp: FloatTensor<B>,
    old_logp: FloatTensor<B>,
    advantages: FloatTensor<B>,
    mask: FloatTensor<B>,
    offsets: Vec<usize>,
    seq_weight: FloatTensor<B>,
    config: PpoClipConfig,
}

impl<B: KernelBackend> Backward<B, 1> for PpoBackward {
    type State = PpoState<B>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let s = ops.state;
        if let Some(node) = parent {
            let d = B::ppo_clip_backward(
                s.logp,
                s.old_logp,
                s.advantages,
                s.mask,
                &s.offsets,
                s.seq_weight,
                grad,
                &s.config,
            );
            grads.register::<B>(node.id, d);
        }
    }
}

impl<B: KernelBackend, C: CheckpointStrategy> KernelBackend for Autodiff<B, C> {
    fn logprob_entropy_forward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        temperature: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (out, lse) = B::logprob_entropy_forward(logits.primitive, targets, temperature);
        (untracked::<B>(out), untracked::<B>(lse))
    }

    fn logprob_entropy_backward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        lse: FloatTensor<Self>,
        out: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        temperature: f32,
    ) -> FloatTensor<Self> {
        untracked::<B>(B::logprob_entropy_backward(
            logits.primitive,
            targets,
            lse.primitive,
            out.primitive,
            grad.primitive,
            temperature,
        ))
    }

    fn logprob_entropy(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        temperature: f32,
    ) -> FloatTensor<Self> {
        match LogProbBackward
            .prepare::<C>([logits.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (out, lse) = B::logprob_entropy_forward(
                    logits.primitive.clone(),
                    targets.clone(),
                    temperature,
                );
                let state = (logits.primitive, targets, lse, out.clone(), temperature);
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(B::logprob_entropy_forward(logits.primitive, targets, temperature).0)
            }
        }
    }

    fn gae(
        rewards: FloatTensor<Self>,
        values: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        offsets: &[usize],
        gamma: f32,
        lambda: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (a, r) = B::gae(
            rewards.primitive,
            values.primitive,
            mask.primitive,
            offsets,
            gamma,
            lambda,
        );
        (untracked::<B>(a), untracked::<B>(r))
    }

    fn ppo_clip_forward(
        logp: FloatTensor<Self>,
        old_logp: FloatTensor<Self>,
        advantages: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        offsets: &[usize],
        config: &PpoClipConfig,
    ) -> PpoForward<Self> {
        let f = B::ppo_clip_forward(
            logp.primitive,
            old_logp.primitive,
            advantages.primitive,
            mask.primitive,
            offsets,
            config,
        );
        PpoForward {
            loss: untracked::<B>(f.loss),
            stats: untracked::<B>(f.stats),
            seq_weight: untracked::<B>(f.seq_weight),
        }
    }

    fn ppo_clip_backward(
        logp: FloatTensor<Self>,
        old_logp: FloatTensor<Self>,
        advantages: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        offsets: &[usize],
        seq_weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        config: &PpoClipConfig,
    ) -> FloatTensor<Self> {
        untracked::<B>(B::ppo_clip_backward(
            logp.primitive,
            old_logp.primitive,
            advantages.primitive,
            mask.primitive,
            offsets,
            seq_weight.primitive,
            grad.primitive,
            config,
        ))
    }

    fn ppo_clip_loss(
        logp: FloatTensor<Self>,
        old_logp: FloatTensor<Self>,
        advantages: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        offsets: &[usize],
        config: &PpoClipConfig,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (old_logp, advantages, mask) =
            (old_logp.primitive, advantages.primitive, mask.primitive);
        match PpoBackward
            .prepare::<C>([logp.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let f = B::ppo_clip_forward(
                    logp.primitive.clone(),
                    old_logp.clone(),
                    advantages.clone(),
                    mask.clone(),
                    offsets,
                    config,
                );
                let state = PpoState {
                    logp: logp.primitive,
                    old_logp,
                    advantages,
                    mask,
                    offsets: offsets.to_vec(),
                    seq_weight: f.seq_weight,
                    config: *config,
                };
                (prep.finish(state, f.loss), untracked::<B>(f.stats))
            }
            OpsKind::UnTracked(prep) => {
                let f = B::ppo_clip_forward(
                    logp.primitive,
                    old_logp,
                    advantages,
                    mask,
                    offsets,
                    config,
                );
                (prep.finish(f.loss), untracked::<B>(f.stats))
            }
        }
    }
}
