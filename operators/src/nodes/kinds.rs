//! [`NodeKind`] for every registered config: its contract, role, references, checks, and
//! the operator it builds. The estimators are pure functions of the batch; the model- and
//! env-driven operators live in [`crate::rollout`], [`crate::training`], [`crate::eval`] and
//! [`crate::checkpoint`].

use roll_flow_engine::{Contract, Operator, Reference, Role};

use super::specs::*;
use super::{NodeKind, SpecCheck};
use crate::algo::{self, AdvantageEstimator, AdvantageNode, AdvantageSpec};
use crate::checkpoint::CheckpointNode;
use crate::eval::EvalNode;
use crate::rollout::RolloutNode;
use crate::runtime::{RunBackend, Runtime};
use crate::training::actor_step::ActorStepNode;
use crate::training::critic_step::CriticStepNode;
use crate::training::log_prob::LogProbNode;
use crate::training::model_update::ModelUpdateNode;
use crate::training::values::ValuesNode;

macro_rules! estimator_kinds {
    ($($config:ty => $variant:ident,)*) => {$(
        impl NodeKind for $config {
            fn contract(&self) -> Contract {
                AdvantageEstimator::contract(self)
            }

            fn check(&self) -> Result<(), String> {
                AdvantageEstimator::validate(self).map_err(|e| e.to_string())
            }

            fn build<B: RunBackend>(&self, name: &str, res: &mut Runtime<B>) -> Result<Box<dyn Operator>, String> {
                let state = res.saved_state("adv", name)?;
                Ok(Box::new(AdvantageNode::with_state(AdvantageSpec::$variant(self.clone()), state)))
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

macro_rules! operator_kinds {
    ($($config:ty => $role:expr, |$c:ident| $refs:expr, |$s:ident, $res:ident, $name:ident| $build:expr;)*) => {$(
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

            fn build<B: RunBackend>(&self, name: &str, resources: &mut Runtime<B>) -> Result<Box<dyn Operator>, String> {
                let ($s, $res, $name) = (self, resources, name);
                Ok(Box::new($build?))
            }
        }
    )*};
}

operator_kinds! {
    RolloutSpec => Role::Source, |c| c.references(),
        |s, r, _name| RolloutNode::build(s, r);
    LogProbSpec => Role::Transform, |c| model_ref(&c.model),
        |s, r, _name| LogProbNode::build(&s.model, false, r);
    RefLogProbSpec => Role::Transform, |c| model_ref(&c.model),
        |s, r, _name| LogProbNode::build(&s.model, true, r);
    ValuesSpec => Role::Transform, |c| model_ref(&c.model),
        |s, r, _name| ValuesNode::build(&s.model, r);
    ActorStepSpec => Role::PolicyUpdate, |c| model_ref(&c.model),
        |s, r, name| ActorStepNode::build(s, name, r);
    CriticStepSpec => Role::Transform, |c| model_ref(&c.model),
        |s, r, _name| CriticStepNode::build(s, r);
    ModelUpdateSpec => Role::PolicyUpdate, |c| model_ref(&c.model),
        |s, r, _name| ModelUpdateNode::build(&s.model, r);
    EvalSpec => Role::Source, |c| c.references(),
        |s, r, _name| EvalNode::build(s, r);
    CheckpointSpec => Role::Transform, |_c| Vec::new(),
        |s, r, _name| CheckpointNode::build(s, r);
}
