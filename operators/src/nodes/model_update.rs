//! `ModelUpdate`: publishes the trained weights to the inference copy as a new policy
//! version. With this node in the graph, `ActorStep` leaves publishing to it, so a
//! pipeline can decide when rollout sees new weights (e.g. after a checkpoint, or only
//! every few steps in asynchronous setups).
//!
//! RON: `"update": ModelUpdate(model: "policy")` (`model` defaults to `"policy"`).

use std::cell::RefCell;
use std::rc::Rc;

use roll_flow_engine::{
    Batch, Column, Contract, Operator, OperatorError, Reference, Role, StepContext,
};
use serde::Deserialize;

use super::kind::{default_policy, model_ref, NodeKind};
use crate::runtime::backend::RunBackend;
use crate::runtime::models::PolicyModel;
use crate::runtime::resources::Runtime;

/// `ModelUpdate`'s settings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelUpdateSpec {
    /// The model published (default `"policy"`).
    pub model: String,
}

impl Default for ModelUpdateSpec {
    fn default() -> Self {
        ModelUpdateSpec {
            model: default_policy(),
        }
    }
}

impl NodeKind for ModelUpdateSpec {
    fn contract(&self) -> Contract {
        Contract::default()
    }

    fn may_give() -> Vec<Column> {
        Vec::new()
    }

    fn role(&self) -> Role {
        Role::PolicyUpdate
    }

    fn references(&self) -> Vec<Reference> {
        model_ref(&self.model)
    }

    fn publishes(&self) -> Option<&str> {
        Some(&self.model)
    }

    fn build<B: RunBackend>(
        &self,
        _name: &str,
        runtime: &mut Runtime<B>,
    ) -> Result<Box<dyn Operator>, String> {
        Ok(Box::new(ModelUpdateNode {
            policy: runtime.policy(&self.model)?,
        }))
    }
}

struct ModelUpdateNode<B: RunBackend> {
    policy: Rc<RefCell<PolicyModel<B>>>,
}

impl<B: RunBackend> Operator for ModelUpdateNode<B> {
    fn process(&mut self, ctx: &mut StepContext, batch: Batch) -> Result<Batch, OperatorError> {
        let mut policy = self.policy.borrow_mut();
        policy.publish();
        ctx.metrics.insert("version".into(), policy.version as f64);
        Ok(batch)
    }
}
