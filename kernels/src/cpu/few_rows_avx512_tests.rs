//! Tests of the AVX-512 few-rows products against the plain kernels.

use super::super::linear::{linear_backward, linear_forward, WeightLayout};

/// Deterministic values in [-1, 1).
fn values(n: usize, salt: u64) -> Vec<f32> {
    let mut state = salt.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// x·W (+ b) in f64, W `[k, m]` row-major.
fn reference(
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
    (n, k, m): (usize, usize, usize),
) -> Vec<f64> {
    (0..n * m)
        .map(|i| {
            let (r, c) = (i / m, i % m);
            let bias = b.map_or(0.0, |b| b[c] as f64);
            bias + (0..k)
                .map(|j| x[r * k + j] as f64 * w[j * m + c] as f64)
                .sum::<f64>()
        })
        .collect()
}

fn assert_close(what: &str, got: &[f32], want: &[f64], k: usize) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    // Sums of k products of values below 1: f32 rounding grows with √k at worst k.
    let tolerance = 1e-6 * (k as f64 + 1.0);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!((g as f64 - w).abs() <= tolerance, "{what}[{i}]: {g} vs {w}");
    }
}

/// Every tail of every tile (rows 1 to 8 and around 16 and 32, columns around 3 and 48, inner
/// lengths around 16), with and without a bias (the accumulating store), W stored
/// either way, and dx (the transposed weight's dot form); against f64.
#[test]
fn few_rows_match_f64_at_every_tail() {
    if !super::super::simd::has_avx512() {
        return;
    }
    for n in [1, 2, 3, 5, 6, 7, 8, 9, 13, 20, 32, 33, 64] {
        for k in [1, 15, 16, 17, 100] {
            for m in [1, 3, 4, 5, 47, 48, 49, 97] {
                let dims = (n, k, m);
                let x = values(n * k, (n * 1000 + k * 10 + m) as u64);
                let w = values(k * m, (k * 77 + m) as u64);
                let b = values(m, m as u64);
                let w_out_in: Vec<f32> = (0..m * k).map(|i| w[(i % k) * m + i / k]).collect();
                let want = reference(&x, &w, Some(&b), dims);
                let what = format!("{n}x{k}x{m}");
                for (stored, layout) in
                    [(&w, WeightLayout::InOut), (&w_out_in, WeightLayout::OutIn)]
                {
                    let y = linear_forward(&x, (stored, layout), Some(&b), dims);
                    assert_close(&format!("y {what} {layout:?}"), &y, &want, k);
                    let y = linear_forward(&x, (stored, layout), None, dims);
                    let want = reference(&x, &w, None, dims);
                    assert_close(&format!("y no bias {what} {layout:?}"), &y, &want, k);
                    // dx = dy·Wᵀ: Wᵀ's rows are W's columns, a product of n rows.
                    let dy = values(n * m, 5);
                    let (dx, _, _) = linear_backward(&x, (stored, layout), &dy, dims, false);
                    let wt: Vec<f32> = (0..m * k).map(|i| w[(i % k) * m + i / k]).collect();
                    let want = reference(&dy, &wt, None, (n, m, k));
                    assert_close(&format!("dx {what} {layout:?}"), &dx, &want, m);
                }
            }
        }
    }
}

/// A product large enough to split its columns over threads, in a pool of three (parts
/// of unequal tile counts), both layouts.
#[test]
fn split_columns_match_f64() {
    if !super::super::simd::has_avx512() {
        return;
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let dims @ (n, k, m) = (32, 512, 533);
    let (x, w) = (values(n * k, 1), values(k * m, 2));
    let w_out_in: Vec<f32> = (0..m * k).map(|i| w[(i % k) * m + i / k]).collect();
    let want = reference(&x, &w, None, dims);
    for (stored, layout) in [(&w, WeightLayout::InOut), (&w_out_in, WeightLayout::OutIn)] {
        let y = pool.install(|| linear_forward(&x, (stored, layout), None, dims));
        assert_close(&format!("{layout:?}"), &y, &want, k);
    }
}
