//! The `adv` node: an [`AdvantageSpec`] plus the state it keeps between steps, as an
//! engine [`Operator`]. It fills `advantages` (and `returns`) and reports the estimator's
//! metrics under their own names (`adv/mean`, `kl/beta`, `gigpo/anchor_groups`, …).
//!
//! The state (the adaptive KL coefficient) is shared with the runtime through an
//! `Rc<RefCell<..>>`, so the checkpoint node can save it and a resumed run starts from the
//! saved value instead of the configured initial one (see [`crate::runtime::Runtime::saved_state`]).

use std::cell::RefCell;
use std::rc::Rc;

use roll_flow_engine::{Batch, Operator, OperatorError, StepContext};

use super::adv_spec::AdvantageSpec;
use super::estimator::{AdvantageEstimator, AdvantageState};

/// The `adv` operator.
#[derive(Clone, Debug)]
pub struct AdvantageNode {
    spec: AdvantageSpec,
    state: Rc<RefCell<AdvantageState>>,
}

impl AdvantageNode {
    /// A node with a fresh state of its own.
    pub fn new(spec: AdvantageSpec) -> Self {
        Self::with_state(spec, Rc::default())
    }

    /// A node whose state is also held by the runtime (saved by checkpoints).
    pub fn with_state(spec: AdvantageSpec, state: Rc<RefCell<AdvantageState>>) -> Self {
        AdvantageNode { spec, state }
    }

    /// A copy of the state carried between steps (the adaptive KL coefficient).
    pub fn state(&self) -> AdvantageState {
        self.state.borrow().clone()
    }
}

impl Operator for AdvantageNode {
    fn process(&mut self, ctx: &mut StepContext, mut input: Batch) -> Result<Batch, OperatorError> {
        let stats = self
            .spec
            .apply(&mut input, &mut self.state.borrow_mut())
            .map_err(|e| OperatorError(e.to_string()))?;
        ctx.metrics.extend(stats);
        Ok(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::test_batches::{f32s, u64s, with_masks};
    use crate::algo::{Grpo, KlPenalty};
    use roll_flow_engine::batch::column::{ADVANTAGES, GROUP_ID, OLD_LOGPROB, REF_LOGPROB, SCORE};
    use std::collections::BTreeMap;

    fn ctx() -> StepContext {
        StepContext {
            step: 0,
            policy_version: 0,
            seed: 1,
            worker: 0,
            workers: 1,
            metrics: BTreeMap::new(),
        }
    }

    #[test]
    fn fills_advantages_reports_metrics_and_keeps_kl_state() {
        let spec = AdvantageSpec::Grpo(Grpo {
            kl_penalty: Some(KlPenalty {
                coef: 0.1,
                target: Some(0.01),
                ..serde_default_kl()
            }),
            ..Default::default()
        });
        let mut node = AdvantageNode::new(spec);
        let mut b = with_masks(&[&[1], &[1]]);
        f32s(&mut b, &SCORE, &[1.0, 0.0]);
        u64s(&mut b, &GROUP_ID, &[0, 0]);
        f32s(&mut b, &OLD_LOGPROB, &[-1.0, -1.0]);
        f32s(&mut b, &REF_LOGPROB, &[-1.5, -1.5]);
        let mut c = ctx();
        let out = node.process(&mut c, b).unwrap();
        assert!(out.has(&ADVANTAGES));
        assert_eq!(c.metrics["kl/beta"], 0.1f32 as f64);
        // KL 0.5 ≫ target 0.01: β grows by the capped 20%·n/horizon.
        let beta = node.state().kl.as_ref().unwrap().beta();
        assert!((beta - 0.1f32 as f64 * (1.0 + 0.2 * 2.0 / 10000.0)).abs() < 1e-12);
        let err = node.process(&mut ctx(), with_masks(&[&[1]])).unwrap_err();
        assert!(err.0.contains("Grpo needs column `score`"), "{}", err.0);
    }

    fn serde_default_kl() -> KlPenalty {
        ron::from_str("()").unwrap()
    }
}
