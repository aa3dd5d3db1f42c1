//! Attention's masked softmax against `reference::masked_softmax` (burn's `softmax` of
//! `scores + mask`): forward values and the scores' gradient (autodiff of the reference),
//! on `[batch, heads, queries, keys]` shapes with a causal mask, left padding (a fully
//! masked query row, whose softmax is uniform), odd key counts and one long row; and once
//! with the mask an expanded view (`[batch, 1, 1, keys]` broadcast over heads and queries,
//! stride 0, as a padding-only mask), which the CubeCL kernel reads in place.
//! Tolerance: |fused − ref| ≤ 1e-6 + 1e-4·|ref|.

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::{reference, KernelBackend};

use super::{assert_close, host, Rng};

/// transformers' finite mask value, as the model's attention mask uses.
const MASKED: f32 = -1.0e30;

const SHAPES: [[usize; 4]; 4] = [[1, 1, 1, 1], [2, 3, 5, 7], [2, 4, 33, 40], [1, 2, 3, 2_500]];

/// Causal over the last `queries` keys, with the first `pad` keys of batch row 1 masked.
fn causal_mask(shape: [usize; 4]) -> Vec<f32> {
    let [batch, heads, queries, keys] = shape;
    let offset = keys - queries;
    let mut v = Vec::with_capacity(batch * heads * queries * keys);
    for b in 0..batch {
        let pad = if b == 1 { offset + 1 } else { 0 };
        for _ in 0..heads {
            for i in 0..queries {
                v.extend((0..keys).map(|j| {
                    if j >= pad && j <= i + offset {
                        0.0
                    } else {
                        MASKED
                    }
                }));
            }
        }
    }
    v
}

pub fn masked_softmax_forward_backward<B: KernelBackend + AutodiffBackend>(device: &B::Device) {
    for (k, &shape) in SHAPES.iter().enumerate() {
        let mut rng = Rng::new(700 + k as u64);
        let n = shape.iter().product::<usize>();
        let tensor = |v: Vec<f32>| Tensor::<B, 4>::from_data(TensorData::new(v, shape), device);
        let scores = tensor((0..n).map(|_| 3.0 * rng.normal()).collect());
        let weight = tensor((0..n).map(|_| rng.normal()).collect());
        let mask = tensor(causal_mask(shape));
        let what = format!("{shape:?}");

        compare(&what, scores, mask, weight);
    }
}

/// The mask as a stride-0 view: each batch row's padding (its first `b` keys hidden)
/// expanded over heads and queries.
pub fn masked_softmax_with_an_expanded_mask<B: KernelBackend + AutodiffBackend>(
    device: &B::Device,
) {
    let shape = [3, 4, 6, 37];
    let [batch, _, _, keys] = shape;
    let mut rng = Rng::new(777);
    let n = shape.iter().product::<usize>();
    let scores = Tensor::<B, 4>::from_data(
        TensorData::new((0..n).map(|_| 3.0 * rng.normal()).collect(), shape),
        device,
    );
    let weight = Tensor::<B, 4>::from_data(
        TensorData::new((0..n).map(|_| rng.normal()).collect(), shape),
        device,
    );
    let padding: Vec<f32> = (0..batch * keys)
        .map(|i| if i % keys < i / keys { MASKED } else { 0.0 })
        .collect();
    let mask = Tensor::<B, 4>::from_data(TensorData::new(padding, [batch, 1, 1, keys]), device)
        .expand(shape);
    compare("expanded mask", scores, mask, weight);
}

/// The fused softmax and the reference on `scores` and `mask`: values and the scores'
/// gradient of Σ softmax ⊙ `weight`.
fn compare<B: KernelBackend + AutodiffBackend>(
    what: &str,
    scores: Tensor<B, 4>,
    mask: Tensor<B, 4>,
    weight: Tensor<B, 4>,
) {
    let run = |f: fn(Tensor<B, 4>, Tensor<B, 4>) -> Tensor<B, 4>| {
        let x = scores.clone().require_grad();
        let y = f(x.clone(), mask.clone());
        let grads = (y.clone() * weight.clone()).sum().backward();
        (host(y), host(x.grad(&grads).unwrap()))
    };
    let (y, dx) = run(roll_flow_kernels::masked_softmax);
    let (ry, rdx) = run(reference::masked_softmax);
    assert_close(&format!("softmax {what}"), &y, &ry, 1e-6, 1e-4);
    assert_close(&format!("dscores {what}"), &dx, &rdx, 1e-6, 1e-4);
}
