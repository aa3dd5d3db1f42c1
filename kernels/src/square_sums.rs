//! Σ x² of many tensors (a model's gradients or its update, parameter by parameter), each
//! in f64, with one wait for a device in all ([`SquareSums`]).
//!
//! Why: the gradient norm and the update norm sum ‖t‖² over every parameter. Read one
//! parameter at a time, a GPU waits for the host once per parameter (about 290 times for
//! Qwen2.5-0.5B, twice an optimizer step). So a device's sums stay there as one-element
//! tensors until [`SquareSums::values`] reads them all at once; the CPU backend sums each
//! on the host right away ([`crate::cpu::sum_of_squares`], in an order fixed by the
//! element count, the same on every CPU and at every thread count), so it holds no tensor.

use burn::tensor::{Tensor, TensorPrimitive};

use crate::backend::{KernelBackend, SquareSum};
use crate::host_transfer::download_f32_each;

/// Σ x² of each tensor pushed, in push order.
pub struct SquareSums<B: KernelBackend> {
    sums: Vec<SquareSum<B>>,
}

impl<B: KernelBackend> Default for SquareSums<B> {
    fn default() -> Self {
        SquareSums { sums: Vec::new() }
    }
}

impl<B: KernelBackend> SquareSums<B> {
    /// No sums yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds Σ x² over every value of `x` ([`KernelBackend::square_sum`]; not
    /// differentiable).
    pub fn push<const D: usize>(&mut self, x: Tensor<B, D>) {
        self.sums.push(B::square_sum(x.into_primitive().tensor()));
    }

    /// Each sum in push order, as f64; the device's in one download (as f32, which holds a
    /// bf16 or f16 sum exactly).
    pub fn values(self) -> Vec<f64> {
        let on_device: Vec<Tensor<B, 1>> = (self.sums.iter())
            .filter_map(|s| match s {
                SquareSum::Host(_) => None,
                SquareSum::Device(t) => {
                    Some(Tensor::from_primitive(TensorPrimitive::Float(t.clone())))
                }
            })
            .collect();
        let mut read = download_f32_each(on_device).into_iter();
        (self.sums.into_iter())
            .map(|s| match s {
                SquareSum::Host(v) => v,
                SquareSum::Device(_) => read
                    .next()
                    .and_then(|v| v.first().copied())
                    .map_or(f64::NAN, f64::from),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_transfer::transfers;
    use burn::backend::{Autodiff, Flex};

    #[test]
    fn the_cpu_sums_each_tensor_on_the_host_in_its_fixed_order() {
        let device = Default::default();
        let a = Tensor::<Autodiff<Flex>, 2>::from_floats([[3.0, -4.0], [1.0, 0.5]], &device);
        let b = Tensor::<Autodiff<Flex>, 2>::from_floats([[2.0]], &device);
        let mut sums = SquareSums::new();
        sums.push(a);
        sums.push(b);
        let before = transfers();
        assert_eq!(sums.values(), vec![26.25, 4.0]);
        assert_eq!(transfers().since(before).downloads, 0);
    }
}
