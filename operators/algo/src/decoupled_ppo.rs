//! Decoupled PPO (AReaL, Fu et al. 2025 eq. 5) for off-policy / asynchronous data.
//!
//! π_behave generated the tokens (`behaviour_logprob`); π_prox is the policy recomputed one
//! step behind (`old_logprob`); π_θ is being trained. Per response token:
//! - w = π_prox/π_behave = exp(old_logp − behaviour_logp), a constant (no gradient);
//! - r = π_θ/π_prox (token, or per-turn mean log-ratio, [`RatioLevel`]);
//! - L = w · max(−A·r, −A·clip(r, 1 − ε_low, 1 + ε_high)) (dual clip as in [`super::PpoClip`]);
//!   the fused PPO kernel takes w as its token weight.
//!
//! The behaviour weight can be bounded ([`BehaviourCap`], AReaL `behav_imp_weight_cap`):
//! `Clamp(c)` uses min(w, c); `Mask(c)` sets w = 0 where w > c (AReaL's rule: such tokens
//! drop out of the loss but stay in the aggregation's denominators). Default: unbounded.
//! Stats add `behave_weight_mean` and `behave_capped_frac` (tokens whose weight was clamped or
//! masked) over response tokens.
//!
//! RON: `loss: DecoupledPpo(low: 0.2, high: 0.2, behaviour_cap: Mask(5.0))`.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use serde::Deserialize;

use roll_flow_kernels::{ClipSettings, KernelBackend};

use super::error::AlgoError;
use super::ppo_loss::{check_clip, ClipLoss, PolicyInputs, PolicyLossOutput, RatioLevel};

/// How the behaviour importance weight is bounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
pub enum BehaviourCap {
    /// Use w as is (default).
    #[default]
    None,
    /// min(w, c).
    Clamp(f32),
    /// w = 0 where w > c.
    Mask(f32),
}

roll_flow_kernels::clip_settings_struct! {
    /// The decoupled PPO loss (clip defaults: [`ClipSettings::default`]).
    pub struct DecoupledPpo {
        /// `Token` (default) or `Segment` ratios.
        pub ratio: RatioLevel = RatioLevel::Token,
        /// Bound on the behaviour weight: `None` (default), `Clamp(c)` or `Mask(c)`.
        pub behaviour_cap: BehaviourCap = BehaviourCap::None,
    }
}

impl Default for DecoupledPpo {
    fn default() -> Self {
        DecoupledPpo::with_clip(ClipSettings::default())
    }
}

impl DecoupledPpo {
    /// Checks the clip and cap settings.
    pub fn validate(&self) -> Result<(), AlgoError> {
        check_clip("DecoupledPpo", self.low, self.high, self.dual_clip)?;
        match self.behaviour_cap {
            BehaviourCap::Clamp(c) | BehaviourCap::Mask(c) if c.is_nan() || c <= 0.0 => {
                Err(AlgoError::invalid(
                    "DecoupledPpo",
                    format!("behaviour_cap must be > 0, got {c}"),
                ))
            }
            _ => Ok(()),
        }
    }

    /// The bounded behaviour weight per token (detached).
    pub fn behaviour_weight<B: Backend>(
        &self,
        prox: Tensor<B, 1>,
        behaviour: Tensor<B, 1>,
    ) -> Tensor<B, 1> {
        let w = (prox - behaviour).detach().exp();
        match self.behaviour_cap {
            BehaviourCap::None => w,
            BehaviourCap::Clamp(c) => w.clamp_max(c),
            BehaviourCap::Mask(c) => {
                let over = w.clone().greater_elem(c);
                w.mask_fill(over, 0.0)
            }
        }
    }

