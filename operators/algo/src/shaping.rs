//! Reward and advantage shaping shared by every estimator, as one RON struct.
//!
//! Order (ROLL `compute_advantage` path, REFERENCE.md): the `repeat_penalty` on scores
//! (not ROLL's; [`super::repeat_penalty`]), response-level `reward_clip`, then
//! the estimator (with the KL penalty on token rewards where it has one), then masked
//! batch-wide `whiten`, then `advantage_clip`, then `positive_weight`. All off by default,
//! as in ROLL.
//!
//! Optionally, last, samples with no policy gradient are dropped (`drop_zero_advantage`).
//!
//! RON: `shaping: (reward_clip: Some(10.0), whiten: true, advantage_clip: Some(5.0))`.

use serde::Deserialize;

use super::advantage_clip::clip_advantages;
use super::algo_stats::AlgoStats;
use super::config_check::{positive, unit_interval};
use super::error::AlgoError;
use super::reward_clip::clip_rewards;
use super::whiten::whiten;

/// Reward clip, advantage whitening and advantage clip.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shaping {
    /// Clip response-level rewards (scores, turn rewards) into [−c, c] before the
    /// estimator. `None` (default) keeps them.
    #[serde(default)]
    pub reward_clip: Option<f32>,
    /// Whiten advantages over the batch's response tokens: (A − mean)/sqrt(var + 1e-8).
    /// Default false.
    #[serde(default)]
    pub whiten: bool,
    /// Clip advantages into [−c, c] after whitening. `None` (default) keeps them.
    #[serde(default)]
    pub advantage_clip: Option<f32>,
    /// Scale positive advantages by λ ∈ [0, 1], last: A ← λ·A where A > 0. Weighted
    /// REINFORCE (Zhu et al. 2025, "The Surprising Effectiveness of Negative Reinforcement
    /// in LLM Reasoning", arXiv:2506.01347): L = λ·L_PSR + L_NSR, λ = 0.1 in the paper; with
    /// `Reinforce(norm: Identity)` over ±1 scores it is the paper's objective, and λ = 0 its
    /// negative-sample reinforcement alone. Penalising failures pushes probability to the
    /// model's other candidates instead of sharpening the successes. `None` (default) keeps
    /// A.
    #[serde(default)]
    pub positive_weight: Option<f32>,
    /// Lower each sample's score by c times the share of the other samples of its group
    /// that gave the same outcome (by c where it gave no answer), before the estimator
    /// ([`super::repeat_penalty`], after Song et al. 2025's batch exploration). Needs the
    /// rollout's `outcome` column. `None` (default) keeps the scores.
    #[serde(default)]
    pub repeat_penalty: Option<f32>,
    /// Drop the samples whose response advantages are all zero after the estimator
    /// ([`super::zero_advantage_filter`], DAPO's dynamic sampling). Default false.
    #[serde(default)]
    pub drop_zero_advantage: bool,
}

impl Shaping {
    /// The clips must be > 0 when set, the positive weight in [0, 1].
    pub fn validate(&self, node: &'static str) -> Result<(), AlgoError> {
        positive(node, "shaping.reward_clip", self.reward_clip)?;
        positive(node, "shaping.advantage_clip", self.advantage_clip)?;
        positive(node, "shaping.repeat_penalty", self.repeat_penalty)?;
        match self.positive_weight {
            Some(w) => unit_interval(node, "shaping.positive_weight", w),
            None => Ok(()),
        }
    }

    /// Applies `reward_clip` to response-level rewards.
    pub fn clip_rewards(&self, rewards: &mut [f64]) {
        if let Some(c) = self.reward_clip {
            clip_rewards(rewards, c as f64);
        }
    }

    /// Applies whitening, `advantage_clip` and `positive_weight` to token-level advantages;
    /// adds metrics.
    pub fn finish(&self, advantages: &mut [f32], mask: &[bool], stats: &mut AlgoStats) {
        if self.whiten {
            let done = whiten(advantages, mask);
            stats.insert("adv/whitened".into(), if done { 1.0 } else { 0.0 });
        }
        if let Some(c) = self.advantage_clip {
            clip_advantages(advantages, mask, c);
        }
        if let Some(w) = self.positive_weight {
            for (a, &m) in advantages.iter_mut().zip(mask) {
                if m && *a > 0.0 {
                    *a *= w;
                }
            }
        }
        let valid: Vec<f64> = advantages
            .iter()
            .zip(mask)
            .filter(|(_, &m)| m)
            .map(|(&a, _)| a as f64)
            .collect();
        let n = valid.len().max(1) as f64;
        stats.insert("adv/mean".into(), valid.iter().sum::<f64>() / n);
        stats.insert(
            "adv/abs_mean".into(),
            valid.iter().map(|a| a.abs()).sum::<f64>() / n,
        );
        stats.insert("adv/response_tokens".into(), valid.len() as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_whiten_then_clip() {
        let shaping = Shaping {
            reward_clip: None,
            whiten: true,
            advantage_clip: Some(0.5),
            positive_weight: None,
            repeat_penalty: None,
            drop_zero_advantage: false,
        };
        let mut a = [1.0, 3.0];
        let mut stats = AlgoStats::new();
        shaping.finish(&mut a, &[true, true], &mut stats);
        // whitened to ±0.7071, then clipped to ±0.5.
        assert_eq!(a, [-0.5, 0.5]);
        assert_eq!(stats["adv/whitened"], 1.0);
    }

    #[test]
    fn positive_weight_scales_positive_response_advantages_after_the_clip() {
        let shaping = Shaping {
            advantage_clip: Some(2.0),
            positive_weight: Some(0.1),
            ..Default::default()
        };
        let mut a = [5.0, 0.5, -3.0, -0.5, 0.0, 4.0];
        let mut stats = AlgoStats::new();
        let mask = [true, true, true, true, true, false];
        shaping.finish(&mut a, &mask, &mut stats);
        // clipped to [2, 0.5, -2, -0.5, 0], positives times 0.1, the prompt token kept.
        assert_eq!(a, [0.2, 0.05, -2.0, -0.5, 0.0, 4.0]);
        assert!((stats["adv/mean"] - (0.2 + 0.05 - 2.0 - 0.5) / 5.0).abs() < 1e-7);
        assert!(shaping.validate("Grpo").is_ok());
        let err = Shaping {
            positive_weight: Some(1.5),
            ..Default::default()
        }
        .validate("Grpo")
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Grpo: `shaping.positive_weight` must be in [0, 1], got 1.5"
        );
    }

    #[test]
    fn reward_clip_only_when_set() {
        let mut r = [3.0, -3.0];
        Shaping::default().clip_rewards(&mut r);
        assert_eq!(r, [3.0, -3.0]);
        Shaping {
            reward_clip: Some(1.0),
            ..Default::default()
        }
        .clip_rewards(&mut r);
        assert_eq!(r, [1.0, -1.0]);
    }
}
