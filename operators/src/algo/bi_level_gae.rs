//! Bi-level GAE (RAGEN `compute_bi_level_gae_advantage_return`): a turn-level GAE across
//! turns, then a token-level GAE inside each turn.
//!
//! For one trajectory with turns k = 0..K−1, e_k the last response token of turn k
//! (from `token_turn`), r the token rewards and V the critic values:
//! 1. Turn level (γ_turn): δ_k = r(e_k) + γ_turn·V(e_{k+1}) − V(e_k), V(e_K) = 0;
//!    Â_k = δ_k + γ_turn·λ·Â_{k+1}; the turn's return is G_k = Â_k + V(e_k).
//! 2. Token level (γ) inside turn k, backward from e_k: at e_k, A = G_k − V(e_k) (= Â_k);
//!    before it, δ_t = r_t + γ·V_{t+1} − V_t and A_t = δ_t + γλ·A_{t+1}.
//! 3. returns = A + V.
//!
//! Difference from RAGEN's code: RAGEN finds turn ends as the tokens with a nonzero reward,
//! which silently merges a zero-reward turn into the next; here turn ends come from
//! `token_turn`. RAGEN always whitens afterwards; here that is `shaping.whiten` (set it to
//! match). Defaults (RAGEN): γ = 1, λ = 1, γ_turn = 0.95.
//!
//! RON: `"adv": BiLevelGae(turn_gamma: 0.95, shaping: (whiten: true))`.

use roll_flow_engine::batch::column::{
    ADVANTAGES, RESPONSE_MASK, RETURNS, TOKEN_REWARD, TOKEN_TURN, VALUES,
};
use roll_flow_engine::{Batch, Contract, Need};
use serde::Deserialize;

use super::batch_read::read_i64;
use super::config_check::unit_interval;
use super::error::AlgoError;
use super::estimator::{AdvantageEstimator, AdvantageState, AlgoStats};
use super::gae::{fused_gae, CriticEstimator, CriticInputs};
use super::kl_penalty::KlPenalty;
use super::shaping::Shaping;

const NODE: &str = "BiLevelGae";

fn one() -> f32 {
    1.0
}

fn default_turn_gamma() -> f32 {
    0.95
}

/// RAGEN's bi-level GAE.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BiLevelGae {
    /// Token-level discount γ (default 1.0).
    #[serde(default = "one")]
    pub gamma: f32,
    /// GAE λ, used at both levels (default 1.0, RAGEN).
    #[serde(default = "one")]
    pub lambda: f32,
    /// Turn-level discount γ_turn (RAGEN `high_level_gamma`, default 0.95).
    #[serde(default = "default_turn_gamma")]
    pub turn_gamma: f32,
    /// Reward clip, whitening, advantage clip (all off by default; RAGEN whitens).
    #[serde(default)]
    pub shaping: Shaping,
    /// KL as a token reward penalty; `None` (default) for no penalty.
    #[serde(default)]
    pub kl_penalty: Option<KlPenalty>,
}

impl Default for BiLevelGae {
    fn default() -> Self {
        BiLevelGae {
            gamma: 1.0,
            lambda: 1.0,
            turn_gamma: 0.95,
            shaping: Shaping::default(),
            kl_penalty: None,
        }
    }
}

impl BiLevelGae {
    /// The whole batch with two scans of the fused GAE kernel: (advantages, returns).
    ///
    /// 1. Turn level: GAE (γ_turn, λ) over the turn-end tokens only (the mask keeps just
    ///    them), so the "next value" of e_k is V(e_{k+1}): Â_k at e_k.
    /// 2. Token level: GAE (γ, λ) with each turn as a sequence of its own (boundaries after
    ///    every e_k) and the reward at e_k replaced by Â_k + V(e_k), so that at e_k
    ///    A = (Â_k + V(e_k)) − V(e_k) = Â_k and the scan continues backward from it.
    fn fused(
        &self,
        x: &CriticInputs<'_>,
        turns: &[i64],
    ) -> Result<(Vec<f32>, Vec<f32>), AlgoError> {
        let mut ends = vec![0.0f32; x.mask.len()];
        let mut turn_offsets = vec![0];
        for w in x.offsets.windows(2) {
            let response: Vec<usize> = (w[0]..w[1]).filter(|&t| x.mask[t] != 0.0).collect();
            for (k, &t) in response.iter().enumerate() {
                if response.get(k + 1).is_none_or(|&u| turns[u] != turns[t]) {
                    ends[t] = 1.0;
                    if t + 1 < w[1] {
                        turn_offsets.push(t + 1);
                    }
                }
            }
            turn_offsets.push(w[1]);
        }
        let turn_level = CriticInputs { mask: &ends, ..*x };
        let (turn_adv, _) = fused_gae(NODE, &turn_level, self.turn_gamma, self.lambda)?;
        let mut rewards = x.rewards.to_vec();
        for (t, _) in ends.iter().enumerate().filter(|(_, &e)| e != 0.0) {
            rewards[t] = turn_adv[t] + x.values[t];
        }
        let token_level = CriticInputs {
            rewards: &rewards,
            offsets: &turn_offsets,
            ..*x
        };
        fused_gae(NODE, &token_level, self.gamma, self.lambda)
    }

