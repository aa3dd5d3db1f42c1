//! What the operators of one worker share and build on: the backend ([`backend`]), the
//! run's plan handed down by the registry ([`run_plan`]), the loaded models and their
//! optimizers ([`models`], [`trainable`], [`trained_params`], [`lr_schedule`],
//! [`concurrent`]), scoring
//! packed responses under a model ([`scoring`]), and [`Runtime`] itself ([`resources`]).
//! Nothing here knows the pipeline's node kinds.

pub mod backend;
pub mod concurrent;
pub mod lr_schedule;
pub mod models;
pub mod record_files;
pub mod resources;
pub mod run_plan;
pub mod saved_architecture;
pub mod scoring;
pub mod trainable;
pub mod trained_params;
pub mod weight_versions;

pub use backend::{InferBackend, RunBackend, TrainBackend};
pub use models::{CriticModel, PolicyModel};
pub use resources::{Guides, ModelTable, Runtime, SavedStates};
pub use run_plan::{RunInfo, RunPlan, Wiring};

#[cfg(test)]
#[path = "runtime_tests.rs"]
mod tests;
