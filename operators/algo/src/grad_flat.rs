//! A module's gradients as one flat vector and back: what data-parallel training sums
//! across workers (one all-reduce per optimizer step, not one per parameter).
//!
//! Layout, parameter by parameter in the module's visiting order: a presence flag (1 when
//! the worker has a gradient for it, else 0) followed by the gradient's values (zeros when
//! absent). After the sum a parameter has a gradient when any worker had one, so AdamW
//! updates exactly the parameters a one-worker run would.

use std::marker::PhantomData;

use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};

struct Flatten<'a, B> {
    grads: &'a GradientsParams,
    out: Vec<f32>,
    _backend: PhantomData<B>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Flatten<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let n = param.shape().num_elements();
        match self.grads.get::<B::InnerBackend, D>(param.id) {
            Some(g) => {
                self.out.push(1.0);
                let values = g.into_data().convert::<f32>();
                self.out
                    .extend_from_slice(values.as_slice::<f32>().expect("f32 data"));
            }
            None => {
                self.out.push(0.0);
                self.out.resize(self.out.len() + n, 0.0);
            }
        }
    }
}

struct Unflatten<'a, B> {
    grads: &'a mut GradientsParams,
    flat: &'a [f32],
    at: usize,
    _backend: PhantomData<B>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Unflatten<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let shape = param.shape();
        let n = shape.num_elements();
        let present = self.flat[self.at] > 0.0;
        let values = &self.flat[self.at + 1..self.at + 1 + n];
        self.at += 1 + n;
        self.grads.remove::<B::InnerBackend, D>(param.id);
        if present {
            let device = param.val().device();
            let data = TensorData::new(values.to_vec(), shape);
            let g = Tensor::<B::InnerBackend, D>::from_data(data, &device);
            self.grads.register::<B::InnerBackend, D>(param.id, g);
        }
    }
}

/// `grads` of `module`'s parameters as one vector (module doc).
pub fn flatten_grads<B: AutodiffBackend, M: AutodiffModule<B>>(
    module: &M,
    grads: &GradientsParams,
) -> Vec<f32> {
    let mut visitor = Flatten::<B> {
        grads,
        out: Vec::new(),
        _backend: PhantomData,
    };
    module.visit(&mut visitor);
    visitor.out
}

/// Gradients of `module` from a vector [`flatten_grads`] laid out (summed or not).
pub fn unflatten_grads<B: AutodiffBackend, M: AutodiffModule<B>>(
    module: &M,
    flat: &[f32],
) -> GradientsParams {
    let mut grads = GradientsParams::new();
    let mut visitor = Unflatten::<B> {
        grads: &mut grads,
        flat,
        at: 0,
        _backend: PhantomData,
    };
    module.visit(&mut visitor);
    grads
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};
    use burn::nn::LinearConfig;

    type AD = Autodiff<Flex>;

    #[test]
    fn gradients_round_trip_and_sum_as_vectors() {
        // A 3→2 layer and the gradients of sum(W·x + b) at x = [1, 2, 3]: ∂/∂W =
        // [[1, 1], [2, 2], [3, 3]] (burn's [in, out]), ∂/∂b = [1, 1].
        let dev = Default::default();
        let model = LinearConfig::new(3, 2).init::<AD>(&dev);
        let x = Tensor::<AD, 2>::from_floats([[1.0, 2.0, 3.0]], &dev);
        let grads = GradientsParams::from_grads(model.forward(x).sum().backward(), &model);
        let flat = flatten_grads(&model, &grads);
        assert_eq!(flat, vec![1.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 1.0, 1.0, 1.0]);
        // Two workers' sum: every value doubled, the flags say "present" (2 > 0).
        let doubled: Vec<f32> = flat.iter().map(|v| v * 2.0).collect();
        let back = unflatten_grads(&model, &doubled);
        let w = back.get::<Flex, 2>(model.weight.id).unwrap();
        assert_eq!(
            w.into_data().to_vec::<f32>().unwrap(),
            vec![2.0, 2.0, 4.0, 4.0, 6.0, 6.0]
        );
        // A worker without gradients contributes flags 0 and zeros.
        let none = flatten_grads(&model, &GradientsParams::new());
        assert_eq!(none, vec![0.0; 10]);
        assert!(unflatten_grads(&model, &none)
            .get::<Flex, 1>(model.bias.as_ref().unwrap().id)
            .is_none());
    }
}
