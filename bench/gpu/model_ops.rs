//! The model ops' rows of `bench/gpu.rs`: RMSNorm, the attention softmax, SwiGLU and the
//! rotary embedding at the training shape of the Qwen2.5-0.5B rows (8 × 2,048 tokens at
//! full size: norms over 896 features, 14 heads' scores over 2,048 keys, the MLP's 4,864,
//! heads of 64). Two rows an op:
//! - "kernels fwd then bwd": the backend's two primitives (`KernelBackend::*_forward`, then
//!   `*_backward` from a fixed gradient), against the bytes they must move: RMSNorm reads x
//!   and writes y, then reads x and dy and writes dx (5 passes of the tensor); the softmax
//!   the same (its mask, a stride-0 view, adds nothing); SwiGLU reads gate and up and
//!   writes y, then reads the three and writes both gradients (8); rotary reads x, cos and
//!   sin and writes y, then the same for dx (8);
//! - "fwd+bwd": the op under autodiff as the model runs it, `(op(x) · probe).sum()`
//!   differentiated, fused against the burn ops it replaces (`roll_flow_kernels::
//!   reference`); the probe's product and sum are in both timings, so its GB/s (same bytes)
//!   is a lower bound.

use std::hint::black_box;

use burn::backend::Autodiff;
use burn::tensor::{Distribution, Tensor};
use roll_flow_kernels::{reference, KernelBackend};
use serde_json::Value;

use super::{kernel_row, median_s, sync, Sizes};

type A<B> = Autodiff<B>;

/// The eight rows on backend `B` (f32).
pub fn model_op_rows<B: KernelBackend>(device: &B::Device, s: Sizes, ceiling: f64) -> Vec<Value> {
    let (batch, len) = s.train_target;
    let (_, dim, heads, _, ffn, _) = s.model;
    let tokens = batch * len;
    let normal =
        |shape: [usize; 4]| Tensor::<B, 4>::random(shape, Distribution::Normal(0.0, 1.0), device);
    let p = |t: &Tensor<B, 4>| t.clone().into_primitive().tensor();
    let a = |t: &Tensor<B, 4>| Tensor::<A<B>, 4>::from_inner(t.clone());
    let mut rows = Vec::new();
    let mut measure = |op: &str,
                       shape: [usize; 4],
                       passes: usize,
                       kernels: &dyn Fn(),
                       autodiff: &dyn Fn(bool)| {
        let bytes = (passes * shape.iter().product::<usize>() * 4) as f64;
        let raw = median_s(s.reps, || {
            kernels();
            sync::<B>(device);
        });
        let name = format!("{op} kernels fwd then bwd, {shape:?}");
        rows.push(kernel_row(&name, raw, None, bytes, ceiling));
        let fused = median_s(s.reps, || {
            autodiff(true);
            sync::<B>(device);
        });
        let unfused = median_s(s.reps.min(3), || {
            autodiff(false);
            sync::<B>(device);
        });
        let name = format!("{op} fwd+bwd, {shape:?}");
        rows.push(kernel_row(&name, fused, Some(unfused), bytes, ceiling));
    };

    let shape = [1, 1, tokens, dim];
    let (x, dy) = (normal(shape), normal(shape));
    let w = Tensor::<B, 1>::random([dim], Distribution::Normal(1.0, 0.1), device);
    let wp = || w.clone().into_primitive().tensor();
    let wa = Tensor::<A<B>, 1>::from_inner(w.clone());
    measure(
        "RMSNorm",
        shape,
        5,
        &|| {
            black_box(B::rms_norm_forward(p(&x), wp(), 1e-6));
            black_box(B::rms_norm_backward(p(&x), wp(), p(&dy), 1e-6));
        },
        &|fused| {
            let (xg, wg) = (a(&x).require_grad(), wa.clone().require_grad());
            let y = match fused {
                true => roll_flow_kernels::rms_norm(xg.clone(), wg.clone(), 1e-6),
                false => reference::rms_norm(xg.clone(), wg.clone(), 1e-6),
            };
            let grads = (y * a(&dy)).sum().backward();
            black_box((xg.grad(&grads), wg.grad(&grads)));
        },
    );

    let shape = [batch, heads, len, len];
    let (scores, dy) = (normal(shape), normal(shape));
    let mask = Tensor::<B, 4>::zeros([1, 1, len, len], device).expand(shape);
    measure(
        "masked softmax",
        shape,
        5,
        &|| {
            let y = B::masked_softmax_forward(p(&scores), p(&mask));
            black_box(B::masked_softmax_backward(y, p(&dy)));
        },
        &|fused| {
            let x = a(&scores).require_grad();
            let y = match fused {
                true => roll_flow_kernels::masked_softmax(x.clone(), a(&mask)),
                false => reference::masked_softmax(x.clone(), a(&mask)),
            };
            black_box(x.grad(&(y * a(&dy)).sum().backward()));
        },
    );

    let shape = [1, 1, tokens, ffn];
    let (gate, up, dy) = (normal(shape), normal(shape), normal(shape));
    measure(
        "SwiGLU",
        shape,
        8,
        &|| {
            black_box(B::swiglu_forward(p(&gate), p(&up)));
            black_box(B::swiglu_backward(p(&gate), p(&up), p(&dy)));
        },
        &|fused| {
            let (g, u) = (a(&gate).require_grad(), a(&up).require_grad());
            let y = match fused {
                true => roll_flow_kernels::swiglu(g.clone(), u.clone()),
                false => reference::swiglu(g.clone(), u.clone()),
            };
            let grads = (y * a(&dy)).sum().backward();
            black_box((g.grad(&grads), u.grad(&grads)));
        },
    );

    let shape = [batch, heads, len, dim / heads];
    let (x, cos, sin, dy) = (normal(shape), normal(shape), normal(shape), normal(shape));
    measure(
        "rotary",
        shape,
        8,
        &|| {
            black_box(B::rotary_forward(p(&x), p(&cos), p(&sin)));
            black_box(B::rotary_backward(p(&cos), p(&sin), p(&dy)));
        },
        &|fused| {
            let xg = a(&x).require_grad();
            let y = match fused {
                true => roll_flow_kernels::rotary(xg.clone(), a(&cos), a(&sin)),
                false => reference::rotary(xg.clone(), a(&cos), a(&sin)),
            };
            black_box(xg.grad(&(y * a(&dy)).sum().backward()));
        },
    );
    rows
}
