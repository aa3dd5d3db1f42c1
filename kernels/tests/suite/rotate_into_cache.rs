//! A cached attention step's prologue (`roll_flow_kernels::rotate_into_cache`: biases,
//! rotations and cache writes; one CubeCL kernel on the device backends, the unfused ops on
//! the CPU) against f64 on the host, written out from the formulas of
//! `roll_flow_kernels::cached_qkv`: the rotated queries, and every cache column (the
//! new ones written, the others as they were). Also:
//! - the same bits as the unfused ops (`CachedQkv::unfused`) in f32 and, on the device
//!   backends, f16: the kernel adds, rotates and rounds as they do;
//! - a buffer another handle still holds is left as it was (written in a copy);
//! - projections read through their row stride (views of one wider product), and key
//!   tables that repeat one head with stride 0 (as the model's) read where they lie.
//!
//! Tolerance against f64: ≤ 1e-6 + 1e-5·|ref| (a handful of products per value).

use burn::tensor::{DType, Tensor, TensorData};
use roll_flow_kernels::{CachedQkv, KernelBackend};

use super::{assert_close, host, Rng};

/// One case: ([rows, new columns n, heads, kv_heads, head width d, cache capacity, first
/// column written], with the projections' biases, the projections and key tables as
/// strided views).
const CASES: [([usize; 7], bool, bool); 4] = [
    ([1, 1, 1, 1, 2, 1, 0], false, false),
    ([3, 1, 6, 2, 8, 5, 2], true, false),
    ([2, 3, 4, 4, 16, 7, 4], true, true),
    ([4, 2, 9, 3, 64, 4, 1], false, true),
];

pub fn rotate_into_cache_matches_f64_and_the_unfused_ops<B: KernelBackend>(device: &B::Device) {
    for (c, &(shape, with_bias, strided)) in CASES.iter().enumerate() {
        let [rows, n, heads, kv, d, capacity, column] = shape;
        let mut rng = Rng::new(1300 + c as u64);
        let tokens = rows * n;
        let mut values = |len: usize, scale: f32| -> Vec<f32> {
            (0..len).map(|_| scale * rng.normal()).collect()
        };
        let (qw, kw) = (heads * d, kv * d);
        // The three products as one [tokens, qw + 2 kw] tensor, each a column range of it
        // when `strided` (what a fused q/k/v product hands over), else each its own.
        let wide = values(tokens * (qw + 2 * kw), 1.0);
        let part = |from: usize, w: usize| -> Vec<f32> {
            (0..tokens)
                .flat_map(|t| wide[t * (qw + 2 * kw) + from..][..w].to_vec())
                .collect()
        };
        let (q, k, v) = (part(0, qw), part(qw, kw), part(qw + kw, kw));
        let bias = [values(qw, 0.5), values(kw, 0.5), values(kw, 0.5)];
        let angles = values(tokens * (d / 2), 4.0);
        // Tables of the model's layout: one angle per (token, pair), repeated over the
        // heads and both halves; the query tables carry the scale 1/sqrt(d).
        let table = |h: usize, scale: f32, trig: fn(f32) -> f32| -> Vec<f32> {
            let mut out = Vec::with_capacity(tokens * h * d);
            for t in 0..tokens {
                for _ in 0..h * 2 {
                    out.extend(
                        angles[t * (d / 2)..][..d / 2]
                            .iter()
                            .map(|&a| scale * trig(a)),
                    );
                }
            }
            out
        };
        let scale = 1.0 / (d as f32).sqrt();
        let q_tables = [table(heads, scale, f32::cos), table(heads, scale, f32::sin)];
        let k_tables = [table(kv, 1.0, f32::cos), table(kv, 1.0, f32::sin)];
        let k_head = [table(1, 1.0, f32::cos), table(1, 1.0, f32::sin)];
        let cache = [
            values(rows * kv * capacity * d, 1.0),
            values(rows * kv * capacity * d, 1.0),
        ];

        let want = host_step(&HostStep {
            shape: [rows, n, heads, kv, d, capacity, column],
            qkv: [&q, &k, &v],
            bias: with_bias.then_some(&bias),
            q_tables: &q_tables,
            k_tables: &k_tables,
            cache: &cache,
        });

        for dtype in [DType::F32, DType::F16] {
            if dtype == DType::F16 && !B::DEVICE_MEMORY {
                continue;
            }
            let t2 = |v: &[f32], shape: [usize; 2]| {
                Tensor::<B, 2>::from_data(TensorData::new(v.to_vec(), shape), device).cast(dtype)
            };
            let products = match strided {
                true => {
                    let wide = t2(&wide, [tokens, qw + 2 * kw]);
                    [
                        wide.clone().narrow(1, 0, qw),
                        wide.clone().narrow(1, qw, kw),
                        wide.narrow(1, qw + kw, kw),
                    ]
                }
                false => [
                    t2(&q, [tokens, qw]),
                    t2(&k, [tokens, kw]),
                    t2(&v, [tokens, kw]),
                ],
            };
            let t1 = |v: &[f32]| {
                Tensor::<B, 1>::from_data(TensorData::new(v.to_vec(), [v.len()]), device)
                    .cast(dtype)
            };
            let t4 = |v: &[f32], shape: [usize; 4]| {
                Tensor::<B, 4>::from_data(TensorData::new(v.to_vec(), shape), device).cast(dtype)
            };
            let [pq, pk, pv] = products;
            let step = CachedQkv {
                q: pq,
                k: pk,
                v: pv,
                bias: with_bias.then(|| [t1(&bias[0]), t1(&bias[1]), t1(&bias[2])]),
                q_tables: q_tables.each_ref().map(|t| t4(t, [rows, n, heads, d])),
                k_tables: match strided {
                    // One head repeated with stride 0, as the model's key tables are.
                    true => k_head
                        .each_ref()
                        .map(|t| t4(t, [rows, n, 1, d]).expand([rows, n, kv, d])),
                    false => k_tables.each_ref().map(|t| t4(t, [rows, n, kv, d])),
                },
                keys: t4(&cache[0], [rows, kv, capacity, d]),
                values: t4(&cache[1], [rows, kv, capacity, d]),
                column,
            };
            // Another handle on the key buffer: it must keep its contents.
            let held = step.keys.clone();
            let before = host(held.clone());
            let unfused = step.clone().unfused();
            let got = roll_flow_kernels::rotate_into_cache(step);
            let what = format!("case {c} {dtype:?}");
            assert_eq!(
                host(held),
                before,
                "{what}: a shared key buffer was written"
            );
            let got = [host(got.q), host(got.keys), host(got.values)];
            let unfused = [host(unfused.q), host(unfused.keys), host(unfused.values)];
            for (name, (g, u)) in ["q", "keys", "values"].iter().zip(got.iter().zip(&unfused)) {
                assert_eq!(g, u, "{what}: {name} differs from the unfused ops");
            }
            if dtype == DType::F32 {
                for (name, (g, w)) in ["q", "keys", "values"].iter().zip(got.iter().zip(&want)) {
                    assert_close(&format!("{what}: {name}"), g, w, 1e-6, 1e-5);
                }
            }
        }
    }
}

