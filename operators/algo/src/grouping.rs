//! Group-wise score normalisation shared by GRPO/REINFORCE, StarPO and step-REINFORCE.
//!
//! Formula (ROLL `reward_norm`, verl `compute_grpo_outcome_advantage`), within each group:
//! - `Identity`: s
//! - `Mean`: s − mean
//! - `MeanStd`: (s − mean) / (std + eps), eps = 1e-6, std the unbiased (n − 1) sample
//!   std as `torch.std` computes it.
//!
//! A group of one, or one whose std ≤ eps, gets 0 under `MeanStd` (REFERENCE.md); under
//! `Mean` a group of one is 0 anyway, which is why validation warns about `group_size: 1`.
//!
//! Groupings: the whole `Batch`, the trajectory `Group` (`group_id`: same seed, same initial
//! state), the `EnvTag`, or the `State` (`state_hash`: step samples whose observation is
//! identical).

use std::collections::HashMap;

use roll_flow_engine::batch::column::{ENV_TAG, GROUP_ID, STATE_HASH};
use roll_flow_engine::{Batch, Column};
use serde::Deserialize;

use super::batch_read::{read_str, read_u64};
use super::error::AlgoError;

/// eps of every normalisation (REFERENCE.md).
pub const EPS: f64 = 1e-6;

/// Which samples are normalised together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum Grouping {
    /// All samples of the step's batch.
    Batch,
    /// Samples of one trajectory group (same seed, same initial state): `group_id`.
    #[default]
    Group,
    /// Samples of one env tag (`envs:` entry): `env_tag`.
    EnvTag,
    /// Step samples with the same observation: `state_hash` (needs step-wise samples).
    State,
}

/// How scores are normalised within a group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum Norm {
    /// Leave scores as they are.
    Identity,
    /// Subtract the group mean.
    Mean,
    /// Subtract the group mean, divide by (std + 1e-6).
    #[default]
    #[serde(alias = "GroupMeanStd")]
    MeanStd,
}

impl Grouping {
    /// The column this grouping reads, if any.
    pub fn column(self) -> Option<Column> {
        match self {
            Grouping::Batch => None,
            Grouping::Group => Some(GROUP_ID),
            Grouping::EnvTag => Some(ENV_TAG),
            Grouping::State => Some(STATE_HASH),
        }
    }

    /// Dense group ids (0..k, in order of first appearance), one per sample.
    pub fn group_ids(self, batch: &Batch, node: &'static str) -> Result<Vec<usize>, AlgoError> {
        let n = batch.num_samples();
        Ok(match self {
            Grouping::Batch => vec![0; n],
            Grouping::Group => dense_ids(read_u64(batch, node, &GROUP_ID)?),
            Grouping::EnvTag => dense_ids(read_str(batch, node, &ENV_TAG)?),
            Grouping::State => dense_ids(read_u64(batch, node, &STATE_HASH)?),
        })
    }
}

/// Maps arbitrary keys to 0..k in order of first appearance.
pub fn dense_ids<K: std::hash::Hash + Eq + Clone>(keys: &[K]) -> Vec<usize> {
    let mut map: HashMap<K, usize> = HashMap::new();
    keys.iter()
        .map(|k| {
            let next = map.len();
            *map.entry(k.clone()).or_insert(next)
        })
        .collect()
}

/// Mean and unbiased std of `values` (std is 0 for fewer than two values).
pub fn mean_std(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return (mean, 0.0);
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// Members of each dense group id.
pub fn members(ids: &[usize]) -> Vec<Vec<usize>> {
    let k = ids.iter().max().map_or(0, |m| m + 1);
    let mut out = vec![Vec::new(); k];
    for (i, &g) in ids.iter().enumerate() {
        out[g].push(i);
    }
    out
}

/// Normalises `scores` within the groups given by `ids` (see the module docs).
pub fn normalise(scores: &[f64], ids: &[usize], norm: Norm) -> Vec<f64> {
    let mut out = scores.to_vec();
    if norm == Norm::Identity {
        return out;
    }
    for group in members(ids) {
        let values: Vec<f64> = group.iter().map(|&i| scores[i]).collect();
        let (mean, std) = mean_std(&values);
        for &i in &group {
            out[i] = match norm {
                Norm::Identity => scores[i],
                Norm::Mean => scores[i] - mean,
                Norm::MeanStd if group.len() < 2 || std <= EPS => 0.0,
                Norm::MeanStd => (scores[i] - mean) / (std + EPS),
            };
        }
    }
    out
}

/// RLOO's leave-one-out centring (Ahmadian et al. 2024; verl
/// `compute_rloo_outcome_advantage`): within a group of n ≥ 2 scores, s_i − (1/(n−1))·
/// Σ_{j≠i} s_j, which is n/(n−1)·(s_i − mean). A group of one has no other score to
/// compare with and gets 0, as under `Mean` (verl keeps its raw score instead).
pub fn leave_one_out(scores: &[f64], ids: &[usize]) -> Vec<f64> {
    let mut out = vec![0.0; scores.len()];
    for group in members(ids) {
        let n = group.len();
        if n < 2 {
            continue;
        }
        let sum: f64 = group.iter().map(|&i| scores[i]).sum();
        for &i in &group {
            out[i] = scores[i] - (sum - scores[i]) / (n - 1) as f64;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_std_by_hand() {
        // [1, 2, 3, 6]: mean 3, unbiased var (4 + 1 + 0 + 9) / 3 = 14/3.
        let (m, s) = mean_std(&[1.0, 2.0, 3.0, 6.0]);
        assert!((m - 3.0).abs() < 1e-12);
        assert!((s - (14.0f64 / 3.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn normalise_modes_by_hand() {
        let scores = [1.0, 0.0, 5.0, 2.0, 2.0, 7.0];
        let ids = [0, 0, 1, 2, 2, 3];
        // group 0: mean 0.5, std sqrt(0.5); group 1 single; group 2 zero std; group 3 single.
        let s = 0.5f64.sqrt() + EPS;
        let ms = normalise(&scores, &ids, Norm::MeanStd);
        let want = [0.5 / s, -0.5 / s, 0.0, 0.0, 0.0, 0.0];
        for (a, b) in ms.iter().zip(want) {
            assert!((a - b).abs() < 1e-9, "{ms:?}");
        }
        assert_eq!(
            normalise(&scores, &ids, Norm::Mean),
            vec![0.5, -0.5, 0.0, 0.0, 0.0, 0.0]
        );
        assert_eq!(normalise(&scores, &ids, Norm::Identity), scores.to_vec());
    }

    #[test]
    fn dense_ids_in_order_of_appearance() {
        assert_eq!(dense_ids(&[9u64, 4, 9, 7, 4]), vec![0, 1, 0, 2, 1]);
    }
}
