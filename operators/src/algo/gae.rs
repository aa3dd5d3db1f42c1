//! GAE: generalised advantage estimation with a critic (PPO), token-level.
//!
//! Over each sample's response tokens only, in order (REFERENCE.md, ROLL
//! `compute_gae_advantage_return`, Schulman et al. 2016 eq. 16):
//! - δ_t = r_t + γ·V_{t+1} − V_t, with V past the last response token = 0;
//! - A_t = δ_t + γλ·A_{t+1};
//! - returns_t = A_t + V_t.
//!
//! r_t is `token_reward` (each turn's reward on its last response token), reward-clipped
//! per turn when `shaping.reward_clip` is set, minus β·KL_t when `kl_penalty` is on.
//! Observation tokens between turns are skipped, so a multi-turn trajectory is one chain.
//! Defaults (ROLL): γ = 1, λ = 0.95.
//!
//! RON: `"adv": Gae(gamma: 1.0, lambda: 0.95)`.

use roll_flow_engine::batch::column::{ADVANTAGES, RETURNS, TOKEN_REWARD, VALUES};
use roll_flow_engine::{Batch, Contract, Need};
use serde::Deserialize;

use super::batch_read::{read_f32, read_mask, response_positions, write};
use super::config_check::unit_interval;
use super::error::AlgoError;
use super::estimator::{AdvantageEstimator, AdvantageState, AlgoStats};
use super::kl_penalty::KlPenalty;
use super::shaping::Shaping;

const NODE: &str = "Gae";

/// The steps every critic-based estimator shares: response-token rewards (reward clip,
/// then the KL penalty), the critic's values, each sample's advantages and returns from
/// `per_sample(positions, rewards, values)`, then whitening and advantage clipping.
pub(super) struct CriticEstimator<'a> {
    pub node: &'static str,
    pub shaping: &'a Shaping,
    pub kl_penalty: Option<&'a KlPenalty>,
}

impl CriticEstimator<'_> {
    pub fn apply(
        &self,
        batch: &mut Batch,
        state: &mut AdvantageState,
        mut per_sample: impl FnMut(&[usize], &[f64], &[f64]) -> (Vec<f64>, Vec<f64>),
    ) -> Result<AlgoStats, AlgoError> {
        let mut stats = AlgoStats::new();
        let mask = read_mask(batch, self.node)?.to_vec();
        let mut rewards = response_rewards(batch, self.node, &mask)?;
        self.shaping.clip_rewards(&mut rewards);
        if let Some(kl) = self.kl_penalty {
            kl.apply(self.node, batch, &mask, &mut rewards, state, &mut stats)?;
        }
        let values = read_f32(batch, self.node, &VALUES, "add a Values node upstream")?;
        let mut adv = vec![0.0f32; batch.num_tokens()];
        let mut ret = vec![0.0f32; batch.num_tokens()];
        for i in 0..batch.num_samples() {
            let pos = response_positions(batch, &mask, i);
            let r: Vec<f64> = pos.iter().map(|&t| rewards[t]).collect();
            let v: Vec<f64> = pos.iter().map(|&t| values[t] as f64).collect();
            let (a, g) = per_sample(&pos, &r, &v);
            for (k, &t) in pos.iter().enumerate() {
                adv[t] = a[k] as f32;
                ret[t] = g[k] as f32;
            }
        }
        self.shaping.finish(&mut adv, &mask, &mut stats);
        write(batch, self.node, &ADVANTAGES, adv)?;
        write(batch, self.node, &RETURNS, ret)?;
        Ok(stats)
    }
}

fn one() -> f32 {
    1.0
}

fn default_lambda() -> f32 {
    0.95
}

/// GAE with a critic.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gae {
    /// Discount γ (default 1.0, ROLL).
    #[serde(default = "one")]
    pub gamma: f32,
    /// GAE λ (default 0.95, ROLL).
    #[serde(default = "default_lambda")]
    pub lambda: f32,
    /// Reward clip, whitening, advantage clip (all off by default).
    #[serde(default)]
    pub shaping: Shaping,
    /// KL as a token reward penalty; `None` (default) for no penalty.
    #[serde(default)]
    pub kl_penalty: Option<KlPenalty>,
}

impl Default for Gae {
    fn default() -> Self {
        Gae {
            gamma: 1.0,
            lambda: 0.95,
            shaping: Shaping::default(),
            kl_penalty: None,
        }
    }
}

/// GAE over one response sequence: returns (advantages, returns).
pub fn gae(rewards: &[f64], values: &[f64], gamma: f64, lambda: f64) -> (Vec<f64>, Vec<f64>) {
    let n = rewards.len();
    let (mut adv, mut ret) = (vec![0.0; n], vec![0.0; n]);
    let (mut next_value, mut next_adv) = (0.0, 0.0);
    for t in (0..n).rev() {
        let delta = rewards[t] + gamma * next_value - values[t];
        next_adv = delta + gamma * lambda * next_adv;
        adv[t] = next_adv;
        ret[t] = next_adv + values[t];
        next_value = values[t];
    }
    (adv, ret)
}

/// Token rewards as f64, refusing a reward placed outside the response (it would be lost).
pub(crate) fn response_rewards(
    batch: &Batch,
    node: &'static str,
    mask: &[bool],
) -> Result<Vec<f64>, AlgoError> {
    let rewards = read_f32(batch, node, &TOKEN_REWARD, "the Rollout node gives it")?;
    if let Some(t) = (0..rewards.len()).find(|&t| !mask[t] && rewards[t] != 0.0) {
        return Err(AlgoError::invalid(
            node,
            format!("`token_reward` is {} on token {t}, which is outside `response_mask`; rewards must sit on response tokens", rewards[t]),
        ));
    }
    Ok(rewards.iter().map(|&r| r as f64).collect())
}

impl AdvantageEstimator for Gae {
    fn shaping(&self) -> &Shaping {
        &self.shaping
    }

    fn kind(&self) -> &'static str {
        NODE
    }

    fn validate(&self) -> Result<(), AlgoError> {
        unit_interval(NODE, "gamma", self.gamma)?;
        unit_interval(NODE, "lambda", self.lambda)?;
        if let Some(kl) = &self.kl_penalty {
            kl.validate(NODE)?;
        }
        self.shaping.validate(NODE)
    }

    fn contract(&self) -> Contract {
        let mut needs = vec![
            Need::column(roll_flow_engine::batch::column::RESPONSE_MASK),
            Need::column(TOKEN_REWARD),
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
        let (gamma, lambda) = (self.gamma as f64, self.lambda as f64);
        let estimator = CriticEstimator {
            node: NODE,
            shaping: &self.shaping,
            kl_penalty: self.kl_penalty.as_ref(),
        };
        estimator.apply(batch, state, |_, r, v| gae(r, v, gamma, lambda))
    }
}

#[cfg(test)]
#[path = "gae_tests.rs"]
mod tests;