/// The host inputs of one case; `shape` is (rows, n, heads, kv_heads, d, capacity, column).
struct HostStep<'a> {
    shape: [usize; 7],
    qkv: [&'a [f32]; 3],
    bias: Option<&'a [Vec<f32>; 3]>,
    q_tables: &'a [Vec<f32>; 2],
    k_tables: &'a [Vec<f32>; 2],
    cache: &'a [Vec<f32>; 2],
}

/// The formulas in f64: `[q', keys, values]` as the kernel should leave them.
fn host_step(s: &HostStep<'_>) -> [Vec<f32>; 3] {
    let [rows, n, heads, kv, d, capacity, column] = s.shape;
    let half = d / 2;
    // Head `h` of token `t` of `x` (width `w`), biased, rotated with `tables`.
    let rotate =
        |x: &[f32], b: Option<&Vec<f32>>, tables: &[Vec<f32>; 2], hs: usize, t: usize, h: usize| {
            let biased = |f: usize| {
                x[t * hs * d + h * d + f] as f64 + b.map_or(0.0, |b| b[h * d + f] as f64)
            };
            (0..d)
                .map(|f| {
                    let at = (t * hs + h) * d + f;
                    let (cos, sin) = (tables[0][at] as f64, tables[1][at] as f64);
                    let rotated = match f < half {
                        true => -biased(f + half),
                        false => biased(f - half),
                    };
                    (biased(f) * cos + rotated * sin) as f32
                })
                .collect::<Vec<f32>>()
        };
    let bias = |i: usize| s.bias.map(|b| &b[i]);
    let tokens = rows * n;
    let q: Vec<f32> = (0..tokens)
        .flat_map(|t| {
            (0..heads).flat_map(move |h| rotate(s.qkv[0], bias(0), s.q_tables, heads, t, h))
        })
        .collect();
    let (mut keys, mut values) = (s.cache[0].clone(), s.cache[1].clone());
    for t in 0..tokens {
        let (r, col) = (t / n, column + t % n);
        for g in 0..kv {
            let key = rotate(s.qkv[1], bias(1), s.k_tables, kv, t, g);
            for f in 0..d {
                let at = ((r * kv + g) * capacity + col) * d + f;
                keys[at] = key[f];
                let value = s.qkv[2][t * kv * d + g * d + f] as f64
                    + bias(2).map_or(0.0, |b| b[g * d + f] as f64);
                values[at] = value as f32;
            }
        }
    }
    [q, keys, values]
}
