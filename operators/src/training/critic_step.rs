//! `CriticStep`: the value-function update (verl's and ROLL's critic update): for each of
//! `ppo_epochs` passes, shuffled mini-batches of `mini_batch` samples (one optimizer step
//! each), micro-batches of `micro_batch` samples, the value loss (MSE to the
//! GAE returns, clipped around the rollout-time values, [`crate::algo::ValueLoss`]) scaled
//! by its share of the mini-batch's loss divisor ([`super::train_epochs`]), micro-batches
//! trained concurrently ([`super::concurrent`]), accumulated gradients, one clipped AdamW
//! step.

use std::cell::RefCell;
use std::rc::Rc;

use burn::tensor::{ElementConversion, Tensor};
use roll_flow_engine::{Batch, Operator, OperatorError, StepContext};

use super::{loss_divisor, single_worker, train_epochs, EpochSchedule, StatMeans};
use crate::algo::{AlgoStats, CriticBatch};
use crate::model::Qwen2ValueModel;
use crate::nodes::CriticStepSpec;
use crate::runtime::scoring::token_values;
use crate::runtime::{CriticModel, RunBackend, Runtime, TrainBackend};

pub struct CriticStepNode<B: RunBackend> {
    spec: CriticStepSpec,
    critic: Rc<RefCell<CriticModel<B>>>,
}

impl<B: RunBackend> CriticStepNode<B> {
    pub fn build(spec: &CriticStepSpec, runtime: &mut Runtime<B>) -> Result<Self, String> {
        single_worker("CriticStep", runtime.worker.peers)?;
        Ok(CriticStepNode {
            spec: spec.clone(),
            critic: runtime.critic(&spec.model)?,
        })
    }
}

/// The value loss of one micro-batch under `critic`, with its statistics.
fn value_loss<B: RunBackend>(
    spec: &CriticStepSpec,
    critic: &Qwen2ValueModel<TrainBackend<B>>,
    batch: &Batch,
) -> Result<(Tensor<TrainBackend<B>, 1>, AlgoStats), String> {
    let device = critic.device();
    let inputs = CriticBatch::from_batch(batch, &device).map_err(|e| e.to_string())?;
    let values = token_values(critic, batch)?;
    let out = spec
        .loss
        .loss(values, inputs.old_values, inputs.returns, &inputs.layout)
        .map_err(|e| e.to_string())?;
    let mut stats = out.stats;
    let loss: f32 = out.loss.clone().detach().into_scalar().elem();
    stats.insert("value_loss".into(), loss as f64);
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
                micro_batch: self.spec.micro_batch,
                seed: ctx.seed,
            },
            &mut stats,
            |part| loss_divisor(part, self.spec.loss.agg, self.spec.loss.norm_length),
            |parts, scales| {
                let spec = &self.spec;
                let mut critic = critic.borrow_mut();
                critic
                    .train
                    .accumulate_parts(parts, scales, |m, p| value_loss(spec, m, p))
            },
            || critic.borrow_mut().train.apply(step),
        )
        .map_err(OperatorError)?;
        stats.into_metrics(&mut ctx.metrics);
        Ok(batch)
    }
}
