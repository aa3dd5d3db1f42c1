//! What a catalog's node types tell the engine ([`NodeSpec`]: kind, contract, role, the
//! models and envs a node names, its checks), what a setting check reports
//! ([`SettingProblem`]) and what an operator learns about its worker ([`WorkerInfo`]).

use std::fmt::Debug;

use serde::de::DeserializeOwned;

use crate::batch::column::Column;
use crate::operator::{Contract, Role};

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
    fn giver_of(column: &Column) -> Option<String>;
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
#[derive(Clone, Debug)]
pub struct WorkerInfo {
    pub index: usize,
    pub peers: usize,
    /// The first step this run executes: 0, or the step after the checkpoint a resumed
    /// run continues from.
    pub first_step: u64,
    /// Sums and gathers across the run's workers (data-parallel training).
    pub collective: crate::collective::Collective,
}

impl WorkerInfo {
    /// The only worker of a run (tests, tools that build operators outside a run).
    pub fn single(first_step: u64) -> WorkerInfo {
        WorkerInfo {
            index: 0,
            peers: 1,
            first_step,
            collective: crate::collective::Collective::single(),
        }
    }
}