    /// Bi-level GAE over one sample's response tokens in f64, the formula of the module
    /// docs step by step (the reference of the fused [`AdvantageEstimator::apply`]);
    /// `turns` are their turn ids (non-decreasing). Returns (advantages, returns).
    pub fn sequence(&self, rewards: &[f64], values: &[f64], turns: &[i64]) -> (Vec<f64>, Vec<f64>) {
        let n = rewards.len();
        let ends: Vec<usize> = (0..n)
            .filter(|&k| k + 1 == n || turns[k + 1] != turns[k])
            .collect();
        let (gt, g, lam) = (
            self.turn_gamma as f64,
            self.gamma as f64,
            self.lambda as f64,
        );
        let mut turn_adv = vec![0.0; ends.len()];
        let mut next_adv = 0.0;
        for j in (0..ends.len()).rev() {
            let next_value = ends.get(j + 1).map_or(0.0, |&e| values[e]);
            let delta = rewards[ends[j]] + gt * next_value - values[ends[j]];
            next_adv = delta + gt * lam * next_adv;
            turn_adv[j] = next_adv;
        }
        let mut adv = vec![0.0; n];
        let mut is_end = vec![None; n];
        for (j, &e) in ends.iter().enumerate() {
            is_end[e] = Some(j);
        }
        let mut last = 0.0;
        for t in (0..n).rev() {
            last = match is_end[t] {
                Some(j) => turn_adv[j],
                None => rewards[t] + g * values[t + 1] - values[t] + g * lam * last,
            };
            adv[t] = last;
        }
        let ret = adv.iter().zip(values).map(|(a, v)| a + v).collect();
        (adv, ret)
    }
}

impl AdvantageEstimator for BiLevelGae {
    fn shaping(&self) -> &Shaping {
        &self.shaping
    }

