//! The fused decode attention (`roll_flow_kernels::decode_attention`, one query per row)
//! against f64 on the host: GQA (1, 2, 3, 4 and 7 query heads a key/value head), heads of 4
//! to 256 (and of 5 and 6), 1 to 300 keys, keys and values read through a narrowed view of
//! a larger buffer (as the KV cache hands them over) and queries through a head swap; the
//! mask hides a prefix of each row (left padding), random keys, and every key of one row
//! (whose answer is the plain average of its values). Tolerance ≤ 1e-5 + 1e-4·|ref|.
//! Backends without the kernel (the CPU ones) return `None`, and the model composes the
//! same from matmuls.

use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use super::{assert_close, host, Rng};

/// (rows, heads, kv_heads, head_dim, keys).
/// The CubeCL kernel walks the keys in tiles of 32 (a head of 64 or less), 16 (128) or 8
/// (256), reading vectors of the widest width that divides the head (4 f32 on wgpu): the
/// cases cover a short last tile, whole tiles only (64 keys of a 64-wide head), the
/// widest head, and heads of 6 and 5 (vectors of 2 and single elements).
const CASES: [(usize, usize, usize, usize, usize); 8] = [
    (1, 1, 1, 4, 1),
    (3, 4, 2, 16, 37),
    (2, 14, 2, 64, 300),
    (3, 6, 6, 128, 70),
    (2, 6, 3, 64, 64),
    (2, 4, 1, 256, 33),
    (2, 4, 2, 6, 45),
    (2, 3, 1, 5, 9),
];
/// Spare key columns of the buffers the keys and values are narrowed from.
const SPARE: usize = 5;

pub fn decode_attention_matches_f64<B: KernelBackend>(device: &B::Device) {
    for (case, &(rows, heads, kv, d, keys)) in CASES.iter().enumerate() {
        let mut rng = Rng::new(2000 + case as u64);
        let mut random = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.normal()).collect() };
        let q = random(rows * heads * d);
        let (k, v) = (
            random(rows * kv * (keys + SPARE) * d),
            random(rows * kv * (keys + SPARE) * d),
        );
        let mut rng = Rng::new(2100 + case as u64);
        // Row r hides its first r keys (left padding) and a third of the rest at random; the
        // last row of a multi-row case hides every key.
        let visible: Vec<bool> = (0..rows * heads * keys)
            .map(|i| {
                let (r, j) = (i / (heads * keys), i % keys);
                let all_hidden = rows > 1 && r == rows - 1;
                !all_hidden && j >= r && (keys == 1 || rng.below(3) != 0 || j == keys - 1)
            })
            .collect();
        let mask: Vec<f32> = visible
            .iter()
            .map(|&s| if s { 0.0 } else { -1.0e30 })
            .collect();

        let buffer = |values: &[f32]| {
            Tensor::<B, 4>::from_data(
                TensorData::new(values.to_vec(), [rows, kv, keys + SPARE, d]),
                device,
            )
            .narrow(2, 0, keys)
        };
        let q_t =
            Tensor::<B, 4>::from_data(TensorData::new(q.clone(), [rows, 1, heads, d]), device)
                .swap_dims(1, 2);
        let mask_t =
            Tensor::<B, 4>::from_data(TensorData::new(mask, [rows, heads, 1, keys]), device);
        let Some(got) = roll_flow_kernels::decode_attention(q_t, buffer(&k), buffer(&v), mask_t)
        else {
            assert!(
                !B::DEVICE_MEMORY,
                "a device backend without the fused kernel"
            );
            continue;
        };
        assert_eq!(got.dims(), [rows, heads, d]);

        let mut want = Vec::with_capacity(rows * heads * d);
        for r in 0..rows {
            for h in 0..heads {
                let g = h / (heads / kv);
                let at = |t: &[f32], j: usize, f: usize| {
                    t[((r * kv + g) * (keys + SPARE) + j) * d + f] as f64
                };
                let seen = |j: usize| visible[(r * heads + h) * keys + j];
                let any = (0..keys).any(seen);
                let scores: Vec<f64> = (0..keys)
                    .map(|j| {
                        (0..d)
                            .map(|f| q[(r * heads + h) * d + f] as f64 * at(&k, j, f))
                            .sum()
                    })
                    .collect();
                let top = (0..keys)
                    .filter(|&j| !any || seen(j))
                    .map(|j| scores[j])
                    .fold(f64::MIN, f64::max);
                let weight = |j: usize| match (any, seen(j)) {
                    (false, _) => 1.0,
                    (true, true) => (scores[j] - top).exp(),
                    (true, false) => 0.0,
                };
                let total: f64 = (0..keys).map(weight).sum();
                for f in 0..d {
                    let sum: f64 = (0..keys).map(|j| weight(j) * at(&v, j, f)).sum();
                    want.push((sum / total) as f32);
                }
            }
        }
        let what = format!("{rows} rows, {heads}/{kv} heads of {d}, {keys} keys");
        assert_close(&what, &host(got), &want, 1e-5, 1e-4);
    }
}
