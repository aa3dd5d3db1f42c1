//! The executor: one timely dataflow per pipeline, one epoch per training step.
//!
//! Every worker builds the same dataflow from the validated `PipelineGraph`:
//!
//! - each node is a timely operator (`unary_frontier`) wrapping the catalog's
//!   `Operator`; a node with several upstream nodes receives their concatenated streams
//!   and runs once the frontier has passed the step, on the merge of their batches;
//! - sources (rollout, eval) read the *policy-version stream*: the versions injected for
//!   the first steps, concatenated with a timely feedback edge that carries
//!   `version = step + 1` from the nodes that publish policy versions (the training node)
//!   back to the sources, advanced by `1 + staleness` steps. With `staleness = 0` the
//!   rollout of step t starts once version t exists (synchronous PPO); with `staleness = k`
//!   it may start once version t − k exists. The pipelines run with 0: their asynchronous
//!   training (`Rollout(staleness: N)`) plays ahead on the rollout node's own thread
//!   instead (`roll_flow_operators::rollout::ahead`), which keeps every other node in step
//!   order and overlaps the rollout with training for real;
//! - a source drops versions for steps ≥ `steps`, so the loop drains and the run ends.
//!
//! Several workers (`threads`, and timely's own cluster options for several processes)
//! each run the same graph; the operators use `StepContext::worker`/`workers` to pick
//! their shard of the env groups and share the training ([`crate::collective`]). Each
//! worker's operators run on its compute thread, one job at a time, in the same order on
//! every worker (`compute`, `turns`). Seeds derive from (pipeline seed, node name, step),
//! the same on every worker, so a run is deterministic for a given seed.

mod broken_connection;
mod compute;
mod connect_processes;
pub mod error;
pub mod node;
pub mod options;
mod turns;
pub mod worker;

pub use connect_processes::PeersGone;
pub use error::ExecError;
pub use node::{step_seed, Envelope, NodeReport, StepReport};
pub use options::ExecutorOptions;
pub use worker::{execute, StepCallback};
