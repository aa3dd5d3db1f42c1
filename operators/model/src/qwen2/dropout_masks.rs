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
//! the second time. Here the `n`-th mask a pass draws is keyed by
//! `splitmix64(seed ⊕ splitmix64(n))` ([`roll_flow_engine::stable_hash::combine`]) and
//! each of its values is a hash of that key and the value's index
//! ([`roll_flow_kernels::dropout_mask`], made on the device where the tensor lives). The
//! `seed` is the training step's, one per micro-batch ([`with_seed`]); `n`
//! counts the masks drawn on the thread since, so the masks follow the layers' order, and a
//! checkpointed layer keeps the count it started at ([`position`]) to run again from it
//! ([`replay`]).

use std::cell::Cell;

use roll_flow_engine::stable_hash::combine;
use roll_flow_kernels::dropout_mask::MaskDraw;
use roll_flow_kernels::KernelBackend;

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
        combine(seed, drawn)
    })
}

/// The draw of the next mask at probability `p` while training on `device` (the backend
/// records a graph: burn's `Dropout` rule), counted on this thread's stream; `None` (no
/// dropout, nothing counted) otherwise or when `p` is 0. The mask is made where the tensor
/// lives, and made again for the backward pass instead of kept
/// ([`KernelBackend::dropout_dense`]).
pub fn next_draw<B: KernelBackend>(device: &B::Device, p: f64) -> Option<MaskDraw> {
    (p > 0.0 && B::ad_enabled(device)).then(|| MaskDraw::new(next_key(), p))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same seed draws the same keys in the same order; another seed, other keys;
    /// `replay` from a saved position draws that key again and leaves the stream as it was.
    #[test]
    fn keys_follow_the_seed_and_replay_from_a_position() {
        let (first, at, second) = with_seed(7, || {
            let first = next_key();
            let at = position();
            (first, at, next_key())
        });
        assert_ne!(first, second);
        assert_eq!(with_seed(7, || (next_key(), next_key())), (first, second));
        assert_ne!(with_seed(8, next_key), first);
        let before = position();
        assert_eq!(replay(at, next_key), second);
        assert_eq!(position(), before);
    }
}
