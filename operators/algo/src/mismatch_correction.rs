//! Rollout–training mismatch correction: the sampler's log-probs (`behaviour_logprob`,
//! recorded by the rollout) are not the trainer's π_old, even for the same weights, once
//! generation and training run different kernels or precisions (Yao et al. 2025, "Your
//! Efficient RL Framework Secretly Brings You Off-Policy RL Training"; Liu et al. 2025,
//! "When Speed Kills Stability"). Each response token's policy-gradient term is weighted
//! by w_t, from the per-token ratio ρ_t = π_old(y_t)/π_behave(y_t) =
//! exp(old_logp_t − behave_logp_t) (its log clamped to [−20, 20] first, verl's safety
//! bound):
//!
//! - TIS (`tis: C`, truncated importance sampling, Yao et al. §3): w_t = min(ρ_t, C);
//!   C ≈ 2 in the paper and verl's `rollout_is_threshold`;
//! - token masking (`mask: Token(low: α, high: β)`): w_t = 0 where ρ_t ∉ [α, β]; IcePop
//!   (Ling Team 2025, Ring-1T) is the two-sided [0.5, 2], the default; a one-sided mask is
//!   `low: 0.0`;
//! - sequence masking (`mask: Sequence(low, high)`): every token of sample i gets w = 0
//!   when its geometric mean ρ_i = exp((1/|y_i|)·Σ_t log ρ_t) ∉ [low, high] (verl's
//!   Geo-RS `seq_mean_k1`, ROLL's `geometric` filter; default [0.999, 1.001], verl's);
//!
//! and both together multiply (TIS weights, then the mask). Peer files: ROLL
//! `roll/utils/train_infer_corrections.py`, verl `verl/trainer/ppo/rollout_corr_helper.py`
//! (`docs/algo/rollout_corr.md`). The weights are constants (no gradient). A masked token
//! drops out of the loss but stays in the aggregation's denominators (AReaL's rule, as
//! `DecoupledPpo`'s `Mask`), so the loss's divisor, and with it the micro-batches'
//! scales, is the batch's; ROLL and verl take masked tokens out of the response mask
//! instead, which also takes them out of the entropy and KL terms (here those still see
//! every token).
//!
//! Stats over response tokens: `mismatch/ratio_mean` (ρ), `mismatch/weight_mean` (w),
//! `mismatch/capped_frac` (tokens TIS capped), `mismatch/masked_frac` (tokens masked).
//!
//! With `ActorStep(old_logprob: Behaviour)` π_old is the behaviour log-probs and ρ ≡ 1,
//! so validation refuses a correction there.
//!
//! RON, on `PpoClip`, `Gspo` or `Cispo`: `correction: (tis: 2.0)`, `correction: (mask:
//! Token(low: 0.5, high: 2.0))`, `correction: (tis: 2.0, mask: Sequence())`.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use serde::Deserialize;

use super::algo_stats::DeviceStats;
use super::error::AlgoError;
use super::packed_layout::PackedLayout;
use super::segment_ratio::{log_ratio, RatioLevel};

/// The safety bound on log ρ (verl's [exp(−20), exp(20)]).
const LOG_RATIO_BOUND: f32 = 20.0;

/// How the mismatch between the sampler and the trainer is corrected (module docs).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MismatchCorrection {
    /// TIS: each token's weight is min(ρ_t, `tis`); `None` (default): no weight.
    pub tis: Option<f32>,
    /// Which tokens drop out: `None` (default), `Token(low, high)` or `Sequence(low, high)`.
    pub mask: MismatchMask,
}

fn icepop_low() -> f32 {
    0.5
}
fn icepop_high() -> f32 {
    2.0
}
fn geo_low() -> f32 {
    0.999
}
fn geo_high() -> f32 {
    1.001
}

/// The tokens a mismatch correction drops out of the loss.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
pub enum MismatchMask {
    /// None (default).
    #[default]
    None,
    /// Tokens whose ρ_t leaves [low, high] (IcePop; defaults 0.5 and 2).
    Token {
        #[serde(default = "icepop_low")]
        low: f32,
        #[serde(default = "icepop_high")]
        high: f32,
    },
    /// Every token of a sample whose geometric-mean ρ leaves [low, high] (defaults 0.999
    /// and 1.001).
    Sequence {
        #[serde(default = "geo_low")]
        low: f32,
        #[serde(default = "geo_high")]
        high: f32,
    },
}

/// The per-token weights of a correction and what they did.
#[derive(Clone, Debug)]
pub struct MismatchWeights<B: Backend> {
    /// w_t per token (detached).
    pub weight: Tensor<B, 1>,
    pub stats: DeviceStats<B>,
}

impl MismatchCorrection {
    /// Checks the cap and the bounds, errors named after the loss `node`.
    pub fn validate(&self, node: &'static str) -> Result<(), AlgoError> {
        if let Some(c) = self.tis {
            if !(c.is_finite() && c > 0.0) {
                return Err(AlgoError::invalid(
                    node,
                    format!("`correction.tis` must be > 0, got {c}"),
                ));
            }
        }
        match self.mask {
            MismatchMask::Token { low, high } | MismatchMask::Sequence { low, high }
                if !(low >= 0.0 && high.is_finite() && low < high) =>
            {
                Err(AlgoError::invalid(
                    node,
                    format!("`correction.mask` needs 0 ≤ low < high, got low {low}, high {high}"),
                ))
            }
            _ => Ok(()),
        }
    }

    /// The weights w_t for π_old `old` and the sampler's `behaviour` log-probs.
    pub fn weights<B: Backend>(
        &self,
        old: Tensor<B, 1>,
        behaviour: Tensor<B, 1>,
        layout: &PackedLayout<B>,
    ) -> MismatchWeights<B> {
        let log_rho = (old.detach() - behaviour.detach())
            .clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)
            .mul(layout.mask.clone());
        let rho = log_rho.clone().exp();
        let ones = rho.ones_like();
        let (mut weight, capped) = match self.tis {
            Some(c) => {
                let capped = rho.clone().greater_elem(c).float();
                (rho.clone().clamp_max(c), capped)
            }
            None => (ones.clone(), rho.zeros_like()),
        };
        let ratio_of_mask = match self.mask {
            MismatchMask::None => None,
            MismatchMask::Token { low, high } => Some((rho.clone(), low, high)),
            MismatchMask::Sequence { low, high } => {
                let mean = log_ratio(log_rho, rho.zeros_like(), layout, RatioLevel::Sequence);
                Some((mean.exp(), low, high))
            }
        };
        let dropped = match ratio_of_mask {
            None => rho.zeros_like(),
            Some((ratio, low, high)) => {
                let outside =
                    ratio.clone().lower_elem(low).float() + ratio.greater_elem(high).float();
                outside.clamp_max(1.0)
            }
        };
        weight = weight * (ones - dropped.clone());
        let mut stats = DeviceStats::new();
        stats.insert_response_mean("mismatch/ratio_mean", rho, layout);
        stats.insert_response_mean("mismatch/weight_mean", weight.clone(), layout);
        stats.insert_response_mean("mismatch/capped_frac", capped, layout);
        stats.insert_response_mean("mismatch/masked_frac", dropped, layout);
        MismatchWeights { weight, stats }
    }
}

#[cfg(test)]
#[path = "mismatch_correction_tests.rs"]
mod tests;
