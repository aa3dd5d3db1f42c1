//! The catalog: the set of node, model and env variants a pipeline file may name.
//!
//! The engine knows no concrete operator. A [`Catalog`] supplies the serde types for the
//! `models:`, `envs:` and `nodes:` sections and builds operators from them. The operators
//! crate provides the real catalog; tests provide tiny ones. Adding an operator means one
//! file for it plus one line in the catalog's node registry.

use std::fmt::Debug;

use serde::de::DeserializeOwned;

use crate::batch::Column;
use crate::operator::{Contract, Operator, Role};
use crate::spec::Pipeline;

/// A model or env a node refers to by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reference {
    Model { field: &'static str, name: String },
    Env { field: &'static str, name: String },
}

/// One node variant of the `nodes:` section (e.g. `StarPO(norm: GroupMeanStd)`).
pub trait NodeSpec: DeserializeOwned + Debug + Clone + Send + Sync + 'static {
    /// The RON variant name, e.g. `"StarPO"`.
    fn kind(&self) -> &'static str;
    /// The columns this node needs and gives, as configured.
    fn contract(&self) -> Contract;
    /// How the executor wires it in.
    fn role(&self) -> Role;
    /// The models and envs it names.
    fn references(&self) -> Vec<Reference> {
        Vec::new()
    }
    /// Checks the node's settings (ranges, combinations) before anything is built.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
    /// What would give `column`, as a noun phrase ("a `LogProb` node"), for the advice
    /// "add … upstream".
    fn giver_of(column: &Column) -> Option<&'static str>;
}

/// Information about the worker an operator is built on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerInfo {
    pub index: usize,
    pub peers: usize,
    /// The first step this run executes: 0, or the step after the checkpoint a resumed
    /// run continues from.
    pub first_step: u64,
}

/// The serde types of one pipeline dialect and how its nodes are built.
pub trait Catalog: Sized + Clone + Debug + Send + Sync + 'static {
    type Node: NodeSpec;
    type Model: DeserializeOwned + Debug + Clone + Send + Sync + 'static;
    type Env: DeserializeOwned + Debug + Clone + Send + Sync + 'static;
    /// Per-worker shared state (loaded models, env pools), built inside the worker thread.
    type Resources;

    /// Builds the per-worker resources once, before any operator.
    fn resources(pipeline: &Pipeline<Self>, worker: WorkerInfo) -> Result<Self::Resources, String>;

    /// Builds the operator for node `name`.
    fn build(
        name: &str,
        node: &Self::Node,
        pipeline: &Pipeline<Self>,
        resources: &mut Self::Resources,
    ) -> Result<Box<dyn Operator>, String>;
}
