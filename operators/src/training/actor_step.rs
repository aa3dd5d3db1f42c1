//! `ActorStep`: the policy update of a PPO-style step (verl's and ROLL's actor update).
//!
//! For each of `ppo_epochs` passes over the batch, the batch is shuffled and cut into
//! mini-batches of `mini_batch` samples, one optimizer step each, and every mini-batch into
//! micro-batches of `micro_batch` samples; each micro-batch's objective (policy loss −
//! entropy bonus + uniform-prior KL + KL term, [`actor_objective`]) is scaled by its share
//! of the mini-batch's loss divisor ([`super::train_epochs`]) and back-propagated,
//! micro-batches concurrently ([`super::concurrent`]); the gradients are accumulated, and
//! one AdamW step with global-norm clipping and the scheduled learning rate applies them.
//! Log-probs are recomputed under the current weights with the rollout's temperature and
//! answer guides, exactly as `LogProb` computed π_old. With `old_logprob: ThisStep` (one
//! optimizer step per batch, checked at validation) π_old is those log-probs detached: the
//! weights `LogProb` would have scored with are the ones about to be updated, so the ratio
//! is 1 and its gradient ∇log π, as with the column, and the `LogProb` pass is saved.
//! With `old_logprob: Behaviour` π_old is the rollout's log-probs: the weights of this
//! step too, since the rollout is synchronous (it samples with the version the step
//! starts from), so mini-batches and several epochs can skip the `LogProb` pass as well.
//! The step does nothing while
//! `critic_warmup` steps have not passed. Afterwards the new weights are published to the
//! inference copy unless a `ModelUpdate` node does that.
//! With `adaptive_entropy` the bonus coefficient is the controller's
//! ([`crate::algo::entropy_control`]), updated from the entropy each step measures and
//! saved by checkpoints (`actor/<node>.json`), so a resumed run continues it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use burn::tensor::Tensor;
use roll_flow_engine::{Batch, Operator, OperatorError, StepContext};

use super::{loss_divisor, single_worker, train_epochs, EpochSchedule, StatMeans};
use crate::algo::{
    actor_objective, ActorBatch, ActorExtras, AlgoStats, EntropyController, PolicyInputs,
    Regularisers,
};
use crate::model::generate::AnswerChoices;
use crate::model::Qwen2CausalLm;
use crate::nodes::ActorStepSpec;
use crate::runtime::scoring::{rollout_temperature, score_responses, token_column};
use crate::runtime::{PolicyModel, RunBackend, Runtime, TrainBackend};

pub struct ActorStepNode<B: RunBackend> {
    spec: ActorStepSpec,
    policy: Rc<RefCell<PolicyModel<B>>>,
    guides: Rc<RefCell<BTreeMap<String, Arc<AnswerChoices>>>>,
    temperature: f32,
    entropy_control: Rc<RefCell<EntropyController>>,
}

impl<B: RunBackend> ActorStepNode<B> {
    pub fn build(
        spec: &ActorStepSpec,
        name: &str,
        runtime: &mut Runtime<B>,
    ) -> Result<Self, String> {
        single_worker("ActorStep", runtime.worker.peers)?;
        Ok(ActorStepNode {
            spec: spec.clone(),
            policy: runtime.policy(&spec.model)?,
            guides: runtime.guides.clone(),
            temperature: rollout_temperature(&runtime.pipeline, &spec.model),
            entropy_control: runtime.saved_state("actor", name)?,
        })
    }

    /// This step's entropy bonus coefficient: fixed, or the controller's.
    fn entropy_coef(&self) -> f32 {
        match &self.spec.adaptive_entropy {
            None => self.spec.entropy,
            Some(settings) => {
                let initial = self.spec.entropy as f64;
                self.entropy_control.borrow().bonus(settings, initial) as f32
            }
        }
    }

    /// Feeds the entropy measured in this step to the controller; reports its coefficient.
    fn control_entropy(&self, metrics: &mut BTreeMap<String, f64>) {
        let Some(settings) = &self.spec.adaptive_entropy else {
            return;
        };
        let mut control = self.entropy_control.borrow_mut();
        if let Some(&entropy) = metrics.get("entropy") {
            control.update(settings, self.spec.entropy as f64, entropy);
        }
        metrics.insert("entropy/coef".into(), control.coef.unwrap_or(0.0));
    }
}

