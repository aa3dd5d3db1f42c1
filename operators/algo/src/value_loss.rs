//! Critic value loss with optional value clipping (PPO; verl/ROLL `compute_value_loss`).
//!
//! Per response token, with V the new prediction, V_old the rollout-time `values` and R the
//! `returns`:
//! - unclipped: L = ½·(V − R)²;
//! - clipped (c): V_c = V_old + clip(V − V_old, −c, c), L = ½·max((V − R)², (V_c − R)²);
//!
//! Aggregated by [`LossAgg`] (default `TokenMean`, as verl's critic). Default clip 0.5
//! (verl `cliprange_value`). Stat `vf_clipfrac`: tokens where the clipped term is larger.
//!
//! RON: `CriticStep(loss: ValueLoss(clip: Some(0.2)))`.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use serde::Deserialize;

use super::aggregation::{aggregate, LossAgg};
use super::algo_stats::DeviceStats;
use super::error::AlgoError;
use super::packed_layout::PackedLayout;

/// The critic's loss.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ValueLoss {
    /// Value clip range c around the old values; `None` turns clipping off (default
    /// `Some(0.5)`).
    pub clip: Option<f32>,
    /// Loss aggregation (default `TokenMean`).
    pub agg: LossAgg,
    /// The constant length L of `SeqMeanTokenSumNorm`; default the longest response.
    pub norm_length: Option<u32>,
}

impl Default for ValueLoss {
    fn default() -> Self {
        ValueLoss {
            clip: Some(0.5),
            agg: LossAgg::TokenMean,
            norm_length: None,
        }
    }
}

/// The scalar value loss (shape `[1]`) and its statistics.
#[derive(Clone, Debug)]
pub struct ValueLossOutput<B: Backend> {
    pub loss: Tensor<B, 1>,
    pub stats: DeviceStats<B>,
}

impl ValueLoss {
    /// The aggregated loss of predictions `values` against `returns`.
    pub fn loss<B: roll_flow_kernels::KernelBackend>(
        &self,
        values: Tensor<B, 1>,
        old_values: Tensor<B, 1>,
        returns: Tensor<B, 1>,
        layout: &PackedLayout<B>,
    ) -> Result<ValueLossOutput<B>, AlgoError> {
        let unclipped = (values.clone() - returns.clone()).square();
        let mut stats = DeviceStats::new();
        let per_token = match self.clip {
            None => unclipped,
            Some(c) if c.is_nan() || c < 0.0 => {
                return Err(AlgoError::invalid(
                    "ValueLoss",
                    format!("clip must be ≥ 0, got {c}"),
                ))
            }
            Some(c) => {
                let clipped_v = old_values.clone() + (values - old_values).clamp(-c, c);
                let clipped = (clipped_v - returns).square();
                let clipped_active = clipped.clone().greater(unclipped.clone()).float();
                stats.insert_response_mean("vf_clipfrac", clipped_active, layout);
                unclipped.max_pair(clipped)
            }
        };
        let loss = aggregate(per_token, layout, self.agg, self.norm_length).mul_scalar(0.5);
        Ok(ValueLossOutput { loss, stats })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AlgoStats;
    use burn::backend::{Autodiff, Flex};

    type AD = Autodiff<Flex>;

    fn run(
        cfg: &ValueLoss,
        v: &[f32],
        old: &[f32],
        ret: &[f32],
        mask: &[bool],
    ) -> (f32, Vec<f32>, AlgoStats) {
        let l = PackedLayout::<AD>::new(&[0, v.len()], mask, None, &Default::default());
        let vt = l.constant(v.to_vec()).require_grad();
        let out = cfg
            .loss(
                vt.clone(),
                l.constant(old.to_vec()),
                l.constant(ret.to_vec()),
                &l,
            )
            .unwrap();
        let g = crate::test_batches::gradient(&vt, &out.loss);
        (out.loss.into_scalar(), g, out.stats.resolve())
    }

    #[test]
    fn parses_ron_with_defaults() {
        let cfg: ValueLoss = ron::from_str("(clip: None)").unwrap();
        assert_eq!(cfg.clip, None);
        assert_eq!(
            ron::from_str::<ValueLoss>("()").unwrap(),
            ValueLoss::default()
        );
    }

    #[test]
    fn unclipped_by_hand() {
        // ½·mean((1 − 0)², (2 − 4)²) = ½·2.5; grads (V − R)/2.
        let cfg = ValueLoss {
            clip: None,
            ..Default::default()
        };
        let (l, g, stats) = run(
            &cfg,
            &[1.0, 2.0, 7.0],
            &[0.0; 3],
            &[0.0, 4.0, 0.0],
            &[true, true, false],
        );
        assert!((l - 1.25).abs() < 1e-6);
        assert_eq!(g, vec![0.5, -1.0, 0.0]);
        assert!(
            !stats.contains_key("vf_clipfrac"),
            "no clipping, no clip fraction"
        );
    }

    #[test]
    fn empty_mask_sample_and_single_token() {
        // Sample 0 has no response token; sample 1 one token with V = 1 inside the clip
        // range of V_old = 0.9: ½·(1 − 2)² = 0.5, gradient V − R = −1.
        let l = PackedLayout::<AD>::new(&[0, 1, 2], &[false, true], None, &Default::default());
        let v = l.constant(vec![5.0, 1.0]).require_grad();
        let out = ValueLoss::default()
            .loss(
                v.clone(),
                l.constant(vec![0.0, 0.9]),
                l.constant(vec![0.0, 2.0]),
                &l,
            )
            .unwrap();
        let g = crate::test_batches::gradient(&v, &out.loss);
        assert!((out.loss.into_scalar() - 0.5).abs() < 1e-6);
        assert_eq!(g, vec![0.0, -1.0]);
        assert_eq!(out.stats.clone().resolve()["vf_clipfrac"], 0.0);
        assert!(ValueLoss {
            clip: Some(-1.0),
            ..Default::default()
        }
        .loss(
            l.constant(vec![0.0, 0.0]),
            l.constant(vec![0.0, 0.0]),
            l.constant(vec![0.0, 0.0]),
            &l
        )
        .is_err());
    }

    #[test]
    fn clipped_by_hand() {
        // c = 0.2. Token 0: V = 1, V_old = 0, R = 2: V_c = 0.2, max(1, 3.24) = 3.24 (clipped
        // term wins, no gradient). Token 1: V = 0.1, V_old = 0, R = 1: V_c = V, 0.81.
        // vf_clipfrac: the clipped term is strictly larger on token 0 only, 1 of 2 = 0.5.
        let cfg = ValueLoss {
            clip: Some(0.2),
            ..Default::default()
        };
        let (l, g, stats) = run(&cfg, &[1.0, 0.1], &[0.0, 0.0], &[2.0, 1.0], &[true, true]);
        assert!((stats["vf_clipfrac"] - 0.5).abs() < 1e-7, "{stats:?}");
        assert!((l - 0.5 * (3.24 + 0.81) / 2.0).abs() < 1e-6, "{l}");
        assert!(g[0].abs() < 1e-7, "{g:?}");
        // max of two equal terms: burn's max_pair sends the gradient to one side: ½·(V − R).
        assert!((g[1] + 0.45).abs() < 1e-6, "{g:?}");
    }
}
