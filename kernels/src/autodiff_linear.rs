//! The dense layer under autodiff: `Autodiff<B>`'s `dense` records one op with two
//! parents (x, weight) or three (x, weight, bias), keeping x and the weight for the
//! backward ([`KernelBackend::dense_backward`], which returns all the gradients at once).

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::autodiff::{Autodiff, NodeId};
use burn::tensor::ops::FloatTensor;

use crate::backend::KernelBackend;

#[derive(Debug)]
struct LinearBackward;

#[derive(Debug)]
struct LinearBiasBackward;

/// Registers each gradient with its parent, where that parent is tracked.
fn register<B: KernelBackend, N, const P: usize>(
    grads: &mut Gradients,
    parents: [Option<N>; P],
    gradients: [Option<FloatTensor<B>>; P],
    id: impl Fn(&N) -> NodeId,
) {
    for (node, grad) in parents.into_iter().zip(gradients) {
        if let (Some(node), Some(grad)) = (node, grad) {
            grads.register::<B>(id(&node), grad);
        }
    }
}

impl<B: KernelBackend> Backward<B, 2> for LinearBackward {
    /// (x, weight).
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let (x, w) = ops.state;
        let (dx, dw, _) = B::dense_backward(x, w, grad, false);
        register::<B, _, 2>(grads, ops.parents, [Some(dx), Some(dw)], |n| n.id);
    }
}

impl<B: KernelBackend> Backward<B, 3> for LinearBiasBackward {
    /// (x, weight).
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let (x, w) = ops.state;
        let (dx, dw, db) = B::dense_backward(x, w, grad, true);
        register::<B, _, 3>(grads, ops.parents, [Some(dx), Some(dw), db], |n| n.id);
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
