//! `CriticStep`: the value-function update (verl's and ROLL's critic update): for each of
//! `ppo_epochs` passes, shuffled mini-batches of `mini_batch` samples (one optimizer step
//! each), micro-batches of `micro_batch` samples, the value loss (MSE to the GAE returns,
//! clipped around the rollout-time values, [`roll_flow_algo::ValueLoss`]) scaled by its
//! share of the mini-batch's loss divisor ([`crate::training::epochs::train_epochs`]),
//! micro-batches trained concurrently ([`crate::runtime::concurrent`]), accumulated
//! gradients, one clipped AdamW step.
//!
//! RON: `"critic_step": CriticStep(model: "critic", ppo_epochs: 1, mini_batch: 64)`.

use std::cell::RefCell;
use std::rc::Rc;

use burn::tensor::Tensor;
use roll_flow_algo::{CriticBatch, ValueLoss};
use roll_flow_engine::batch::column::{RESPONSE_MASK, RETURNS, VALUES};
use roll_flow_engine::collective::Collective;
use roll_flow_engine::{
    Batch, Column, Contract, Need, Operator, OperatorError, Reference, StepContext,
};
use roll_flow_model::Qwen2ValueModel;
use serde::Deserialize;

use super::kind::{at_least_one, model_ref, NodeKind, TrainedModel};
use crate::runtime::backend::{RunBackend, TrainBackend};
use crate::runtime::models::CriticModel;
use crate::runtime::resources::Runtime;
use crate::runtime::scoring::token_values;
use crate::runtime::trainable::PartStats;
use crate::training::epochs::{
    loss_divisor, train_epochs, EpochSchedule, MicroBatching, StatMeans,
};

/// `CriticStep`'s settings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CriticStepSpec {
    /// The critic trained (a `models:` name).
    pub model: String,
    /// The value loss (default: MSE with value clipping as in ROLL).
    #[serde(default)]
    pub loss: ValueLoss,
    /// Passes over the batch per step (default 1).
    #[serde(default = "one_epoch")]
    pub ppo_epochs: usize,
    /// Samples per optimizer step (default: the whole batch).
    #[serde(default)]
    pub mini_batch: Option<usize>,
    /// Samples per gradient-accumulation micro-batch (default: the whole mini-batch).
    #[serde(default)]
    pub micro_batch: Option<usize>,
    /// Padded tokens per micro-batch at most, as `ActorStep`'s (default: no limit).
    #[serde(default)]
    pub max_tokens_per_micro_batch: Option<usize>,
}

fn one_epoch() -> usize {
    1
}

impl NodeKind for CriticStepSpec {
    fn contract(&self) -> Contract {
        Contract {
            needs: vec![
                Need::column(RESPONSE_MASK),
                Need::with_hint(
                    RETURNS,
                    "value targets come from GAE; use `adv: Gae(...)` upstream",
                ),
                Need::column(VALUES),
            ],
            ..Contract::default()
        }
    }

    fn may_give() -> Vec<Column> {
        Vec::new()
    }

    fn references(&self) -> Vec<Reference> {
        model_ref(&self.model)
    }

    fn check(&self) -> Result<(), String> {
        at_least_one("ppo_epochs", self.ppo_epochs as u64)?;
        at_least_one("mini_batch", self.mini_batch.unwrap_or(1) as u64)?;
        at_least_one("micro_batch", self.micro_batch.unwrap_or(1) as u64)?;
        at_least_one(
            "max_tokens_per_micro_batch",
            self.max_tokens_per_micro_batch.unwrap_or(1) as u64,
        )
    }

    fn trained(&self) -> Option<TrainedModel> {
        Some(TrainedModel {
            model: self.model.clone(),
            micro_batch: self.micro_batch.or(self.mini_batch),
            max_tokens_per_micro_batch: self.max_tokens_per_micro_batch,
            lm_head: false,
        })
    }

    fn build<B: RunBackend>(
        &self,
        _name: &str,
        runtime: &mut Runtime<B>,
    ) -> Result<Box<dyn Operator>, String> {
        Ok(Box::new(CriticStepNode {
            collective: runtime.worker.collective.clone(),
            spec: self.clone(),
            critic: runtime.critic(&self.model)?,
        }))
    }
}

struct CriticStepNode<B: RunBackend> {
    /// The workers that share each step's micro-batches.
    collective: Collective,
    spec: CriticStepSpec,
    critic: Rc<RefCell<CriticModel<B>>>,
}

/// The value loss of one micro-batch under `critic`, with its statistics.
fn value_loss<B: RunBackend>(
    spec: &CriticStepSpec,
    critic: &Qwen2ValueModel<TrainBackend<B>>,
    batch: &Batch,
) -> Result<(Tensor<TrainBackend<B>, 1>, PartStats<B>), String> {
    let device = critic.device();
    let inputs = CriticBatch::from_batch(batch, &device)
        .map_err(|e| e.with_hint_from(&spec.contract()).to_string())?;
    let values = token_values(critic, batch)?;
    let out = spec
        .loss
        .loss(values, inputs.old_values, inputs.returns, &inputs.layout)
        .map_err(|e| e.to_string())?;
    let mut stats = out.stats;
    stats.insert_scalar("value_loss", out.loss.clone());
    Ok((out.loss, stats))
}

impl<B: RunBackend> Operator for CriticStepNode<B> {
    fn process(&mut self, ctx: &mut StepContext, batch: Batch) -> Result<Batch, OperatorError> {
        let critic = self.critic.clone();
        let mut stats = StatMeans::default();
        let step = ctx.step;
        train_epochs(
            &batch,
            EpochSchedule {
                epochs: self.spec.ppo_epochs,
                mini_batch: self.spec.mini_batch,
                micro: MicroBatching {
                    samples: self.spec.micro_batch,
                    tokens: self.spec.max_tokens_per_micro_batch,
                    by_prompt: false,
                },
                seed: ctx.seed,
                collective: &self.collective,
            },
            &mut stats,
            |part| loss_divisor(part, self.spec.loss.agg, self.spec.loss.norm_length),
            |parts, scales, seeds| {
                let spec = &self.spec;
                let mut critic = critic.borrow_mut();
                critic
                    .train
                    .accumulate_parts(parts, scales, seeds, |m, p| value_loss(spec, m, p))
            },
            || critic.borrow_mut().train.apply(step),
        )
        .map_err(OperatorError)?;
        stats.into_metrics(&mut ctx.metrics);
        Ok(batch)
    }
}
