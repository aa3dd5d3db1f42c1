//! roll-flow's engine: everything between a RON pipeline file and running operators.
//!
//! - [`batch`]: the columnar, packed [`Batch`] that flows along edges.
//! - [`spec`]: the serde types of a pipeline file, its loading with precise error
//!   locations, and `--set` overrides.
//! - [`graph`]: the validated per-step graph (petgraph) and every check that runs before
//!   any model or env is built.
//! - [`operator`]: the [`Operator`] trait each node implements and the [`Catalog`] that
//!   maps RON node variants to implementations.
//! - [`executor`]: one timely dataflow per pipeline; one epoch per training step.
//!
//! The engine is generic over a [`Catalog`]: the operators crate supplies the real one, and
//! tests supply small ones of their own, which is how the executor is tested in isolation.

pub mod atomic_file;
pub mod batch;

pub use batch::{Batch, BatchError, Column, Level, Values};
pub mod catalog;
pub mod operator;
pub mod spec;

pub use catalog::{Catalog, NodeSpec, Reference, SettingProblem, WorkerInfo};
pub use operator::{Contract, Need, Operator, OperatorError, Role, StepContext};
pub use spec::{EnvSet, Pipeline};
pub mod executor;
pub mod graph;
pub mod metrics;

pub use executor::{execute, ExecError, ExecutorOptions, NodeReport, StepReport};
pub use graph::{validate, PipelineGraph, Validation};
