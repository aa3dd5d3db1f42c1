//! [`validate`]: every check in order, and what it found.

use super::pipeline_graph::{GraphNode, PipelineGraph};
use super::{checks, columns};
use crate::dialect::Catalog;
use crate::node_spec::NodeSpec;
use crate::spec::diagnostic::Diagnostic;
use crate::spec::load::Loaded;

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
