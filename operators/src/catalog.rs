//! The real catalog: roll-flow's node kinds, model specs and env configs, with operators
//! that run on backend `B`.
//!
//! Reading, validating and drawing a pipeline only need the dialect, so they use
//! `RollFlow` (the CPU backend, the default type parameter). Running picks the backend from
//! the pipeline's `device:` and executes `Pipeline::recast::<RollFlow<B>>()` of the same
//! file.

use std::fmt;
use std::marker::PhantomData;

use roll_flow_engine::{Catalog, Operator, Pipeline, SettingProblem, WorkerInfo};

use crate::envs::EnvConfig;
use crate::model::spec::ModelSpec;
use crate::model::CpuBackend;
use crate::nodes::Node;
use crate::runtime::{RunBackend, Runtime};

/// The pipeline dialect `roll-flow` reads (`Pipeline<RollFlow>`), with operators on
/// backend `B`.
pub struct RollFlow<B: RunBackend = CpuBackend>(PhantomData<fn() -> B>);

impl<B: RunBackend> Clone for RollFlow<B> {
    fn clone(&self) -> Self {
        RollFlow(PhantomData)
    }
}

impl<B: RunBackend> fmt::Debug for RollFlow<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RollFlow")
    }
}

/// What the operators of one worker share.
pub type NodeResources<B = CpuBackend> = Runtime<B>;

impl<B: RunBackend> Catalog for RollFlow<B> {
    type Node = Node;
    type Model = ModelSpec;
    type Env = EnvConfig;
    type Resources = NodeResources<B>;

    fn check_model(model: &ModelSpec, pipeline: &Pipeline<Self>) -> Vec<SettingProblem> {
        model.setting_problems(pipeline.steps)
    }

    fn check_env(env: &EnvConfig) -> Vec<SettingProblem> {
        env.setting_problems()
    }

    fn resources(pipeline: &Pipeline<Self>, worker: WorkerInfo) -> Result<Runtime<B>, String> {
        Runtime::new(pipeline.clone().recast::<RollFlow>(), worker)
    }

    fn build(
        name: &str,
        node: &Node,
        _pipeline: &Pipeline<Self>,
        resources: &mut Runtime<B>,
    ) -> Result<Box<dyn Operator>, String> {
        let operator = node.build(name, resources)?;
        match (&resources.run.dump_dir, node) {
            (Some(dir), Node::ActorStep(_) | Node::CriticStep(_)) => {
                Ok(Box::new(roll_flow_engine::batch::dump::DumpInput {
                    inner: operator,
                    dir: dir.clone(),
                    node: name.to_string(),
                }))
            }
            _ => Ok(operator),
        }
    }
}
