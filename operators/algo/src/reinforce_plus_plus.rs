//! REINFORCE++ and REINFORCE++-baseline (Hu et al. 2025, "REINFORCE++: An Efficient
//! RLHF Algorithm with Robustness to Both Prompt and Reward Models", §3; verl
//! `compute_reinforce_plus_plus_outcome_advantage` and
//! `compute_reinforce_plus_plus_baseline_outcome_advantage`, AReaL's REINFORCE++).
//!
//! Per sample, with s its `score` (clipped by `shaping.reward_clip`):
//! 1. token rewards r_t = 1[t = T]·ŝ − β·KL_t over the response tokens (KL_t when
//!    `kl_penalty` is on), ŝ = s, or with `baseline: true` ŝ = s − mean of the sample's
//!    group (REINFORCE++-baseline; a group of one gets 0, where verl keeps its score);
//! 2. returns G_t = Σ_{u≥t} γ^{u−t}·r_u (the `returns` column);
//! 3. A = (G − mean)/sqrt(var + 1e-8) over every response token of the batch (the masked,
//!    batch-wide whitening of [`super::whiten`]; verl's `masked_whiten`), then the rest of
//!    the shaping (`advantage_clip`). The whitening is the estimator, not an option.
//!
//! It is GRPO's computation ([`super::grpo`]) with `Identity` over the `Batch` (or `Mean`
//! over the `Group` for the baseline) and whitening on. With a KL penalty each token's
//! return carries the KL of the tokens from it on (REINFORCE++'s token rewards); verl's
//! baseline variant folds the whole response's KL into the score instead.
//!
//! Defaults: `baseline: false`, γ = 1, no reward or advantage clip, no KL penalty (the
//! paper uses β = 0.01 with K1 or K2; `kl_penalty: (coef: 0.01)`).
//!
//! RON: `"adv": ReinforcePlusPlus()`, `"adv": ReinforcePlusPlus(baseline: true)`.

use roll_flow_engine::{Batch, Contract};
use serde::Deserialize;

use super::algo_stats::AlgoStats;
use super::error::AlgoError;
use super::estimator::{AdvantageEstimator, AdvantageState};
use super::grouping::{Grouping, Norm};
use super::grpo::{Centre, Settings};
use super::kl_penalty::KlPenalty;
use super::shaping::Shaping;

const NODE: &str = "ReinforcePlusPlus";

/// REINFORCE++: discounted returns whitened over the batch.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReinforcePlusPlus {
    /// Subtract each group's mean score first (REINFORCE++-baseline; default false).
    pub baseline: bool,
    /// Token discount γ of the return (default 1.0).
    pub gamma: f32,
    /// Reward clip and advantage clip (off by default); the whitening is always on.
    pub shaping: Shaping,
    /// KL as a token reward penalty; `None` (default) for no penalty.
    pub kl_penalty: Option<KlPenalty>,
}

impl Default for ReinforcePlusPlus {
    fn default() -> Self {
        ReinforcePlusPlus {
            baseline: false,
            gamma: 1.0,
            shaping: Shaping::default(),
            kl_penalty: None,
        }
    }
}

impl ReinforcePlusPlus {
    fn settings<'a>(&'a self, shaping: &'a Shaping) -> Settings<'a> {
        let (group_by, norm) = match self.baseline {
            true => (Grouping::Group, Norm::Mean),
            false => (Grouping::Batch, Norm::Identity),
        };
        Settings {
            node: NODE,
            gamma: self.gamma,
            group_by,
            centre: Centre::Norm(norm),
            shaping,
            kl_penalty: &self.kl_penalty,
        }
    }

    /// The shaping with the whitening on.
    fn whitened(&self) -> Shaping {
        Shaping {
            whiten: true,
            ..self.shaping.clone()
        }
    }
}

impl AdvantageEstimator for ReinforcePlusPlus {
    fn kind(&self) -> &'static str {
        NODE
    }

    fn contract(&self) -> Contract {
        self.settings(&self.shaping).contract()
    }

    fn validate(&self) -> Result<(), AlgoError> {
        self.settings(&self.shaping).validate()
    }

    fn shaping(&self) -> &Shaping {
        &self.shaping
    }

    fn apply(&self, batch: &mut Batch, state: &mut AdvantageState) -> Result<AlgoStats, AlgoError> {
        self.settings(&self.whitened()).apply(batch, state)
    }
}

#[cfg(test)]
#[path = "reinforce_plus_plus_tests.rs"]
mod tests;
