//! The combine of the CubeCL PPO loss: the per-sequence partials of `ppo.rs` (Σm·u·l,
//! Σm, Σm·clipped, Σm·capped, Σm·(old − logp) per sequence s) → the loss, the stats and
//! the weight w the backward scales every saved token gradient by, in parallel over the
//! sequences.
//!
//! Every aggregation mode's loss is one sum over sequences over one denominator
//! (verl/ROLL `agg_loss`), with L_s = (Σm·u·l)_s and n_s = (Σm)_s:
//! token-mean Σ_s L_s / Σ_s n_s; seq-mean-token-sum Σ_s L_s / #{n_s > 0};
//! seq-mean-token-mean Σ_{n_s > 0} (L_s / n_s) / #{n_s > 0}; seq-mean-token-sum-norm
//! Σ_s L_s / N (N the configured length, else the longest n_s); each denominator at least 1.
//! The denominator's inverse is w (in seq-mean-token-mean the partials kernel has already
//! divided each token's gradient by its n_s). Two launches take it, neither walking all
//! sequences alone:
//! - `ppo_block_kernel`: one cube per block of `units` sequences, one a unit → the block's
//!   Σ L_s, Σ L_s/n_s, Σ n_s, #{n_s > 0}, max n_s, Σ clipped, Σ capped, Σ kl (a tree in
//!   shared memory, fixed order);
//! - `ppo_final_kernel`: one cube over the blocks → loss, stats `[4]` and w `[1]`.
//!
//! Before, one cube of 256 units walked every sequence twice (at 32,768 sequences, 128
//! dependent loads a unit each time): a serial tail inside a kernel meant to run at the
//! memory's pace.

use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;

use super::cube_index::cube_index;
use super::launch::{empty, grid};
use crate::aggregation::LossAgg;
use crate::ppo_clip::ClipSettings;

/// Partial sums per sequence that `ppo.rs`'s partials kernel writes (same layout as the CPU
/// twin): Σm·u·l, Σm, Σm·clipped, Σm·capped, Σm·(old − logp).
pub(crate) const PARTIALS: usize = 5;
/// Values per block: Σ L, Σ L/n, Σ n, #valid, max n, Σ clipped, Σ capped, Σ kl.
const BLOCK_VALUES: usize = 8;
/// Sequences per block (one a unit) and units of the final cube.
const UNITS: u32 = 256;

/// The aggregation mode as the kernels number it.
fn agg_code(agg: LossAgg) -> u32 {
    match agg {
        LossAgg::TokenMean => 0,
        LossAgg::SeqMeanTokenSum => 1,
        LossAgg::SeqMeanTokenMean => 2,
        LossAgg::SeqMeanTokenSumNorm => 3,
    }
}

/// (loss `[1]`, stats `[4]`, w `[1]`) from `partials` `[sequences · PARTIALS]`.
pub(super) fn combine<R: CubeRuntime>(
    partials: CubeTensor<R>,
    sequences: usize,
    config: &ClipSettings,
) -> (CubeTensor<R>, CubeTensor<R>, CubeTensor<R>) {
    let blocks = sequences.div_ceil(UNITS as usize).max(1);
    let block_sums = empty(&partials, &[blocks * BLOCK_VALUES]);
    let (loss, stats, weight) = (
        empty(&partials, &[1]),
        empty(&partials, &[4]),
        empty(&partials, &[1]),
    );
    let (client, dtype) = (partials.client.clone(), partials.dtype.into());
    let agg = agg_code(config.agg);
    ppo_block_kernel::launch::<R>(
        &client,
        grid(blocks),
        CubeDim::new_1d(UNITS),
        partials.into_tensor_arg(),
        block_sums.clone().into_tensor_arg(),
        sequences as u32,
        blocks as u32,
        UNITS,
        dtype,
    );
    ppo_final_kernel::launch::<R>(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(UNITS),
        block_sums.into_tensor_arg(),
        loss.clone().into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        weight.clone().into_tensor_arg(),
        blocks as u32,
        agg,
        config.norm_length.map_or(0.0, |l| l as f32),
        UNITS,
        dtype,
    );
    (loss, stats, weight)
}

