//! The fused CPU twins, on plain slices (multi-threaded with rayon, SIMD-friendly loops).
//! The `Flex` backend implementation calls them on its tensors' storage without copies;
//! callers holding host vectors can call them directly.

pub mod batched_matmul;
pub mod block_write;
pub(crate) mod buffer;
pub(crate) mod few_rows;
#[cfg(target_arch = "x86_64")]
mod few_rows_avx512;
pub use buffer::keep_freed_buffers_for_reuse;
pub mod gae;
pub mod linear;
pub mod logprob;
mod logprob_row;
mod ordered_product;
mod ordered_product_plain;
#[cfg(target_arch = "x86_64")]
mod ordered_product_x86;
pub mod ppo;
pub mod rms_norm;
pub mod rotary;
pub mod row_sample;
pub(crate) mod simd;
pub mod softmax;
pub mod strided_copy;
pub mod sum_of_squares;
pub mod swiglu;
mod tile_kernel;
pub mod weight_panels;
