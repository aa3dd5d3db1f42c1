//! RLOO: REINFORCE with a leave-one-out baseline (Ahmadian et al. 2024, "Back to Basics:
//! Revisiting REINFORCE Style Optimization for Learning from Human Feedback in LLMs", §3.2;
//! verl `compute_rloo_outcome_advantage`, AReaL's RLOO).
//!
//! For a group of G samples with scores s_1..s_G (trajectory `Group` by default):
//! A_i = s_i − (1/(G−1))·Σ_{j≠i} s_j = G/(G−1)·(s_i − mean), on every response token of
//! sample i. The computation is GRPO's ([`super::grpo`]) with the leave-one-out centring in
//! step 2 ([`leave_one_out`](super::grouping::leave_one_out)): the score (clipped by
//! `shaping.reward_clip`) is placed on the last response token, minus β·KL_t on every token
//! when `kl_penalty` is on, and A_t is the reverse discounted sum with γ (1 by default, so
//! every token of a sample gets its A_i, as in verl).
//!
//! A group of one has no other sample to compare with and gets 0 (verl keeps its raw
//! score); validation warns about `group_size: 1` as for every group-normalised estimator.
//! With a KL penalty each token's return carries the KL of the tokens from it on; verl
//! folds the whole response's KL into the score before the baseline instead.
//!
//! Defaults: group by `Group`, γ = 1, no shaping, no KL penalty.
//!
//! RON: `"adv": Rloo()`, `"adv": Rloo(group_by: EnvTag)`.

use roll_flow_engine::{Batch, Contract};
use serde::Deserialize;

use super::algo_stats::AlgoStats;
use super::error::AlgoError;
use super::estimator::{AdvantageEstimator, AdvantageState};
use super::grouping::Grouping;
use super::grpo::Centre;
use super::kl_penalty::KlPenalty;
use super::shaping::Shaping;

/// RLOO: each score less the mean of its group's other scores.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Rloo {
    /// Token discount γ of the return (default 1.0).
    pub gamma: f32,
    /// Which samples form a group: `Group` (default), `Batch`, `EnvTag`, `State`.
    pub group_by: Grouping,
    /// Reward clip, whitening, advantage clip (all off by default).
    pub shaping: Shaping,
    /// KL as a token reward penalty; `None` (default) for no penalty.
    pub kl_penalty: Option<KlPenalty>,
}

impl Default for Rloo {
    fn default() -> Self {
        Rloo {
            gamma: 1.0,
            group_by: Grouping::Group,
            shaping: Shaping::default(),
            kl_penalty: None,
        }
    }
}

super::grpo::estimator_from_settings!(Rloo, centre: Centre::LeaveOneOut);

#[cfg(test)]
#[path = "rloo_tests.rs"]
mod tests;