/// Sums of the [`BLOCK_VALUES`] slots of every unit in `acc` into unit 0's, slot 4 by max.
#[cube]
fn reduce_block_values<F: Float>(acc: &mut SharedMemory<F>) {
    let u = UNIT_POS_X as usize;
    sync_cube();
    let mut stride = CUBE_DIM_X as usize / 2;
    while stride > 0 {
        if u < stride {
            for k in 0..BLOCK_VALUES {
                let o = acc[(u + stride) * BLOCK_VALUES + k];
                if k == 4 {
                    acc[u * BLOCK_VALUES + k] = F::max(acc[u * BLOCK_VALUES + k], o);
                } else {
                    acc[u * BLOCK_VALUES + k] += o;
                }
            }
        }
        sync_cube();
        stride /= 2;
    }
}

#[cube(launch)]
pub(crate) fn ppo_block_kernel<F: Float>(
    partials: &Tensor<F>,
    block_sums: &mut Tensor<F>,
    sequences: u32,
    blocks: u32,
    #[comptime] units: u32,
    #[define(F)] _dtype: StorageType,
) {
    let block = cube_index(blocks);
    let u = UNIT_POS_X as usize;
    let s = block * units as usize + u;
    let zero = F::new(0.0);
    let mut acc = SharedMemory::<F>::new((units as usize) * BLOCK_VALUES);
    for k in 0..BLOCK_VALUES {
        acc[u * BLOCK_VALUES + k] = zero;
    }
    if s < sequences as usize {
        let l = partials[s * PARTIALS];
        let n = partials[s * PARTIALS + 1];
        acc[u * BLOCK_VALUES] = l;
        if n > zero {
            acc[u * BLOCK_VALUES + 1] = l / n;
            acc[u * BLOCK_VALUES + 3] = F::new(1.0);
        }
        acc[u * BLOCK_VALUES + 2] = n;
        acc[u * BLOCK_VALUES + 4] = n;
        acc[u * BLOCK_VALUES + 5] = partials[s * PARTIALS + 2];
        acc[u * BLOCK_VALUES + 6] = partials[s * PARTIALS + 3];
        acc[u * BLOCK_VALUES + 7] = partials[s * PARTIALS + 4];
    }
    reduce_block_values::<F>(&mut acc);
    if u < BLOCK_VALUES {
        block_sums[block * BLOCK_VALUES + u] = acc[u];
    }
}

/// `weight` = w: 1/Σn (token-mean), 1/#valid (seq-mean-token-sum and -token-mean) or 1/N
/// (seq-mean-token-sum-norm), each denominator at least 1.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn ppo_final_kernel<F: Float>(
    block_sums: &Tensor<F>,
    loss: &mut Tensor<F>,
    stats: &mut Tensor<F>,
    weight: &mut Tensor<F>,
    blocks: u32,
    agg: u32,
    norm_length: f32,
    #[comptime] units: u32,
    #[define(F)] _dtype: StorageType,
) {
    let u = UNIT_POS_X as usize;
    let zero = F::new(0.0);
    let one = F::new(1.0);
    let mut acc = SharedMemory::<F>::new((units as usize) * BLOCK_VALUES);
    for k in 0..BLOCK_VALUES {
        acc[u * BLOCK_VALUES + k] = zero;
    }
    let mut b = u;
    while b < blocks as usize {
        for k in 0..BLOCK_VALUES {
            let v = block_sums[b * BLOCK_VALUES + k];
            if k == 4 {
                acc[u * BLOCK_VALUES + k] = F::max(acc[u * BLOCK_VALUES + k], v);
            } else {
                acc[u * BLOCK_VALUES + k] += v;
            }
        }
        b += units as usize;
    }
    reduce_block_values::<F>(&mut acc);
    if u == 0 {
        let count = acc[2];
        let total = F::max(count, one);
        let valid = F::max(acc[3], one);
        let mut norm = F::cast_from(norm_length);
        if norm <= zero {
            norm = acc[4];
        }
        norm = F::max(norm, one);
        let mut value = acc[0] / total;
        let mut denominator = total;
        if agg == 1 {
            value = acc[0] / valid;
            denominator = valid;
        } else if agg == 2 {
            value = acc[1] / valid;
            denominator = valid;
        } else if agg == 3 {
            value = acc[0] / norm;
            denominator = norm;
        }
        loss[0] = value;
        weight[0] = one / denominator;
        stats[0] = acc[5] / total;
        stats[1] = acc[6] / total;
        stats[2] = acc[7] / total;
        stats[3] = count;
    }
}