/// What a micro-batch's objective needs, shareable across the threads that train
/// micro-batches concurrently.
struct ActorObjective<'a> {
    spec: &'a ActorStepSpec,
    guides: &'a BTreeMap<String, Arc<AnswerChoices>>,
    temperature: f32,
    entropy_coef: f32,
}

impl ActorObjective<'_> {
    /// The objective of one micro-batch under `policy` (log-probs recomputed), with its
    /// statistics.
    fn loss<B: RunBackend>(
        &self,
        policy: &Qwen2CausalLm<TrainBackend<B>>,
        batch: &Batch,
    ) -> Result<(Tensor<TrainBackend<B>, 1>, AlgoStats), String> {
        let device = policy.device();
        let old = self.spec.old_logprob.column();
        let inputs = ActorBatch::from_batch(
            batch,
            &self.spec.loss,
            self.spec.kl.as_ref(),
            old.as_ref(),
            &device,
        )
        .map_err(|e| e.to_string())?;
        let uniform_kl = self.spec.uniform_kl != 0.0;
        let scored = score_responses(policy, batch, self.temperature, self.guides, uniform_kl)?;
        let n = batch.num_tokens();
        let logprob = token_column(scored.logprobs, &scored.token_index, n);
        let entropy = token_column(scored.entropy, &scored.token_index, n);
        let uniform_kl = scored
            .uniform_kl
            .map(|u| token_column(u, &scored.token_index, n));
        let old_logprob = match &inputs.old_logprob {
            Some(old) => old.clone(),
            None => logprob.clone().detach(),
        };
        let policy_inputs = PolicyInputs {
            logprob,
            old_logprob,
            advantages: inputs.advantages.clone(),
            layout: &inputs.layout,
        };
        let extras = ActorExtras {
            behaviour_logprob: inputs.behaviour_logprob.clone(),
            ref_logprob: inputs.ref_logprob.clone(),
            entropy: Some(entropy),
            uniform_kl,
        };
        let regularisers = Regularisers {
            entropy: self.entropy_coef,
            uniform_kl: self.spec.uniform_kl,
            kl_loss: self.spec.kl.as_ref(),
        };
        let out = actor_objective(&self.spec.loss, &policy_inputs, extras, regularisers)
            .map_err(|e| e.to_string())?;
        Ok((out.loss, out.stats))
    }
}

impl<B: RunBackend> Operator for ActorStepNode<B> {
    fn process(&mut self, ctx: &mut StepContext, batch: Batch) -> Result<Batch, OperatorError> {
        if ctx.step < self.spec.critic_warmup {
            ctx.metrics.insert("warming_up".into(), 1.0);
            return Ok(batch);
        }
        let policy_cell = self.policy.clone();
        let guides = self.guides.borrow();
        let objective = ActorObjective {
            spec: &self.spec,
            guides: &guides,
            temperature: self.temperature,
            entropy_coef: self.entropy_coef(),
        };
        ctx.metrics
            .insert("entropy/bonus".into(), objective.entropy_coef as f64);
        let (agg, norm_length) = self.spec.loss.agg();
        let mut stats = StatMeans::default();
        let step = ctx.step;
        train_epochs(
            &batch,
            EpochSchedule {
                epochs: self.spec.ppo_epochs,
                mini_batch: self.spec.mini_batch,
                micro_batch: self.spec.micro_batch,
                seed: ctx.seed,
            },
            &mut stats,
            |part| loss_divisor(part, agg, norm_length),
            |parts, scales| {
                let mut policy = policy_cell.borrow_mut();
                policy
                    .train
                    .accumulate_parts(parts, scales, |m, p| objective.loss(m, p))
            },
            || policy_cell.borrow_mut().train.apply(step),
        )
        .map_err(OperatorError)?;
        let mut policy = self.policy.borrow_mut();
        if policy.publish_on_train {
            policy.publish();
        }
        stats.into_metrics(&mut ctx.metrics);
        self.control_entropy(&mut ctx.metrics);
        ctx.metrics
            .insert("policy_version".into(), policy.version as f64);
        Ok(batch)
    }
}
