//! LoRA's dropout masks, drawn from a counter instead of the backend's random state, so a
//! training pass is reproducible and a checkpointed layer's second run draws its masks
//! again.
//!
//! Inverted dropout (Srivastava et al. 2014; `torch.nn.Dropout`, which PEFT's
//! `lora_dropout` is): in training each input value is kept with probability `1 − p` and
//! scaled by `1 / (1 − p)`, else zeroed, so `E[dropout(x)] = x`.
//!
//! burn's `Dropout` draws from the backend's random state, which nothing in a run seeds
//! (burn's CPU backend takes it from the operating system's entropy): two runs of one file
//! trained differently, a resumed run left the killed one's path, and gradient
//! checkpointing, which runs a layer's forward pass twice, would have drawn other masks
//! the second time. Here the value at flat index `i` of the `n`-th mask a pass draws is
//! kept when `splitmix64(key_n ⊕ splitmix64(i))`'s upper 32 bits are at least
//! `p · 2³²`, with `key_n = splitmix64(seed ⊕ splitmix64(n))`: a counter-based generator
//! (Salmon et al. 2011, "Parallel random numbers: as easy as 1, 2, 3") with SplitMix64's
//! finaliser (Steele et al. 2014). The `seed` is the training step's, one per micro-batch
//! ([`with_seed`]); `n` counts the masks drawn on the thread since, so the masks follow the
//! layers' order, and a checkpointed layer keeps the count it started at ([`position`]) to
//! run again from it ([`replay`]).

use std::cell::Cell;

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use roll_flow_engine::stable_hash::splitmix64;

thread_local! {
    /// The seed of the pass running on this thread and how many masks it has drawn.
    static STREAM: Cell<Stream> = const { Cell::new(Stream { seed: 0, drawn: 0 }) };
}

/// Where a thread's masks stand: its pass's seed and the masks drawn so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    seed: u64,
    drawn: u64,
}

/// Runs `f` with this thread's masks drawn from `seed`, from the first, then puts the
/// thread's stream back as it was.
pub fn with_seed<R>(seed: u64, f: impl FnOnce() -> R) -> R {
    replay(Stream { seed, drawn: 0 }, f)
}

/// Where this thread's masks stand now: what [`replay`] takes to draw the same ones again.
pub fn position() -> Stream {
    STREAM.with(Cell::get)
}

/// Runs `f` with this thread's masks drawn from `at` on, then puts the stream back.
pub fn replay<R>(at: Stream, f: impl FnOnce() -> R) -> R {
    let before = STREAM.with(|s| s.replace(at));
    let out = f();
    STREAM.with(|s| s.set(before));
    out
}

/// The key of the next mask on this thread; counts it.
fn next_key() -> u64 {
    STREAM.with(|s| {
        let Stream { seed, drawn } = s.get();
        s.set(Stream {
            seed,
            drawn: drawn + 1,
        });
        splitmix64(seed ^ splitmix64(drawn))
    })
}

/// The mask's values for `len` inputs at drop probability `p`: `1 / (1 − p)` where kept,
/// 0 where dropped (module doc). Each value is a function of its index alone, so the
/// threads that fill the mask's blocks do not change it.
pub fn mask_values(key: u64, len: usize, p: f64) -> Vec<f32> {
    use rayon::prelude::*;
    const BLOCK: usize = 1 << 16;
    let threshold = (p * 4_294_967_296.0) as u64;
    let kept = (1.0 / (1.0 - p)) as f32;
    let mut values = vec![0.0f32; len];
    let blocks = values.par_chunks_mut(BLOCK).enumerate();
    blocks.for_each(|(b, block)| {
        for (j, v) in block.iter_mut().enumerate() {
            let i = (b * BLOCK + j) as u64;
            if splitmix64(key ^ splitmix64(i)) >> 32 >= threshold {
                *v = kept;
            }
        }
    });
    values
}

/// `x` with inverted dropout at probability `p` while training (the backend records a
/// graph: burn's `Dropout` rule), `x` itself otherwise or when `p` is 0.
pub fn dropout<B: Backend, const D: usize>(x: Tensor<B, D>, p: f64) -> Tensor<B, D> {
    let device = x.device();
    if p <= 0.0 || !B::ad_enabled(&device) {
        return x;
    }
    let shape = x.shape();
    let values = mask_values(next_key(), shape.num_elements(), p);
    let mask = Tensor::<B, D>::from_data(TensorData::new(values, shape), &device);
    let dtype = x.dtype();
    x.mul(mask.cast(dtype))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kept values are `1 / (1 − p)`, the kept share is `1 − p` within 4 standard errors,
    /// and the mean is 1 within as many.
    #[test]
    fn masks_keep_one_minus_p_scaled_up() {
        let (n, p) = (200_000, 0.25);
        let values = mask_values(12345, n, p);
        let kept = values.iter().filter(|&&v| v != 0.0).count() as f64 / n as f64;
        assert!(values.iter().all(|&v| v == 0.0 || v == (1.0 / 0.75) as f32));
        let se = (p * (1.0 - p) / n as f64).sqrt();
        assert!((kept - 0.75).abs() < 4.0 * se, "kept share {kept}");
        let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        assert!((mean - 1.0).abs() < 4.0 * se / 0.75, "mean {mean}");
    }

    /// A mask across several blocks holds the value each index gives alone.
    #[test]
    fn a_value_depends_on_its_index_alone() {
        let values = mask_values(99, 200_001, 0.5);
        for i in [0usize, 65_535, 65_536, 200_000] {
            let alone = splitmix64(99 ^ splitmix64(i as u64)) >> 32 >= 1 << 31;
            assert_eq!(values[i] != 0.0, alone, "index {i}");
        }
    }

    /// The same seed draws the same masks in the same order; another seed, another mask;
    /// `replay` from a saved position draws that mask again and leaves the stream as it was.
    #[test]
    fn masks_follow_the_seed_and_replay_from_a_position() {
        let draw = || mask_values(next_key(), 64, 0.5);
        let (first, at, second) = with_seed(7, || {
            let first = draw();
            let at = position();
            (first, at, draw())
        });
        assert_ne!(first, second);
        assert_eq!(
            with_seed(7, || (draw(), draw())),
            (first.clone(), second.clone())
        );
        assert_ne!(with_seed(8, draw), first);
        let before = position();
        assert_eq!(replay(at, draw), second);
        assert_eq!(position(), before);
    }
}
