//! CISPO: clipped importance-sampling-weight policy optimisation (MiniMax 2025,
//! "MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning Attention", §3.1
//! eq. 4–5; verl `compute_policy_loss_cispo`, ROLL `pg_variant: cispo`).
//!
//! Per response token, with r_t = exp(logp_t − old_logp_t):
//! - w_t = sg(clip(r_t, max(0, 1 − ε_low), 1 + ε_high)), the clipped importance weight as
//!   a constant (stop-gradient);
//! - L_t = −w_t·A_t·logp_t, times the mismatch weight when `correction` is set;
//! - aggregated by `agg` (default `TokenMean`, the paper's mean over every token of the
//!   group, verl's CISPO default).
//!
//! Where PPO's clip zeroes the gradient of the tokens whose ratio left the range, CISPO
//! clips the weight and keeps every token's gradient: ∂L_t/∂logp_t = −w_t·A_t. The loss
//! value carries logp, so it is not comparable with a surrogate's (its gradient is).
//!
//! Plain burn ops (any backend: CPU, wgpu, CUDA; no fused kernel), aggregated by
//! [`crate::aggregation::aggregate`], the weights the fused losses use.
//!
//! Defaults: ε_low = 1 (no lower bound: the paper sets ε_low large and tunes only ε_high;
//! any ε_low ≥ 1 is the same), ε_high = 0.2 (verl's CISPO example), `TokenMean`. The dual
//! clip has no meaning here and is refused. Stats: `pg_clipfrac` (tokens whose weight was
//! clipped), `ppo_kl` (mean of old_logp − logp).
//!
//! RON: `loss: Cispo()`, `loss: Cispo(high: 0.28, agg: SeqMeanTokenMean)`.

use burn::tensor::Tensor;
use roll_flow_kernels::{ClipSettings, KernelBackend, LossAgg};

use super::aggregation::aggregate;
use super::algo_stats::DeviceStats;
use super::error::AlgoError;
use super::mismatch_correction::MismatchCorrection;
use super::ppo_loss::{
    check_correction, corrected, mismatch_weights, PolicyInputs, PolicyLossOutput,
};

const NODE: &str = "Cispo";

roll_flow_kernels::clip_settings_struct! {
    /// CISPO's settings (defaults: ε_low 1, ε_high 0.2, `TokenMean`; `dual_clip` unused).
    pub struct Cispo {
        /// Rollout–training mismatch correction ([`MismatchCorrection`]); `None` (default).
        pub correction: Option<MismatchCorrection> = None,
    }
}

impl Default for Cispo {
    fn default() -> Self {
        Cispo::with_clip(ClipSettings {
            low: 1.0,
            high: 0.2,
            agg: LossAgg::TokenMean,
            ..ClipSettings::default()
        })
    }
}

impl Cispo {
    /// Checks the bounds (ε_low ≥ 0, ε_high ≥ 0, no dual clip) and the correction.
    pub fn validate(&self) -> Result<(), AlgoError> {
        if !(self.low >= 0.0 && self.high >= 0.0 && self.high.is_finite()) {
            return Err(AlgoError::invalid(
                NODE,
                format!(
                    "the weight's clip needs low ≥ 0 and high ≥ 0, got low {}, high {}",
                    self.low, self.high
                ),
            ));
        }
        if self.dual_clip.is_some() {
            return Err(AlgoError::invalid(
                NODE,
                "`dual_clip` has no meaning for Cispo, which clips the weight and keeps every \
                 token's gradient; remove it",
            ));
        }
        check_correction(NODE, self.correction.as_ref())
    }

    /// The aggregated loss; `behaviour` (the sampler's log-probs) is read by a correction.
    pub fn loss<B: KernelBackend>(
        &self,
        inputs: &PolicyInputs<'_, B>,
        behaviour: Option<Tensor<B, 1>>,
    ) -> Result<PolicyLossOutput<B>, AlgoError> {
        self.validate()?;
        let correction = mismatch_weights(NODE, self.correction.as_ref(), inputs, behaviour)?;
        corrected(correction, |mismatch| {
            Ok(self.weighted_loss(inputs, mismatch))
        })
    }

    /// The loss with each token's term times `mismatch` when given.
    fn weighted_loss<B: KernelBackend>(
        &self,
        inputs: &PolicyInputs<'_, B>,
        mismatch: Option<Tensor<B, 1>>,
    ) -> PolicyLossOutput<B> {
        let layout = inputs.layout;
        let d = (inputs.logprob.clone() - inputs.old_logprob.clone()).detach();
        let ratio = d.clone().exp();
        let (lower, upper) = ((1.0 - self.low).max(0.0), 1.0 + self.high);
        let weight = ratio.clone().clamp(lower, upper);
        let clipped = ratio.clone().lower_elem(lower).float() + ratio.greater_elem(upper).float();
        let mut coef = weight * inputs.advantages.clone();
        if let Some(m) = mismatch {
            coef = coef * m;
        }
        let per_token = (coef * inputs.logprob.clone()).neg();
        let loss = aggregate(per_token, layout, self.agg, self.norm_length);
        let mut stats = DeviceStats::new();
        stats.insert_response_mean("pg_clipfrac", clipped, layout);
        stats.insert_response_mean("ppo_kl", d.neg(), layout);
        PolicyLossOutput { loss, stats }
    }
}

#[cfg(test)]
#[path = "cispo_tests.rs"]
mod tests;
