//! StarPO and StarPO-S (RAGEN): trajectory-level group-normalised advantages.
//!
//! Each sample is a whole multi-turn trajectory τ_i; every response token of τ_i gets
//! Â_i = (R(τ_i) − mean_group R)/(std_group R + 1e-6) (RAGEN paper eq. 4, `MeanStd`; `Mean`
//! and `Identity` also offered). R is `score`; groups are `group_id` (same seed).
//!
//! StarPO-S filtering (RAGEN `rollout_filter_ratio`, `rollout_filter_type: std`): before
//! normalising, keep only the top `keep_top_std` fraction of groups ranked by their reward
//! std (unbiased, as `torch.std`), k = max(1, ⌊p·G⌋) groups, ties kept in batch order; the
//! other groups' samples are dropped from the batch. p = 1 (the default) is plain StarPO;
//! StarPO-S uses 0.25 (the paper also tries 0.5 and 0.75), together with asymmetric clipping
//! (`PpoClip(low: 0.2, high: 0.28)`) and no KL.
//!
//! RON: `"adv": StarPO(norm: MeanStd, keep_top_std: 0.25)`.

use roll_flow_engine::batch::column::{ADVANTAGES, GROUP_ID, RESPONSE_MASK, SCORE, STEP_INDEX};
use roll_flow_engine::{Batch, Contract, Need, Refusal};
use serde::Deserialize;

use super::algo_stats::AlgoStats;
use super::batch_read::{broadcast_to_response, read_f32, read_mask, read_u64, write};
use super::error::AlgoError;
use super::estimator::{AdvantageEstimator, AdvantageState};
use super::grouping::{dense_ids, mean_std, members, normalise, Norm};
use super::shaping::Shaping;

const NODE: &str = "StarPO";

/// StarPO / StarPO-S advantages.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StarPo {
    /// `Identity`, `Mean` or `MeanStd` (default) within each trajectory group.
    pub norm: Norm,
    /// Fraction of groups kept, by reward std (StarPO-S). 1.0 (default) keeps all; RAGEN's
    /// StarPO-S uses 0.25.
    pub keep_top_std: f32,
    /// Reward clip, whitening, advantage clip (all off by default).
    pub shaping: Shaping,
}

impl Default for StarPo {
    fn default() -> Self {
        StarPo {
            norm: Norm::MeanStd,
            keep_top_std: 1.0,
            shaping: Shaping::default(),
        }
    }
}

/// Indices of the samples in the top ⌊p·G⌋ (at least one) groups by score std.
pub fn top_std_groups(scores: &[f64], ids: &[usize], keep: f64) -> Vec<usize> {
    let groups = members(ids);
    let mut stds: Vec<(usize, f64)> = groups
        .iter()
        .enumerate()
        .map(|(g, m)| {
            (
                g,
                mean_std(&m.iter().map(|&i| scores[i]).collect::<Vec<_>>()).1,
            )
        })
        .collect();
    stds.sort_by(|a, b| b.1.total_cmp(&a.1));
    let k = ((keep * groups.len() as f64 + 1e-9).floor() as usize).max(1);
    let mut kept = vec![false; groups.len()];
    for &(g, _) in stds.iter().take(k) {
        kept[g] = true;
    }
    (0..ids.len()).filter(|&i| kept[ids[i]]).collect()
}

impl AdvantageEstimator for StarPo {
    fn shaping(&self) -> &Shaping {
        &self.shaping
    }

    fn kind(&self) -> &'static str {
        NODE
    }

    fn validate(&self) -> Result<(), AlgoError> {
        if !(self.keep_top_std > 0.0 && self.keep_top_std <= 1.0) {
            return Err(AlgoError::invalid(
                NODE,
                format!(
                    "`keep_top_std` must be in (0, 1], got {}",
                    self.keep_top_std
                ),
            ));
        }
        self.shaping.validate(NODE)
    }

    fn contract(&self) -> Contract {
        Contract {
            needs: vec![
                Need::column(RESPONSE_MASK),
                Need::column(SCORE),
                Need::column(GROUP_ID),
            ],
            gives: vec![ADVANTAGES],
            refuses: vec![Refusal {
                column: STEP_INDEX,
                reason: "StarPO needs trajectory-wise samples, but the rollout gives step-wise \
                         ones; set the rollout's `samples: Trajectory` (or use GiGPO)"
                    .into(),
            }],
            group_normalised: self.norm != Norm::Identity,
        }
    }

    fn apply(
        &self,
        batch: &mut Batch,
        _state: &mut AdvantageState,
    ) -> Result<AlgoStats, AlgoError> {
        self.validate()?;
        let mut stats = AlgoStats::new();
        let mut scores = self.scores(batch)?;
        let mut ids = dense_ids(read_u64(batch, NODE, &GROUP_ID)?);
        let groups = members(&ids).len();
        if self.keep_top_std < 1.0 {
            let keep = top_std_groups(&scores, &ids, self.keep_top_std as f64);
            *batch = batch.select(&keep);
            scores = keep.iter().map(|&i| scores[i]).collect();
            ids = dense_ids(&keep.iter().map(|&i| ids[i]).collect::<Vec<_>>());
        }
        stats.insert("starpo/groups".into(), groups as f64);
        stats.insert("starpo/kept_groups".into(), members(&ids).len() as f64);
        let normed = normalise(&scores, &ids, self.norm);
        let mask = read_mask(batch, NODE)?.to_vec();
        let mut adv = broadcast_to_response(batch, &mask, &normed);
        self.shaping.finish(&mut adv, &mask, &mut stats);
        write(batch, NODE, &ADVANTAGES, adv)?;
        Ok(stats)
    }
}

