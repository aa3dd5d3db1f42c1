//! [`PolicyLoss`]: the policy loss an `ActorStep` trains with, one variant per loss file,
//! and everything the step and its node ask of it (its aggregation, its ratio level, the
//! columns it reads, its checks, its value), answered here so that nothing else matches on
//! the variants.
//!
//! RON: `loss: PpoClip(...)` (the default), `DecoupledPpo(...)`, `Gspo(...)` or
//! `Cispo(...)`.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use roll_flow_kernels::KernelBackend;
use serde::Deserialize;

use super::aggregation::LossAgg;
use super::cispo::Cispo;
use super::decoupled_ppo::DecoupledPpo;
use super::error::AlgoError;
use super::gspo::Gspo;
use super::mismatch_correction::MismatchCorrection;
use super::ppo_loss::{PolicyInputs, PolicyLossOutput, PpoClip, RatioLevel};
use super::segment_ratio::log_ratio;

/// The policy loss of an `ActorStep`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub enum PolicyLoss {
    /// The PPO clipped surrogate ([`super::ppo_loss`]).
    PpoClip(PpoClip),
    /// AReaL's decoupled PPO ([`super::decoupled_ppo`]).
    DecoupledPpo(DecoupledPpo),
    /// GSPO, one clipped ratio per sequence ([`super::gspo`]).
    Gspo(Gspo),
    /// CISPO, clipped stop-gradient weights ([`super::cispo`]).
    Cispo(Cispo),
}

impl Default for PolicyLoss {
    fn default() -> Self {
        PolicyLoss::PpoClip(PpoClip::default())
    }
}

impl PolicyLoss {
    /// The RON name of the variant.
    pub fn name(&self) -> &'static str {
        match self {
            PolicyLoss::PpoClip(_) => "PpoClip",
            PolicyLoss::DecoupledPpo(_) => "DecoupledPpo",
            PolicyLoss::Gspo(_) => "Gspo",
            PolicyLoss::Cispo(_) => "Cispo",
        }
    }

    /// The aggregation mode and its normalisation length.
    pub fn agg(&self) -> (LossAgg, Option<u32>) {
        let clip = match self {
            PolicyLoss::PpoClip(p) => p.clip(),
            PolicyLoss::DecoupledPpo(p) => p.clip(),
            PolicyLoss::Gspo(p) => p.clip(),
            PolicyLoss::Cispo(p) => p.clip(),
        };
        (clip.agg, clip.norm_length)
    }

    /// The granularity of the importance ratio (`Segment` needs the turn ids).
    pub fn ratio(&self) -> RatioLevel {
        match self {
            PolicyLoss::PpoClip(p) => p.ratio,
            PolicyLoss::DecoupledPpo(p) => p.ratio,
            PolicyLoss::Gspo(_) => RatioLevel::Sequence,
            PolicyLoss::Cispo(_) => RatioLevel::Token,
        }
    }

    /// The rollout–training mismatch correction, if the loss has one.
    pub fn correction(&self) -> Option<&MismatchCorrection> {
        match self {
            PolicyLoss::PpoClip(p) => p.correction.as_ref(),
            PolicyLoss::DecoupledPpo(_) => None,
            PolicyLoss::Gspo(p) => p.correction.as_ref(),
            PolicyLoss::Cispo(p) => p.correction.as_ref(),
        }
    }

    /// Whether the loss reads the rollout's `behaviour_logprob` column besides π_old: the
    /// decoupled loss, and any loss with a mismatch correction.
    pub fn reads_behaviour(&self) -> bool {
        matches!(self, PolicyLoss::DecoupledPpo(_)) || self.correction().is_some()
    }

    /// Whether the loss corrects for samples older than the step (`policy_lag`): only the
    /// decoupled loss, whose behaviour weight π_prox/π_behave does.
    pub fn corrects_stale_samples(&self) -> bool {
        matches!(self, PolicyLoss::DecoupledPpo(_))
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), AlgoError> {
        match self {
            PolicyLoss::PpoClip(p) => p.validate(),
            PolicyLoss::DecoupledPpo(p) => p.validate(),
            PolicyLoss::Gspo(p) => p.validate(),
            PolicyLoss::Cispo(p) => p.validate(),
        }
    }

    /// The aggregated loss; `behaviour_logprob` is read by the losses that
    /// [`reads_behaviour`](Self::reads_behaviour) (an error names it when missing).
    pub fn loss<B: KernelBackend>(
        &self,
        inputs: &PolicyInputs<'_, B>,
        behaviour_logprob: Option<Tensor<B, 1>>,
    ) -> Result<PolicyLossOutput<B>, AlgoError> {
        match self {
            PolicyLoss::PpoClip(p) => p.loss_with_behaviour(inputs, behaviour_logprob),
            PolicyLoss::DecoupledPpo(p) => p.loss(inputs, behaviour(behaviour_logprob)?),
            PolicyLoss::Gspo(p) => p.loss(inputs, behaviour_logprob),
            PolicyLoss::Cispo(p) => p.loss(inputs, behaviour_logprob),
        }
    }
}

impl PolicyLoss {
    /// What the loss weighs each response token's term by, detached, for a reader of
    /// `--dump-batches` to check: `policy_ratio`, the importance ratio it clips or weighs
    /// (per token, per turn or per sequence as configured; CISPO's before its clip), and
    /// the weight from the behaviour log-probs when the loss has one
    /// (`mismatch_weight` of a correction, `behaviour_weight` of `DecoupledPpo`).
    pub fn token_diagnostics<B: Backend>(
        &self,
        inputs: &PolicyInputs<'_, B>,
        behaviour_logprob: Option<Tensor<B, 1>>,
    ) -> Vec<(&'static str, Tensor<B, 1>)> {
        let (logp, old) = (inputs.logprob.clone().detach(), inputs.old_logprob.clone());
        let log_r = log_ratio(logp, old.clone(), inputs.layout, self.ratio());
        let mut out = vec![("policy_ratio", log_r.exp())];
        let Some(behaviour) = behaviour_logprob else {
            return out;
        };
        if let PolicyLoss::DecoupledPpo(p) = self {
            out.push((
                "behaviour_weight",
                p.behaviour_weight(old.clone(), behaviour.clone()),
            ));
        }
        if let Some(c) = self.correction() {
            out.push((
                "mismatch_weight",
                c.weights(old, behaviour, inputs.layout).weight,
            ));
        }
        out
    }
}

/// The behaviour log-probs a loss needs, or the error that names them.
fn behaviour<B: KernelBackend>(
    behaviour_logprob: Option<Tensor<B, 1>>,
) -> Result<Tensor<B, 1>, AlgoError> {
    behaviour_logprob.ok_or_else(|| {
        AlgoError::invalid(
            "ActorStep",
            "the configured loss needs behaviour_logprob, which was not provided",
        )
    })
}
