//! The dense layer and the matrix product under autodiff: `Autodiff<B>`'s `dense` records
//! one op with two parents (x, weight) or three (x, weight, bias), keeping x and the weight
//! for the backward ([`KernelBackend::dense_backward`], which returns all the gradients at
//! once); `dropout_dense` records one with two parents (x, weight), keeping x, the weight
//! and the mask's draw, and drops x again in the backward (`dx = (dy·Wᵀ) ⊙ mask`, `dW =
//! (x ⊙ mask)ᵀ·dy`); `matmul` records one with two parents, keeping both factors.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::autodiff::Autodiff;
use burn::tensor::ops::FloatTensor;
use burn::tensor::TensorMetadata;

use crate::backend::KernelBackend;
use crate::dropout_mask::MaskDraw;

#[derive(Debug)]
struct LinearBackward;

#[derive(Debug)]
struct LinearBiasBackward;

/// The backward of either op: (x, weight) saved, the bias gradient when there is a
/// third parent; each gradient registered with its parent where that one is tracked.
fn dense_backward<B: KernelBackend, const P: usize>(
    ops: Ops<(FloatTensor<B>, FloatTensor<B>), P>,
    grads: &mut Gradients,
) {
    let grad = grads.consume::<B>(&ops.node);
    let (x, w) = ops.state;
    let (dx, dw, db) = B::dense_backward(x, w, grad, P == 3);
    for (node, grad) in ops.parents.into_iter().zip([Some(dx), Some(dw), db]) {
        if let (Some(node), Some(grad)) = (node, grad) {
            grads.register::<B>(node.id, grad);
        }
    }
}

impl<B: KernelBackend> Backward<B, 2> for LinearBackward {
    /// (x, weight).
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        dense_backward::<B, 2>(ops, grads);
    }
}

impl<B: KernelBackend> Backward<B, 3> for LinearBiasBackward {
    /// (x, weight).
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        dense_backward::<B, 3>(ops, grads);
    }
}

/// `Autodiff<B>`'s differentiable `dense`.
pub(crate) fn dense<B: KernelBackend, C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<B, C>>,
    weight: FloatTensor<Autodiff<B, C>>,
    bias: Option<FloatTensor<Autodiff<B, C>>>,
) -> FloatTensor<Autodiff<B, C>> {
    let Some(bias) = bias else {
        let parents = [x.node.clone(), weight.node.clone()];
        return match LinearBackward
            .prepare::<C>(parents)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let y = B::dense_forward(x.primitive.clone(), weight.primitive.clone(), None);
                prep.finish((x.primitive, weight.primitive), y)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(B::dense_forward(x.primitive, weight.primitive, None))
            }
        };
    };
    let parents = [x.node.clone(), weight.node.clone(), bias.node.clone()];
    match LinearBiasBackward
        .prepare::<C>(parents)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let (xp, wp) = (x.primitive.clone(), weight.primitive.clone());
            let y = B::dense_forward(xp, wp, Some(bias.primitive));
            prep.finish((x.primitive, weight.primitive), y)
        }
        OpsKind::UnTracked(prep) => prep.finish(B::dense_forward(
            x.primitive,
            weight.primitive,
            Some(bias.primitive),
        )),
    }
}

#[derive(Debug)]
struct DropoutDenseBackward;

impl<B: KernelBackend> Backward<B, 2> for DropoutDenseBackward {
    /// (x, weight, the mask's draw).
    type State = (FloatTensor<B>, FloatTensor<B>, MaskDraw);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let (x, w, draw) = ops.state;
        let (d_dropped, dw, _) = B::dense_backward(B::dropout(x, draw), w, grad, false);
        let [x_node, w_node] = ops.parents;
        if let Some(node) = x_node {
            grads.register::<B>(node.id, B::dropout(d_dropped, draw));
        }
        if let Some(node) = w_node {
            grads.register::<B>(node.id, dw);
        }
    }
}

/// `Autodiff<B>`'s differentiable `dropout_dense`.
pub(crate) fn dropout_dense<B: KernelBackend, C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<B, C>>,
    weight: FloatTensor<Autodiff<B, C>>,
    draw: MaskDraw,
) -> FloatTensor<Autodiff<B, C>> {
    let parents = [x.node.clone(), weight.node.clone()];
    match DropoutDenseBackward
        .prepare::<C>(parents)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let dropped = B::dropout(x.primitive.clone(), draw);
            let y = B::dense_forward(dropped, weight.primitive.clone(), None);
            prep.finish((x.primitive, weight.primitive, draw), y)
        }
        OpsKind::UnTracked(prep) => {
            let dropped = B::dropout(x.primitive, draw);
            prep.finish(B::dense_forward(dropped, weight.primitive, None))
        }
    }
}

#[derive(Debug)]
struct MatmulBackward;

/// `t` with its last two axes swapped (a view).
fn transposed<B: KernelBackend>(t: FloatTensor<B>) -> FloatTensor<B> {
    let rank = t.shape().num_dims();
    B::float_swap_dims(t, rank - 2, rank - 1)
}

impl<B: KernelBackend> Backward<B, 2> for MatmulBackward {
    /// (lhs, rhs).
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let (lhs, rhs) = ops.state;
        let [lhs_node, rhs_node] = ops.parents;
        if let Some(node) = lhs_node {
            grads.register::<B>(
                node.id,
                B::matmul_forward(grad.clone(), transposed::<B>(rhs)),
            );
        }
        if let Some(node) = rhs_node {
            grads.register::<B>(node.id, B::matmul_forward(transposed::<B>(lhs), grad));
        }
    }
}

/// `Autodiff<B>`'s differentiable `matmul`.
pub(crate) fn matmul<B: KernelBackend, C: CheckpointStrategy>(
    lhs: FloatTensor<Autodiff<B, C>>,
    rhs: FloatTensor<Autodiff<B, C>>,
) -> FloatTensor<Autodiff<B, C>> {
    let parents = [lhs.node.clone(), rhs.node.clone()];
    match MatmulBackward
        .prepare::<C>(parents)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let y = B::matmul_forward(lhs.primitive.clone(), rhs.primitive.clone());
            prep.finish((lhs.primitive, rhs.primitive), y)
        }
        OpsKind::UnTracked(prep) => prep.finish(B::matmul_forward(lhs.primitive, rhs.primitive)),
    }
}
