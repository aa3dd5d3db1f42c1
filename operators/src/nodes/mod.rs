//! The node registry: every RON node variant a pipeline may name, and its implementation.
//!
//! A node kind is a config struct implementing [`NodeKind`] (its contract, its role, the
//! models and envs it names, how to build its operator). The `node_registry!` list
//! below turns the kinds into the `Node` enum that serde reads from `nodes:`; adding an
//! operator is its own file plus one line here.

mod checks;
mod env_names;
mod kinds;
mod specs;

use roll_flow_engine::batch::column::*;
use roll_flow_engine::{Column, Contract, NodeSpec, Operator, Reference, Role};
use serde::Deserialize;

use crate::algo;
use crate::runtime::{RunBackend, Runtime};

pub use checks::SpecCheck;
pub use env_names::EnvNames;
pub use specs::*;

/// What each node kind tells the engine, and how it is built.
pub trait NodeKind {
    fn contract(&self) -> Contract;
    fn role(&self) -> Role {
        Role::Transform
    }
    fn references(&self) -> Vec<Reference> {
        Vec::new()
    }
    /// Range and combination checks run at validation.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
    /// Builds the operator on backend `B` (not part of the trait object: the generic
    /// call is made from `Node::build`'s match).
    fn build<B: RunBackend>(
        &self,
        name: &str,
        resources: &mut Runtime<B>,
    ) -> Result<Box<dyn Operator>, String>
    where
        Self: Sized;
}

macro_rules! node_registry {
    ($($variant:ident($config:ty) = $ron:literal,)*) => {
        /// One entry of the pipeline's `nodes:` section.
        #[derive(Clone, Debug, PartialEq, Deserialize)]
        #[serde(rename = "node kind")]
        pub enum Node {
            $(#[serde(rename = $ron)] $variant($config),)*
        }

        impl Node {
            /// Every node kind's RON name.
            pub const KINDS: &'static [&'static str] = &[$($ron),*];

            fn parts(&self) -> (&'static str, &dyn NodeKind) {
                match self {
                    $(Node::$variant(config) => ($ron, config),)*
                }
            }

            /// Builds this node's operator on backend `B`.
            pub fn build<B: RunBackend>(
                &self,
                name: &str,
                resources: &mut Runtime<B>,
            ) -> Result<Box<dyn Operator>, String> {
                match self {
                    $(Node::$variant(config) => config.build(name, resources),)*
                }
            }
        }
    };
}

node_registry! {
    Rollout(RolloutSpec) = "Rollout",
    LogProb(LogProbSpec) = "LogProb",
    RefLogProb(RefLogProbSpec) = "RefLogProb",
    Values(ValuesSpec) = "Values",
    Gae(algo::Gae) = "Gae",
    BiLevelGae(algo::BiLevelGae) = "BiLevelGae",
    Grpo(algo::Grpo) = "Grpo",
    Reinforce(algo::Reinforce) = "Reinforce",
    StarPo(algo::StarPo) = "StarPO",
    GiGpo(algo::GiGpo) = "GiGPO",
    StepReinforce(algo::StepReinforce) = "StepReinforce",
    AgenticReinforce(algo::AgenticReinforce) = "AgenticReinforce",
    ActorStep(ActorStepSpec) = "ActorStep",
    CriticStep(CriticStepSpec) = "CriticStep",
    ModelUpdate(ModelUpdateSpec) = "ModelUpdate",
    Eval(EvalSpec) = "Eval",
    Checkpoint(CheckpointSpec) = "Checkpoint",
}

impl NodeSpec for Node {
    fn kind(&self) -> &'static str {
        self.parts().0
    }

    fn contract(&self) -> Contract {
        self.parts().1.contract()
    }

    fn role(&self) -> Role {
        self.parts().1.role()
    }

    fn references(&self) -> Vec<Reference> {
        self.parts().1.references()
    }

    fn check(&self) -> Result<(), String> {
        self.parts().1.check()
    }

    fn giver_of(column: &Column) -> Option<&'static str> {
        let advice = [
            (OLD_LOGPROB, "a `LogProb` node"),
            (REF_LOGPROB, "a `RefLogProb` node"),
            (VALUES, "a `Values` node (with a critic model)"),
            (
                ADVANTAGES,
                "an advantage node (`StarPO`, `GiGPO`, `Grpo`, `Gae`, ...)",
            ),
            (RETURNS, "a `Gae` or `BiLevelGae` node"),
        ];
        advice
            .into_iter()
            .find(|(c, _)| c == column)
            .map(|(_, a)| a)
            .or(Some("a `Rollout` node"))
    }
}

#[cfg(test)]
mod tests;