    /// The aggregated loss; `behaviour_logprob` is π_behave per token.
    pub fn loss<B: KernelBackend>(
        &self,
        inputs: &PolicyInputs<'_, B>,
        behaviour_logprob: Tensor<B, 1>,
    ) -> Result<PolicyLossOutput<B>, AlgoError> {
        self.validate()?;
        let layout = inputs.layout;
        let w = self.behaviour_weight(inputs.old_logprob.clone(), behaviour_logprob.clone());
        let raw = (inputs.old_logprob.clone() - behaviour_logprob)
            .detach()
            .exp();
        let dropped = raw.greater(w.clone().add_scalar(1e-12)).float();
        let clip = ClipLoss {
            node: "DecoupledPpo",
            config: self.clip(),
            ratio: self.ratio,
        };
        let mut out = clip.loss(inputs, Some(w.clone()))?;
        out.stats
            .insert_response_mean("behave_weight_mean", w, layout);
        out.stats
            .insert_response_mean("behave_capped_frac", dropped, layout);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packed_layout::PackedLayout;
    use crate::ppo_loss::PpoClip;
    use crate::AlgoStats;
    use burn::backend::{Autodiff, Flex};

    type AD = Autodiff<Flex>;

    fn loss(cfg: &DecoupledPpo, behaviour: &[f32]) -> (f32, Vec<f32>, AlgoStats) {
        // Three tokens, π_prox = 0.5 each (log), π_θ = π_prox (r = 1), A = [1, −1, 2].
        let l = PackedLayout::<AD>::new(&[0, 3], &[true; 3], None, &Default::default());
        let logp = l.constant(vec![0.5f32.ln(); 3]).require_grad();
        let inputs = PolicyInputs {
            logprob: logp.clone(),
            old_logprob: l.constant(vec![0.5f32.ln(); 3]),
            advantages: l.constant(vec![1.0, -1.0, 2.0]),
            layout: &l,
        };
        let out = cfg.loss(&inputs, l.constant(behaviour.to_vec())).unwrap();
        let g = crate::test_batches::gradient(&logp, &out.loss);
        (out.loss.into_scalar(), g, out.stats.resolve())
    }

    fn assert_stat(stats: &AlgoStats, name: &str, want: f64) {
        assert!((stats[name] - want).abs() < 1e-5, "{name}: {stats:?}");
    }

    #[test]
    fn behaviour_weight_scales_tokens_by_hand() {
        // π_behave = [0.25, 0.5, 0.05] → w = [2, 1, 10]; L = mean(−2·1, 1·1, −10·2) = −7.
        let behaviour = [0.25f32.ln(), 0.5f32.ln(), 0.05f32.ln()];
        let (l, g, stats) = loss(&DecoupledPpo::default(), &behaviour);
        assert!((l + 7.0).abs() < 1e-4, "{l}");
        // Unbounded: mean w = (2 + 1 + 10)/3 = 13/3, nothing capped.
        assert_stat(&stats, "behave_weight_mean", 13.0 / 3.0);
        assert_stat(&stats, "behave_capped_frac", 0.0);
        // dL/dlogp_t = −w·A·r/3.
        let want = [-2.0 / 3.0, 1.0 / 3.0, -20.0 / 3.0];
        for (a, b) in g.iter().zip(want) {
            assert!((a - b).abs() < 1e-4, "{g:?}");
        }
        // Clamp at 5: w = [2, 1, 5] → mean(−2, 1, −10) = −11/3; mean w = 8/3, 1 of 3 capped.
        let (l, _, stats) = loss(
            &DecoupledPpo {
                behaviour_cap: BehaviourCap::Clamp(5.0),
                ..Default::default()
            },
            &behaviour,
        );
        assert!((l + 11.0 / 3.0).abs() < 1e-4, "{l}");
        assert_stat(&stats, "behave_weight_mean", 8.0 / 3.0);
        assert_stat(&stats, "behave_capped_frac", 1.0 / 3.0);
        // Mask at 5: w = [2, 1, 0] → mean(−2, 1, 0) = −1/3; mean w = 1, 1 of 3 masked.
        let (l, _, stats) = loss(
            &DecoupledPpo {
                behaviour_cap: BehaviourCap::Mask(5.0),
                ..Default::default()
            },
            &behaviour,
        );
        assert!((l + 1.0 / 3.0).abs() < 1e-4, "{l}");
        assert_stat(&stats, "behave_weight_mean", 1.0);
        assert_stat(&stats, "behave_capped_frac", 1.0 / 3.0);
    }

    #[test]
    fn on_policy_equals_ppo() {
        // π_behave = π_prox → w = 1: decoupled PPO reduces to PPO.
        let l = PackedLayout::<Flex>::new(&[0, 2], &[true, true], None, &Default::default());
        let inputs = PolicyInputs {
            logprob: l.constant(vec![-0.2, -1.0]),
            old_logprob: l.constant(vec![-0.5, -0.9]),
            advantages: l.constant(vec![1.0, -0.5]),
            layout: &l,
        };
        let a: f32 = DecoupledPpo::default()
            .loss(&inputs, l.constant(vec![-0.5, -0.9]))
            .unwrap()
            .loss
            .into_scalar();
        let b: f32 = PpoClip::default().loss(&inputs).unwrap().loss.into_scalar();
        assert!((a - b).abs() < 1e-6);
        assert!(DecoupledPpo {
            behaviour_cap: BehaviourCap::Mask(0.0),
            ..Default::default()
        }
        .validate()
        .is_err());
    }
}
