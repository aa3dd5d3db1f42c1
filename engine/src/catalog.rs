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

/// A setting of a `models:` or `envs:` entry out of its range, found before anything is
/// loaded (`Catalog::check_model`, `Catalog::check_env`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingProblem {
    /// Field names from the checked value down to the setting, outermost first: `["optim",
    /// "lr"]` below a model entry, `["size"]` below an env's `FrozenLake(..)`. The
    /// diagnostic points at the deepest of them the file writes (a setting left at its
    /// default is not in the file; then its parent is shown).
    pub field: Vec<String>,
    /// What is wrong, with the valid range.
    pub message: String,
    /// How to fix it, when that is more than the range.
    pub help: Option<String>,
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

    /// Checks one `models:` entry's settings (shapes, optimizer ranges) without loading
    /// anything; `pipeline` gives run-wide settings such as `steps`.
    fn check_model(_model: &Self::Model, _pipeline: &Pipeline<Self>) -> Vec<SettingProblem> {
        Vec::new()
    }

    /// Checks one env config's parameters (the `env:` of an `envs:` entry) without building
    /// an env; fields are relative to the env value.
    fn check_env(_env: &Self::Env) -> Vec<SettingProblem> {
        Vec::new()
    }

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
