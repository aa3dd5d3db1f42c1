//! The loss aggregation modes (verl/ROLL `agg_loss`) as per-sequence weights: every mode is
//! loss = Σ_s w_s Σ_{t∈s} m_t l_t, so one weight per sequence says all there is to say.
//! The fused PPO loss (CPU and CubeCL) and `roll-flow-operators`' `algo::aggregation`
//! (entropy, KL and value terms) both take their weights from [`sequence_weights`].
//!
//! With c_s the response tokens of sequence s, C = Σ c_s and V the number of sequences
//! with c_s > 0:
//! - `TokenMean`: w_s = 1 / C;
//! - `SeqMeanTokenSum`: w_s = 1 / V (0 for an empty sequence);
//! - `SeqMeanTokenMean` (ROLL default): w_s = 1 / (c_s·V) (0 for an empty sequence);
//! - `SeqMeanTokenSumNorm` (Dr. GRPO): w_s = 1 / L, L = `norm_length` or max c_s.
//!
//! Every divisor is at least 1, so a batch without response tokens aggregates to 0.

use serde::Deserialize;

/// How per-token losses become one scalar.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum LossAgg {
    /// Σ m·l / Σ m over the batch.
    TokenMean,
    /// Mean over sequences with ≥ 1 response token of Σ_t m·l.
    SeqMeanTokenSum,
    /// Mean over sequences with ≥ 1 response token of Σ_t m·l / Σ_t m (ROLL default).
    #[default]
    SeqMeanTokenMean,
    /// Σ m·l / L, L = `norm_length` or the longest response (Dr. GRPO).
    SeqMeanTokenSumNorm,
}

/// The weight w_s of each sequence, from its response-token count `counts[s]`.
pub fn sequence_weights(counts: &[f64], agg: LossAgg, norm_length: Option<u32>) -> Vec<f64> {
    let n = loss_normalizer(counts, agg, norm_length);
    counts
        .iter()
        .map(|&c| match agg {
            LossAgg::TokenMean | LossAgg::SeqMeanTokenSumNorm => 1.0 / n,
            LossAgg::SeqMeanTokenSum if c > 0.0 => 1.0 / n,
            LossAgg::SeqMeanTokenMean if c > 0.0 => 1.0 / (c * n),
            _ => 0.0,
        })
        .collect()
}

/// The batch-wide divisor N of the mode (≥ 1): C for `TokenMean`, V for the two
/// sequence means, L for `SeqMeanTokenSumNorm`. Every weight is 1/N times a per-sequence
/// factor, so the loss of a part of a batch, rescaled by N_part / N_batch, is exactly
/// that part's share of the whole batch's loss: gradient accumulation over micro-batches
/// with these scales gives the whole batch's gradient, whatever the split.
pub fn loss_normalizer(counts: &[f64], agg: LossAgg, norm_length: Option<u32>) -> f64 {
    match agg {
        LossAgg::TokenMean => counts.iter().sum::<f64>().max(1.0),
        LossAgg::SeqMeanTokenSum | LossAgg::SeqMeanTokenMean => {
            counts.iter().filter(|&&c| c > 0.0).count().max(1) as f64
        }
        LossAgg::SeqMeanTokenSumNorm => norm_length
            .map_or_else(|| counts.iter().copied().fold(0.0, f64::max), f64::from)
            .max(1.0),
    }
}
