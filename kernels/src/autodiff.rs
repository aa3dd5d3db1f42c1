//! [`KernelBackend`] for `Autodiff<B>`: the forward runs on `B`, the backward passes are
//! registered with burn's autodiff graph (burn's custom-kernel pattern: a `Backward`
//! step with a state saved in the forward).
//!
//! - log-prob + entropy and the PPO loss: their `Backward` steps are in
//!   [`crate::autodiff_rl_ops`].
//! - GAE: not differentiable; runs on `B` and returns untracked tensors.
//! - the model ops (SwiGLU, RMSNorm, rotary, masked softmax, contiguous, dropout): their
//!   `Backward` steps are in [`crate::autodiff_model_ops`]; the dense layer's, LoRA's
//!   dropout-then-dense and the matrix product's in [`crate::autodiff_linear`].

use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::ops::{Backward, OpsKind};
use burn::backend::autodiff::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::{FloatTensor, IntTensor};

use crate::autodiff_model_ops::{
    ContiguousBackward, DropoutBackward, MaskedSoftmaxBackward, RmsNormBackward, RotaryBackward,
    SwiGluBackward,
};
use crate::autodiff_rl_ops::{inner_tokens, LogProbBackward, PpoBackward, PpoState};
use crate::backend::{GaeTokens, KernelBackend, LogProbSaved, PpoForward, PpoTokens, SquareSum};
use crate::dropout_mask::MaskDraw;
use crate::ppo_clip::ClipSettings;
use crate::unfused::DenseGradients;

fn untracked<B: KernelBackend>(t: FloatTensor<B>) -> FloatTensor<Autodiff<B>> {
    Autodiff::<B>::from_inner(t)
}

impl<B: KernelBackend, C: CheckpointStrategy> KernelBackend for Autodiff<B, C> {
    const DEVICE_MEMORY: bool = B::DEVICE_MEMORY;

