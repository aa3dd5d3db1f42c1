//! Whether f32 matrix products may run on TF32 tensor cores: one opt-in for the whole run
//! (a pipeline's `tf32: true`), off by default, as PyTorch's
//! `torch.backends.cuda.matmul.allow_tf32` has been since 1.12.
//!
//! TF32 keeps f32's exponent with a 10-bit mantissa, so each product is good to about
//! 1e-3 relative: on an H100 SXM dense TF32 runs at 494.7 TFLOP/s against 67 for f32 on the
//! CUDA cores, and it moved a Qwen2 fixture's logits 0.02-0.04 from transformers'
//! (bench/history/gpu.md). Off, the CubeCL backends multiply f32 in f32
//! ([`KernelBackend::matmul_forward`](crate::KernelBackend::matmul_forward)); on, they
//! take burn's matmul, which uses TF32 where the device has it. Devices without TF32 and
//! the CPU backends ignore the setting.

use std::sync::atomic::{AtomicBool, Ordering};

static ALLOWED: AtomicBool = AtomicBool::new(false);

/// Lets (or stops) f32 matrix products run in TF32 from now on, in this process.
pub fn allow_tf32(allowed: bool) {
    ALLOWED.store(allowed, Ordering::Relaxed);
}

/// Whether f32 matrix products may run in TF32 ([`allow_tf32`]; false until set).
pub fn tf32_allowed() -> bool {
    ALLOWED.load(Ordering::Relaxed)
}
