//! The autodiff `Backward` steps of the model ops, registered by [`KernelBackend`]'s
//! `Autodiff<B>` implementation (`autodiff.rs`):
//!
//! - SwiGLU: two parents (gate, up), both kept for the backward.
//! - RMSNorm: two parents (x, weight), both kept; the backward recomputes the row norms.
//! - Rotary embedding: one parent (x; the cos/sin tables are constants, kept).
//! - Masked softmax: one parent (the scores; the mask is a constant); the state is the
//!   output, all the backward needs.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::tensor::ops::FloatTensor;

use crate::backend::KernelBackend;

#[derive(Debug)]
pub(crate) struct SwiGluBackward;

impl<B: KernelBackend> Backward<B, 2> for SwiGluBackward {
    /// (gate, up).
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [gate_node, up_node] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (gate, up) = ops.state;
        let (dgate, dup) = B::swiglu_backward(gate, up, grad);
        if let Some(node) = gate_node {
            grads.register::<B>(node.id, dgate);
        }
        if let Some(node) = up_node {
            grads.register::<B>(node.id, dup);
        }
    }
}

#[derive(Debug)]
pub(crate) struct RmsNormBackward;

impl<B: KernelBackend> Backward<B, 2> for RmsNormBackward {
    /// (x, weight, eps).
    type State = (FloatTensor<B>, FloatTensor<B>, f32);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [x_node, w_node] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (x, w, eps) = ops.state;
        let (dx, dw) = B::rms_norm_backward(x, w, grad, eps);
        if let Some(node) = x_node {
            grads.register::<B>(node.id, dx);
        }
        if let Some(node) = w_node {
            grads.register::<B>(node.id, dw);
        }
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
