//! Small batch builders and gradient readers for the algorithm tests.

use burn::backend::{Autodiff, Flex};
use burn::tensor::Tensor;
use roll_flow_engine::batch::column::RESPONSE_MASK;
use roll_flow_engine::{Batch, Column};

/// The gradient of `loss` with respect to the leaf tensor `x`, as f32s.
pub fn gradient(x: &Tensor<Autodiff<Flex>, 1>, loss: &Tensor<Autodiff<Flex>, 1>) -> Vec<f32> {
    x.grad(&loss.backward())
        .expect("x is a leaf that requires grad")
        .into_data()
        .to_vec::<f32>()
        .unwrap()
}

/// A batch whose samples have the given response masks (1 = response token); token ids
/// are 0..n.
pub fn with_masks(masks: &[&[u8]]) -> Batch {
    let mut next = 0u32;
    let seqs: Vec<Vec<u32>> = masks
        .iter()
        .map(|m| {
            m.iter()
                .map(|_| {
                    next += 1;
                    next
                })
                .collect()
        })
        .collect();
    let mut batch = Batch::from_sequences(seqs);
    let flat: Vec<bool> = masks
        .iter()
        .flat_map(|m| m.iter().map(|&x| x == 1))
        .collect();
    batch.set(&RESPONSE_MASK, flat).unwrap();
    batch
}

/// Sets an f32 column.
pub fn f32s(batch: &mut Batch, column: &Column, values: &[f32]) {
    batch.set(column, values.to_vec()).unwrap();
}

/// Sets a u64 column.
pub fn u64s(batch: &mut Batch, column: &Column, values: &[u64]) {
    batch.set(column, values.to_vec()).unwrap();
}

/// Reads an f32 column.
pub fn get(batch: &Batch, column: &Column) -> Vec<f32> {
    batch.f32s(column).unwrap().to_vec()
}

/// Asserts two f32 slices agree within `tol`.
pub fn assert_close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "got {got:?}, want {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((*g as f64 - w).abs() <= tol, "got {got:?}, want {want:?}");
    }
}

/// The central finite-difference gradient of `f` at `x` in float64, step `h`.
pub fn finite_difference(f: impl Fn(&[f64]) -> f64, x: &[f64], h: f64) -> Vec<f64> {
    (0..x.len())
        .map(|i| {
            let (mut up, mut down) = (x.to_vec(), x.to_vec());
            up[i] += h;
            down[i] -= h;
            (f(&up) - f(&down)) / (2.0 * h)
        })
        .collect()
}
