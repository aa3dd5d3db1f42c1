//! Bi-level GAE (RAGEN `compute_bi_level_gae_advantage_return`): a turn-level GAE across
//! turns, then a token-level GAE inside each turn.
//!
//! For one trajectory with turns k = 0..K−1, e_k the last response token of turn k
//! (from `token_turn`), r the token rewards and V the critic values:
//! 1. Turn level (γ_turn, λ_turn): δ_k = r(e_k) + γ_turn·V(e_{k+1}) − V(e_k), V(e_K) = 0;
//!    Â_k = δ_k + γ_turn·λ_turn·Â_{k+1}; the turn's return is G_k = Â_k + V(e_k).
//! 2. Token level (γ) inside turn k, backward from e_k: at e_k, A = G_k − V(e_k) (= Â_k);
//!    before it, δ_t = r_t + γ·V_{t+1} − V_t and A_t = δ_t + γλ·A_{t+1}.
//! 3. returns = A + V.
//!
//! Step-wise samples (one per turn, `samples: Step(..)`) are chained back into their
//! trajectory (`trajectory_id`, ordered by `step_index`) for the turn level, so each step
//! bootstraps from the critic's value of the next step: the turn-level abstraction of
//! Verlog's PPO, where every turn is a sample of its own and GAE runs across turns.
//!
//! Difference from RAGEN's code: RAGEN finds turn ends as the tokens with a nonzero reward,
//! which silently merges a zero-reward turn into the next; here turn ends come from
//! `token_turn`. RAGEN always whitens afterwards; here that is `shaping.whiten` (set it to
//! match). Defaults (RAGEN): γ = 1, λ = 1, γ_turn = 0.95, λ_turn = λ.
//!
//! `turn_lambda` (λ_turn) is this engine's addition; RAGEN uses λ at both levels. With
//! λ = 1 inside the reply and λ_turn = 0 across turns, the decision token's advantage is
//! the one-step TD error r_k + γ_turn·V(e_{k+1}) − V(s_k): a move is judged by the value of
//! the state it leads to, not by what the later moves of the same episode did. With λ_turn
//! near 1 a good first move of a detour that a later move spoils is scored as the failure.
//! The price is the critic's bias: from scratch, with a critic that knows nothing yet,
//! λ_turn = 0 left FrozenLake PPO at its random level for 340 steps (bench/history/learning_curve_frozen_lake_ppo.md).
//!
//! RON: `"adv": BiLevelGae(turn_gamma: 0.95, shaping: (whiten: true))`.

use roll_flow_engine::batch::column::{
    ADVANTAGES, RESPONSE_MASK, RETURNS, STEP_INDEX, TOKEN_REWARD, TOKEN_TURN, VALUES,
};
use roll_flow_engine::{Batch, Contract, Need};
use serde::Deserialize;

use super::algo_stats::AlgoStats;
use super::batch_read::{read_i64, read_step_order};
use super::config_check::unit_interval;
use super::discount::trajectory_chains;
use super::error::AlgoError;
use super::estimator::{AdvantageEstimator, AdvantageState};
use super::gae::{fused_gae, CriticEstimator, CriticInputs};
use super::kl_penalty::KlPenalty;
use super::shaping::Shaping;

const NODE: &str = "BiLevelGae";

/// RAGEN's bi-level GAE.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BiLevelGae {
    /// Token-level discount γ (default 1.0).
    pub gamma: f32,
    /// GAE λ inside each reply, and across turns unless `turn_lambda` is set (default 1.0,
    /// RAGEN).
    pub lambda: f32,
    /// GAE λ across turns (default: `lambda`, as in RAGEN).
    pub turn_lambda: Option<f32>,
    /// Turn-level discount γ_turn (RAGEN `high_level_gamma`, default 0.95).
    pub turn_gamma: f32,
    /// Reward clip, whitening, advantage clip (all off by default; RAGEN whitens).
    pub shaping: Shaping,
    /// KL as a token reward penalty; `None` (default) for no penalty.
    pub kl_penalty: Option<KlPenalty>,
}

impl Default for BiLevelGae {
    fn default() -> Self {
        BiLevelGae {
            gamma: 1.0,
            lambda: 1.0,
            turn_lambda: None,
            turn_gamma: 0.95,
            shaping: Shaping::default(),
            kl_penalty: None,
        }
    }
}

impl BiLevelGae {
    /// λ_turn: `turn_lambda`, or `lambda` when it is not set.
    pub fn turn_level_lambda(&self) -> f32 {
        self.turn_lambda.unwrap_or(self.lambda)
    }

