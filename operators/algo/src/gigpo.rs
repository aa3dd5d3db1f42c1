//! GiGPO (verl-agent, Feng et al. 2025): group-in-group advantages for step-wise samples.
//!
//! All within one trajectory group (`group_id`):
//! 1. Episode advantage A^E_i = (R(τ_i) − mean)/F, R = `episode_return`; F = 1 under
//!    `Mean` (verl-agent's scripts' default), std + 1e-6 under `MeanStd`. A group of one
//!    gets mean 0, std 1 (verl-agent `episode_norm_reward`). The statistics are taken over
//!    step rows (`StepRows`, verl-agent: long trajectories weigh more) or one value per
//!    trajectory (`Trajectories`, ROLL). A group of one trajectory gets mean 0, std 1 in
//!    both modes (verl-agent's step-row code counts rows, so a lone multi-step trajectory
//!    would get its own mean there; REFERENCE.md's "group of one" is one trajectory).
//! 2. Step return R_t = r_t + γ_s·R_{t+1} within each trajectory (r_t = the step sample's
//!    `score`, order by `step_index`; γ_s = 0.95).
//! 3. Anchor groups: steps whose observation is identical (`state_hash`), or, in
//!    `Similarity` mode, whose observation text (`observation`) has difflib ratio ≥ the
//!    threshold with the cluster's first member (verl-agent uses 0.9 for search tasks).
//! 4. Step advantage A^S_t = (R_t − mean_anchor)/F. A singleton anchor group gets 0
//!    (REFERENCE.md; verl-agent's code instead gives a singleton mean 0, std 1).
//! 5. A = A^E + ω·A^S (ω = `step_weight`, 1), broadcast over the step's response tokens.
//!
//! RON: `"adv": GiGPO(step_gamma: 0.95, step_weight: 1.0, norm: Mean)`.

use roll_flow_engine::batch::column::{
    ADVANTAGES, EPISODE_RETURN, GROUP_ID, RESPONSE_MASK, SCORE, STATE_HASH, STEP_INDEX,
    TRAJECTORY_ID,
};
use roll_flow_engine::{Batch, Contract, Need};
use serde::Deserialize;

use super::algo_stats::AlgoStats;
use super::batch_read::{
    broadcast_to_response, read_f32, read_mask, read_step_order, read_str, read_u64, write,
};
use super::config_check::unit_interval;
use super::discount::step_returns;
use super::error::AlgoError;
use super::estimator::{AdvantageEstimator, AdvantageState};
use super::grouping::{dense_ids, mean_std, members, EPS};
use super::shaping::Shaping;
use super::similarity::cluster;
use roll_flow_engine::batch::column::OBSERVATION;

const NODE: &str = "GiGPO";
/// The advice when GiGPO sees trajectory-wise samples.
pub const STEP_HINT: &str =
    "GiGPO needs step-wise samples; set the rollout's `samples: Step(history: 2)`";

/// GiGPO's normaliser F.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum GigpoNorm {
    /// F = 1: subtract the mean only (verl-agent default).
    #[default]
    Mean,
    /// F = std + 1e-6.
    MeanStd,
}

/// Which rows the episode mean/std is taken over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum EpisodeStats {
    /// Every step row counts (verl-agent): long trajectories weigh more.
    #[default]
    StepRows,
    /// One value per trajectory (ROLL).
    Trajectories,
}

/// How anchor states are matched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
pub enum AnchorMode {
    /// Identical observations (equal `state_hash`).
    #[default]
    Exact,
    /// Observations whose difflib similarity ratio is ≥ `threshold` (default 0.9).
    Similarity {
        #[serde(default = "default_threshold")]
        threshold: f32,
    },
}

fn default_threshold() -> f32 {
    0.9
}

