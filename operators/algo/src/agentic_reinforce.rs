//! Agentic-REINFORCE (ROLL): turn-level discounted returns on trajectory-wise samples.
//!
//! With r_k the reward of turn k (the sum of `token_reward` over turn k's response tokens,
//! i.e. the turn reward the rollout put on its last token), every response token of turn k
//! gets G_k = r_k + γ·G_{k+1}: the discounted return from that turn to the end of the
//! trajectory. Turns are identified by `token_turn`. A trajectory cut off by the turn limit
//! is treated as terminal (no bootstrap), as in ROLL. Default γ = 1.0; AReaL's multi-turn
//! math example discounts turn rewards backward with γ = 0.9
//! (`apply_reward_discount(turn_discount=0.9)`). Shaping: `reward_clip` clips each turn reward.
//!
//! RON: `"adv": AgenticReinforce(gamma: 0.9)`.

use std::collections::BTreeMap;

use roll_flow_engine::batch::column::{ADVANTAGES, RESPONSE_MASK, TOKEN_REWARD, TOKEN_TURN};
use roll_flow_engine::{Batch, Contract, Need};
use serde::Deserialize;

use super::algo_stats::AlgoStats;
use super::batch_read::{read_i64, read_mask, response_positions, write};
use super::config_check::unit_interval;
use super::discount::discounted_returns;
use super::error::AlgoError;
use super::estimator::{AdvantageEstimator, AdvantageState};
use super::gae::response_rewards;
use super::shaping::Shaping;

const NODE: &str = "AgenticReinforce";

/// Agentic-REINFORCE advantages.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgenticReinforce {
    /// Discount γ between turns (default 1.0).
    pub gamma: f32,
    /// Reward clip (per turn), whitening, advantage clip.
    pub shaping: Shaping,
}

impl Default for AgenticReinforce {
    fn default() -> Self {
        AgenticReinforce {
            gamma: 1.0,
            shaping: Shaping::default(),
        }
    }
}

impl AgenticReinforce {
    /// Per-turn returns of one sample, keyed by turn index.
    fn turn_returns(&self, pos: &[usize], turns: &[i64], rewards: &[f64]) -> BTreeMap<i64, f64> {
        let mut per_turn: BTreeMap<i64, f64> = BTreeMap::new();
        for &t in pos {
            *per_turn.entry(turns[t]).or_default() += rewards[t];
        }
        let mut r: Vec<f64> = per_turn.values().copied().collect();
        self.shaping.clip_rewards(&mut r);
        per_turn
            .keys()
            .copied()
            .zip(discounted_returns(&r, self.gamma as f64))
            .collect()
    }
}

impl AdvantageEstimator for AgenticReinforce {
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
        Contract {
            needs: vec![
                Need::column(RESPONSE_MASK),
                Need::column(TOKEN_REWARD),
                Need::column(TOKEN_TURN),
            ],
            gives: vec![ADVANTAGES],
            ..Contract::default()
        }
    }

    fn apply(
        &self,
        batch: &mut Batch,
        _state: &mut AdvantageState,
    ) -> Result<AlgoStats, AlgoError> {
        let mask = read_mask(batch, NODE)?.to_vec();
        let rewards = response_rewards(batch, NODE, &mask)?;
        let turns = read_i64(batch, NODE, &TOKEN_TURN)?;
        let mut adv = vec![0.0f32; batch.num_tokens()];
        for i in 0..batch.num_samples() {
            let pos = response_positions(batch, &mask, i);
            let returns = self.turn_returns(&pos, turns, &rewards);
            for &t in &pos {
                adv[t] = returns[&turns[t]] as f32;
            }
        }
        let mut stats = AlgoStats::new();
        self.shaping.finish(&mut adv, &mask, &mut stats);
        write(batch, NODE, &ADVANTAGES, adv)?;
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_batches::{assert_close, f32s, get, with_masks};

    fn math_batch() -> Batch {
        // Sample 0: 3 turns (prompt, 2 answer tokens, feedback, ...): wrong, wrong, right.
        // Sample 1: hits the 2-turn limit with two wrong answers.
        // Sample 2: a single response token answering right at once.
        let mut b = with_masks(&[&[0, 1, 1, 0, 1, 0, 1], &[0, 1, 0, 1], &[1]]);
        f32s(
            &mut b,
            &TOKEN_REWARD,
            &[
                0.0, 0.0, -1.0, 0.0, -1.0, 0.0, 1.0, 0.0, -1.0, 0.0, -1.0, 1.0,
            ],
        );
        b.set(&TOKEN_TURN, vec![0i64, 0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 0])
            .unwrap();
        b
    }

    #[test]
    fn turn_returns_by_hand() {
        // γ = 0.5. Sample 0: r = [−1, −1, 1] → G = [−1.25, −0.5, 1].
        // Sample 1: r = [−1, −1] → G = [−1.5, −1]. Sample 2: G = [1].
        let mut b = math_batch();
        AgenticReinforce {
            gamma: 0.5,
            ..Default::default()
        }
        .apply(&mut b, &mut AdvantageState::default())
        .unwrap();
        let want = [
            0.0, -1.25, -1.25, 0.0, -0.5, 0.0, 1.0, 0.0, -1.5, 0.0, -1.0, 1.0,
        ];
        assert_close(&get(&b, &ADVANTAGES), &want, 1e-7);
    }

    #[test]
    fn reward_clip_per_turn() {
        let mut b = math_batch();
        let cfg = AgenticReinforce {
            gamma: 1.0,
            shaping: Shaping {
                reward_clip: Some(0.5),
                ..Default::default()
            },
        };
        cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
        let want = [
            0.0, -0.5, -0.5, 0.0, 0.0, 0.0, 0.5, 0.0, -1.0, 0.0, -0.5, 0.5,
        ];
        assert_close(&get(&b, &ADVANTAGES), &want, 1e-7);
    }

    #[test]
    fn missing_turns_column_is_named() {
        let mut b = with_masks(&[&[1]]);
        f32s(&mut b, &TOKEN_REWARD, &[1.0]);
        let err = AgenticReinforce::default()
            .apply(&mut b, &mut AdvantageState::default())
            .unwrap_err();
        assert!(err.to_string().contains("`token_turn`"), "{err}");
    }
}
