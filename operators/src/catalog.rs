//! The real catalog: roll-flow's node kinds, model specs and env configs.

use roll_flow_engine::{Catalog, Operator, Pipeline, WorkerInfo};

use crate::envs::EnvConfig;
use crate::model::spec::ModelSpec;
use crate::nodes::Node;

/// The pipeline dialect `roll-flow` reads: `Pipeline<RollFlow>`.
#[derive(Clone, Debug)]
pub struct RollFlow;

/// What the operators of one worker share.
pub type NodeResources = crate::runtime::Runtime;

impl Catalog for RollFlow {
    type Node = Node;
    type Model = ModelSpec;
    type Env = EnvConfig;
    type Resources = NodeResources;

    fn resources(pipeline: &Pipeline<Self>, worker: WorkerInfo) -> Result<NodeResources, String> {
        if pipeline.device != roll_flow_engine::spec::Device::Cpu {
            return Err(format!(
                "`device: {:?}`: this build trains and generates on the CPU only; the GPU path \
                 (burn's wgpu/cuda backends) is not wired into the operators yet; use `--set device=Cpu`",
                pipeline.device
            ));
        }
        Ok(crate::runtime::Runtime::new(pipeline, worker))
    }

    fn build(
        name: &str,
        node: &Node,
        _pipeline: &Pipeline<Self>,
        resources: &mut NodeResources,
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
