//! The real catalog: roll-flow's node kinds, model specs and env configs.

use roll_flow_engine::{Catalog, Operator, Pipeline, WorkerInfo};

use crate::envs::EnvConfig;
use crate::model::spec::ModelSpec;
use crate::nodes::Node;

/// The pipeline dialect `roll-flow` reads: `Pipeline<RollFlow>`.
#[derive(Clone, Debug)]
pub struct RollFlow;

/// What the operators of one worker share.
#[derive(Debug)]
pub struct NodeResources {
    pub worker: WorkerInfo,
}

impl Catalog for RollFlow {
    type Node = Node;
    type Model = ModelSpec;
    type Env = EnvConfig;
    type Resources = NodeResources;

    fn resources(_pipeline: &Pipeline<Self>, worker: WorkerInfo) -> Result<NodeResources, String> {
        Ok(NodeResources { worker })
    }

    fn build(
        name: &str,
        node: &Node,
        _pipeline: &Pipeline<Self>,
        resources: &mut NodeResources,
    ) -> Result<Box<dyn Operator>, String> {
        node.build(name, resources)
    }
}
