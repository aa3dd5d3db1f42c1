//! Dr.GRPO: GRPO without its two biases (Liu et al. 2025, "Understanding R1-Zero-Like
//! Training: A Critical Perspective", §3.1 and eq. 3; verl `norm_adv_by_std_in_grpo:
//! False` with `loss_agg_mode: seq-mean-token-sum-norm`, AReaL's Dr.GRPO).
//!
//! The advantage is the score less its group's mean, with no division by the group's std:
//! A_i = s_i − mean_group(s), on every response token of sample i (GRPO's computation,
//! [`super::grpo`], with `Mean`: reward clip, KL penalty and discount as there). A group of
//! one gets 0.
//!
//! The other half of the recipe is the loss: each response's token losses are summed and
//! divided by a constant instead of by the response's length. That is the policy loss's
//! `agg: SeqMeanTokenSumNorm` ([`roll_flow_kernels::aggregation`]: Σ over the batch's
//! response tokens / L, L = `norm_length`, by default the longest response of the batch;
//! the paper's L is the generation budget `max_new_tokens`, times the number of responses
//! for its mean over them). Pair them:
//! `"adv": DrGrpo()`, `ActorStep(loss: PpoClip(agg: SeqMeanTokenSumNorm, norm_length: 64))`.
//!
//! Defaults: group by `Group`, γ = 1, no shaping, no KL penalty.
//!
//! RON: `"adv": DrGrpo()`.

use roll_flow_engine::{Batch, Contract};
use serde::Deserialize;

use super::algo_stats::AlgoStats;
use super::error::AlgoError;
use super::estimator::{AdvantageEstimator, AdvantageState};
use super::grouping::{Grouping, Norm};
use super::grpo::Centre;
use super::kl_penalty::KlPenalty;
use super::shaping::Shaping;

/// Dr.GRPO: scores less their group's mean, unscaled.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DrGrpo {
    /// Token discount γ of the return (default 1.0).
    pub gamma: f32,
    /// Which samples form a group: `Group` (default), `Batch`, `EnvTag`, `State`.
    pub group_by: Grouping,
    /// Reward clip, whitening, advantage clip (all off by default).
    pub shaping: Shaping,
    /// KL as a token reward penalty; `None` (default) for no penalty.
    pub kl_penalty: Option<KlPenalty>,
}

impl Default for DrGrpo {
    fn default() -> Self {
        DrGrpo {
            gamma: 1.0,
            group_by: Grouping::Group,
            shaping: Shaping::default(),
            kl_penalty: None,
        }
    }
}

super::grpo::estimator_from_settings!(DrGrpo, centre: Centre::Norm(Norm::Mean));

#[cfg(test)]
#[path = "dr_grpo_tests.rs"]
mod tests;
