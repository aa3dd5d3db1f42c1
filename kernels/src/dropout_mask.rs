//! Inverted-dropout masks from a counter, the same bits on every backend (LoRA's
//! `lora_dropout`; Srivastava et al. 2014, `torch.nn.Dropout`): the value at flat index `i`
//! is `1 / (1 − p)` where `lowbias32(lowbias32(i) ⊕ key) ≥ ⌊p · 2³²⌋` and 0 elsewhere, so
//! it is kept with probability `1 − p` and `E[mask] = 1`.
//!
//! `lowbias32` is Chris Wellons' 32-bit integer hash (hash-prospector, "lowbias32": xor-shift
//! 16, multiply 0x7feb352d, xor-shift 15, multiply 0x846ca68b, xor-shift 16), a bijection
//! with low bias; hashing a counter with a key is the counter-based idea of Salmon et al.
//! 2011 ("Parallel random numbers: as easy as 1, 2, 3"). Only 32-bit integer operations, so
//! a CubeCL kernel computes the same bits as the CPU (WGSL has no 64-bit integers): a mask
//! is a function of the key and the index alone, made where the tensor lives
//! ([`crate::KernelBackend::dropout_mask`]), with nothing drawn from a backend's random
//! state and nothing uploaded.

use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{TensorData, TensorMetadata};

/// Chris Wellons' `lowbias32` (module doc).
pub fn lowbias32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

/// One mask's parameters: its key, the drop threshold and the kept value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MaskDraw {
    /// `lowbias32(low ⊕ lowbias32(high))` of the 64-bit key's halves.
    pub key: u32,
    /// `⌊p · 2³²⌋`: an index is dropped where its hash is below it.
    pub threshold: u32,
    /// `1 / (1 − p)`.
    pub kept: f32,
}

impl MaskDraw {
    /// The mask of drop probability `p` (in [0, 1)) keyed by `key`.
    pub fn new(key: u64, p: f64) -> Self {
        let (low, high) = (key as u32, (key >> 32) as u32);
        MaskDraw {
            key: lowbias32(low ^ lowbias32(high)),
            threshold: (p * 4_294_967_296.0).min(u32::MAX as f64) as u32,
            kept: (1.0 / (1.0 - p)) as f32,
        }
    }

    /// Whether index `i` is kept.
    pub fn keeps(&self, i: u32) -> bool {
        lowbias32(lowbias32(i) ^ self.key) >= self.threshold
    }

    /// The mask's `len` values (`len` below 2³²): `1 / (1 − p)` where kept, 0 where dropped.
    pub fn values(&self, len: usize) -> Vec<f32> {
        self.fill(len, |_, m| m)
    }

    /// `x ⊙ mask` on the host without the mask: each value times its index's mask value
    /// (`x · 1/(1 − p)` or `x · 0`, the same products as multiplying by [`Self::values`]).
    pub fn apply(&self, x: &[f32]) -> Vec<f32> {
        self.fill(x.len(), |i, m| x[i] * m)
    }

    /// `len` values, the one at index `i` being `value(i, mask value at i)`, filled by
    /// blocks on rayon's threads: every value is its index's alone, so the thread count
    /// does not change them.
    fn fill(&self, len: usize, value: impl Fn(usize, f32) -> f32 + Sync) -> Vec<f32> {
        use rayon::prelude::*;
        assert!(len <= u32::MAX as usize, "a dropout mask of {len} values");
        let mut out = vec![0.0f32; len];
        let blocks = out.par_chunks_mut(BLOCK).enumerate();
        blocks.for_each(|(b, block)| {
            for (j, y) in block.iter_mut().enumerate() {
                let i = b * BLOCK + j;
                let mask = if self.keeps(i as u32) { self.kept } else { 0.0 };
                *y = value(i, mask);
            }
        });
        out
    }
}

/// The values a block of [`MaskDraw::fill`] covers on one thread.
const BLOCK: usize = 1 << 16;

