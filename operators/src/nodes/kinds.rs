//! [`NodeKind`] for every registered config.
//!
//! The advantage estimators run here already (they are pure functions of the batch); the
//! model- and env-driven operators (rollout, log-probs, training, eval, checkpoints) are
//! declared and validated, and report plainly that this build cannot run them yet.

use roll_flow_engine::{Contract, Operator, Reference, Role};

use super::specs::*;
use super::{NodeKind, SpecCheck};
use crate::algo::{self, AdvantageEstimator, AdvantageNode, AdvantageSpec};
use crate::catalog::NodeResources;

fn not_runnable(kind: &str) -> Result<Box<dyn Operator>, String> {
    Err(format!(
        "`{kind}` nodes cannot run in this build of roll-flow yet (validate and graph accept them); \
         see README.md, \"Status\""
    ))
}

macro_rules! estimator_kinds {
    ($($config:ty => $variant:ident,)*) => {$(
        impl NodeKind for $config {
            fn contract(&self) -> Contract {
                AdvantageEstimator::contract(self)
            }

            fn check(&self) -> Result<(), String> {
                AdvantageEstimator::validate(self).map_err(|e| e.to_string())
            }

            fn build(&self, _name: &str, _res: &mut NodeResources) -> Result<Box<dyn Operator>, String> {
                Ok(Box::new(AdvantageNode::new(AdvantageSpec::$variant(self.clone()))))
            }
        }
    )*};
}

estimator_kinds! {
    algo::Gae => Gae,
    algo::BiLevelGae => BiLevelGae,
    algo::Grpo => Grpo,
    algo::Reinforce => Reinforce,
    algo::StarPo => StarPo,
    algo::GiGpo => GiGpo,
    algo::StepReinforce => StepReinforce,
    algo::AgenticReinforce => AgenticReinforce,
}

macro_rules! declared_kinds {
    ($($config:ty => $kind:literal, $role:expr, |$c:ident| $refs:expr;)*) => {$(
        impl NodeKind for $config {
            fn contract(&self) -> Contract {
                <$config>::contract(self)
            }

            fn role(&self) -> Role {
                $role
            }

            fn references(&self) -> Vec<Reference> {
                let $c = self;
                $refs
            }

            fn check(&self) -> Result<(), String> {
                SpecCheck::check(self)
            }

            fn build(&self, _name: &str, _res: &mut NodeResources) -> Result<Box<dyn Operator>, String> {
                not_runnable($kind)
            }
        }
    )*};
}

declared_kinds! {
    RolloutSpec => "Rollout", Role::Source, |c| c.references();
    LogProbSpec => "LogProb", Role::Transform, |c| model_ref(&c.model);
    RefLogProbSpec => "RefLogProb", Role::Transform, |c| model_ref(&c.model);
    ValuesSpec => "Values", Role::Transform, |c| model_ref(&c.model);
    ActorStepSpec => "ActorStep", Role::PolicyUpdate, |c| model_ref(&c.model);
    CriticStepSpec => "CriticStep", Role::Transform, |c| model_ref(&c.model);
    ModelUpdateSpec => "ModelUpdate", Role::PolicyUpdate, |c| model_ref(&c.model);
    EvalSpec => "Eval", Role::Source, |c| c.references();
    CheckpointSpec => "Checkpoint", Role::Transform, |_c| Vec::new();
}