impl StarPo {
    fn scores(&self, batch: &Batch) -> Result<Vec<f64>, AlgoError> {
        let mut s: Vec<f64> = read_f32(batch, NODE, &SCORE)?
            .iter()
            .map(|&x| x as f64)
            .collect();
        self.shaping.clip_rewards(&mut s);
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_batches::{assert_close, f32s, get, u64s, with_masks};

    fn three_groups() -> Batch {
        // g0 = [1, 0] (std 0.707), g1 = [1, 1] (std 0), g2 = [0, 3] (std 2.12).
        let mut b = with_masks(&[&[0, 1, 1], &[1], &[1], &[1], &[0, 1], &[1]]);
        f32s(&mut b, &SCORE, &[1.0, 0.0, 1.0, 1.0, 0.0, 3.0]);
        u64s(&mut b, &GROUP_ID, &[10, 10, 11, 11, 12, 12]);
        b
    }

    #[test]
    fn starpo_broadcasts_group_normalised_score() {
        let mut b = three_groups();
        let stats = StarPo::default()
            .apply(&mut b, &mut AdvantageState::default())
            .unwrap();
        let a = 0.5 / (0.5f64.sqrt() + 1e-6);
        let c = 1.5 / (4.5f64.sqrt() + 1e-6);
        // zero-std group 11 gets 0.
        assert_close(
            &get(&b, &ADVANTAGES),
            &[0.0, a, a, -a, 0.0, 0.0, 0.0, -c, c],
            1e-5,
        );
        assert_eq!(stats["starpo/kept_groups"], 3.0);
    }

    #[test]
    fn starpo_s_keeps_top_std_groups() {
        let mut b = three_groups();
        let cfg = StarPo {
            keep_top_std: 0.34,
            ..Default::default()
        };
        cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
        // ⌊0.34·3⌋ = 1 group: g2 only.
        assert_eq!(b.num_samples(), 2);
        assert_eq!(b.u64s(&GROUP_ID).unwrap(), &[12, 12]);
        let c = 1.5 / (4.5f64.sqrt() + 1e-6);
        assert_close(&get(&b, &ADVANTAGES), &[0.0, -c, c], 1e-5);

        let mut b = three_groups();
        let cfg = StarPo {
            keep_top_std: 0.67,
            ..Default::default()
        };
        cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
        assert_eq!(b.u64s(&GROUP_ID).unwrap(), &[10, 10, 12, 12]);
    }

    #[test]
    fn group_of_one_and_tiny_fraction_keep_one_group() {
        let mut b = with_masks(&[&[1], &[1]]);
        f32s(&mut b, &SCORE, &[1.0, 0.0]);
        u64s(&mut b, &GROUP_ID, &[0, 1]);
        let cfg = StarPo {
            keep_top_std: 0.01,
            ..Default::default()
        };
        cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
        assert_eq!(b.num_samples(), 1);
        assert_close(&get(&b, &ADVANTAGES), &[0.0], 0.0);
    }

    #[test]
    fn refuses_step_samples_and_bad_fraction() {
        // Step-wise samples are refused by graph validation, from the contract.
        let refuses = StarPo::default().contract().refuses;
        assert_eq!(refuses.len(), 1);
        assert_eq!(refuses[0].column, STEP_INDEX);
        assert!(
            refuses[0].reason.contains("trajectory-wise"),
            "{}",
            refuses[0].reason
        );
        let mut b = three_groups();
        let cfg = StarPo {
            keep_top_std: 0.0,
            ..Default::default()
        };
        assert!(cfg.apply(&mut b, &mut AdvantageState::default()).is_err());
    }

    #[test]
    fn parses_design_doc_ron() {
        let cfg: StarPo = ron::from_str("(norm: GroupMeanStd, keep_top_std: 0.75)").unwrap();
        assert_eq!(
            cfg,
            StarPo {
                keep_top_std: 0.75,
                ..Default::default()
            }
        );
    }
}
