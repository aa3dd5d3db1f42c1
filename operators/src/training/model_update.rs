//! `ModelUpdate`: publishes the trained weights to the inference copy as a new policy
//! version. With this node in the graph, `ActorStep` leaves publishing to it, so a
//! pipeline can decide when rollout sees new weights (e.g. after a checkpoint, or only
//! every few steps in asynchronous setups).

use std::cell::RefCell;
use std::rc::Rc;

use roll_flow_engine::{Batch, Operator, OperatorError, StepContext};

use crate::runtime::{PolicyModel, RunBackend, Runtime};

pub struct ModelUpdateNode<B: RunBackend> {
    policy: Rc<RefCell<PolicyModel<B>>>,
}

impl<B: RunBackend> ModelUpdateNode<B> {
    pub fn build(model: &str, runtime: &mut Runtime<B>) -> Result<Self, String> {
        Ok(ModelUpdateNode {
            policy: runtime.policy(model)?,
        })
    }
}

impl<B: RunBackend> Operator for ModelUpdateNode<B> {
    fn process(&mut self, ctx: &mut StepContext, batch: Batch) -> Result<Batch, OperatorError> {
        let mut policy = self.policy.borrow_mut();
        policy.publish();
        ctx.metrics.insert("version".into(), policy.version as f64);
        Ok(batch)
    }
}
