//! The validated per-step graph ([`PipelineGraph`]) the executor builds its dataflow from.

use petgraph::graph::{DiGraph, NodeIndex};

use crate::operator::{Contract, Role};

/// One node of the validated graph.
#[derive(Clone, Debug)]
pub struct GraphNode {
    pub name: String,
    /// Its RON variant, e.g. `StarPO`.
    pub kind: &'static str,
    pub role: Role,
    pub contract: Contract,
    /// Upstream node indices, in the order the edges are written.
    pub inputs: Vec<usize>,
    /// Downstream node indices.
    pub outputs: Vec<usize>,
}

/// A validated pipeline graph: acyclic, every node reachable from a source, every column
/// need met.
#[derive(Clone, Debug)]
pub struct PipelineGraph {
    pub nodes: Vec<GraphNode>,
    /// Node indices in a topological order (sources first); ties keep file order.
    pub order: Vec<usize>,
    /// Nodes whose completion publishes the next policy version (the feedback edge's
    /// origin): the last policy updaters, or every sink when nothing trains.
    pub feedback_from: Vec<usize>,
}

impl PipelineGraph {
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    pub fn sources(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(|&i| self.nodes[i].role == Role::Source)
    }

    /// Nodes with no downstream node.
    pub fn sinks(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(|&i| self.nodes[i].outputs.is_empty())
    }
}

pub(crate) type Petgraph = DiGraph<usize, usize>;

pub(crate) fn node_index(i: usize) -> NodeIndex {
    NodeIndex::new(i)
}
