//! `CriticStep`: the value-function update (verl's and ROLL's critic update): for each of
//! `ppo_epochs` passes, shuffled mini-batches of `mini_batch` samples (one optimizer step
//! each), micro-batches of `micro_batch` samples, the value loss (MSE to the
//! GAE returns, clipped around the rollout-time values, [`crate::algo::ValueLoss`]) scaled
//! by 1/micro-batches, accumulated gradients, one clipped AdamW step.

use std::cell::RefCell;
use std::rc::Rc;

use burn::optim::GradientsParams;
use roll_flow_engine::{Batch, Operator, OperatorError, StepContext};

use super::{single_worker, train_epochs, StatMeans};
use crate::algo::CriticBatch;
use crate::nodes::CriticStepSpec;
use crate::runtime::scoring::token_values;
use crate::runtime::{CriticModel, Runtime};

pub struct CriticStepNode {
    spec: CriticStepSpec,
    critic: Rc<RefCell<CriticModel>>,
}

impl CriticStepNode {
    pub fn build(spec: &CriticStepSpec, runtime: &mut Runtime) -> Result<Self, String> {
        single_worker("CriticStep", runtime.worker.peers)?;
        Ok(CriticStepNode {
            spec: spec.clone(),
            critic: runtime.critic(&spec.model)?,
        })
    }

    fn micro_step(
        &self,
        critic: &mut CriticModel,
        batch: &Batch,
        scale: f32,
    ) -> Result<crate::algo::AlgoStats, String> {
        let device = Default::default();
        let inputs = CriticBatch::from_batch(batch, &device).map_err(|e| e.to_string())?;
        let values = token_values(critic.train.module(), batch)?;
        let out = self
            .spec
            .loss
            .loss(values, inputs.old_values, inputs.returns, &inputs.layout)
            .map_err(|e| e.to_string())?;
        let mut stats = out.stats;
        let loss: f32 = out.loss.clone().detach().into_scalar();
        stats.insert("value_loss".into(), loss as f64);
        let grads = out.loss.mul_scalar(scale).backward();
        critic
            .train
            .accumulate(GradientsParams::from_grads(grads, critic.train.module()));
        Ok(stats)
    }
}

impl Operator for CriticStepNode {
    fn process(&mut self, ctx: &mut StepContext, batch: Batch) -> Result<Batch, OperatorError> {
        let critic = self.critic.clone();
        let mut stats = StatMeans::default();
        let step = ctx.step;
        train_epochs(
            &batch,
            self.spec.ppo_epochs,
            (self.spec.mini_batch, self.spec.micro_batch),
            ctx.seed,
            &mut stats,
            |part, scale| self.micro_step(&mut critic.borrow_mut(), part, scale),
            || critic.borrow_mut().train.apply(step),
        )
        .map_err(OperatorError)?;
        stats.into_metrics(&mut ctx.metrics);
        Ok(batch)
    }
}
