//! Gradient clipping by global norm over all parameters (PyTorch `clip_grad_norm_`, used
//! by verl/ROLL's actor and critic updates with `max_grad_norm` 1.0).
//!
//! n = sqrt(Σ_p ‖g_p‖²) over every float parameter of the module that has a gradient; when
//! n > max_norm every gradient is scaled by max_norm/(n + 1e-6). Returns the pre-clip n.
//! A non-finite n (NaN/inf gradients) leaves the gradients untouched and is returned as is,
//! so the caller can skip the optimizer step and report it.

use std::marker::PhantomData;

use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use roll_flow_kernels::{KernelBackend, SquareSums};

/// ‖g_p‖² of every parameter's gradient that `grads` holds, in the module's visit order,
/// each in an order fixed by the tensor's size, not the CPU (the clipping scale and every
/// step after it follow these sums); a device's read at once ([`SquareSums`]).
struct SquaredNorms<'a, B: AutodiffBackend<InnerBackend: KernelBackend>> {
    grads: &'a GradientsParams,
    sums: SquareSums<B::InnerBackend>,
}

impl<B: AutodiffBackend<InnerBackend: KernelBackend>> ModuleVisitor<B> for SquaredNorms<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
            self.sums.push(g);
        }
    }
}

struct Scale<'a, B> {
    grads: &'a mut GradientsParams,
    factor: f32,
    _backend: PhantomData<B>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Scale<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.remove::<B::InnerBackend, D>(param.id) {
            self.grads
                .register::<B::InnerBackend, D>(param.id, g.mul_scalar(self.factor));
        }
    }
}

/// The global gradient norm of `module`'s parameters in `grads`.
pub fn grad_norm<B: AutodiffBackend<InnerBackend: KernelBackend>, M: AutodiffModule<B>>(
    module: &M,
    grads: &GradientsParams,
) -> f64 {
    let mut visitor = SquaredNorms::<B> {
        grads,
        sums: SquareSums::new(),
    };
    module.visit(&mut visitor);
    let squares = visitor.sums.values();
    squares.into_iter().fold(0.0, |total, s| total + s).sqrt()
}

/// Clips `grads` to global norm `max_norm` in place; returns the norm before clipping.
pub fn clip_grad_norm<B: AutodiffBackend<InnerBackend: KernelBackend>, M: AutodiffModule<B>>(
    module: &M,
    grads: &mut GradientsParams,
    max_norm: f64,
) -> f64 {
    let norm = grad_norm(module, grads);
    let coef = max_norm / (norm + 1e-6);
    if norm.is_finite() && coef < 1.0 {
        let mut visitor = Scale::<B> {
            grads,
            factor: coef as f32,
            _backend: PhantomData,
        };
        module.visit(&mut visitor);
    }
    norm
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};
    use burn::nn::{Linear, LinearConfig};

    type AD = Autodiff<Flex>;

    /// A 3→2 linear layer and the gradients of sum(W·x + b) at x = [1, 2, 3]:
    /// ∂/∂W = [[1, 1], [2, 2], [3, 3]] (burn stores W as [in, out]), ∂/∂b = [1, 1];
    /// global norm sqrt(2·(1 + 4 + 9) + 2) = sqrt(30).
    fn setup() -> (Linear<AD>, GradientsParams) {
        let dev = Default::default();
        let model = LinearConfig::new(3, 2).init::<AD>(&dev);
        let x = Tensor::<AD, 2>::from_floats([[1.0, 2.0, 3.0]], &dev);
        let grads = model.forward(x).sum().backward();
        let grads = GradientsParams::from_grads(grads, &model);
        (model, grads)
    }

    fn weight_grad(model: &Linear<AD>, grads: &GradientsParams) -> Vec<f32> {
        grads
            .get::<Flex, 2>(model.weight.id)
            .unwrap()
            .into_data()
            .to_vec::<f32>()
            .unwrap()
    }

    #[test]
    fn clips_to_max_norm_by_hand() {
        let (model, mut grads) = setup();
        let before = clip_grad_norm(&model, &mut grads, 1.0);
        assert!((before - 30f64.sqrt()).abs() < 1e-5);
        let after = grad_norm(&model, &grads);
        assert!((after - 1.0).abs() < 1e-5, "{after}");
        let scale = 1.0 / (30f64.sqrt() + 1e-6);
        let want = [1.0, 1.0, 2.0, 2.0, 3.0, 3.0];
        for (g, w) in weight_grad(&model, &grads).iter().zip(want) {
            assert!((*g as f64 - w * scale).abs() < 1e-6);
        }
    }

    #[test]
    fn below_max_norm_is_unchanged() {
        let (model, mut grads) = setup();
        let before = weight_grad(&model, &grads);
        let norm = clip_grad_norm(&model, &mut grads, 10.0);
        assert!((norm - 30f64.sqrt()).abs() < 1e-5);
        assert_eq!(weight_grad(&model, &grads), before);
    }
}
