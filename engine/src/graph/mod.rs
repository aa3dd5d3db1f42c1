//! The per-step graph: nodes, edges, and every check that runs before anything is built.
//!
//! [`validate`] turns a parsed [`Pipeline`] into a [`PipelineGraph`] or reports *all* the
//! problems at once (a user fixing a file should not have to run validation ten times).
//! Checks only look at the spec, the node contracts and the catalog's range checks of each
//! model and env entry: no model, tokenizer or env is loaded, so `roll-flow validate` is
//! instant even for a 7B pipeline.

mod checks;
mod columns;
mod dot;
pub mod graphviz;

use petgraph::graph::{DiGraph, NodeIndex};

use crate::catalog::{Catalog, NodeSpec};
use crate::operator::{Contract, Role};
use crate::spec::{Diagnostic, Loaded};

pub use dot::to_dot;

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

/// The outcome of validation: the graph (when there are no errors) and every diagnostic.
#[derive(Debug)]
pub struct Validation {
    pub graph: Option<PipelineGraph>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Validation {
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.is_error())
    }

    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| !d.is_error())
    }
}

/// Validates a loaded pipeline. See the module docs.
pub fn validate<C: Catalog>(loaded: &Loaded<C>) -> Validation {
    let mut report = checks::Report::new(&loaded.source);
    let pipeline = &loaded.pipeline;
    checks::scalars(pipeline, &mut report);
    checks::duplicate_names(pipeline, &mut report);
    checks::references(pipeline, &mut report);
    checks::node_settings(pipeline, &mut report);
    checks::entry_settings(pipeline, &mut report);
    // Duplicated names are reported above; the graph keeps each name's first definition.
    let mut nodes: Vec<GraphNode> = pipeline
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, (name, _))| pipeline.nodes.names().position(|n| n == *name) == Some(*i))
        .map(|(_, (name, spec))| GraphNode {
            name: name.to_string(),
            kind: spec.kind(),
            role: spec.role(),
            contract: spec.contract(),
            inputs: Vec::new(),
            outputs: Vec::new(),
        })
        .collect();
    let graph = checks::edges(pipeline, &mut nodes, &mut report);
    let order = checks::acyclic_order(&graph, &nodes, &mut report);
    let reachable = checks::reachable_from_sources(&graph, &nodes, &mut report);
    if let Some(order) = &order {
        columns::column_needs::<C::Node>(order, &nodes, &reachable, &mut report);
        columns::group_pitfalls(pipeline, order, &nodes, &mut report);
    }
    let feedback_from = checks::feedback_origins(&graph, &nodes);
    let diagnostics = report.finish();
    let ok = !diagnostics.iter().any(Diagnostic::is_error);
    let graph = match (ok, order) {
        (true, Some(order)) => Some(PipelineGraph {
            nodes,
            order,
            feedback_from,
        }),
        _ => None,
    };
    Validation { graph, diagnostics }
}

pub(crate) type Petgraph = DiGraph<usize, usize>;

pub(crate) fn node_index(i: usize) -> NodeIndex {
    NodeIndex::new(i)
}
