//! Typed column reads that turn a missing column into an [`AlgoError`], plus the per-sample
//! views (response positions) every estimator needs. The advice for a missing column comes
//! from the reader's contract (its `Need` hints; graph validation gives the same advice
//! before a run), not from each read.

use roll_flow_engine::batch::column::{RESPONSE_MASK, STEP_INDEX, TRAJECTORY_ID};
use roll_flow_engine::{Batch, BatchError, Column};

use super::discount::repeated_step;
use super::error::AlgoError;

fn lift(node: &'static str, column: &Column, err: BatchError) -> AlgoError {
    match err {
        BatchError::Missing { .. } => AlgoError::MissingColumn {
            node,
            column: column.name().to_string(),
            hint: None,
        },
        source => AlgoError::Batch { node, source },
    }
}

macro_rules! reader {
    ($($name:ident => $getter:ident, $t:ty;)*) => {$(
        /// Reads a column; a missing one becomes [`AlgoError::MissingColumn`].
        pub(crate) fn $name<'a>(
            batch: &'a Batch,
            node: &'static str,
            column: &Column,
        ) -> Result<&'a [$t], AlgoError> {
            batch.$getter(column).map_err(|e| lift(node, column, e))
        }
    )*};
}

reader! {
    read_f32 => f32s, f32;
    read_i64 => i64s, i64;
    read_u64 => u64s, u64;
    read_bool => bools, bool;
    read_str => strs, String;
}

/// The response mask.
pub(crate) fn read_mask<'a>(batch: &'a Batch, node: &'static str) -> Result<&'a [bool], AlgoError> {
    read_bool(batch, node, &RESPONSE_MASK)
}

/// Step-wise samples' (trajectory ids, step indices), `step_index` read first, refusing a
/// trajectory that has some step twice: the step-wise estimators order each trajectory's
/// samples by step, which a repeated step would make ambiguous.
pub(crate) fn read_step_order<'a>(
    batch: &'a Batch,
    node: &'static str,
) -> Result<(&'a [u64], &'a [u64]), AlgoError> {
    let steps = read_u64(batch, node, &STEP_INDEX)?;
    let trajectory = read_u64(batch, node, &TRAJECTORY_ID)?;
    if let Some((t, s)) = repeated_step(trajectory, steps) {
        return Err(AlgoError::invalid(
            node,
            format!("trajectory {t} has step {s} twice"),
        ));
    }
    Ok((trajectory, steps))
}

/// Packed indices of sample `i`'s response tokens, in order.
pub(crate) fn response_positions(batch: &Batch, mask: &[bool], i: usize) -> Vec<usize> {
    batch.sample_range(i).filter(|&t| mask[t]).collect()
}

/// A token-level column holding `per_sample[i]` on every response token of sample `i`
/// and 0 elsewhere.
pub(crate) fn broadcast_to_response(batch: &Batch, mask: &[bool], per_sample: &[f64]) -> Vec<f32> {
    let mut out = vec![0.0f32; batch.num_tokens()];
    for (i, &v) in per_sample.iter().enumerate() {
        for t in batch.sample_range(i) {
            if mask[t] {
                out[t] = v as f32;
            }
        }
    }
    out
}

/// Writes a token-level column computed by this crate (its length is right by construction).
pub(crate) fn write(
    batch: &mut Batch,
    node: &'static str,
    column: &Column,
    values: Vec<f32>,
) -> Result<(), AlgoError> {
    batch
        .set(column, values)
        .map_err(|source| AlgoError::Batch { node, source })
}
