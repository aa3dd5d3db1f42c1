//! GRPO: group-normalised scores as discounted token returns (ROLL's `grpo` advantage
//! estimator; Shao et al. 2024, DeepSeekMath, outcome supervision).
//!
//! For each sample (ROLL `compute_response_level_rewards` + `compute_reinforce_return`):
//! 1. s = `score`, clipped by `shaping.reward_clip`;
//! 2. ŝ = s normalised within the configured grouping ([`Grouping`], [`Norm`]):
//!    (s − mean)/(std + 1e-6) under `MeanStd`; a group of one or with std ≤ 1e-6 gets 0;
//! 3. ŝ is placed on the sample's last response token, minus β·KL_t on every response
//!    token when `kl_penalty` is on;
//! 4. A_t = G_t = r_t + γ·G_{t+1} over the response tokens (reverse discounted sum).
//!
//! Defaults: group by trajectory `Group`, `MeanStd`, γ = 1 (verl/ROLL GRPO).
//! [`super::reinforce::Reinforce`] is the same computation with a batch-mean baseline; the
//! steps above are shared with it (`Settings`).
//!
//! RON: `"adv": Grpo(norm: MeanStd)`.

use roll_flow_engine::batch::column::{ADVANTAGES, RESPONSE_MASK, RETURNS, SCORE};
use roll_flow_engine::{Batch, Contract, Need};
use serde::Deserialize;

use super::algo_stats::AlgoStats;
use super::batch_read::{read_f32, read_mask, response_positions, write};
use super::config_check::unit_interval;
use super::discount::discounted_returns;
use super::error::AlgoError;
use super::estimator::{AdvantageEstimator, AdvantageState};
use super::grouping::{leave_one_out, normalise, Grouping, Norm};
use super::kl_penalty::KlPenalty;
use super::shaping::Shaping;

/// GRPO: scores normalised within trajectory groups.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Grpo {
    /// Token discount γ of the return (default 1.0).
    pub gamma: f32,
    /// Which samples are normalised together: `Batch`, `Group` (default), `EnvTag`, `State`.
    pub group_by: Grouping,
    /// `Identity`, `Mean` or `MeanStd` (default).
    pub norm: Norm,
    /// Reward clip, whitening, advantage clip (all off by default).
    pub shaping: Shaping,
    /// KL as a token reward penalty; `None` (default) for no penalty.
    pub kl_penalty: Option<KlPenalty>,
}

impl Default for Grpo {
    fn default() -> Self {
        Grpo {
            gamma: 1.0,
            group_by: Grouping::Group,
            norm: Norm::MeanStd,
            shaping: Shaping::default(),
            kl_penalty: None,
        }
    }
}

/// The settings GRPO, REINFORCE, RLOO, Dr.GRPO and REINFORCE++ share: the computation of
/// the module docs, step 2 as [`Centre`] says.
pub(super) struct Settings<'a> {
    pub node: &'static str,
    pub gamma: f32,
    pub group_by: Grouping,
    pub centre: Centre,
    pub shaping: &'a Shaping,
    pub kl_penalty: &'a Option<KlPenalty>,
}

/// How step 2 turns each score into ŝ within its group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Centre {
    /// [`normalise`] with the norm (GRPO, REINFORCE, Dr.GRPO, REINFORCE++).
    Norm(Norm),
    /// [`leave_one_out`]: s minus the mean of the group's other scores (RLOO).
    LeaveOneOut,
}

impl Centre {
    fn apply(self, scores: &[f64], ids: &[usize]) -> Vec<f64> {
        match self {
            Centre::Norm(norm) => normalise(scores, ids, norm),
            Centre::LeaveOneOut => leave_one_out(scores, ids),
        }
    }
}

