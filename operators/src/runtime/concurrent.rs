//! The micro-batches of a mini-batch, trained concurrently on the CPU: one forward and
//! backward pass per rayon thread, gradients accumulated in micro-batch order afterwards.
//! On a GPU backend the passes run one after another
//! ([`super::backend::RunBackend::CONCURRENT_PASSES`]).
//!
//! Why: on the CPU only the matrix products of a pass split over threads; burn's
//! elementwise ops and its autodiff bookkeeping run on one, so a second thread sped a
//! Tiny-model training step up by about 1.2× (PyTorch: about 1.65×). Two passes over two
//! halves of the batch at once keep both threads busy through the whole step
//! (`bench/model_throughput.rs`).
//!
//! Each pass runs on a copy of the module whose parameters are fresh autodiff leaves
//! ([`FreshLeaves`]: the same weights and parameter ids, new graph nodes). burn's autodiff
//! keeps one graph per set of connected nodes behind one lock; passes that shared the
//! parameter leaves would share that graph and run their backward passes one at a time.
//! The gradients come back keyed by parameter id, as the accumulator wants them.
//!
//! The result does not depend on the thread count: every pass computes exactly what it
//! would alone (the same weights, the same ops), and the gradients are summed in
//! micro-batch order.

use burn::module::{AutodiffModule, ModuleMapper, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use rayon::prelude::*;

/// Maps every tracked parameter to a new autodiff leaf over the same values and id.
pub struct FreshLeaves;

impl<B: AutodiffBackend> ModuleMapper<B> for FreshLeaves {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        let fresh = if tensor.is_require_grad() {
            tensor.detach().require_grad()
        } else {
            tensor
        };
        Param::from_mapped_value(id, fresh, mapper)
    }
}

/// `f` of every item, in item order: at once on rayon's threads when `concurrent`, else
/// one after another. The first error, in item order, is returned.
pub fn in_order<T, R, F>(items: Vec<T>, concurrent: bool, f: F) -> Result<Vec<R>, String>
where
    T: Send,
    R: Send,
    F: Fn(T) -> Result<R, String> + Sync,
{
    if concurrent {
        items.into_par_iter().map(&f).collect()
    } else {
        items.into_iter().map(f).collect()
    }
}

/// The gradients of `scale[i] · loss(part[i])` for every part, computed concurrently when
/// `concurrent` (each on its own [`FreshLeaves`] copy of `module`), with what `loss`
/// reported, in part order. The first error, in part order, is returned.
pub fn part_gradients<B, M, P, S>(
    module: &M,
    parts: &[P],
    scales: &[f32],
    concurrent: bool,
    loss: impl Fn(&M, &P) -> Result<(Tensor<B, 1>, S), String> + Sync,
) -> Result<Vec<(GradientsParams, S)>, String>
where
    B: AutodiffBackend,
    M: AutodiffModule<B> + Sync,
    P: Sync,
    S: Send,
{
    assert_eq!(parts.len(), scales.len(), "one scale per part");
    let work: Vec<(&P, f32)> = parts.iter().zip(scales.iter().copied()).collect();
    in_order(work, concurrent, |(part, scale)| {
        let copy = module.clone().map(&mut FreshLeaves);
        let (value, report) = loss(&copy, part)?;
        let grads = value.mul_scalar(scale).backward();
        Ok((GradientsParams::from_grads(grads, &copy), report))
    })
}