/// GiGPO advantages.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GiGpo {
    /// Discount γ_s of the step returns (default 0.95).
    pub step_gamma: f32,
    /// Weight ω of the step advantage (default 1.0).
    pub step_weight: f32,
    /// `Mean` (default, F = 1) or `MeanStd` (F = std + 1e-6).
    pub norm: GigpoNorm,
    /// Episode statistics over `StepRows` (default, verl-agent) or `Trajectories` (ROLL).
    pub episode_stats: EpisodeStats,
    /// Anchor matching: `Exact` (default) or `Similarity(threshold: 0.9)`.
    pub anchor: AnchorMode,
    /// Reward clip (on step rewards and episode returns), whitening, advantage clip.
    pub shaping: Shaping,
}

impl Default for GiGpo {
    fn default() -> Self {
        GiGpo {
            step_gamma: 0.95,
            step_weight: 1.0,
            norm: GigpoNorm::Mean,
            episode_stats: EpisodeStats::StepRows,
            anchor: AnchorMode::Exact,
            shaping: Shaping::default(),
        }
    }
}

/// Writes (values[i] − mean)/F for i in `group`, with mean and std over `stats_of`, or
/// mean 0, std 1 when `lone` (a group of one trajectory, verl-agent's rule).
fn normalise_in(
    values: &[f64],
    group: &[usize],
    stats_of: &[f64],
    lone: bool,
    norm: GigpoNorm,
    out: &mut [f64],
) {
    let (mean, std) = if lone { (0.0, 1.0) } else { mean_std(stats_of) };
    for &i in group {
        out[i] = match norm {
            GigpoNorm::Mean => values[i] - mean,
            GigpoNorm::MeanStd => (values[i] - mean) / (std + EPS),
        };
    }
}

impl GiGpo {
    /// Episode advantages A^E per step row.
    pub fn episode_advantages(&self, returns: &[f64], groups: &[usize], trajs: &[u64]) -> Vec<f64> {
        let mut out = vec![0.0; returns.len()];
        for group in members(groups) {
            let mut seen = std::collections::HashSet::new();
            let first_rows: Vec<usize> = group
                .iter()
                .copied()
                .filter(|&i| seen.insert(trajs[i]))
                .collect();
            let stats_of: Vec<f64> = match self.episode_stats {
                EpisodeStats::StepRows => group.iter().map(|&i| returns[i]).collect(),
                EpisodeStats::Trajectories => first_rows.iter().map(|&i| returns[i]).collect(),
            };
            let lone = first_rows.len() == 1;
            normalise_in(returns, &group, &stats_of, lone, self.norm, &mut out);
        }
        out
    }

    /// Step advantages A^S per step row; `anchors` are dense anchor-group ids.
    pub fn step_advantages(&self, step_returns: &[f64], anchors: &[usize]) -> Vec<f64> {
        let mut out = vec![0.0; step_returns.len()];
        for group in members(anchors).into_iter().filter(|g| g.len() > 1) {
            let stats_of: Vec<f64> = group.iter().map(|&i| step_returns[i]).collect();
            normalise_in(step_returns, &group, &stats_of, false, self.norm, &mut out);
        }
        out
    }

    fn anchor_ids(&self, batch: &Batch, groups: &[usize]) -> Result<Vec<usize>, AlgoError> {
        match self.anchor {
            AnchorMode::Exact => {
                let hashes = read_u64(batch, NODE, &STATE_HASH)?;
                Ok(dense_ids(
                    &groups
                        .iter()
                        .zip(hashes)
                        .map(|(&g, &h)| (g, h))
                        .collect::<Vec<_>>(),
                ))
            }
            AnchorMode::Similarity { threshold } => {
                let texts = read_str(batch, NODE, &OBSERVATION)?;
                let mut keys = vec![(0usize, 0usize); groups.len()];
                for group in members(groups) {
                    let group_texts: Vec<&str> = group.iter().map(|&i| texts[i].as_str()).collect();
                    for (&i, c) in group.iter().zip(cluster(&group_texts, threshold as f64)) {
                        keys[i] = (groups[i], c);
                    }
                }
                Ok(dense_ids(&keys))
            }
        }
    }

