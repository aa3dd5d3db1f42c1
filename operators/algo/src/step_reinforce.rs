//! Step-REINFORCE (ROLL): per-step discounted returns, normalised by a grouping.
//!
//! For step-wise samples (ROLL's step-level `reinforce` path): with r_t the step sample's
//! `score`, G_t = r_t + γ·G_{t+1} within each trajectory (`trajectory_id`, ordered by
//! `step_index`); then Ĝ_t is G_t normalised within the configured grouping (see
//! [`super::grouping`]) and broadcast over the step's response tokens.
//! Defaults: γ = 0.95 (ROLL `step_reward_gamma`), group by trajectory `Group`, `MeanStd`.
//!
//! RON: `"adv": StepReinforce(gamma: 0.95, group_by: State, norm: Mean)`.

use roll_flow_engine::batch::column::{
    ADVANTAGES, RESPONSE_MASK, SCORE, STEP_INDEX, TRAJECTORY_ID,
};
use roll_flow_engine::{Batch, Contract, Need};
use serde::Deserialize;

use super::algo_stats::AlgoStats;
use super::batch_read::{broadcast_to_response, read_f32, read_mask, read_step_order, write};
use super::config_check::unit_interval;
use super::discount::step_returns;
use super::error::AlgoError;
use super::estimator::{AdvantageEstimator, AdvantageState};
use super::grouping::{normalise, Grouping, Norm};
use super::grpo::group_need;
use super::shaping::Shaping;

const NODE: &str = "StepReinforce";
const STEP_HINT: &str =
    "StepReinforce needs step-wise samples; set the rollout's `samples: Step(history: 2)`";

/// Step-REINFORCE advantages.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StepReinforce {
    /// Discount γ between steps (default 0.95).
    pub gamma: f32,
    /// `Batch`, `Group` (default), `EnvTag` or `State`.
    pub group_by: Grouping,
    /// `Identity`, `Mean` or `MeanStd` (default).
    pub norm: Norm,
    /// Reward clip (on step rewards), whitening, advantage clip.
    pub shaping: Shaping,
}

impl Default for StepReinforce {
    fn default() -> Self {
        StepReinforce {
            gamma: 0.95,
            group_by: Grouping::Group,
            norm: Norm::MeanStd,
            shaping: Shaping::default(),
        }
    }
}

impl AdvantageEstimator for StepReinforce {
    fn shaping(&self) -> &Shaping {
        &self.shaping
    }

    fn kind(&self) -> &'static str {
        NODE
    }

    fn validate(&self) -> Result<(), AlgoError> {
        unit_interval(NODE, "gamma", self.gamma)?;
        self.shaping.validate(NODE)
    }

    fn contract(&self) -> Contract {
        let mut needs = vec![
            Need::column(RESPONSE_MASK),
            Need::column(SCORE),
            Need::with_hint(TRAJECTORY_ID, STEP_HINT),
            Need::with_hint(STEP_INDEX, STEP_HINT),
        ];
        if let Some(col) = self.group_by.column() {
            needs.push(group_need(self.group_by, col));
        }
        let group_normalised = self.norm != Norm::Identity && self.group_by != Grouping::Batch;
        Contract {
            needs,
            gives: vec![ADVANTAGES],
            group_normalised,
            ..Contract::default()
        }
    }

    fn apply(
        &self,
        batch: &mut Batch,
        _state: &mut AdvantageState,
    ) -> Result<AlgoStats, AlgoError> {
        let (trajs, steps) = read_step_order(batch, NODE)?;
        let mut rewards: Vec<f64> = read_f32(batch, NODE, &SCORE)?
            .iter()
            .map(|&x| x as f64)
            .collect();
        self.shaping.clip_rewards(&mut rewards);
        let returns = step_returns(&rewards, trajs, steps, self.gamma as f64);
        let ids = self.group_by.group_ids(batch, NODE)?;
        let normed = normalise(&returns, &ids, self.norm);
        let mask = read_mask(batch, NODE)?.to_vec();
        let mut adv = broadcast_to_response(batch, &mask, &normed);
        let mut stats = AlgoStats::new();
        self.shaping.finish(&mut adv, &mask, &mut stats);
        write(batch, NODE, &ADVANTAGES, adv)?;
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_batches::{assert_close, f32s, get, u64s, with_masks};
    use roll_flow_engine::batch::column::GROUP_ID;

    #[test]
    fn discounted_then_group_normalised_by_hand() {
        // Trajectory 1: rewards [0, 1] → G = [0.5, 1] (γ = 0.5). Trajectory 2: [0] → 0.
        // Group (all three rows), Mean: mean 0.5 → [0, 0.5, −0.5].
        let mut b = with_masks(&[&[0, 1], &[1, 1], &[0, 1]]);
        f32s(&mut b, &SCORE, &[0.0, 1.0, 0.0]);
        u64s(&mut b, &TRAJECTORY_ID, &[1, 1, 2]);
        u64s(&mut b, &STEP_INDEX, &[0, 1, 0]);
        u64s(&mut b, &GROUP_ID, &[0, 0, 0]);
        let cfg = StepReinforce {
            gamma: 0.5,
            norm: Norm::Mean,
            ..Default::default()
        };
        cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
        assert_close(
            &get(&b, &ADVANTAGES),
            &[0.0, 0.0, 0.5, 0.5, 0.0, -0.5],
            1e-7,
        );
        // Identity keeps the raw returns.
        let cfg = StepReinforce {
            gamma: 0.5,
            norm: Norm::Identity,
            ..Default::default()
        };
        cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
        assert_close(&get(&b, &ADVANTAGES), &[0.0, 0.5, 1.0, 1.0, 0.0, 0.0], 1e-7);
    }

    #[test]
    fn group_of_one_and_zero_std_get_zero() {
        // Group 0: one single-step trajectory. Group 1: two one-step trajectories whose only
        // action was invalid (−0.1 each): equal returns, zero std. Group 2: two trajectories
        // that hit the 2-turn limit with invalid actions: returns [−0.195, −0.1] each.
        let mut b = with_masks(&[&[1], &[1], &[1], &[1], &[1], &[1], &[1]]);
        f32s(&mut b, &SCORE, &[1.0, -0.1, -0.1, -0.1, -0.1, -0.1, -0.1]);
        u64s(&mut b, &TRAJECTORY_ID, &[1, 2, 3, 4, 4, 5, 5]);
        u64s(&mut b, &STEP_INDEX, &[0, 0, 0, 0, 1, 0, 1]);
        u64s(&mut b, &GROUP_ID, &[0, 1, 1, 2, 2, 2, 2]);
        StepReinforce::default()
            .apply(&mut b, &mut AdvantageState::default())
            .unwrap();
        // Group 2: mean −0.1475, unbiased std sqrt(4·0.0475²/3).
        let s = (4.0 * 0.0475f64.powi(2) / 3.0).sqrt() + 1e-6;
        let (lo, hi) = (-0.0475 / s, 0.0475 / s);
        assert_close(
            &get(&b, &ADVANTAGES),
            &[0.0, 0.0, 0.0, lo, hi, lo, hi],
            1e-4,
        );
    }

    #[test]
    fn trajectory_samples_are_refused_clearly() {
        let mut b = with_masks(&[&[1]]);
        f32s(&mut b, &SCORE, &[1.0]);
        let err = StepReinforce::default()
            .estimate(&mut b, &mut AdvantageState::default())
            .unwrap_err();
        assert!(
            err.to_string().contains("samples: Step(history: 2)"),
            "{err}"
        );
    }
}
