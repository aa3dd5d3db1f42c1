//! Which of cubek's tensor-core routines multiplies half-precision (bf16, f16) matrices on
//! the CubeCL backends: one choice for the whole process.
//!
//! burn 0.21 without its `autotune` feature launches cubek's `Strategy::Auto`, the simple
//! cyclic CMMA routine with the tiles cubek infers. On an H200 that ran the Qwen2.5-0.5B
//! shape's training products at 31-89 TFLOP/s and a decode step's MLP product in 0.45 ms
//! (bench/history/gpu.md, run 7), against the chip's 989 dense bf16 TFLOP/s. burn's
//! answer is to time every candidate on first use (autotune), which picks by a race: a
//! run's kernels, and so its low bits, could differ from the next run's on the same GPU.
//! Here the routine is named instead, and the GPU bench times each at the model's sizes
//! (`bench/gpu/matmul_rows.rs`). The default, [`HalfMatmul::SimpleTmaMma`], measured best
//! at three of the four training sizes (164-202 TFLOP/s; 2-5× burn's) and within 20% of the
//! best at decode sizes; where it cannot be set up (GPUs before Hopper have no tensor
//! memory accelerator) [`HalfMatmul::DoubleCyclicMma`], the best at decode sizes, runs
//! instead, then burn's. f32 products are not affected ([`crate::allow_tf32`] governs
//! them), nor are the CPU backends.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// A cubek routine for half-precision products (cubek-matmul 0.2's `Strategy` variants,
/// with the tiles cubek infers; `Cmma` is CUDA's warp matrix API, `Mma` the PTX `mma`
/// instructions).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
#[repr(u8)]
pub enum HalfMatmul {
    /// burn's matmul (`Strategy::Auto`: simple cyclic CMMA).
    Burn,
    /// Simple cyclic loading, several rows of tiles a plane, `mma`.
    SimpleMultiRowsMma,
    /// Double-buffered cyclic loading, `cmma`.
    DoubleCyclicCmma,
    /// Double-buffered cyclic loading, `mma`.
    DoubleCyclicMma,
    /// Double-buffered, loading planes apart from computing ones, `mma`.
    DoubleSpecializedMma,
    /// Ordered double buffering (4 rows, k split in 2), `mma`.
    OrderedDoubleMma,
    /// Tensor-memory-accelerator loads (Hopper), simple, `mma`: the default.
    SimpleTmaMma,
    /// Tensor-memory-accelerator loads, specialized planes, `mma`.
    SpecializedTmaMma,
}

impl HalfMatmul {
    /// Every choice, in the order the bench times them (their discriminants' order).
    pub const ALL: [HalfMatmul; 8] = [
        HalfMatmul::Burn,
        HalfMatmul::SimpleMultiRowsMma,
        HalfMatmul::DoubleCyclicCmma,
        HalfMatmul::DoubleCyclicMma,
        HalfMatmul::DoubleSpecializedMma,
        HalfMatmul::OrderedDoubleMma,
        HalfMatmul::SimpleTmaMma,
        HalfMatmul::SpecializedTmaMma,
    ];
}

static CHOICE: AtomicU8 = AtomicU8::new(HalfMatmul::SimpleTmaMma as u8);
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// Multiplies half-precision matrices with `choice` from now on, in this process.
pub fn set_half_matmul(choice: HalfMatmul) {
    CHOICE.store(choice as u8, Ordering::Relaxed);
}

/// The routine half-precision products use ([`set_half_matmul`]; [`HalfMatmul::SimpleTmaMma`]
/// until set).
pub fn half_matmul() -> HalfMatmul {
    HalfMatmul::ALL[CHOICE.load(Ordering::Relaxed) as usize]
}

/// Products the chosen routine refused to set up (its tiles did not fit the shapes or the
/// device), which the fallback (module docs) took instead; counted since the process
/// started.
pub fn half_matmul_refusals() -> u64 {
    REFUSED.load(Ordering::Relaxed)
}

#[cfg_attr(not(feature = "cube"), allow(dead_code))]
pub(crate) fn count_refusal() {
    REFUSED.fetch_add(1, Ordering::Relaxed);
}
