//! The fused CPU twins, on plain slices (multi-threaded with rayon, SIMD-friendly loops).
//! The `Flex` backend implementation calls them on its tensors' storage without copies;
//! callers holding host vectors can call them directly.

pub(crate) mod buffer;
pub mod gae;
pub mod logprob;
pub mod ppo;
pub(crate) mod simd;
