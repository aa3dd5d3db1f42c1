//! roll-flow's operators: what runs a pipeline, over the `roll-flow-envs`,
//! `roll-flow-model` and `roll-flow-algo` crates. Layers, lowest first (a module imports
//! only those before it; `tools/module_cycles.py` checks it):
//!
//! - [`run_layout`]: where a run keeps its checkpoints; [`play_settings`]: how a policy
//!   plays, as plain data.
//! - [`runtime`]: what one worker's operators share (models, optimizers, versions, the
//!   run's plan), generic over [`runtime::backend::RunBackend`] (the CPU, or burn's
//!   wgpu/CUDA backends with those features).
//! - [`rollout`]: the env pool, the inference loop and the sample builders; [`training`]:
//!   epochs, mini- and micro-batches, gradient accumulation.
//! - [`nodes`]: one file per node kind (settings, contract, checks, operator).
//! - [`registry`]: the list of node kinds; [`catalog`]: [`catalog::RollFlow`], the catalog
//!   that ties nodes, models and envs to the engine; [`memory_estimate`]: the least
//!   memory a pipeline holds, from the file alone.
//! - [`run`]: the run as a library ([`run::Run`]); [`run_dir`]: readying a run's
//!   directory; [`watch`]: a checkpoint's policy playing one episode (`roll-flow play
//!   --policy`); [`export`]: a checkpoint's policy as a Hugging Face directory.

pub mod catalog;
pub mod checkpoint_commits;
pub mod export;
pub mod export_peft;
pub mod memory_estimate;
pub mod nodes;
pub mod play_settings;
pub mod prompt;
pub mod registry;
pub mod rollout;
pub mod run;
mod run_device;
pub mod run_dir;
pub mod run_layout;
pub mod runtime;
pub mod training;
pub mod watch;
