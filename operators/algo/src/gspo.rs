//! GSPO: group sequence policy optimisation, the clipped surrogate on one importance ratio
//! per sequence (Zheng et al. 2025, "Group Sequence Policy Optimization", Qwen, eq. 5–7;
//! verl `compute_policy_loss_gspo`, ROLL's GSPO, AReaL's GSPO).
//!
//! For sample i with response y_i:
//! - s_i = (π_θ(y_i)/π_old(y_i))^{1/|y_i|} = exp((1/|y_i|)·Σ_t (logp_t − old_logp_t)), the
//!   length-normalised sequence ratio ([`RatioLevel::Sequence`]);
//! - per response token t of i: L_t = max(−A_t·s_i, −A_t·clip(s_i, 1 − ε_low, 1 + ε_high))
//!   (and the dual clip, if set), times the mismatch weight when `correction` is set;
//! - aggregated by `agg` (default `SeqMeanTokenMean`: the mean over sequences of each
//!   sequence's token mean, which for an outcome advantage A_i is the paper's
//!   (1/G)·Σ_i min(s_i·A_i, clip(s_i)·A_i)).
//!
//! The gradient reaches every token of a sequence through the mean log-ratio:
//! ∂L_i/∂logp_u = −A_i·s_i/|y_i| for each token u of i while s_i is inside the clip range
//! (A_i > 0: s_i < 1 + ε_high; A_i < 0: s_i > 1 − ε_low), 0 outside (paper eq. 10–11), so
//! a whole sequence is clipped or not. With advantages that vary over a sequence's tokens
//! (GAE) each token's gradient is the sequence's mean of the tokens' terms, not verl's
//! GSPO-token variant s_{i,t} = sg(s_i)·π_θ(y_t)/sg(π_θ(y_t)), which keeps each token's own
//! A_t; the two agree for outcome advantages. verl also clamps log s_i at 10; here s_i is
//! not clamped (the clip bounds it where A > 0, the dual clip where A < 0).
//!
//! It runs in the fused PPO kernel (any `KernelBackend`: CPU, wgpu, CUDA), the sequence
//! log-ratio formed in burn ops first, as `PpoClip(ratio: Sequence)` does.
//!
//! Defaults: ε_low = 3e-4, ε_high = 4e-4 (the paper's, §5.1; verl's GSPO example), no
//! dual clip, `SeqMeanTokenMean`. Stats: `pg_clipfrac` (response tokens of clipped
//! sequences), `ppo_kl`.
//!
//! RON: `loss: Gspo()`, `loss: Gspo(low: 3e-4, high: 4e-4, correction: (tis: 2.0))`.

use burn::tensor::Tensor;
use roll_flow_kernels::{ClipSettings, KernelBackend};

use super::error::AlgoError;
use super::mismatch_correction::MismatchCorrection;
use super::ppo_loss::{
    check_clip, check_correction, corrected, mismatch_weights, ClipLoss, PolicyInputs,
    PolicyLossOutput,
};
use super::segment_ratio::RatioLevel;

const NODE: &str = "Gspo";

roll_flow_kernels::clip_settings_struct! {
    /// GSPO's settings (defaults: ε_low 3e-4, ε_high 4e-4, else [`ClipSettings::default`]).
    pub struct Gspo {
        /// Rollout–training mismatch correction ([`MismatchCorrection`]); `None` (default).
        pub correction: Option<MismatchCorrection> = None,
    }
}

impl Default for Gspo {
    fn default() -> Self {
        Gspo::with_clip(ClipSettings {
            low: 3e-4,
            high: 4e-4,
            ..ClipSettings::default()
        })
    }
}

impl Gspo {
    /// Checks the clip and correction settings.
    pub fn validate(&self) -> Result<(), AlgoError> {
        check_clip(NODE, self.low, self.high, self.dual_clip)?;
        check_correction(NODE, self.correction.as_ref())
    }

    /// The aggregated loss; `behaviour` (the sampler's log-probs) is read by a correction.
    pub fn loss<B: KernelBackend>(
        &self,
        inputs: &PolicyInputs<'_, B>,
        behaviour: Option<Tensor<B, 1>>,
    ) -> Result<PolicyLossOutput<B>, AlgoError> {
        self.validate()?;
        let correction = mismatch_weights(NODE, self.correction.as_ref(), inputs, behaviour)?;
        let clip = ClipLoss {
            node: NODE,
            config: self.clip(),
            ratio: RatioLevel::Sequence,
        };
        corrected(correction, |w| clip.loss(inputs, w))
    }
}

#[cfg(test)]
#[path = "gspo_tests.rs"]
mod tests;
