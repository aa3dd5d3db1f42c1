//! The `adv` node: any advantage estimator of `roll-flow-algo` plus the state it keeps
//! between steps, as an engine [`Operator`]. It fills `advantages` (and `returns`) and
//! reports the estimator's metrics under their own names (`adv/mean`, `kl/beta`,
//! `gigpo/anchor_groups`, …).
//!
//! Every [`AdvantageEstimator`] is a node kind through the blanket [`NodeKind`] impl
//! below, so an estimator is its own file in `roll-flow-algo` plus one registry line. Its
//! state (the adaptive KL coefficient) is shared with the runtime through an
//! `Rc<RefCell<..>>`, so the checkpoint node saves it (`adv/<node>.json`) and a resumed run
//! starts from the saved value instead of the configured initial one.

use std::cell::RefCell;
use std::rc::Rc;

use roll_flow_algo::{AdvantageEstimator, AdvantageState};
use roll_flow_engine::{Batch, Column, Contract, Operator, OperatorError, StepContext};

use super::kind::NodeKind;
use crate::runtime::backend::RunBackend;
use crate::runtime::resources::Runtime;

impl<E> NodeKind for E
where
    E: AdvantageEstimator + Clone + Default + 'static,
{
    fn contract(&self) -> Contract {
        self.full_contract()
    }

    fn may_give() -> Vec<Column> {
        AdvantageEstimator::contract(&E::default()).gives
    }

    fn check(&self) -> Result<(), String> {
        self.validate().map_err(|e| e.to_string())
    }

    fn own_name() -> String {
        E::default().kind().to_string()
    }

    fn build<B: RunBackend>(
        &self,
        name: &str,
        runtime: &mut Runtime<B>,
    ) -> Result<Box<dyn Operator>, String> {
        let state = runtime.saved_state("adv", name)?;
        Ok(Box::new(AdvantageNode::with_state(self.clone(), state)))
    }
}

/// The `adv` operator over estimator `E`.
#[derive(Clone, Debug)]
pub struct AdvantageNode<E> {
    estimator: E,
    state: Rc<RefCell<AdvantageState>>,
}

impl<E: AdvantageEstimator> AdvantageNode<E> {
    /// A node with a fresh state of its own.
    pub fn new(estimator: E) -> Self {
        Self::with_state(estimator, Rc::default())
    }

    /// A node whose state is also held by the runtime (saved by checkpoints).
    pub fn with_state(estimator: E, state: Rc<RefCell<AdvantageState>>) -> Self {
        AdvantageNode { estimator, state }
    }

    /// A copy of the state carried between steps (the adaptive KL coefficient).
    pub fn state(&self) -> AdvantageState {
        self.state.borrow().clone()
    }
}

impl<E: AdvantageEstimator> Operator for AdvantageNode<E> {
    fn process(&mut self, ctx: &mut StepContext, mut input: Batch) -> Result<Batch, OperatorError> {
        let stats = self
            .estimator
            .estimate(&mut input, &mut self.state.borrow_mut())
            .map_err(|e| OperatorError(e.to_string()))?;
        ctx.metrics.extend(stats);
        Ok(input)
    }
}

#[cfg(test)]
#[path = "advantage_tests.rs"]
mod tests;