    fn kind(&self) -> &'static str {
        NODE
    }

    fn validate(&self) -> Result<(), AlgoError> {
        unit_interval(NODE, "gamma", self.gamma)?;
        unit_interval(NODE, "lambda", self.lambda)?;
        unit_interval(NODE, "turn_gamma", self.turn_gamma)?;
        if let Some(kl) = &self.kl_penalty {
            kl.validate(NODE)?;
        }
        self.shaping.validate(NODE)
    }

    fn contract(&self) -> Contract {
        let mut needs = vec![
            Need::column(RESPONSE_MASK),
            Need::column(TOKEN_REWARD),
            Need::column(TOKEN_TURN),
            Need::with_hint(VALUES, "add a Values node upstream"),
        ];
        needs.extend(self.kl_penalty.iter().flat_map(KlPenalty::needs));
        Contract {
            needs,
            gives: vec![ADVANTAGES, RETURNS],
            group_normalised: false,
        }
    }

    fn apply(&self, batch: &mut Batch, state: &mut AdvantageState) -> Result<AlgoStats, AlgoError> {
        let turns = read_i64(batch, NODE, &TOKEN_TURN, "the Rollout node gives it")?.to_vec();
        let estimator = CriticEstimator {
            node: NODE,
            shaping: &self.shaping,
            kl_penalty: self.kl_penalty.as_ref(),
        };
        estimator.apply(batch, state, |x| self.fused(x, &turns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::gae::gae;
    use crate::algo::test_batches::{assert_close, f32s, get, with_masks};

    #[test]
    fn ragen_example_by_hand() {
        // RAGEN's own example: rewards at tokens 4 and 9, values 0.1..1.0, γ = λ = 1,
        // γ_turn = 0.95. Turn level: Â_1 = 1 − 1.0 = 0, Â_0 = 1 + 0.95·1.0 − 0.5 = 1.45.
        // Token level: turn 1 tokens 5..8 add 0.1 per step back from 0; turn 0 from 1.45.
        let mut b = with_masks(&[&[1; 10]]);
        f32s(
            &mut b,
            &TOKEN_REWARD,
            &[0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        );
        f32s(
            &mut b,
            &VALUES,
            &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
        );
        b.set(&TOKEN_TURN, vec![0i64, 0, 0, 0, 0, 1, 1, 1, 1, 1])
            .unwrap();
        BiLevelGae::default()
            .apply(&mut b, &mut AdvantageState::default())
            .unwrap();
        let want = [1.85, 1.75, 1.65, 1.55, 1.45, 0.4, 0.3, 0.2, 0.1, 0.0];
        assert_close(&get(&b, &ADVANTAGES), &want, 1e-5);
        let values = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];
        let ret: Vec<f64> = want.iter().zip(values).map(|(a, v)| a + v).collect();
        assert_close(&get(&b, &RETURNS), &ret, 1e-5);
    }

    #[test]
    fn single_turn_is_plain_gae() {
        // One turn: the turn level gives r(e) − V(e), the token level is then GAE.
        let cfg = BiLevelGae {
            gamma: 0.9,
            lambda: 0.8,
            ..Default::default()
        };
        let (r, v) = ([0.0, 0.3, 1.0], [0.2, 0.5, 0.4]);
        let (a, _) = cfg.sequence(&r, &v, &[0, 0, 0]);
        let (want, _) = gae(&r, &v, cfg.gamma as f64, cfg.lambda as f64);
        for (x, y) in a.iter().zip(want) {
            assert!((x - y).abs() < 1e-12);
        }
    }

    #[test]
    fn fused_batch_matches_per_sample_reference() {
        // Three samples: prompt, turns split by observation tokens, an empty response.
        let masks: [&[u8]; 3] = [&[0, 1, 1, 0, 1, 1, 1], &[0, 0, 1, 0, 1], &[0, 0]];
        let turns = [0i64, 0, 0, 1, 1, 1, 2, 0, 0, 0, 1, 1, 0, 0];
        let mut b = with_masks(&masks);
        let flat: Vec<u8> = masks.concat();
        let rewards: Vec<f32> = (0..flat.len())
            .map(|t| f32::from(flat[t]) * (0.3 * t as f32).sin())
            .collect();
        let values: Vec<f32> = (0..flat.len()).map(|t| (0.7 * t as f32).cos()).collect();
        f32s(&mut b, &TOKEN_REWARD, &rewards);
        f32s(&mut b, &VALUES, &values);
        b.set(&TOKEN_TURN, turns.to_vec()).unwrap();
        let cfg = BiLevelGae {
            gamma: 0.9,
            lambda: 0.8,
            turn_gamma: 0.95,
            ..Default::default()
        };
        cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
        let (mut want_adv, mut want_ret) = (vec![0.0; flat.len()], vec![0.0; flat.len()]);
        for w in b.offsets().windows(2) {
            let pos: Vec<usize> = (w[0]..w[1]).filter(|&t| flat[t] == 1).collect();
            let r: Vec<f64> = pos.iter().map(|&t| rewards[t] as f64).collect();
            let v: Vec<f64> = pos.iter().map(|&t| values[t] as f64).collect();
            let tt: Vec<i64> = pos.iter().map(|&t| turns[t]).collect();
            let (a, g) = cfg.sequence(&r, &v, &tt);
            for (k, &t) in pos.iter().enumerate() {
                (want_adv[t], want_ret[t]) = (a[k], g[k]);
            }
        }
        assert_close(&get(&b, &ADVANTAGES), &want_adv, 1e-5);
        assert_close(&get(&b, &RETURNS), &want_ret, 1e-5);
    }

    #[test]
    fn zero_reward_turn_keeps_its_own_end() {
        // Two one-token turns, the first with reward 0 (RAGEN would merge them).
        // Â_1 = 1 − 0.5 = 0.5; Â_0 = 0 + 0.95·0.5 − 0.25 + 0.95·0.5 = 0.7.
        let (a, _) = BiLevelGae::default().sequence(&[0.0, 1.0], &[0.25, 0.5], &[0, 1]);
        assert!(
            (a[0] - 0.7).abs() < 1e-6 && (a[1] - 0.5).abs() < 1e-12,
            "{a:?}"
        );
    }
}
