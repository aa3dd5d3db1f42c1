//! PPO clipped surrogate with symmetric/asymmetric clip, dual clip and token or segment
//! ratios, written in burn tensor ops (autodiff on any backend; the fused kernels' oracle).
//!
//! Per response token (Schulman et al. 2017 eq. 7; verl/ROLL `compute_policy_loss`):
//! - r = exp(log r), log r = logp − old_logp per token, or the turn's mean ([`RatioLevel`]);
//! - L_clip = max(−A·r, −A·clip(r, 1 − ε_low, 1 + ε_high));
//! - dual clip (Ye et al. 2020), for A < 0 only: L = min(L_clip, −c·A), capping the loss
//!   at −c·A (c = 3 usually; ROLL uses 1 + 2ε); requires c > 1;
//! - aggregated by [`LossAgg`] (default `SeqMeanTokenMean`, ROLL).
//!
//! Defaults: ε_low = ε_high = 0.2 (symmetric; StarPO-S uses `low: 0.2, high: 0.28`), no
//! dual clip, token ratios. Stats: `pg_clipfrac` (tokens whose clipped term is active),
//! `pg_clipfrac_lower` (dual-clipped), `ppo_kl` (masked mean of old_logp − logp).
//!
//! RON: `loss: PpoClip(low: 0.2, high: 0.28, dual_clip: Some(3.0), ratio: Token, agg: SeqMeanTokenMean)`.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use serde::Deserialize;

use super::aggregation::{aggregate, LossAgg};
use super::error::AlgoError;
use super::estimator::AlgoStats;
use super::packed_layout::PackedLayout;
use super::segment_ratio::log_ratio;
pub use super::segment_ratio::RatioLevel;

fn default_eps() -> f32 {
    0.2
}

/// The PPO clipped-surrogate policy loss.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PpoClip {
    /// ε_low: the ratio is clipped below at 1 − ε_low (default 0.2).
    #[serde(default = "default_eps")]
    pub low: f32,
    /// ε_high: the ratio is clipped above at 1 + ε_high (default 0.2; StarPO-S 0.28).
    #[serde(default = "default_eps")]
    pub high: f32,
    /// Dual clip constant c > 1 for negative advantages; `None` (default) turns it off.
    #[serde(default)]
    pub dual_clip: Option<f32>,
    /// `Token` (default) or `Segment` (one ratio per turn).
    #[serde(default)]
    pub ratio: RatioLevel,
    /// Loss aggregation (default `SeqMeanTokenMean`).
    #[serde(default)]
    pub agg: LossAgg,
    /// The constant length L of `SeqMeanTokenSumNorm`; default the longest response.
    #[serde(default)]
    pub norm_length: Option<u32>,
}

impl Default for PpoClip {
    fn default() -> Self {
        PpoClip {
            low: 0.2,
            high: 0.2,
            dual_clip: None,
            ratio: RatioLevel::Token,
            agg: LossAgg::SeqMeanTokenMean,
            norm_length: None,
        }
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

/// A scalar loss (shape `[1]`) and its detached statistics.
#[derive(Clone, Debug)]
pub struct PolicyLossOutput<B: Backend> {
    pub loss: Tensor<B, 1>,
    pub stats: AlgoStats,
}

impl PpoClip {
    /// Checks the clip settings.
    pub fn validate(&self) -> Result<(), AlgoError> {
        check_clip("PpoClip", self.low, self.high, self.dual_clip)
    }

    /// The aggregated loss.
    pub fn loss<B: Backend>(
        &self,
        inputs: &PolicyInputs<'_, B>,
    ) -> Result<PolicyLossOutput<B>, AlgoError> {
        self.validate()?;
        let log_r = log_ratio(
            inputs.logprob.clone(),
            inputs.old_logprob.clone(),
            inputs.layout,
            self.ratio,
        );
        let (tokens, mut stats) = surrogate(
            log_r,
            inputs.advantages.clone(),
            self.low,
            self.high,
            self.dual_clip,
            inputs.layout,
        );
        stats.insert(
            "ppo_kl".into(),
            masked_mean(
                inputs.old_logprob.clone() - inputs.logprob.clone(),
                inputs.layout,
            ),
        );
        let loss = aggregate(tokens, inputs.layout, self.agg, self.norm_length);
        Ok(PolicyLossOutput { loss, stats })
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

/// Masked mean of a detached per-token tensor, as f64.
pub(crate) fn masked_mean<B: Backend>(values: Tensor<B, 1>, layout: &PackedLayout<B>) -> f64 {
    let s: f32 = (values.detach() * layout.mask.clone())
        .sum()
        .into_scalar()
        .elem();
    s as f64 / layout.response_tokens().max(1) as f64
}

use burn::tensor::ElementConversion;

/// Per-token clipped (and dual-clipped) surrogate loss from log-ratios, and clip stats.
pub(crate) fn surrogate<B: Backend>(
    log_r: Tensor<B, 1>,
    adv: Tensor<B, 1>,
    low: f32,
    high: f32,
    dual: Option<f32>,
    layout: &PackedLayout<B>,
) -> (Tensor<B, 1>, AlgoStats) {
    let ratio = log_r.exp();
    let pg1 = adv.clone().neg() * ratio.clone();
    let pg2 = adv.clone().neg() * ratio.clamp(1.0 - low, 1.0 + high);
    let clipped = pg2.clone().greater(pg1.clone()).float();
    let mut loss = pg1.max_pair(pg2);
    let mut stats = AlgoStats::new();
    stats.insert("pg_clipfrac".into(), masked_mean(clipped, layout));
    if let Some(c) = dual {
        let pg3 = adv.clone().neg().mul_scalar(c);
        let negative = adv.lower_elem(0.0);
        let capped = loss.clone().greater(pg3.clone()).float() * negative.clone().float();
        stats.insert("pg_clipfrac_lower".into(), masked_mean(capped, layout));
        let dual_loss = loss.clone().min_pair(pg3);
        loss = loss.mask_where(negative, dual_loss);
    }
    (loss, stats)
}

#[cfg(test)]
#[path = "ppo_loss_tests.rs"]
mod tests;
