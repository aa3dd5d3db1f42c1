//! Sliding-window attention computed block by block, for whole sequences without a cache
//! (training and log-prob passes).
//!
//! A sliding-window layer lets query `i` see keys `i - window + 1 ..= i` only, yet the dense
//! path scores every query against every key and masks all but `window` of them: a
//! `[len, len]` score block per head, most of it thrown away. In a StarPO trajectory of
//! 300 tokens with a one-turn window of 40 that is about seven times the work that counts.
//! Here the queries are cut into blocks of `block` tokens and each block is scored only
//! against the `key_blocks` key blocks that can hold its window (its own and the ones just
//! before it), the band around the diagonal that Longformer calls local attention:
//!
//! `out[n] = softmax(q[n] · [k[n-kb+1] … k[n]]ᵀ + band) · [v[n-kb+1] … v[n]]`
//!
//! with `kb = 1 + ceil((window - 1) / block)` and `band` the additive mask that keeps, for
//! query `r` of block `n`, key column `c` when its position `n·block + c - (kb-1)·block` is
//! at least 0 and `window - 1` or fewer positions before the query's own. The keys and
//! values are padded in front with `(kb-1)·block` zeros, which the band hides. The result
//! equals the dense masked attention (tested); the scores shrink from `len²` to
//! `len·kb·block` per head. Everything is plain burn ops plus the fused masked softmax,
//! so the backward pass comes from autodiff.
//!
//! Grouped-query attention stacks the `heads / kv_heads` query heads of a key/value head
//! along each block's query axis, as the dense path does along the whole query axis.

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use super::mask_rule::mask_value;
use roll_flow_kernels::host_transfer::upload;

/// The block layout and additive band mask of one sliding window over right-padded
/// sequences that start at position 0.
#[derive(Clone, Debug)]
pub struct BandedWindow<B: Backend> {
    /// Queries per block.
    pub block: usize,
    /// Key blocks each query block reads (its own and `key_blocks - 1` before it).
    pub key_blocks: usize,
    /// The band mask `[batch, kv_heads, blocks, rep·block, key_blocks·block]`.
    pub mask: Tensor<B, 5>,
}

impl<B: Backend> BandedWindow<B> {
    /// Block size for a window: half the window (rounded up), which scores each query
    /// against about 1.5 windows of keys; smaller blocks cut that toward one window but
    /// make more, smaller matmuls.
    pub fn block_for(window: usize) -> usize {
        window.div_ceil(2).max(1)
    }

    /// Scores per query and head under this layout, to compare with `len` for the dense path.
    pub fn keys_per_query(window: usize) -> usize {
        Self::block_for(window) * Self::key_blocks_for(window)
    }

    /// Key blocks a query block must read to hold a window: its own and enough before it
    /// to reach `window - 1` positions back.
    fn key_blocks_for(window: usize) -> usize {
        1 + (window.max(1) - 1).div_ceil(Self::block_for(window))
    }

    /// The layout for `batch` rows of `len` tokens, `heads` query heads over `kv_heads`
    /// key/value heads, and a window of `window` keys (the query's own included).
    pub fn new(
        batch: usize,
        len: usize,
        (heads, kv_heads): (usize, usize),
        window: usize,
        device: &B::Device,
    ) -> Self {
        let window = window.max(1);
        let (block, key_blocks) = (Self::block_for(window), Self::key_blocks_for(window));
        let blocks = len.div_ceil(block);
        let (rep, width) = (heads / kv_heads, key_blocks * block);
        let front = (key_blocks - 1) * block;
        let mut one = Vec::with_capacity(blocks * rep * block * width);
        for n in 0..blocks {
            let block_start = one.len();
            for r in 0..block {
                let query = (n * block + r) as isize;
                one.extend((0..width).map(|c| {
                    let key = (n * block + c) as isize - front as isize;
                    mask_value(query, key, 0, window)
                }));
            }
            for _ in 1..rep {
                one.extend_from_within(block_start..block_start + block * width);
            }
        }
        let mut values = Vec::with_capacity(batch * kv_heads * one.len());
        for _ in 0..batch * kv_heads {
            values.extend_from_slice(&one);
        }
        let shape = [batch, kv_heads, blocks, rep * block, width];
        BandedWindow {
            block,
            key_blocks,
            mask: upload(TensorData::new(values, shape), device),
        }
    }

    fn blocks(&self) -> usize {
        self.mask.dims()[2]
    }
}