    fn check_returns(&self, trajs: &[u64], returns: &[f64]) -> Result<(), AlgoError> {
        let mut first = std::collections::HashMap::new();
        for (&t, &r) in trajs.iter().zip(returns) {
            let r0 = *first.entry(t).or_insert(r);
            if r0 != r {
                return Err(AlgoError::invalid(
                    NODE,
                    format!("trajectory {t} has differing `episode_return` values ({r0} and {r})"),
                ));
            }
        }
        Ok(())
    }
}

impl AdvantageEstimator for GiGpo {
    fn shaping(&self) -> &Shaping {
        &self.shaping
    }

    fn kind(&self) -> &'static str {
        NODE
    }

    fn validate(&self) -> Result<(), AlgoError> {
        unit_interval(NODE, "step_gamma", self.step_gamma)?;
        if !self.step_weight.is_finite() || self.step_weight < 0.0 {
            return Err(AlgoError::invalid(
                NODE,
                format!("`step_weight` must be ≥ 0, got {}", self.step_weight),
            ));
        }
        if let AnchorMode::Similarity { threshold } = self.anchor {
            unit_interval(NODE, "anchor.threshold", threshold)?;
        }
        self.shaping.validate(NODE)
    }

    fn contract(&self) -> Contract {
        let mut needs = vec![
            Need::column(RESPONSE_MASK),
            Need::column(SCORE),
            Need::column(EPISODE_RETURN),
            Need::column(GROUP_ID),
            Need::with_hint(TRAJECTORY_ID, STEP_HINT),
            Need::with_hint(STEP_INDEX, STEP_HINT),
            Need::with_hint(STATE_HASH, STEP_HINT),
        ];
        if let AnchorMode::Similarity { .. } = self.anchor {
            needs.push(Need::with_hint(
                OBSERVATION,
                "similarity anchors need the step's observation text",
            ));
        }
        Contract {
            needs,
            gives: vec![ADVANTAGES],
            group_normalised: true,
            ..Contract::default()
        }
    }

    fn apply(
        &self,
        batch: &mut Batch,
        _state: &mut AdvantageState,
    ) -> Result<AlgoStats, AlgoError> {
        let (trajs, steps) = read_step_order(batch, NODE)?;
        read_u64(batch, NODE, &STATE_HASH)?;
        let groups = dense_ids(read_u64(batch, NODE, &GROUP_ID)?);
        let mut rewards: Vec<f64> = read_f32(batch, NODE, &SCORE)?
            .iter()
            .map(|&x| x as f64)
            .collect();
        let mut returns: Vec<f64> = read_f32(batch, NODE, &EPISODE_RETURN)?
            .iter()
            .map(|&x| x as f64)
            .collect();
        self.check_returns(trajs, &returns)?;
        self.shaping.clip_rewards(&mut rewards);
        self.shaping.clip_rewards(&mut returns);
        let episode = self.episode_advantages(&returns, &groups, trajs);
        let step_ret = step_returns(&rewards, trajs, steps, self.step_gamma as f64);
        let anchors = self.anchor_ids(batch, &groups)?;
        let step = self.step_advantages(&step_ret, &anchors);
        let total: Vec<f64> = episode
            .iter()
            .zip(&step)
            .map(|(e, s)| e + self.step_weight as f64 * s)
            .collect();
        let mut stats = AlgoStats::new();
        let anchor_groups = members(&anchors);
        stats.insert("gigpo/anchor_groups".into(), anchor_groups.len() as f64);
        let singletons = anchor_groups.iter().filter(|g| g.len() == 1).count();
        stats.insert(
            "gigpo/singleton_anchor_fraction".into(),
            singletons as f64 / anchor_groups.len().max(1) as f64,
        );
        let mask = read_mask(batch, NODE)?.to_vec();
        let mut adv = broadcast_to_response(batch, &mask, &total);
        self.shaping.finish(&mut adv, &mask, &mut stats);
        write(batch, NODE, &ADVANTAGES, adv)?;
        Ok(stats)
    }
}

#[cfg(test)]
#[path = "gigpo_tests.rs"]
mod tests;
