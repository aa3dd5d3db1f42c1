//! The per-step graph: nodes, edges, and every check that runs before anything is built.
//!
//! `validate` turns a parsed `Pipeline` into a [`PipelineGraph`] or reports *all* the
//! problems at once (a user fixing a file should not have to run validation ten times).
//! Checks only look at the spec, the node contracts and the catalog's range checks of each
//! model and env entry: no model, tokenizer or env is loaded, so `roll-flow validate` is
//! instant even for a 7B pipeline.

pub mod checks;
pub mod columns;
pub mod dot;
pub mod graphviz;
pub mod pipeline_graph;
pub mod validate;

pub use dot::to_dot;
pub use pipeline_graph::{GraphNode, PipelineGraph};
pub use validate::{validate, Validation};
