//! Gradient checkpointing by layer (`gradient_checkpointing: true`; transformers'
//! `gradient_checkpointing_enable()`, the default in ROLL's and verl's training configs):
//! under autodiff, every decoder layer below the last runs without a graph, and the
//! backward pass runs each of them again, one at a time, from its saved input.
//!
//! Autodiff keeps, for the backward pass, what every op needs of its inputs: at
//! SmolLM2-135M's shape about 1 MB a token over the 30 layers, most of it the attention
//! probabilities (`heads × len` a token and layer). Checkpointing keeps only each layer's
//! input (the residual stream `x` and the previous MLP output not yet added, 2 × hidden
//! values a token and layer) and one layer's graph at a time, for one more forward pass of
//! those layers (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost").
//!
//! How, with burn's autodiff as it is (it recomputes only ops marked memory-bound, and a
//! backward step cannot run a graph of its own: burn holds the graph's lock through the
//! steps, and a nested backward pass ends by visiting every graph's lock):
//! 1. Forward ([`Qwen2Backbone::hidden_rows`]): the
//!    embedding and layers `0..top` run on parameters with `require_grad` off, so nothing
//!    is recorded; each layer's input is kept. The top layer's input becomes a fresh leaf,
//!    and the top layer, the final norm and the caller's loss build the graph as before.
//!    The layers, their inputs, masks and rotary tables go to a per-thread list (a
//!    `TrunkRecord` each).
//! 2. Backward ([`backward`], instead of `loss.backward()`): the graph's backward gives the
//!    gradients of the parameters it holds and of the leaf. Then, from the top down, each
//!    layer `l` runs again under autodiff from its saved input and is differentiated alone
//!    through `Σ (y_l ⊙ g_l)`, whose gradient with respect to the layer's output `y_l` is
//!    the output gradient `g_l` exactly (`1 · g`); that gives `g_{l-1}` and the layer's
//!    parameter gradients, added to the others (each parameter of a layer is used once, so
//!    there is nothing to add to, except the embedding a tied head also reads: its two
//!    terms are added in the order burn's own pass adds them). The embedding last.
//!
//! The kernels are deterministic, so the forward again gives the same activations, and the
//! gradients are the ones the whole graph gives, bit for bit (tested,
//! `operators/model/tests/model_gradient_checkpointing.rs`), LoRA's dropout included: a
//! layer's second run draws the masks its first drew ([`super::dropout_masks::replay`] from
//! the position the first started at).

use std::any::Any;
use std::cell::RefCell;

use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::nn::Embedding;
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{DType, Int, Tensor};
use roll_flow_kernels::KernelBackend;

use super::attention_mask::LayerMask;
use super::backbone::{embedded, Qwen2Backbone};
use super::decoder_layer::DecoderLayer;
use super::dropout_masks::{self, Stream};
use super::queries::QueryRows;
use super::rotary::RotaryAngles;

/// A layer's input: the residual stream and the previous layer's MLP output not yet added.
type LayerInput<B> = (Tensor<B, 3>, Option<Tensor<B, 3>>);

/// What one checkpointed forward pass leaves for its backward pass.
struct TrunkRecord<B: KernelBackend> {
    /// The embedding (its parameter as the pass read it) and the tokens it looked up.
    embed: Embedding<B>,
    tokens: Tensor<B, 2, Int>,
    /// The compute dtype the embedding's output was cast to.
    compute: Option<DType>,
    /// The layers below the top one, with the parameters the pass read.
    layers: Vec<DecoderLayer<B>>,
    /// Each of those layers' mask, and the rotary tables they share.
    masks: Vec<LayerMask<B>>,
    rope: RotaryAngles<B>,
    /// Each of those layers' input, without a graph.
    inputs: Vec<LayerInput<B>>,
    /// Where this thread's dropout masks stood as each of those layers began.
    dropout_at: Vec<Stream>,
    /// The top layer's input: leaves of the pass's graph.
    leaves: LayerInput<B>,
}

impl<B: KernelBackend> Qwen2Backbone<B> {
    /// Embeds `tokens` and runs the layers below the top one without a graph, keeping each
    /// one's input; returns the top layer's input `(x, delta)` as fresh leaves, and defers
    /// the pass's record to [`backward`].
    pub(super) fn checkpointed_trunk(
        &self,
        tokens: Tensor<B, 2, Int>,
        rope: &RotaryAngles<B>,
        mask_of: &mut impl FnMut(usize) -> LayerMask<B>,
    ) -> LayerInput<B> {
        let below = &self.layers[..self.layers.len() - 1];
        let (mut inputs, mut masks) = (Vec::with_capacity(below.len()), Vec::new());
        let mut dropout_at = Vec::with_capacity(below.len());
        let mut x = self.embed(tokens.clone(), true);
        let mut delta = None;
        for (i, layer) in below.iter().enumerate() {
            let mask = mask_of(i);
            inputs.push((x.clone(), delta.clone()));
            dropout_at.push(dropout_masks::position());
            let frozen = layer.clone().no_grad();
            let (h, mlp_out) = frozen.forward(x, delta, rope, None, &QueryRows::All(&mask));
            (x, delta) = (h, Some(mlp_out));
            masks.push(mask);
        }
        let leaves = (x.require_grad(), delta.map(Tensor::require_grad));
        defer(TrunkRecord {
            embed: self.embed_tokens.clone(),
            tokens,
            compute: self.compute,
            layers: below.to_vec(),
            masks,
            rope: rope.clone(),
            inputs,
            dropout_at,
            leaves: leaves.clone(),
        });
        leaves
    }
}