/// `draw`'s mask shaped and typed like `like`, made on the host and uploaded.
pub fn host_mask<B: Backend>(like: FloatTensor<B>, draw: MaskDraw) -> FloatTensor<B> {
    let (shape, dtype, device) = (like.shape(), like.dtype(), B::float_device(&like));
    let values = draw.values(shape.num_elements());
    let mask = B::float_from_data(TensorData::new(values, shape), &device);
    B::float_cast(mask, dtype.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// lowbias32 against its five steps worked in u64 arithmetic (for 1: 1 ⊕ 0 = 1;
    /// × 0x7feb352d = 0x7feb352d; ⊕ (that >> 15 = 0xffd6) = 0x7febcafb; …), 0 fixed, and no
    /// two of the first 2¹⁶ inputs colliding (a bijection).
    #[test]
    fn lowbias32_matches_its_steps() {
        let steps = |mut x: u32| {
            x ^= x >> 16;
            x = (x as u64 * 0x7feb_352d % (1 << 32)) as u32;
            x ^= x >> 15;
            x = (x as u64 * 0x846c_a68b % (1 << 32)) as u32;
            x ^ (x >> 16)
        };
        assert_eq!(lowbias32(0), 0);
        for x in [1u32, 2, 0xdead_beef, u32::MAX] {
            assert_eq!(lowbias32(x), steps(x), "{x:#x}");
        }
        let mut seen: Vec<u32> = (0..1u32 << 16).map(lowbias32).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 1 << 16);
    }

    /// Kept values are `1 / (1 − p)`; the kept share is `1 − p` and the mean 1, within 4
    /// standard errors, at p = 0.1 and 0.5; p = 0 keeps everything.
    #[test]
    fn masks_keep_one_minus_p_scaled_up() {
        let n = 200_000;
        for p in [0.1, 0.5] {
            let draw = MaskDraw::new(0x0123_4567_89ab_cdef, p);
            let values = draw.values(n);
            assert!(values
                .iter()
                .all(|&v| v == 0.0 || v == (1.0 / (1.0 - p)) as f32));
            let kept = values.iter().filter(|&&v| v != 0.0).count() as f64 / n as f64;
            let se = (p * (1.0 - p) / n as f64).sqrt();
            assert!((kept - (1.0 - p)).abs() < 4.0 * se, "p {p}: kept {kept}");
        }
        assert!(MaskDraw::new(5, 0.0).values(1000).iter().all(|&v| v == 1.0));
    }

    /// Values are their index's alone across blocks, and other keys give other masks.
    #[test]
    fn a_value_is_its_indexs_alone() {
        let draw = MaskDraw::new(99, 0.5);
        let values = draw.values(200_001);
        for i in [0u32, 65_535, 65_536, 200_000] {
            assert_eq!(values[i as usize] != 0.0, draw.keeps(i), "index {i}");
        }
        assert_ne!(MaskDraw::new(100, 0.5).values(64), draw.values(64));
        assert_ne!(MaskDraw::new(99 | 1 << 40, 0.5).values(64), draw.values(64));
    }

    /// `apply` is `x ⊙ values` bit for bit across blocks, signed zeros and infinities
    /// included (a dropped infinity is NaN, as the product by the mask's 0 makes it).
    #[test]
    fn apply_is_the_product_by_the_mask() {
        let draw = MaskDraw::new(3, 0.3);
        let mut x: Vec<f32> = (0..150_000)
            .map(|i| (i as f32 - 70_000.5) / 999.0)
            .collect();
        x[..4].copy_from_slice(&[-0.0, f32::INFINITY, f32::NEG_INFINITY, 0.0]);
        let want: Vec<u32> = (x.iter().zip(draw.values(x.len())))
            .map(|(x, m)| (x * m).to_bits())
            .collect();
        let got: Vec<u32> = draw.apply(&x).iter().map(|v| v.to_bits()).collect();
        assert!(got == want);
    }
}
