//! The clipped PPO loss's settings ([`PpoClipConfig`]) and statistics ([`PpoStats`]), shared
//! by every backend's kernel and the reference formulas.

use burn::tensor::Tensor;

use crate::aggregation::LossAgg;

/// Settings of the clipped PPO loss.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PpoClipConfig {
    /// ε_low: ratio clipped below at 1 − ε_low.
    pub low: f32,
    /// ε_high: ratio clipped above at 1 + ε_high.
    pub high: f32,
    /// Dual clip c > 1 for negative advantages (`None`: off).
    pub dual_clip: Option<f32>,
    pub agg: LossAgg,
    /// L of `SeqMeanTokenSumNorm` (default: the longest response).
    pub norm_length: Option<u32>,
}

impl Default for PpoClipConfig {
    fn default() -> Self {
        PpoClipConfig {
            low: 0.2,
            high: 0.2,
            dual_clip: None,
            agg: LossAgg::SeqMeanTokenMean,
            norm_length: None,
        }
    }
}

/// Statistics of one PPO loss pass, over response tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PpoStats {
    /// Fraction of tokens whose clipped term is active (`pg_clipfrac`).
    pub clipfrac: f32,
    /// Fraction of tokens capped by the dual clip (`pg_clipfrac_lower`; 0 when off).
    pub clipfrac_lower: f32,
    /// Mean of old_logp − logp (`ppo_kl`).
    pub approx_kl: f32,
    /// Σ mask.
    pub response_tokens: f32,
}

impl PpoStats {
    /// The `[4]` layout the backends use.
    pub fn to_vec(self) -> Vec<f32> {
        vec![
            self.clipfrac,
            self.clipfrac_lower,
            self.approx_kl,
            self.response_tokens,
        ]
    }

    /// Reads a `[4]` stats tensor (waits for the device).
    pub fn from_tensor<B: burn::tensor::backend::Backend>(stats: Tensor<B, 1>) -> Self {
        let v = stats
            .into_data()
            .convert::<f32>()
            .into_vec::<f32>()
            .unwrap_or_default();
        let at = |i: usize| v.get(i).copied().unwrap_or(0.0);
        PpoStats {
            clipfrac: at(0),
            clipfrac_lower: at(1),
            approx_kl: at(2),
            response_tokens: at(3),
        }
    }
}