    fn logprob_entropy_forward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        temperature: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (out, lse) = B::logprob_entropy_forward(logits.primitive, targets, temperature);
        (untracked::<B>(out), untracked::<B>(lse))
    }

    fn logprob_entropy_backward(
        saved: LogProbSaved<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let saved = LogProbSaved {
            logits: saved.logits.primitive,
            targets: saved.targets,
            lse: saved.lse.primitive,
            out: saved.out.primitive,
            temperature: saved.temperature,
        };
        untracked::<B>(B::logprob_entropy_backward(saved, grad.primitive))
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
                let state = LogProbSaved {
                    logits: logits.primitive,
                    targets,
                    lse,
                    out: out.clone(),
                    temperature,
                };
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(B::logprob_entropy_forward(logits.primitive, targets, temperature).0)
            }
        }
    }

    fn gae(
        tokens: GaeTokens<Self>,
        offsets: &[usize],
        gamma: f32,
        lambda: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (a, r) = B::gae(tokens.map(|t| t.primitive), offsets, gamma, lambda);
        (untracked::<B>(a), untracked::<B>(r))
    }

    fn ppo_clip_forward(
        tokens: PpoTokens<Self>,
        offsets: &[usize],
        config: &ClipSettings,
    ) -> PpoForward<Self> {
        B::ppo_clip_forward(inner_tokens(tokens), offsets, config).map(untracked::<B>)
    }

    fn ppo_clip_backward(
        tokens: PpoTokens<Self>,
        offsets: &[usize],
        forward: PpoForward<Self>,
        grad: FloatTensor<Self>,
        config: &ClipSettings,
    ) -> FloatTensor<Self> {
        untracked::<B>(B::ppo_clip_backward(
            inner_tokens(tokens),
            offsets,
            forward.map(|t| t.primitive),
            grad.primitive,
            config,
        ))
    }

    fn ppo_clip_loss(
        tokens: PpoTokens<Self>,
        offsets: &[usize],
        config: &ClipSettings,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let node = tokens.logp.node.clone();
        let tokens = inner_tokens(tokens);
        match PpoBackward.prepare::<C>([node]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let f = B::ppo_clip_forward(tokens.clone(), offsets, config);
                let (loss, stats) = (f.loss.clone(), f.stats.clone());
                let state = PpoState {
                    tokens,
                    offsets: offsets.to_vec(),
                    forward: f,
                    config: *config,
                };
                (prep.finish(state, loss), untracked::<B>(stats))
            }
            OpsKind::UnTracked(prep) => {
                let f = B::ppo_clip_forward(tokens, offsets, config);
                (prep.finish(f.loss), untracked::<B>(f.stats))
            }
        }
    }

    fn swiglu_forward(gate: FloatTensor<Self>, up: FloatTensor<Self>) -> FloatTensor<Self> {
        untracked::<B>(B::swiglu_forward(gate.primitive, up.primitive))
    }

    fn swiglu_backward(
        gate: FloatTensor<Self>,
        up: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (dg, du) = B::swiglu_backward(gate.primitive, up.primitive, grad.primitive);
        (untracked::<B>(dg), untracked::<B>(du))
    }

    fn swiglu(gate: FloatTensor<Self>, up: FloatTensor<Self>) -> FloatTensor<Self> {
        let parents = [gate.node.clone(), up.node.clone()];
        match SwiGluBackward
            .prepare::<C>(parents)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let out = B::swiglu_forward(gate.primitive.clone(), up.primitive.clone());
                prep.finish((gate.primitive, up.primitive), out)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(B::swiglu_forward(gate.primitive, up.primitive))
            }
        }
    }

    fn rms_norm_forward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self> {
        untracked::<B>(B::rms_norm_forward(x.primitive, weight.primitive, eps))
    }

    fn rms_norm_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        eps: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (dx, dw) = B::rms_norm_backward(x.primitive, weight.primitive, grad.primitive, eps);
        (untracked::<B>(dx), untracked::<B>(dw))
    }

    fn rms_norm(x: FloatTensor<Self>, weight: FloatTensor<Self>, eps: f32) -> FloatTensor<Self> {
        let parents = [x.node.clone(), weight.node.clone()];
        match RmsNormBackward
            .prepare::<C>(parents)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let y = B::rms_norm_forward(x.primitive.clone(), weight.primitive.clone(), eps);
                prep.finish((x.primitive, weight.primitive, eps), y)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(B::rms_norm_forward(x.primitive, weight.primitive, eps))
            }
        }
    }

    fn rotary_forward(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        untracked::<B>(B::rotary_forward(x.primitive, cos.primitive, sin.primitive))
    }

    fn rotary_backward(
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        untracked::<B>(B::rotary_backward(
            cos.primitive,
            sin.primitive,
            grad.primitive,
        ))
    }

    fn square_sum(x: FloatTensor<Self>) -> SquareSum<Self> {
        match B::square_sum(x.primitive) {
            SquareSum::Host(v) => SquareSum::Host(v),
            SquareSum::Device(t) => SquareSum::Device(untracked::<B>(t)),
        }
    }

    fn dropout_mask(like: FloatTensor<Self>, draw: MaskDraw) -> FloatTensor<Self> {
        untracked::<B>(B::dropout_mask(like.primitive, draw))
    }

    fn dropout(x: FloatTensor<Self>, draw: MaskDraw) -> FloatTensor<Self> {
        match (DropoutBackward.prepare::<C>([x.node.clone()]))
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(draw, B::dropout(x.primitive, draw)),
            OpsKind::UnTracked(prep) => prep.finish(B::dropout(x.primitive, draw)),
        }
    }

    fn sample_rows(logits: FloatTensor<Self>, params: FloatTensor<Self>) -> FloatTensor<Self> {
        untracked::<B>(B::sample_rows(logits.primitive, params.primitive))
    }

    fn contiguous(x: FloatTensor<Self>) -> FloatTensor<Self> {
        ContiguousBackward
            .prepare::<C>([x.node.clone()])
            .compute_bound()
            .stateless(B::contiguous(x.primitive))
    }

    fn rotary(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let node = x.node.clone();
        let (cos, sin) = (cos.primitive, sin.primitive);
        match RotaryBackward
            .prepare::<C>([node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let y = B::rotary_forward(x.primitive, cos.clone(), sin.clone());
                prep.finish((cos, sin), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::rotary_forward(x.primitive, cos, sin)),
        }
    }

    fn matmul_forward(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        untracked::<B>(B::matmul_forward(lhs.primitive, rhs.primitive))
    }

    fn matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        crate::autodiff_linear::matmul::<B, C>(lhs, rhs)
    }

    fn dense_forward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self> {
        let bias = bias.map(|b| b.primitive);
        untracked::<B>(B::dense_forward(x.primitive, weight.primitive, bias))
    }

    fn dense_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        with_bias: bool,
    ) -> DenseGradients<Self> {
        let (dx, dw, db) =
            B::dense_backward(x.primitive, weight.primitive, grad.primitive, with_bias);
        (
            untracked::<B>(dx),
            untracked::<B>(dw),
            db.map(untracked::<B>),
        )
    }

    fn dense(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self> {
        crate::autodiff_linear::dense::<B, C>(x, weight, bias)
    }

    fn dropout_dense(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        draw: MaskDraw,
    ) -> FloatTensor<Self> {
        crate::autodiff_linear::dropout_dense::<B, C>(x, weight, draw)
    }

    fn masked_softmax_forward(
        scores: FloatTensor<Self>,
        mask: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        untracked::<B>(B::masked_softmax_forward(scores.primitive, mask.primitive))
    }

    fn masked_softmax_backward(
        probs: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        untracked::<B>(B::masked_softmax_backward(probs.primitive, grad.primitive))
    }

    fn masked_softmax(scores: FloatTensor<Self>, mask: FloatTensor<Self>) -> FloatTensor<Self> {
        let node = scores.node.clone();
        match MaskedSoftmaxBackward
            .prepare::<C>([node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let y = B::masked_softmax_forward(scores.primitive, mask.primitive);
                prep.finish(y.clone(), y)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(B::masked_softmax_forward(scores.primitive, mask.primitive))
            }
        }
    }
}
