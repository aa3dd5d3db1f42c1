//! The norm of an optimizer step's change to the weights, ‖θ_after − θ_before‖₂ over every
//! float parameter, summed per parameter in the weights' own precision (f32): an update
//! that overflows it (an absurd learning rate, a moment gone to infinity) or that holds a
//! NaN gives a non-finite norm, which the trainer treats as a non-finite update (skipped,
//! the weights before it kept). Parameters are matched by id, as the optimizer keys them.

use std::collections::HashMap;

use burn::module::{AutodiffModule, ModuleVisitor, Param, ParamId};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use roll_flow_kernels::{KernelBackend, SquareSums};

/// Each float parameter's values, by id, flattened, on the inner backend: arithmetic on
/// the autodiff tensors themselves would record graph nodes that no backward pass ever
/// frees (the soak saw the process grow by about a megabyte a step).
struct Collect<B: AutodiffBackend> {
    params: HashMap<ParamId, Tensor<B::InnerBackend, 1>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Collect<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let flat = param.val().inner().flatten::<1>(0, D - 1);
        self.params.insert(param.id, flat);
    }
}

/// ‖Δθ_p‖² of each float parameter, in the module's visit order, each in an order fixed by
/// the tensor's size, not the CPU; a device's read at once ([`SquareSums`]).
struct SquaredChanges<B: AutodiffBackend<InnerBackend: KernelBackend>> {
    before: HashMap<ParamId, Tensor<B::InnerBackend, 1>>,
    sums: SquareSums<B::InnerBackend>,
}

impl<B: AutodiffBackend<InnerBackend: KernelBackend>> ModuleVisitor<B> for SquaredChanges<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let after = param.val().inner().flatten::<1>(0, D - 1);
        self.sums.push(match self.before.remove(&param.id) {
            Some(before) => after.sub(before),
            // A parameter the step created: its whole value is the change.
            None => after,
        });
    }
}

/// ‖after − before‖₂ over the float parameters of two versions of one module.
pub fn update_norm<B: AutodiffBackend<InnerBackend: KernelBackend>, M: AutodiffModule<B>>(
    before: &M,
    after: &M,
) -> f64 {
    let mut collect = Collect::<B> {
        params: HashMap::new(),
    };
    before.visit(&mut collect);
    let mut change = SquaredChanges::<B> {
        before: collect.params,
        sums: SquareSums::new(),
    };
    after.visit(&mut change);
    // Each rounded to f32, where a sum beyond f32's range is infinite.
    let squares = change.sums.values();
    let total = squares.into_iter().fold(0.0, |t, s| t + s as f32 as f64);
    total.sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};
    use burn::module::Module;
    use burn::nn::{Initializer, Linear, LinearConfig};

    type AD = Autodiff<Flex>;

    /// A 3→2 layer of constant weights (parameters initialise lazily: a random one
    /// would draw different values in each clone).
    fn layer() -> Linear<AD> {
        LinearConfig::new(3, 2)
            .with_initializer(Initializer::Constant { value: 0.1 })
            .init::<AD>(&Default::default())
    }

    fn shifted(model: &Linear<AD>, by: f32) -> Linear<AD> {
        let mut out = model.clone();
        out.weight = out.weight.map(|w| w.add_scalar(by));
        out
    }

    #[test]
    fn the_norm_of_a_uniform_shift_by_hand() {
        // 6 weights moved by 0.5, the bias not: sqrt(6 · 0.25).
        let model = layer();
        let norm = update_norm(&model, &shifted(&model, 0.5));
        assert!((norm - 1.5f64.sqrt()).abs() < 1e-6, "{norm}");
        assert_eq!(update_norm(&model, &model.clone()), 0.0);
        assert_eq!(model.num_params(), 8);
    }

    #[test]
    fn an_overflowing_or_nan_update_is_not_finite() {
        let model = layer();
        assert!(!update_norm(&model, &shifted(&model, 1e30)).is_finite());
        assert!(update_norm(&model, &shifted(&model, f32::NAN)).is_nan());
    }
}
