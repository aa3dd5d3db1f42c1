//! CubeCL dropout mask: one unit per value, [`crate::dropout_mask`]'s hash in 32-bit integer
//! operations, so the mask is the CPU's bit for bit and made where it is used (no upload).

use burn::tensor::TensorMetadata;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;

use super::cube_index::element_index;
use super::launch::{empty, grid};
use crate::dropout_mask::MaskDraw;

/// Units per cube (one value each).
const UNITS: usize = 256;

/// The mask of `draw`, shaped and typed like `like` (compact strides).
pub(super) fn mask<R: CubeRuntime>(like: CubeTensor<R>, draw: MaskDraw) -> CubeTensor<R> {
    let shape = like.shape().to_vec();
    let n = shape.iter().product::<usize>();
    assert!(n <= u32::MAX as usize, "a dropout mask of {n} values");
    let out = empty(&like, &shape);
    dropout_mask_kernel::launch::<R>(
        &like.client,
        grid(n.div_ceil(UNITS)),
        CubeDim::new_1d(UNITS as u32),
        out.clone().into_tensor_arg(),
        n,
        draw.key,
        draw.threshold,
        draw.kept,
        like.dtype.into(),
    );
    out
}

/// [`crate::dropout_mask::lowbias32`], in wrapping 32-bit arithmetic.
#[cube]
fn lowbias32(x: u32) -> u32 {
    let mut x = x ^ (x >> 16);
    x *= 0x7feb_352du32;
    x ^= x >> 15;
    x *= 0x846c_a68bu32;
    x ^ (x >> 16)
}

#[cube(launch)]
pub(crate) fn dropout_mask_kernel<F: Float>(
    out: &mut Tensor<F>,
    n: usize,
    key: u32,
    threshold: u32,
    kept: f32,
    #[define(F)] _dtype: StorageType,
) {
    let i = element_index(n);
    let h = lowbias32(lowbias32(i as u32) ^ key);
    let mut v = F::new(0.0);
    if h >= threshold {
        v = F::cast_from(kept);
    }
    out[i] = v;
}