thread_local! {
    /// The records of the checkpointed passes run on this thread since the last
    /// [`backward`] (type-erased: one list for every backend).
    static PENDING: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

/// Keeps `record` for the next [`backward`] on this thread.
fn defer<B: KernelBackend>(record: TrunkRecord<B>) {
    PENDING.with(|p| p.borrow_mut().push(Box::new(record)));
}

/// Drops the records of passes on this thread that were never differentiated (a loss
/// that failed after its forward pass), so that they hold no memory.
pub fn discard_pending() {
    PENDING.with(|p| p.borrow_mut().clear());
}

/// The parameter gradients of `loss` for `module`: `loss.backward()` followed by the
/// checkpointed layers' backward passes of every forward pass on this thread since the
/// last call ([`GradientsParams::from_grads`] when there are none).
pub fn backward<B, M>(loss: Tensor<B, 1>, module: &M) -> GradientsParams
where
    B: AutodiffBackend + KernelBackend,
    M: AutodiffModule<B>,
{
    let mut records: Vec<TrunkRecord<B>> = Vec::new();
    PENDING.with(|p| {
        let mut pending = p.borrow_mut();
        let others = pending.drain(..).filter_map(|r| match r.downcast() {
            Ok(mine) => {
                records.push(*mine);
                None
            }
            Err(other) => Some(other),
        });
        *pending = others.collect();
    });
    let grads = loss.backward();
    let seeds: Vec<_> = records
        .iter()
        .map(|r| {
            let (x, delta) = &r.leaves;
            (x.grad(&grads), delta.as_ref().and_then(|d| d.grad(&grads)))
        })
        .collect();
    let mut params = GradientsParams::from_grads(grads, module);
    for (record, seed) in records.into_iter().zip(seeds).rev() {
        record.backward(seed, &mut params);
    }
    params
}

/// A layer output's gradient, on the inner backend; `None` where the loss does not reach it.
type Seed<B> = Option<Tensor<<B as AutodiffBackend>::InnerBackend, 3>>;

impl<B: AutodiffBackend + KernelBackend> TrunkRecord<B> {
    /// Runs the layers again from the top down, then the embedding, each differentiated
    /// alone from its output gradient, adding their parameters' gradients to `params`.
    fn backward(self, (mut gx, mut gdelta): (Seed<B>, Seed<B>), params: &mut GradientsParams) {
        let layers =
            (self.layers.iter().zip(&self.masks)).zip(self.inputs.into_iter().zip(self.dropout_at));
        for ((layer, mask), ((x, delta), at)) in layers.rev() {
            if gx.is_none() && gdelta.is_none() {
                return;
            }
            let x = x.require_grad();
            let delta = delta.map(Tensor::require_grad);
            let (h, mlp_out) = dropout_masks::replay(at, || {
                let rows = QueryRows::All(mask);
                layer.forward(x.clone(), delta.clone(), &self.rope, None, &rows)
            });
            let mut grads = seeded([(h, gx), (mlp_out, gdelta)]).backward();
            gx = x.grad(&grads);
            gdelta = delta.and_then(|d| d.grad(&grads));
            layer.visit(&mut AddGradients::<B> {
                from: &mut grads,
                into: params,
            });
        }
        if gx.is_none() || !self.embed.weight.val().is_require_grad() {
            return;
        }
        let x = embedded(&self.embed, self.tokens, self.compute);
        let mut grads = seeded([(x, gx)]).backward();
        self.embed.visit(&mut AddGradients::<B> {
            from: &mut grads,
            into: params,
        });
    }
}

/// `Σ_i Σ (y_i ⊙ g_i)` over the outputs that have a gradient: its gradient with respect to
/// each `y_i` is `g_i`.
fn seeded<B: AutodiffBackend, const N: usize>(
    outputs: [(Tensor<B, 3>, Seed<B>); N],
) -> Tensor<B, 1> {
    outputs
        .into_iter()
        .filter_map(|(y, g)| g.map(|g| y.mul(Tensor::from_inner(g)).sum()))
        .reduce(Tensor::add)
        .expect("the callers pass at least one gradient")
}

/// Moves each parameter's gradient out of `from` and adds it to its sum in `into`
/// (`new + old`, the order of burn's own accumulation).
struct AddGradients<'a, B: AutodiffBackend> {
    from: &'a mut B::Gradients,
    into: &'a mut GradientsParams,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for AddGradients<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let Some(grad) = param.val().grad_remove(self.from) else {
            return;
        };
        let sum = match self.into.remove::<B::InnerBackend, D>(param.id) {
            Some(old) => grad.add(old),
            None => grad,
        };
        self.into.register::<B::InnerBackend, D>(param.id, sum);
    }
}