/// `softmax(q kᵀ + band) v` with the heads merged back: `q: [batch, heads, len, d]` (already
/// scaled), `k`, `v: [batch, kv_heads, len, d]` -> `[batch, len, heads·d]`.
pub fn banded_attention<B: KernelBackend>(
    q: Tensor<B, 4>,
    k: Tensor<B, 4>,
    v: Tensor<B, 4>,
    band: &BandedWindow<B>,
) -> Tensor<B, 3> {
    let [batch, heads, len, d] = q.dims();
    let kv = k.dims()[1];
    let (rep, block, blocks) = (heads / kv, band.block, band.blocks());
    let q = pad_len(q, 0, blocks * block);
    // [batch, kv, blocks, rep·block, d]: the rep query heads of a key/value head stacked
    // per block (a copy when rep > 1).
    let q = if rep == 1 {
        q.reshape([batch, kv, blocks, block, d])
    } else {
        q.reshape([batch, kv, rep, blocks, block, d])
            .swap_dims(2, 3)
            .reshape([batch, kv, blocks, rep * block, d])
    };
    let k = key_blocks(k, band);
    let v = key_blocks(v, band);
    let scores = roll_flow_kernels::matmul(q, k.swap_dims(3, 4));
    let probs = roll_flow_kernels::masked_softmax(scores, band.mask.clone());
    let out = roll_flow_kernels::matmul(probs, v);
    let out = if rep == 1 {
        out.reshape([batch, heads, blocks * block, d])
    } else {
        out.reshape([batch, kv, blocks, rep, block, d])
            .swap_dims(2, 3)
            .reshape([batch, heads, blocks * block, d])
    };
    out.slice([0..batch, 0..heads, 0..len, 0..d])
        .swap_dims(1, 2)
        .reshape([batch, len, heads * d])
}

/// `[batch, n, len, d]` keys or values -> `[batch, n, blocks, key_blocks·block, d]`: for each
/// query block, its own key block and the `key_blocks - 1` before it (zeros before the
/// sequence).
fn key_blocks<B: Backend>(t: Tensor<B, 4>, band: &BandedWindow<B>) -> Tensor<B, 5> {
    let [batch, n, _, d] = t.dims();
    let (block, blocks, kb) = (band.block, band.blocks(), band.key_blocks);
    let padded = pad_len(t, (kb - 1) * block, (blocks + kb - 1) * block).reshape([
        batch,
        n,
        blocks + kb - 1,
        block,
        d,
    ]);
    let shifted = (0..kb)
        .map(|j| {
            padded
                .clone()
                .slice([0..batch, 0..n, j..j + blocks, 0..block, 0..d])
        })
        .collect();
    Tensor::cat(shifted, 3)
}

