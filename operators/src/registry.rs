//! The node registry: every node kind a pipeline's `nodes:` may name, one line each.
//!
//! A line `Variant(path::ToSettings) = "RonName"` adds a kind: its settings struct
//! implements [`NodeKind`] in its own file (`crate::nodes`), or is an advantage estimator
//! of `roll-flow-algo` (a node kind through `crate::nodes::advantage`). The list becomes
//! the [`Node`] enum serde reads, and everything the engine and the operators ask about a
//! node is answered by its kind: its contract and role, the advice for a missing column
//! (the kinds that may give it), and the facts the runtime is handed as plain data
//! ([`run_plan`]).

use roll_flow_engine::{Catalog, Column, Contract, NodeSpec, Operator, Pipeline, Reference, Role};
use roll_flow_envs::config::EnvConfig;
use roll_flow_model::spec::ModelSpec;
use serde::Deserialize;

use crate::nodes::kind::{NodeKind, TrainedModel};
use crate::play_settings::{EvalPlay, PolicyPlay};
use crate::runtime::backend::RunBackend;
use crate::runtime::resources::Runtime;
use crate::runtime::run_plan::{RunInfo, RunPlan, Wiring};

macro_rules! node_registry {
    ($($variant:ident($settings:ty) = $ron:literal,)*) => {
        /// One entry of the pipeline's `nodes:` section.
        #[derive(Clone, Debug, PartialEq, Deserialize)]
        #[serde(rename = "node kind")]
        pub enum Node {
            $(#[serde(rename = $ron)] $variant($settings),)*
        }

        impl Node {
            /// Every node kind's RON name, in registry order.
            pub const KINDS: &'static [&'static str] = &[$($ron),*];

            fn parts(&self) -> (&'static str, &dyn NodeKind) {
                match self {
                    $(Node::$variant(settings) => ($ron, settings),)*
                }
            }

            /// The RON names of the kinds some configuration of which gives `column`.
            pub fn kinds_giving(column: &Column) -> Vec<&'static str> {
                let mut kinds = Vec::new();
                $(if <$settings as NodeKind>::may_give().contains(column) {
                    kinds.push($ron);
                })*
                kinds
            }

            /// Each registry line's RON name beside the name its kind gives itself
            /// ([`NodeKind::own_name`]), which must agree.
            #[cfg(test)]
            pub(crate) fn own_names() -> Vec<(&'static str, String)> {
                vec![$(($ron, <$settings as NodeKind>::own_name()),)*]
            }

            /// Builds this node's operator on backend `B`.
            pub fn build<B: RunBackend>(
                &self,
                name: &str,
                runtime: &mut Runtime<B>,
            ) -> Result<Box<dyn Operator>, String> {
                match self {
                    $(Node::$variant(settings) => settings.build(name, runtime),)*
                }
            }
        }
    };
}

node_registry! {
    Rollout(crate::nodes::rollout::RolloutSpec) = "Rollout",
    LogProb(crate::nodes::log_prob::LogProbSpec) = "LogProb",
    RefLogProb(crate::nodes::ref_log_prob::RefLogProbSpec) = "RefLogProb",
    Values(crate::nodes::values::ValuesSpec) = "Values",
    Gae(roll_flow_algo::gae::Gae) = "Gae",
    BiLevelGae(roll_flow_algo::bi_level_gae::BiLevelGae) = "BiLevelGae",
    Grpo(roll_flow_algo::grpo::Grpo) = "Grpo",
    Reinforce(roll_flow_algo::reinforce::Reinforce) = "Reinforce",
    Rloo(roll_flow_algo::rloo::Rloo) = "Rloo",
    DrGrpo(roll_flow_algo::dr_grpo::DrGrpo) = "DrGrpo",
    ReinforcePlusPlus(roll_flow_algo::reinforce_plus_plus::ReinforcePlusPlus) = "ReinforcePlusPlus",
    StarPo(roll_flow_algo::starpo::StarPo) = "StarPO",
    GiGpo(roll_flow_algo::gigpo::GiGpo) = "GiGPO",
    StepReinforce(roll_flow_algo::step_reinforce::StepReinforce) = "StepReinforce",
    AgenticReinforce(roll_flow_algo::agentic_reinforce::AgenticReinforce) = "AgenticReinforce",
    ActorStep(crate::nodes::actor_step::ActorStepSpec) = "ActorStep",
    CriticStep(crate::nodes::critic_step::CriticStepSpec) = "CriticStep",
    ModelUpdate(crate::nodes::model_update::ModelUpdateSpec) = "ModelUpdate",
    Eval(crate::nodes::eval::EvalSpec) = "Eval",
    Checkpoint(crate::nodes::checkpoint::CheckpointSpec) = "Checkpoint",
}

impl Node {
    /// It trains a model.
    pub fn trains(&self) -> bool {
        self.parts().1.trains()
    }

    /// The model whose weights it publishes to the inference copy (`ModelUpdate`).
    pub fn trained(&self) -> Option<TrainedModel> {
        self.parts().1.trained()
    }

    pub fn publishes(&self) -> Option<&str> {
        self.parts().1.publishes()
    }

    /// The policy it trains by playing envs, and how (`Rollout`).
    pub fn plays(&self) -> Option<PolicyPlay> {
        self.parts().1.plays()
    }

    /// The policy it evaluates, and on which envs (`Eval`).
    pub fn evaluates(&self) -> Option<EvalPlay> {
        self.parts().1.evaluates()
    }
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

    fn giver_of(column: &Column) -> Option<String> {
        let quoted: Vec<String> = Node::kinds_giving(column)
            .into_iter()
            .map(|k| format!("`{k}`"))
            .collect();
        match quoted.as_slice() {
            [] => None,
            [one] => Some(format!("a {one} node")),
            several => Some(format!("one of the nodes {}", several.join(", "))),
        }
    }
}

/// A pipeline of roll-flow's dialect, whatever backend its operators run on.
pub trait RollFlowDialect: Catalog<Node = Node, Model = ModelSpec, Env = EnvConfig> {}

impl<C: Catalog<Node = Node, Model = ModelSpec, Env = EnvConfig>> RollFlowDialect for C {}

/// The plain data every worker's runtime is built from: the run's settings, models and env
/// sets, and how the nodes relate, asked of their kinds.
pub fn run_plan<C: RollFlowDialect>(pipeline: &Pipeline<C>) -> RunPlan {
    let nodes: Vec<&Node> = pipeline.nodes.iter().map(|(_, node)| node).collect();
    let wiring = Wiring {
        published_by_update: nodes
            .iter()
            .filter_map(|n| n.publishes().map(str::to_string))
            .collect(),
        trained: nodes
            .iter()
            .filter_map(|n| n.trained())
            .map(|t| t.model)
            .collect(),
        rollouts: nodes.iter().filter_map(|n| n.plays()).collect(),
    };
    RunPlan {
        run: RunInfo {
            name: pipeline.name.clone(),
            seed: pipeline.seed,
            steps: pipeline.steps,
            out_dir: pipeline.out_dir.clone(),
            first_step: 0,
            dump_dir: pipeline.dump_batches.clone(),
        },
        device: pipeline.device,
        models: pipeline.models.clone(),
        envs: pipeline.envs.clone(),
        wiring,
    }
}

/// The names of the nodes that train a model, in file order.
pub fn training_nodes<C: RollFlowDialect>(pipeline: &Pipeline<C>) -> Vec<&str> {
    pipeline
        .nodes
        .iter()
        .filter(|(_, node)| node.trains())
        .map(|(name, _)| name)
        .collect()
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
