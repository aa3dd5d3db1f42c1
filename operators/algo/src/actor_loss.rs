//! The actor's full objective: policy loss − entropy bonus + uniform-prior KL + KL loss term.
//!
//! L = L_policy − entropy_coef·agg(H) + uniform_kl_coef·agg(KL(U_A‖π_θ))
//!     + kl_coef·agg(KL(π_θ‖π_ref)) (verl/ROLL actor update, plus the uniform prior). The
//! three regularisers use the policy loss's aggregation mode.
//!
//! The uniform-prior term, KL(U_A‖π) = −ln|A| − (1/|A|)·Σ_{a∈A} ln π(a) over the tokens `A`
//! the answer guide allows at a position (the vocabulary without a guide), is label
//! smoothing's regulariser (Pereyra et al. 2017, "Regularizing neural networks by
//! penalizing confident output distributions", §3.1: label smoothing adds KL(u‖p)). Its
//! gradient on a logit is (π(a) − 1/|A|)/T: it pulls hardest where the policy is surest,
//! so every state keeps some probability on every action. The entropy bonus does the
//! opposite (its gradient −π(a)(ln π(a) + H) vanishes as π saturates): a policy can meet
//! an entropy target on the states where actions tie and stay deterministic where one
//! action looks best, and those are the states where a wrong belief needs exploration to
//! be corrected. Default 0 (off); `ActorStep(uniform_kl: …)`.
//!
//! The KL term uses a per-token estimator of d = logp − ref_logp, default `K3`
//! (REFERENCE.md: "+ kl_loss_coef · k3"); its coefficient defaults to 0.001 (verl/ROLL
//! `kl_loss_coef`). `Full` (full-vocabulary KL) is not supported as a loss term: it needs
//! the reference model's whole distribution at every response token, and validation refuses
//! it (as verl raises NotImplementedError). The entropy coefficient is the
//! `ActorStep(entropy: …)` field.
//!
//! RON: `ActorStep(loss: PpoClip(...), entropy: 0.001, kl_loss: Some((coef: 0.001)))`.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use serde::Deserialize;

use super::aggregation::aggregate;
use super::algo_stats::DeviceStats;
use super::error::AlgoError;
use super::kl::KlEstimator;
use super::policy_loss::PolicyLoss;
use super::ppo_loss::PolicyInputs;
#[cfg(test)]
use super::{decoupled_ppo::DecoupledPpo, ppo_loss::PpoClip};

fn default_kl_coef() -> f32 {
    0.001
}

fn k3() -> KlEstimator {
    KlEstimator::K3
}

/// KL to the reference model as a loss term.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KlLoss {
    /// Coefficient of the KL term (default 0.001).
    #[serde(default = "default_kl_coef")]
    pub coef: f32,
    /// KL estimator (default `K3`); `Full` is refused at validation.
    #[serde(default = "k3")]
    pub estimator: KlEstimator,
}

/// Per-token tensors the actor objective reads besides the policy inputs.
#[derive(Clone, Debug, Default)]
pub struct ActorExtras<B: Backend> {
    /// `behaviour_logprob` (decoupled PPO).
    pub behaviour_logprob: Option<Tensor<B, 1>>,
    /// `ref_logprob` (KL term).
    pub ref_logprob: Option<Tensor<B, 1>>,
    /// Per-token entropy of the policy (entropy bonus).
    pub entropy: Option<Tensor<B, 1>>,
    /// Per-token KL(U_A‖π) (uniform-prior term).
    pub uniform_kl: Option<Tensor<B, 1>>,
}

/// The coefficients of the objective's regularisers (all off by default).
#[derive(Clone, Copy, Debug, Default)]
pub struct Regularisers<'a> {
    /// Entropy bonus coefficient.
    pub entropy: f32,
    /// Uniform-prior KL coefficient.
    pub uniform_kl: f32,
    /// KL to the reference model.
    pub kl_loss: Option<&'a KlLoss>,
}

/// The actor's scalar loss (shape `[1]`) and its statistics, still on the device (read
/// them after the backward is queued: [`DeviceStats`]).
#[derive(Clone, Debug)]
pub struct ActorLossOutput<B: Backend> {
    pub loss: Tensor<B, 1>,
    pub stats: DeviceStats<B>,
}

/// L_policy − entropy_coef·agg(H) + uniform_kl_coef·agg(KL(U‖π)) + kl.coef·agg(KL).
pub fn actor_objective<B: roll_flow_kernels::KernelBackend>(
    policy: &PolicyLoss,
    inputs: &PolicyInputs<'_, B>,
    extras: ActorExtras<B>,
    regularisers: Regularisers<'_>,
) -> Result<ActorLossOutput<B>, AlgoError> {
    let (entropy_coef, kl_loss) = (regularisers.entropy, regularisers.kl_loss);
    let out = policy.loss(inputs, extras.behaviour_logprob.clone())?;
    let (agg, norm) = policy.agg();
    let mut stats = out.stats;
    stats.insert_scalar("pg_loss", out.loss.clone());
    let mut loss = out.loss;
    // The `entropy` stat is always the mean over tokens, whatever the loss aggregation, so
    // it means the same with the bonus on or off (adaptive entropy control reads it).
    if let Some(h) = &extras.entropy {
        stats.insert_response_mean("entropy", h.clone(), inputs.layout);
    }
    if entropy_coef != 0.0 {
        let h = aggregate(
            extras.entropy.clone().ok_or_else(|| missing("entropy"))?,
            inputs.layout,
            agg,
            norm,
        );
        loss = loss - h.mul_scalar(entropy_coef);
    }
    if let Some(u) = &extras.uniform_kl {
        stats.insert_response_mean("uniform_kl", u.clone(), inputs.layout);
    }
    if regularisers.uniform_kl != 0.0 {
        let u = extras.uniform_kl.ok_or_else(|| missing("uniform_kl"))?;
        let term = aggregate(u, inputs.layout, agg, norm);
        loss = loss + term.mul_scalar(regularisers.uniform_kl);
    }
    if let Some(kl) = kl_loss {
        let reference = extras
            .ref_logprob
            .clone()
            .ok_or_else(|| missing("ref_logprob"))?;
        let per_token = kl
            .estimator
            .tensor(inputs.logprob.clone(), reference)
            .ok_or_else(|| {
                AlgoError::invalid(
                    "ActorStep",
                    "the KL loss term needs a per-token estimator (K1, Abs, Mse (K2), K3 or LowVarKl), not `Full`",
                )
            })?;
        let term = aggregate(per_token, inputs.layout, agg, norm);
        stats.insert_scalar("kl_loss", term.clone());
        loss = loss + term.mul_scalar(kl.coef);
    }
    stats.insert_scalar("actor_loss", loss.clone());
    Ok(ActorLossOutput { loss, stats })
}

fn missing(what: &str) -> AlgoError {
    AlgoError::invalid(
        "ActorStep",
        format!("the configured loss needs {what}, which was not provided"),
    )
}

#[cfg(test)]
#[path = "actor_loss_tests.rs"]
mod tests;
