//! REINFORCE: scores with a baseline as discounted token returns (ROLL's `reinforce`
//! advantage estimator; Williams 1992, REINFORCE with a baseline).
//!
//! The computation is GRPO's ([`super::grpo`], shared through its `Settings`); only the
//! defaults differ. For each sample (ROLL `compute_response_level_rewards` +
//! `compute_reinforce_return`):
//! 1. s = `score`, clipped by `shaping.reward_clip`;
//! 2. ŝ = s normalised within the configured grouping ([`Grouping`], [`Norm`]); by
//!    default ŝ = s − mean over the whole batch (a batch-mean baseline);
//! 3. ŝ is placed on the sample's last response token, minus β·KL_t on every response
//!    token when `kl_penalty` is on;
//! 4. A_t = G_t = r_t + γ·G_{t+1} over the response tokens (reverse discounted sum).
//!
//! Defaults: group by `Batch`, `Mean`, γ = 1. With `group_by: Batch` the advantages are
//! not group-normalised (validation's group_size warnings do not apply).
//!
//! RON: `"adv": Reinforce()`, `"adv": Reinforce(group_by: Batch, norm: Identity)`.

use roll_flow_engine::{Batch, Contract};
use serde::Deserialize;

use super::algo_stats::AlgoStats;
use super::error::AlgoError;
use super::estimator::{AdvantageEstimator, AdvantageState};
use super::grouping::{Grouping, Norm};
use super::kl_penalty::KlPenalty;
use super::shaping::Shaping;

/// REINFORCE: scores with a batch-mean baseline by default.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Reinforce {
    /// Token discount γ of the return (default 1.0).
    pub gamma: f32,
    /// Which samples are normalised together: `Batch` (default), `Group`, `EnvTag`, `State`.
    pub group_by: Grouping,
    /// `Identity`, `Mean` (default) or `MeanStd`.
    pub norm: Norm,
    /// Reward clip, whitening, advantage clip (all off by default).
    pub shaping: Shaping,
    /// KL as a token reward penalty; `None` (default) for no penalty.
    pub kl_penalty: Option<KlPenalty>,
}

impl Default for Reinforce {
    fn default() -> Self {
        Reinforce {
            gamma: 1.0,
            group_by: Grouping::Batch,
            norm: Norm::Mean,
            shaping: Shaping::default(),
            kl_penalty: None,
        }
    }
}

super::grpo::estimator_from_settings!(Reinforce);

#[cfg(test)]
mod tests {
    use roll_flow_engine::batch::column::{ADVANTAGES, GROUP_ID, SCORE};

    use super::*;
    use crate::grpo::Grpo;
    use crate::test_batches::{assert_close, f32s, get, u64s, with_masks};

    #[test]
    fn defaults_to_a_batch_mean_baseline_by_hand() {
        // Scores [1, 0, 0.5, 0], batch mean 0.375, γ = 1: each sample's s − 0.375 on all of
        // its response tokens; sample 3 has none.
        let mut b = with_masks(&[&[0, 1, 1], &[0, 1], &[1], &[0, 0]]);
        f32s(&mut b, &SCORE, &[1.0, 0.0, 0.5, 0.0]);
        u64s(&mut b, &GROUP_ID, &[4, 4, 9, 4]);
        Reinforce::default()
            .apply(&mut b, &mut AdvantageState::default())
            .unwrap();
        assert_close(
            &get(&b, &ADVANTAGES),
            &[0.0, 0.625, 0.625, 0.0, -0.375, 0.125, 0.0, 0.0],
            1e-6,
        );
        assert!(!Reinforce::default().contract().group_normalised);
        assert!(Grpo::default().contract().group_normalised);
    }

    #[test]
    fn discount_and_defaults_from_ron() {
        // γ = 0.5, no baseline: score 1 on the last of three tokens → [0.25, 0.5, 1].
        let cfg: Reinforce = roll_flow_engine::spec::ron_options()
            .from_str("(gamma: 0.5, norm: Identity)")
            .unwrap();
        assert_eq!(cfg.group_by, Grouping::Batch);
        let mut b = with_masks(&[&[1, 1, 1]]);
        f32s(&mut b, &SCORE, &[1.0]);
        cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
        assert_close(&get(&b, &ADVANTAGES), &[0.25, 0.5, 1.0], 1e-7);
        assert_eq!(
            roll_flow_engine::spec::ron_options()
                .from_str::<Reinforce>("()")
                .unwrap(),
            Reinforce::default()
        );
    }
}