    /// The whole batch with two scans of the fused GAE kernel: (advantages, returns).
    ///
    /// 1. Turn level: GAE (γ_turn, λ_turn) over each trajectory's turn ends e_0, e_1, …
    ///    gathered into one short sequence, so the "next value" of e_k is V(e_{k+1}): Â_k
    ///    at e_k. A trajectory is one sample (trajectory-wise) or, given `steps`
    ///    (trajectory id and step index per sample), the chain of its step samples in step
    ///    order.
    /// 2. Token level: GAE (γ, λ) with each turn as a sequence of its own (boundaries after
    ///    every e_k) and the reward at e_k replaced by Â_k + V(e_k), so that at e_k
    ///    A = (Â_k + V(e_k)) − V(e_k) = Â_k and the scan continues backward from it.
    fn fused(
        &self,
        x: &CriticInputs<'_>,
        turns: &[i64],
        steps: Option<(&[u64], &[u64])>,
    ) -> Result<(Vec<f32>, Vec<f32>), AlgoError> {
        let (sample_ends, turn_offsets) = turn_ends(x, turns);
        let chains: Vec<Vec<usize>> = match steps {
            None => sample_ends,
            Some((trajectory, step)) => trajectory_chains(trajectory, step)
                .iter()
                .map(|rows| {
                    rows.iter()
                        .flat_map(|&i| sample_ends[i].iter().copied())
                        .collect()
                })
                .collect(),
        };
        let ends = chains.concat();
        let chain_offsets: Vec<usize> = std::iter::once(0)
            .chain(chains.iter().scan(0, |end, c| {
                *end += c.len();
                Some(*end)
            }))
            .collect();
        let gather = |v: &[f32]| ends.iter().map(|&t| v[t]).collect::<Vec<f32>>();
        let turn_level = CriticInputs {
            rewards: &gather(x.rewards),
            values: &gather(x.values),
            mask: &vec![1.0; ends.len()],
            offsets: &chain_offsets,
        };
        let (turn_adv, _) =
            fused_gae(NODE, &turn_level, self.turn_gamma, self.turn_level_lambda())?;
        let mut rewards = x.rewards.to_vec();
        for (&t, a) in ends.iter().zip(turn_adv) {
            rewards[t] = a + x.values[t];
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
        let (gt, g, lam, turn_lam) = (
            self.turn_gamma as f64,
            self.gamma as f64,
            self.lambda as f64,
            self.turn_level_lambda() as f64,
        );
        let mut turn_adv = vec![0.0; ends.len()];
        let mut next_adv = 0.0;
        for j in (0..ends.len()).rev() {
            let next_value = ends.get(j + 1).map_or(0.0, |&e| values[e]);
            let delta = rewards[ends[j]] + gt * next_value - values[ends[j]];
            next_adv = delta + gt * turn_lam * next_adv;
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

/// Each sample's turn ends (its last response token of every turn, in order) and the
/// packed offsets that make every turn a sequence of its own.
fn turn_ends(x: &CriticInputs<'_>, turns: &[i64]) -> (Vec<Vec<usize>>, Vec<usize>) {
    let mut sample_ends = Vec::with_capacity(x.offsets.len().saturating_sub(1));
    let mut turn_offsets = vec![0];
    for w in x.offsets.windows(2) {
        let response: Vec<usize> = (w[0]..w[1]).filter(|&t| x.mask[t] != 0.0).collect();
        let mut ends = Vec::new();
        for (k, &t) in response.iter().enumerate() {
            if response.get(k + 1).is_none_or(|&u| turns[u] != turns[t]) {
                ends.push(t);
                if t + 1 < w[1] {
                    turn_offsets.push(t + 1);
                }
            }
        }
        turn_offsets.push(w[1]);
        sample_ends.push(ends);
    }
    (sample_ends, turn_offsets)
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
        unit_interval(NODE, "turn_lambda", self.turn_level_lambda())?;
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
            ..Contract::default()
        }
    }

    fn apply(&self, batch: &mut Batch, state: &mut AdvantageState) -> Result<AlgoStats, AlgoError> {
        let turns = read_i64(batch, NODE, &TOKEN_TURN)?.to_vec();
        let steps = step_chain_columns(batch)?;
        let estimator = CriticEstimator {
            node: NODE,
            shaping: &self.shaping,
            kl_penalty: self.kl_penalty.as_ref(),
        };
        let steps = steps.as_ref().map(|(t, s)| (t.as_slice(), s.as_slice()));
        estimator.apply(batch, state, |x| self.fused(x, &turns, steps))
    }
}

/// Per sample: (trajectory id, step index).
type StepColumns = (Vec<u64>, Vec<u64>);

/// Step-wise samples' trajectory ids and step indices, copied out of the batch the
/// estimator then writes to (`None` for trajectory-wise samples).
fn step_chain_columns(batch: &Batch) -> Result<Option<StepColumns>, AlgoError> {
    if !batch.has(&STEP_INDEX) {
        return Ok(None);
    }
    let (trajectory, steps) = read_step_order(batch, NODE)?;
    Ok(Some((trajectory.to_vec(), steps.to_vec())))
}

#[cfg(test)]
#[path = "bi_level_gae_tests.rs"]
mod tests;