/// Zeros before (`front` rows) and after `t` along the length axis, to `total` rows.
fn pad_len<B: Backend>(t: Tensor<B, 4>, front: usize, total: usize) -> Tensor<B, 4> {
    let [batch, n, len, d] = t.dims();
    let back = total - front - len;
    if front == 0 && back == 0 {
        return t;
    }
    let device = t.device();
    let mut parts = Vec::with_capacity(3);
    if front > 0 {
        parts.push(Tensor::zeros([batch, n, front, d], &device));
    }
    parts.push(t);
    if back > 0 {
        parts.push(Tensor::zeros([batch, n, back, d], &device));
    }
    Tensor::cat(parts, 2)
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};
    use burn::tensor::activation::softmax;

    use super::*;
    use crate::qwen2::AttentionLayout;

    type B = Flex;

    /// Deterministic values in [-1, 1).
    fn values(n: usize, salt: u64) -> Vec<f32> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ salt;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    fn tensor<A: Backend>(shape: [usize; 4], salt: u64) -> Tensor<A, 4> {
        let n = shape.iter().product();
        Tensor::from_data(TensorData::new(values(n, salt), shape), &Default::default())
    }

    /// The dense reference in plain burn ops: each query head reads its key/value head
    /// (`h / rep`), `softmax(q kᵀ + mask) v` with the dense window mask.
    fn dense<A: Backend>(
        q: Tensor<A, 4>,
        k: Tensor<A, 4>,
        v: Tensor<A, 4>,
        window: usize,
    ) -> Tensor<A, 3> {
        let [batch, heads, len, d] = q.dims();
        let kv = k.dims()[1];
        let per_head = |t: Tensor<A, 4>| {
            let parts = (0..heads)
                .map(|h| {
                    t.clone()
                        .slice([0..batch, h / (heads / kv)..h / (heads / kv) + 1])
                })
                .collect();
            Tensor::cat(parts, 1)
        };
        let mask = AttentionLayout::right_padded(batch, len).mask_on_host::<A>(
            len,
            heads,
            Some(window),
            &Default::default(),
        );
        let probs = softmax(q.matmul(per_head(k).swap_dims(2, 3)) + mask, 3);
        probs
            .matmul(per_head(v))
            .swap_dims(1, 2)
            .reshape([batch, len, heads * d])
    }

    fn close(a: Vec<f32>, b: Vec<f32>, tol: f32) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!((x - y).abs() <= tol, "entry {i}: {x} vs {y}");
        }
    }

    fn host<A: Backend, const D: usize>(t: Tensor<A, D>) -> Vec<f32> {
        t.into_data().convert::<f32>().to_vec().unwrap()
    }

    /// (batch, heads, kv_heads, len, d, window): lengths that are and are not multiples of
    /// the block, windows of 1, odd and even, and grouped-query heads.
    const CASES: [(usize, usize, usize, usize, usize, usize); 6] = [
        (2, 2, 2, 12, 4, 4),
        (1, 2, 2, 13, 3, 5),
        (2, 4, 2, 11, 4, 3),
        (1, 3, 1, 9, 2, 1),
        (1, 2, 2, 7, 4, 6),
        (2, 2, 1, 40, 8, 9),
    ];

    #[test]
    fn banded_equals_dense_window_attention() {
        for (i, &(batch, heads, kv, len, d, window)) in CASES.iter().enumerate() {
            let salt = i as u64 * 3;
            let q = tensor::<B>([batch, heads, len, d], salt);
            let k = tensor::<B>([batch, kv, len, d], salt + 1);
            let v = tensor::<B>([batch, kv, len, d], salt + 2);
            let band = BandedWindow::new(batch, len, (heads, kv), window, &Default::default());
            let got = banded_attention(q.clone(), k.clone(), v.clone(), &band);
            close(host(got), host(dense(q, k, v, window)), 1e-5);
        }
    }

    #[test]
    fn banded_gradients_equal_dense_gradients() {
        type A = Autodiff<B>;
        for (i, &(batch, heads, kv, len, d, window)) in CASES.iter().enumerate() {
            let salt = 100 + i as u64 * 3;
            let leaves = || {
                (
                    tensor::<A>([batch, heads, len, d], salt).require_grad(),
                    tensor::<A>([batch, kv, len, d], salt + 1).require_grad(),
                    tensor::<A>([batch, kv, len, d], salt + 2).require_grad(),
                )
            };
            // A loss that weighs every output differently.
            let weights = Tensor::<A, 3>::from_data(
                TensorData::new(
                    values(batch * len * heads * d, salt + 3),
                    [batch, len, heads * d],
                ),
                &Default::default(),
            );
            let band = BandedWindow::new(batch, len, (heads, kv), window, &Default::default());
            let grads_of = |banded: bool| {
                let (q, k, v) = leaves();
                let out = if banded {
                    banded_attention(q.clone(), k.clone(), v.clone(), &band)
                } else {
                    dense(q.clone(), k.clone(), v.clone(), window)
                };
                let grads = (out * weights.clone()).sum().backward();
                [q, k, v].map(|t| host(t.grad(&grads).expect("a leaf's gradient")))
            };
            for (got, want) in grads_of(true).into_iter().zip(grads_of(false)) {
                close(got, want, 1e-5);
            }
        }
    }

    #[test]
    fn band_scores_fewer_keys_than_a_long_sequence() {
        // Window 40 (one FrozenLake turn): blocks of 20, three key blocks, 60 scores per
        // query where a 300-token chat's dense mask has 300.
        assert_eq!(BandedWindow::<B>::block_for(40), 20);
        assert_eq!(BandedWindow::<B>::keys_per_query(40), 60);
        assert_eq!(BandedWindow::<B>::keys_per_query(1), 1);
        let layout = AttentionLayout::right_padded(2, 300);
        let banded = layout.layer_mask::<B>(300, (8, 8), Some(40), None, &Default::default());
        assert!(matches!(
            banded,
            super::super::attention_mask::LayerMask::Banded(_)
        ));
        let short = AttentionLayout::right_padded(2, 50);
        let dense = short.layer_mask::<B>(50, (8, 8), Some(40), None, &Default::default());
        assert!(matches!(
            dense,
            super::super::attention_mask::LayerMask::Dense { .. }
        ));
    }
}
