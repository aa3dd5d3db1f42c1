//! PPO clipped surrogate with symmetric/asymmetric clip, dual clip and token or segment
//! ratios. The per-token loss, its aggregation, the clip statistics and the backward pass
//! run fused in one kernel ([`roll_flow_kernels::ppo_clip_loss_weighted`]); segment ratios
//! are formed in burn ops first and handed to it as the log-ratio.
//!
//! Per response token (Schulman et al. 2017 eq. 7; verl/ROLL `compute_policy_loss`):
//! - r = exp(log r), log r = logp − old_logp per token, or the mean over the token's turn
//!   or sample ([`RatioLevel`]);
//! - L_clip = max(−A·r, −A·clip(r, 1 − ε_low, 1 + ε_high));
//! - dual clip (Ye et al. 2020), for A < 0 only: L = min(L_clip, −c·A), capping the loss
//!   at −c·A (c = 3 usually; ROLL uses 1 + 2ε); requires c > 1;
//! - times the rollout–training mismatch weight w_t when `correction` is set
//!   ([`MismatchCorrection`]: TIS, token or sequence masking);
//! - aggregated by [`LossAgg`](super::aggregation::LossAgg) (default `SeqMeanTokenMean`, ROLL).
//!
//! Defaults: ε_low = ε_high = 0.2 (symmetric; StarPO-S uses `low: 0.2, high: 0.28`), no
//! dual clip, token ratios. Stats: `pg_clipfrac` (tokens whose clipped term is active),
//! `pg_clipfrac_lower` (dual-clipped), `ppo_kl` (masked mean of old_logp − logp).
//!
//! RON: `loss: PpoClip(low: 0.2, high: 0.28, dual_clip: Some(3.0), ratio: Token, agg: SeqMeanTokenMean)`.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use roll_flow_kernels::{ClipSettings, KernelBackend};

#[cfg(test)]
use super::aggregation::LossAgg;
use super::algo_stats::DeviceStats;
use super::error::AlgoError;
use super::mismatch_correction::{MismatchCorrection, MismatchWeights};
use super::packed_layout::PackedLayout;
use super::segment_ratio::log_ratio;
pub use super::segment_ratio::RatioLevel;

roll_flow_kernels::clip_settings_struct! {
    /// The PPO clipped-surrogate policy loss (defaults: [`ClipSettings::default`]).
    pub struct PpoClip {
        /// `Token` (default), `Segment` (one ratio per turn) or `Sequence` (one per sample).
        pub ratio: RatioLevel = RatioLevel::Token,
        /// Rollout–training mismatch correction ([`MismatchCorrection`]); `None` (default).
        pub correction: Option<MismatchCorrection> = None,
    }
}

impl Default for PpoClip {
    fn default() -> Self {
        PpoClip::with_clip(ClipSettings::default())
    }
}

/// Packed per-token inputs of a policy loss.
#[derive(Clone, Debug)]
pub struct PolicyInputs<'a, B: Backend> {
    /// Log-probs of the sampled tokens under the policy being trained (carries the graph).
    pub logprob: Tensor<B, 1>,
    /// Log-probs under π_old (PPO) or π_prox (decoupled PPO): `old_logprob`.
    pub old_logprob: Tensor<B, 1>,
    /// `advantages`.
    pub advantages: Tensor<B, 1>,
    pub layout: &'a PackedLayout<B>,
}

/// A scalar loss (shape `[1]`) and its statistics, still on the device ([`DeviceStats`]).
#[derive(Clone, Debug)]
pub struct PolicyLossOutput<B: Backend> {
    pub loss: Tensor<B, 1>,
    pub stats: DeviceStats<B>,
}

impl PpoClip {
    /// Checks the clip and correction settings.
    pub fn validate(&self) -> Result<(), AlgoError> {
        check_clip("PpoClip", self.low, self.high, self.dual_clip)?;
        check_correction("PpoClip", self.correction.as_ref())
    }

    /// The aggregated loss (a `correction` needs [`PpoClip::loss_with_behaviour`]).
    pub fn loss<B: KernelBackend>(
        &self,
        inputs: &PolicyInputs<'_, B>,
    ) -> Result<PolicyLossOutput<B>, AlgoError> {
        self.loss_with_behaviour(inputs, None)
    }

    /// The aggregated loss, each token's term weighted by the mismatch correction, if
    /// any, from the sampler's log-probs `behaviour`.
    pub fn loss_with_behaviour<B: KernelBackend>(
        &self,
        inputs: &PolicyInputs<'_, B>,
        behaviour: Option<Tensor<B, 1>>,
    ) -> Result<PolicyLossOutput<B>, AlgoError> {
        self.validate()?;
        let correction = mismatch_weights("PpoClip", self.correction.as_ref(), inputs, behaviour)?;
        corrected(correction, |w| self.clip_loss("PpoClip").loss(inputs, w))
    }

