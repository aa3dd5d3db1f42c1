//! roll-flow's engine: everything between a RON pipeline file and running operators.
//!
//! - [`batch`]: the columnar, packed [`Batch`] that flows along edges; [`batch_dump`]: a
//!   node's input batches as JSON files (`--dump-batches`).
//! - [`operator`]: the [`Operator`] trait each node implements and the [`Contract`] it
//!   declares; [`node_spec`]: what a node type tells the engine ([`NodeSpec`]).
//! - [`dialect`]: the [`Catalog`] that maps RON node, model and env variants to their
//!   types and operators, and [`Pipeline`], one file of that dialect.
//! - [`spec`]: loading a pipeline file with precise error locations, and `--set`
//!   overrides.
//! - [`graph`]: the validated per-step graph (petgraph) and every check that runs before
//!   any model or env is built.
//! - [`executor`]: one timely dataflow per pipeline; one epoch per training step.
//! - [`metrics`]: `metrics.jsonl`, TensorBoard events and plots; [`atomic_file`]: writes
//!   that never leave a half-written file.
//!
//! The engine is generic over a [`Catalog`]: the operators crate supplies the real one, and
//! tests supply small ones of their own, which is how the executor is tested in isolation.

pub mod atomic_file;
pub mod batch;
pub mod batch_dump;
pub mod collective;
pub mod dialect;
pub mod executor;
pub mod graph;
pub mod metrics;
pub mod node_spec;
pub mod operator;
pub mod spec;
pub mod stable_hash;
pub mod trace;
pub mod trace_chart;

pub use batch::{Batch, BatchError, Column, Level, Values};
pub use dialect::{Catalog, Pipeline};
pub use executor::{execute, ExecError, ExecutorOptions, NodeReport, StepReport};
pub use graph::{validate, PipelineGraph, Validation};
pub use node_spec::{NodeSpec, Reference, SettingProblem, WorkerInfo};
pub use operator::{Contract, Need, Operator, OperatorError, Refusal, Role, StepContext};
pub use spec::EnvSet;
