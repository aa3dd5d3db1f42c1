//! Range checks of node settings, run by `roll-flow validate` before anything is built.

use super::specs::*;
use crate::algo::{KlEstimator, PolicyLoss};

/// Why `ActorStep(kl: (estimator: Full))` is refused (verl raises NotImplementedError for
/// it too).
const FULL_KL_REFUSAL: &str = "`kl: (estimator: Full)` is not supported: full-vocabulary KL \
    needs the reference model's whole distribution at every response token, which the \
    `RefLogProb` column does not hold; use `estimator: K3` (the default, low variance) or `K1`";

/// Range checks of a node's settings, run at validation; most nodes have none.
pub trait SpecCheck {
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

impl SpecCheck for LogProbSpec {}
impl SpecCheck for RefLogProbSpec {}
impl SpecCheck for ValuesSpec {}
impl SpecCheck for ModelUpdateSpec {}

fn at_least_one(what: &str, value: u64) -> Result<(), String> {
    if value == 0 {
        return Err(format!("`{what}` must be at least 1"));
    }
    Ok(())
}

impl SpecCheck for RolloutSpec {
    fn check(&self) -> Result<(), String> {
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return Err(format!(
                "`temperature` must be >= 0, got {}",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(format!("`top_p` must be in (0, 1], got {}", self.top_p));
        }
        if self.top_k == Some(0) {
            return Err("`top_k` must be at least 1 (leave it out to disable)".into());
        }
        at_least_one("max_new_tokens", self.max_new_tokens as u64)?;
        at_least_one("inference_loops", self.inference_loops as u64)?;
        if self.sequence_length <= self.max_new_tokens {
            return Err(format!(
                "`sequence_length` ({}) must exceed `max_new_tokens` ({}) to leave room for the prompt",
                self.sequence_length, self.max_new_tokens
            ));
        }
        Ok(())
    }
}

impl SpecCheck for ActorStepSpec {
    fn check(&self) -> Result<(), String> {
        at_least_one("ppo_epochs", self.ppo_epochs as u64)?;
        at_least_one("micro_batch", self.micro_batch.unwrap_or(1) as u64)?;
        at_least_one("mini_batch", self.mini_batch.unwrap_or(1) as u64)?;
        if !(self.entropy.is_finite() && self.entropy >= 0.0) {
            return Err(format!("`entropy` must be >= 0, got {}", self.entropy));
        }
        if !(self.uniform_kl.is_finite() && self.uniform_kl >= 0.0) {
            return Err(format!(
                "`uniform_kl` must be >= 0, got {}",
                self.uniform_kl
            ));
        }
        if let Some(adaptive) = &self.adaptive_entropy {
            adaptive.validate()?;
        }
        if self
            .kl
            .as_ref()
            .is_some_and(|k| k.estimator == KlEstimator::Full)
        {
            return Err(FULL_KL_REFUSAL.into());
        }
        if self.old_logprob == OldLogProb::ThisStep
            && (self.ppo_epochs > 1 || self.mini_batch.is_some())
        {
            return Err(
                "`old_logprob: ThisStep` needs one optimizer step per batch (`ppo_epochs: 1`, \
                        no `mini_batch`): after the first step the weights are no longer π_old; \
                        remove it and add a LogProb node upstream"
                    .into(),
            );
        }
        let loss = match &self.loss {
            PolicyLoss::PpoClip(l) => l.validate(),
            PolicyLoss::DecoupledPpo(l) => l.validate(),
        };
        loss.map_err(|e| e.to_string())
    }
}

impl SpecCheck for CriticStepSpec {
    fn check(&self) -> Result<(), String> {
        at_least_one("ppo_epochs", self.ppo_epochs as u64)?;
        at_least_one("mini_batch", self.mini_batch.unwrap_or(1) as u64)?;
        at_least_one("micro_batch", self.micro_batch.unwrap_or(1) as u64)
    }
}

impl SpecCheck for EvalSpec {
    fn check(&self) -> Result<(), String> {
        at_least_one("every", self.every)?;
        at_least_one("max_new_tokens", self.max_new_tokens as u64)?;
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return Err(format!(
                "`temperature` must be >= 0 (0 is greedy), got {}",
                self.temperature
            ));
        }
        Ok(())
    }
}

impl SpecCheck for CheckpointSpec {
    fn check(&self) -> Result<(), String> {
        at_least_one("every", self.every)?;
        at_least_one("keep", self.keep.unwrap_or(1) as u64)
    }
}
