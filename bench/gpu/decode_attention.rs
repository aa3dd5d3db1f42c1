//! The decode-attention row of `bench/gpu.rs`: one query a row against a KV cache at
//! Qwen2.5-0.5B's attention shape (14 query and 2 key/value heads of 64; 128 rows over
//! 1,024 and 4,096 keys at full size), the fused kernel (`roll_flow_kernels::decode_attention`)
//! against the composition the model used before it (two matmuls and the masked softmax,
//! the query heads of a key/value head stacked as in `Attention::attend`). The bytes it
//! must move: the keys, the values and the mask, read once.

use std::hint::black_box;

use burn::tensor::{Distribution, Tensor};
use roll_flow_kernels::KernelBackend;
use serde_json::{json, Value};

use super::{kernel_row, median_s, sync, Sizes};

/// (query heads, key/value heads, head width).
const HEADS: (usize, usize, usize) = (14, 2, 64);

/// The row over `times` × the sizes' cached keys.
pub fn decode_attention_row<B: KernelBackend>(
    device: &B::Device,
    s: Sizes,
    times: usize,
    ceiling: f64,
) -> Value {
    let (rows, keys) = (s.decode.0, times * s.decode.1);
    let (heads, kv, d) = HEADS;
    let rep = heads / kv;
    let normal =
        |shape: [usize; 4]| Tensor::<B, 4>::random(shape, Distribution::Normal(0.0, 1.0), device);
    let q = normal([rows, heads, 1, d]).mul_scalar(1.0 / (d as f32).sqrt());
    let (k, v) = (normal([rows, kv, keys, d]), normal([rows, kv, keys, d]));
    let mask = Tensor::<B, 4>::zeros([rows, heads, 1, keys], device);
    let name = format!("decode attention, {rows} rows × {heads}/{kv} heads of {d} × {keys} keys");
    let fused_once =
        || roll_flow_kernels::decode_attention(q.clone(), k.clone(), v.clone(), mask.clone());
    if fused_once().is_none() {
        println!("| {name} | – (no fused kernel on this backend) | | | |");
        return json!({"name": name, "fused_ms": null});
    }
    let fused = median_s(s.reps, || {
        black_box(fused_once());
        sync::<B>(device);
    });
    let unfused = median_s(s.reps, || {
        let scores = roll_flow_kernels::matmul(
            q.clone().reshape([rows, kv, rep, d]),
            k.clone().swap_dims(2, 3),
        )
        .reshape([rows, heads, 1, keys]);
        let probs = roll_flow_kernels::masked_softmax(scores, mask.clone());
        black_box(roll_flow_kernels::matmul(
            probs.reshape([rows, kv, rep, keys]),
            v.clone(),
        ));
        sync::<B>(device);
    });
    let bytes = (4 * (2 * rows * kv * keys * d + rows * heads * keys)) as f64;
    kernel_row(&name, fused, Some(unfused), bytes, ceiling)
}
