//! The autodiff `Backward` steps of the model ops, registered by [`KernelBackend`]'s
//! `Autodiff<B>` implementation (`autodiff.rs`):
//!
//! - SwiGLU: two parents (gate, up), both kept for the backward.
//! - RMSNorm: two parents (x, weight), both kept; the backward recomputes the row norms.
//! - Rotary embedding: one parent (x; the cos/sin tables are constants, kept).
//! - Masked softmax: one parent (the scores; the mask is a constant); the state is the
//!   output, all the backward needs.
//! - Contiguous: one parent, no state; the gradient passes through, laid out row-major.
//! - Dropout: one parent; the state is the mask's draw, made again for the backward
//!   (`dx = dy ⊙ mask`) instead of kept.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::autodiff::NodeId;
use burn::tensor::ops::FloatTensor;

use crate::backend::KernelBackend;
use crate::dropout_mask::MaskDraw;

/// Registers the two gradients of a two-parent op with the parents that are tracked
/// (`id` reads a parent's node id: burn does not export its node type by name).
fn register_both<B: KernelBackend, N>(
    grads: &mut Gradients,
    parents: [Option<N>; 2],
    (first, second): (FloatTensor<B>, FloatTensor<B>),
    id: impl Fn(&N) -> NodeId,
) {
    for (node, grad) in parents.into_iter().zip([first, second]) {
        if let Some(node) = node {
            grads.register::<B>(id(&node), grad);
        }
    }
}

#[derive(Debug)]
pub(crate) struct SwiGluBackward;

impl<B: KernelBackend> Backward<B, 2> for SwiGluBackward {
    /// (gate, up).
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let (gate, up) = ops.state;
        let pair = B::swiglu_backward(gate, up, grad);
        register_both::<B, _>(grads, ops.parents, pair, |n| n.id);
    }
}

#[derive(Debug)]
pub(crate) struct RmsNormBackward;

impl<B: KernelBackend> Backward<B, 2> for RmsNormBackward {
    /// (x, weight, eps).
    type State = (FloatTensor<B>, FloatTensor<B>, f32);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let (x, w, eps) = ops.state;
        let pair = B::rms_norm_backward(x, w, grad, eps);
        register_both::<B, _>(grads, ops.parents, pair, |n| n.id);
    }
}

#[derive(Debug)]
pub(crate) struct RotaryBackward;

impl<B: KernelBackend> Backward<B, 1> for RotaryBackward {
    /// The (cos, sin) tables.
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        if let Some(node) = parent {
            let (cos, sin) = ops.state;
            grads.register::<B>(node.id, B::rotary_backward(cos, sin, grad));
        }
    }
}

#[derive(Debug)]
pub(crate) struct MaskedSoftmaxBackward;

impl<B: KernelBackend> Backward<B, 1> for MaskedSoftmaxBackward {
    /// The softmax output.
    type State = FloatTensor<B>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        if let Some(node) = parent {
            grads.register::<B>(node.id, B::masked_softmax_backward(ops.state, grad));
        }
    }
}

#[derive(Debug)]
pub(crate) struct ContiguousBackward;

impl<B: KernelBackend> Backward<B, 1> for ContiguousBackward {
    type State = ();

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        if let Some(node) = parent {
            grads.register::<B>(node.id, B::contiguous(grad));
        }
    }
}

#[derive(Debug)]
pub(crate) struct DropoutBackward;

impl<B: KernelBackend> Backward<B, 1> for DropoutBackward {
    type State = MaskDraw;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let [parent] = ops.parents;
        if let Some(node) = parent {
            grads.register::<B>(node.id, B::dropout(grad, ops.state));
        }
    }
}