    /// These settings as the fused kernel takes them, errors named after `node`.
    pub(crate) fn clip_loss(&self, node: &'static str) -> ClipLoss {
        ClipLoss {
            node,
            config: self.clip(),
            ratio: self.ratio,
        }
    }
}

/// The mismatch correction's weights for `inputs` when `correction` is set, or the error
/// that says the sampler's log-probs are missing.
pub(crate) fn mismatch_weights<B: Backend>(
    node: &'static str,
    correction: Option<&MismatchCorrection>,
    inputs: &PolicyInputs<'_, B>,
    behaviour: Option<Tensor<B, 1>>,
) -> Result<Option<MismatchWeights<B>>, AlgoError> {
    let Some(correction) = correction else {
        return Ok(None);
    };
    let behaviour = behaviour.ok_or_else(|| {
        AlgoError::invalid(
            node,
            "`correction` needs the rollout's behaviour_logprob, which was not provided",
        )
    })?;
    let old = inputs.old_logprob.clone();
    Ok(Some(correction.weights(old, behaviour, inputs.layout)))
}

/// `loss(weights)` with the correction's weights (if any) and its stats added.
pub(crate) fn corrected<B: Backend>(
    correction: Option<MismatchWeights<B>>,
    loss: impl FnOnce(Option<Tensor<B, 1>>) -> Result<PolicyLossOutput<B>, AlgoError>,
) -> Result<PolicyLossOutput<B>, AlgoError> {
    let (weight, stats) = match correction {
        Some(w) => (Some(w.weight), w.stats),
        None => (None, DeviceStats::new()),
    };
    let mut out = loss(weight)?;
    out.stats.extend(stats);
    Ok(out)
}

/// Validates a loss's mismatch correction, if any.
pub(crate) fn check_correction(
    node: &'static str,
    correction: Option<&MismatchCorrection>,
) -> Result<(), AlgoError> {
    correction.map_or(Ok(()), |c| c.validate(node))
}

/// A clipped surrogate as the fused kernel runs it: shared by [`PpoClip`],
/// [`super::DecoupledPpo`] and [`super::gspo::Gspo`].
pub(crate) struct ClipLoss {
    pub node: &'static str,
    pub config: ClipSettings,
    pub ratio: RatioLevel,
}

impl ClipLoss {
    /// The aggregated loss of the (dual-)clipped surrogate, each token's loss times
    /// `token_weight` when given (a constant), with the stats `pg_clipfrac`,
    /// `pg_clipfrac_lower` (dual clip only) and `ppo_kl`.
    pub fn loss<B: KernelBackend>(
        &self,
        inputs: &PolicyInputs<'_, B>,
        token_weight: Option<Tensor<B, 1>>,
    ) -> Result<PolicyLossOutput<B>, AlgoError> {
        let layout = inputs.layout;
        // The kernel takes (logp, old) and forms r = exp(logp − old); a segment ratio goes
        // in as its log-ratio against 0 (Σ over tokens of −log r is then still Σ old − logp,
        // so `ppo_kl` is unchanged).
        let (logp, old) = match self.ratio {
            RatioLevel::Token => (inputs.logprob.clone(), inputs.old_logprob.clone()),
            RatioLevel::Segment | RatioLevel::Sequence => {
                let log_r = log_ratio(
                    inputs.logprob.clone(),
                    inputs.old_logprob.clone(),
                    layout,
                    self.ratio,
                );
                let zeros = log_r.zeros_like();
                (log_r, zeros)
            }
        };
        let out = roll_flow_kernels::ppo_clip_loss_weighted(
            logp,
            old,
            inputs.advantages.clone(),
            layout.mask.clone(),
            token_weight,
            &layout.offsets,
            &self.config,
        )
        .map_err(|e| AlgoError::invalid(self.node, e.to_string()))?;
        // The kernel's stats tensor: [clipfrac, clipfrac_lower, approx_kl, tokens]
        // (`roll_flow_kernels::PpoStats`).
        let mut names = vec![("pg_clipfrac", 0)];
        if self.config.dual_clip.is_some() {
            names.push(("pg_clipfrac_lower", 1));
        }
        names.push(("ppo_kl", 2));
        let mut stats = DeviceStats::new();
        stats.insert_elements(out.stats, &names);
        Ok(PolicyLossOutput {
            loss: out.loss,
            stats,
        })
    }
}

/// Validates ε_low, ε_high and the dual clip constant.
pub(crate) fn check_clip(
    node: &'static str,
    low: f32,
    high: f32,
    dual: Option<f32>,
) -> Result<(), AlgoError> {
    if !(0.0..1.0).contains(&low) || high.is_nan() || high < 0.0 {
        return Err(AlgoError::invalid(
            node,
            format!("clip needs 0 ≤ low < 1 and high ≥ 0, got low {low}, high {high}"),
        ));
    }
    if let Some(c) = dual {
        if c.is_nan() || c <= 1.0 {
            return Err(AlgoError::invalid(
                node,
                format!("dual_clip must be > 1, got {c}"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "ppo_loss_tests.rs"]
mod tests;
