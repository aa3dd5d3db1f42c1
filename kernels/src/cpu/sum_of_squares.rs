//! Σ x² over a slice, in f64, in an order fixed by the slice's length alone: what the
//! global gradient norm (clipping) and the update norm sum.
//!
//! Each square of an f32 is exact in f64 (48 significant bits), so only the additions
//! round. They run over 16 lane partials within chunks of `CHUNK` values (lane `l` adds
//! values `l`, `l + 16`, …; then the lanes in order, then the chunk's tail), and the chunk
//! sums are added in chunk order. Chunks run in parallel, but their boundaries and the
//! order of the final additions do not depend on the thread count or the CPU. burn's
//! `square().sum()` on the CPU backend sums across as many partials as the SIMD width the
//! CPU has (8 with AVX2, 16 with AVX-512), so a run's gradient norm, and every clipped step
//! after it, depended on the machine.

use rayon::prelude::*;

/// Values per chunk (a chunk is one task).
const CHUNK: usize = 1 << 15;
const LANES: usize = 16;

/// Σ x² of `values` in the order of the module docs.
pub fn sum_of_squares(values: &[f32]) -> f64 {
    let chunk_sums: Vec<f64> = values.par_chunks(CHUNK).map(chunk_sum).collect();
    chunk_sums.into_iter().fold(0.0, |s, c| s + c)
}

fn chunk_sum(chunk: &[f32]) -> f64 {
    let mut lanes = [0.0f64; LANES];
    let groups = chunk.chunks_exact(LANES);
    let tail = groups.remainder();
    for group in groups {
        for (s, &x) in lanes.iter_mut().zip(group) {
            let x = x as f64;
            *s += x * x;
        }
    }
    let head = lanes.into_iter().fold(0.0, |s, l| s + l);
    tail.iter().fold(head, |s, &x| s + x as f64 * x as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small cases by hand, and a long slice against the same order written out plainly,
    /// in a pool of one thread and of three.
    #[test]
    fn sums_in_the_fixed_order_at_any_thread_count() {
        assert_eq!(sum_of_squares(&[]), 0.0);
        assert_eq!(sum_of_squares(&[3.0, -4.0]), 25.0);
        let values: Vec<f32> = (0..3 * CHUNK + 37)
            .map(|i| ((i * 7919 % 10007) as f32 - 5003.0) * 1.37e-3)
            .collect();
        let want = values.chunks(CHUNK).fold(0.0f64, |total, chunk| {
            let mut lanes = [0.0f64; LANES];
            let whole = chunk.len() / LANES * LANES;
            for (i, &x) in chunk[..whole].iter().enumerate() {
                lanes[i % LANES] += x as f64 * x as f64;
            }
            let mut s = 0.0;
            for l in lanes {
                s += l;
            }
            for &x in &chunk[whole..] {
                s += x as f64 * x as f64;
            }
            total + s
        });
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let got = pool.install(|| sum_of_squares(&values));
            assert_eq!(got.to_bits(), want.to_bits(), "{threads} threads");
        }
    }
}