impl Settings<'_> {
    pub(super) fn contract(&self) -> Contract {
        let mut needs = vec![Need::column(RESPONSE_MASK), Need::column(SCORE)];
        if let Some(col) = self.group_by.column() {
            needs.push(group_need(self.group_by, col));
        }
        needs.extend(self.kl_penalty.iter().flat_map(KlPenalty::needs));
        let centred = self.centre != Centre::Norm(Norm::Identity);
        let group_normalised = centred && self.group_by != Grouping::Batch;
        Contract {
            needs,
            gives: vec![ADVANTAGES, RETURNS],
            group_normalised,
            ..Contract::default()
        }
    }

    pub(super) fn validate(&self) -> Result<(), AlgoError> {
        unit_interval(self.node, "gamma", self.gamma)?;
        if let Some(kl) = self.kl_penalty {
            kl.validate(self.node)?;
        }
        self.shaping.validate(self.node)
    }

    pub(super) fn apply(
        &self,
        batch: &mut Batch,
        state: &mut AdvantageState,
    ) -> Result<AlgoStats, AlgoError> {
        let mut stats = AlgoStats::new();
        let mask = read_mask(batch, self.node)?.to_vec();
        let mut scores: Vec<f64> = read_f32(batch, self.node, &SCORE)?
            .iter()
            .map(|&s| s as f64)
            .collect();
        self.shaping.clip_rewards(&mut scores);
        let ids = self.group_by.group_ids(batch, self.node)?;
        let normed = self.centre.apply(&scores, &ids);
        let mut rewards = vec![0.0f64; batch.num_tokens()];
        let positions: Vec<Vec<usize>> = (0..batch.num_samples())
            .map(|i| response_positions(batch, &mask, i))
            .collect();
        for (pos, &s) in positions.iter().zip(&normed) {
            if let Some(&last) = pos.last() {
                rewards[last] = s;
            }
        }
        if let Some(kl) = self.kl_penalty {
            kl.apply(self.node, batch, &mask, &mut rewards, state, &mut stats)?;
        }
        let mut adv = vec![0.0f32; batch.num_tokens()];
        for pos in &positions {
            let r: Vec<f64> = pos.iter().map(|&t| rewards[t]).collect();
            for (&t, g) in pos.iter().zip(discounted_returns(&r, self.gamma as f64)) {
                adv[t] = g as f32;
            }
        }
        let returns = adv.clone();
        self.shaping.finish(&mut adv, &mask, &mut stats);
        write(batch, self.node, &ADVANTAGES, adv)?;
        write(batch, self.node, &RETURNS, returns)?;
        Ok(stats)
    }
}

/// The need for a grouping column, with advice where the kind that gives it is not enough
/// (`group_by: State` needs step-wise samples).
pub(crate) fn group_need(g: Grouping, column: roll_flow_engine::Column) -> Need {
    match g {
        Grouping::State => Need::with_hint(
            column,
            "`group_by: State` needs step-wise samples; set the rollout's `samples: Step(history: 2)`",
        ),
        _ => Need::column(column),
    }
}

/// The estimator impl of a node whose fields are [`Settings`]'s (`gamma`, `group_by`,
/// `shaping`, `kl_penalty`, and `norm` unless the centre is given): GRPO and REINFORCE
/// differ only in their defaults; Dr.GRPO (`centre: Centre::Norm(Norm::Mean)`) and RLOO
/// (`centre: Centre::LeaveOneOut`) fix the centre instead of reading `norm`.
macro_rules! estimator_from_settings {
    ($node:ident) => {
        $crate::grpo::estimator_from_settings!(@impl $node, |node: &$node| {
            $crate::grpo::Centre::Norm(node.norm)
        });
    };
    ($node:ident, centre: $centre:expr) => {
        $crate::grpo::estimator_from_settings!(@impl $node, |_: &$node| $centre);
    };
    (@impl $node:ident, $centre:expr) => {
        impl $node {
            fn settings(&self) -> $crate::grpo::Settings<'_> {
                $crate::grpo::Settings {
                    node: stringify!($node),
                    gamma: self.gamma,
                    group_by: self.group_by,
                    centre: ($centre)(self),
                    shaping: &self.shaping,
                    kl_penalty: &self.kl_penalty,
                }
            }
        }

        impl AdvantageEstimator for $node {
            fn shaping(&self) -> &Shaping {
                &self.shaping
            }
            fn kind(&self) -> &'static str {
                stringify!($node)
            }
            fn contract(&self) -> Contract {
                self.settings().contract()
            }
            fn validate(&self) -> Result<(), AlgoError> {
                self.settings().validate()
            }
            fn apply(
                &self,
                batch: &mut Batch,
                state: &mut AdvantageState,
            ) -> Result<AlgoStats, AlgoError> {
                self.settings().apply(batch, state)
            }
        }
    };
}
pub(super) use estimator_from_settings;

estimator_from_settings!(Grpo);

#[cfg(test)]
#[path = "grpo_tests.rs"]
mod tests;
