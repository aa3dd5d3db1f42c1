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
//! On step-wise samples every step is a sequence of its own, so a step that does not end
//! the episode bootstraps from nothing; [`super::bi_level_gae::BiLevelGae`] chains the
//! steps of each trajectory instead (what `pipelines/frozen_lake_ppo.ron` uses).
//!
//! The scan runs over the whole packed batch in one call of the fused kernel
//! ([`roll_flow_kernels::gae`]: sequences in parallel, f64 accumulation).
//!
//! RON: `"adv": Gae(gamma: 1.0, lambda: 0.95)`.

use burn::tensor::{Tensor, TensorData};
use roll_flow_engine::batch::column::{ADVANTAGES, RETURNS, TOKEN_REWARD, VALUES};
use roll_flow_engine::{Batch, Contract, Need};
use serde::Deserialize;

use super::algo_stats::AlgoStats;
use super::batch_read::{read_f32, read_mask, write};
use super::config_check::unit_interval;
use super::error::AlgoError;
use super::estimator::{AdvantageEstimator, AdvantageState};
use super::kl_penalty::KlPenalty;
use super::shaping::Shaping;

const NODE: &str = "Gae";

/// The steps every critic-based estimator shares: response-token rewards (reward clip,
/// then the KL penalty), the critic's values, the whole batch's advantages and returns
/// from `estimate`, then whitening and advantage clipping.
pub(super) struct CriticEstimator<'a> {
    pub node: &'static str,
    pub shaping: &'a Shaping,
    pub kl_penalty: Option<&'a KlPenalty>,
}

/// The packed per-token inputs of a critic-based estimator (0 off the response mask).
#[derive(Clone, Copy)]
pub(super) struct CriticInputs<'a> {
    pub rewards: &'a [f32],
    pub values: &'a [f32],
    /// The response mask as 0/1.
    pub mask: &'a [f32],
    /// Sample boundaries `[0, …, tokens]`.
    pub offsets: &'a [usize],
}

impl CriticEstimator<'_> {
    pub fn apply(
        &self,
        batch: &mut Batch,
        state: &mut AdvantageState,
        estimate: impl FnOnce(&CriticInputs<'_>) -> Result<(Vec<f32>, Vec<f32>), AlgoError>,
    ) -> Result<AlgoStats, AlgoError> {
        let mut stats = AlgoStats::new();
        let mask = read_mask(batch, self.node)?.to_vec();
        let mut rewards = response_rewards(batch, self.node, &mask)?;
        self.shaping.clip_rewards(&mut rewards);
        if let Some(kl) = self.kl_penalty {
            kl.apply(self.node, batch, &mask, &mut rewards, state, &mut stats)?;
        }
        let values = read_f32(batch, self.node, &VALUES)?;
        let rewards: Vec<f32> = rewards.iter().map(|&r| r as f32).collect();
        let mask_f32: Vec<f32> = mask.iter().map(|&m| f32::from(u8::from(m))).collect();
        let (mut adv, ret) = estimate(&CriticInputs {
            rewards: &rewards,
            values,
            mask: &mask_f32,
            offsets: batch.offsets(),
        })?;
        self.shaping.finish(&mut adv, &mask, &mut stats);
        write(batch, self.node, &ADVANTAGES, adv)?;
        write(batch, self.node, &RETURNS, ret)?;
        Ok(stats)
    }
}

/// GAE over packed sequences with the fused kernel ([`roll_flow_kernels::gae`], on the
/// CPU backend, burn's `Flex`): (advantages, returns), 0 off the mask. The batch's columns
/// are host data, so the estimator runs where they are, whatever device the models use.
pub(super) fn fused_gae(
    node: &'static str,
    x: &CriticInputs<'_>,
    gamma: f32,
    lambda: f32,
) -> Result<(Vec<f32>, Vec<f32>), AlgoError> {
    let device = Default::default();
    let column = |v: &[f32]| {
        Tensor::<burn::backend::Flex, 1>::from_data(TensorData::new(v.to_vec(), [v.len()]), &device)
    };
    let host = |t: Tensor<burn::backend::Flex, 1>| t.into_data().into_vec::<f32>();
    let (adv, ret) = roll_flow_kernels::gae(
        column(x.rewards),
        column(x.values),
        column(x.mask),
        x.offsets,
        gamma,
        lambda,
    )
    .map_err(|e| AlgoError::invalid(node, e.to_string()))?;
    match (host(adv), host(ret)) {
        (Ok(adv), Ok(ret)) => Ok((adv, ret)),
        (Err(e), _) | (_, Err(e)) => Err(AlgoError::invalid(node, format!("{e:?}"))),
    }
}

/// GAE with a critic.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Gae {
    /// Discount γ (default 1.0, ROLL).
    pub gamma: f32,
    /// GAE λ (default 0.95, ROLL).
    pub lambda: f32,
    /// Reward clip, whitening, advantage clip (all off by default).
    pub shaping: Shaping,
    /// KL as a token reward penalty; `None` (default) for no penalty.
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

/// GAE over one response sequence in f64: (advantages, returns). The formula of the
/// module docs, kept as the per-sequence reference ([`Gae`] itself runs the fused kernel).
pub use roll_flow_kernels::reference::gae_sequence as gae;

/// Token rewards as f64, refusing a reward placed outside the response (it would be lost).
pub(crate) fn response_rewards(
    batch: &Batch,
    node: &'static str,
    mask: &[bool],
) -> Result<Vec<f64>, AlgoError> {
    let rewards = read_f32(batch, node, &TOKEN_REWARD)?;
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
            ..Contract::default()
        }
    }

    fn apply(&self, batch: &mut Batch, state: &mut AdvantageState) -> Result<AlgoStats, AlgoError> {
        let estimator = CriticEstimator {
            node: NODE,
            shaping: &self.shaping,
            kl_penalty: self.kl_penalty.as_ref(),
        };
        estimator.apply(batch, state, |x| {
            fused_gae(NODE, x, self.gamma, self.lambda)
        })
    }
}

#[cfg(test)]
#[path = "gae_tests.rs"]
mod tests;
