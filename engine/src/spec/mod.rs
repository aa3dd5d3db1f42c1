//! The pipeline file: serde types, loading with precise error locations, and overrides.
//!
//! A pipeline is one RON file holding named models, envs, nodes and the edges between
//! nodes. Parsing is done by `ron` into the typed [`Pipeline`]; errors are turned into
//! [`Diagnostic`]s that name the file, line:column and show the offending source line.
//! Errors found after parsing (graph checks) point into the file through [`locate`], which
//! finds the span of a value from its path (`nodes` → `"adv"` → `norm`).

pub mod diagnostic;
mod env_set;
mod load;
pub mod locate;
mod ordered_map;
mod overrides;
pub mod suggest;

use std::path::PathBuf;

use serde::Deserialize;

use crate::catalog::Catalog;

pub use diagnostic::{Diagnostic, Location, Severity};
pub use env_set::EnvSet;
pub use load::{load, parse, ron_options, Loaded, Source};
pub use ordered_map::OrderedMap;

/// Where a pipeline's tensors live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum Device {
    /// The CPU backend (the default build).
    #[default]
    Cpu,
    /// CubeCL kernels through wgpu (Vulkan/Metal/DX12); needs the `wgpu` feature.
    Wgpu,
    /// CUDA device N; needs the `cuda` feature.
    Cuda(usize),
}

/// A whole pipeline file.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename = "Pipeline", deny_unknown_fields)]
#[serde(bound(deserialize = ""))]
pub struct Pipeline<C: Catalog> {
    /// The run's name (metrics and logs carry it).
    pub name: String,
    /// Seeds every random choice of the run.
    #[serde(default)]
    pub seed: u64,
    /// Training steps to run.
    pub steps: u64,
    #[serde(default)]
    pub device: Device,
    /// Where metrics, checkpoints and renders go.
    pub out_dir: PathBuf,
    /// Named models: policy, reference, critic.
    #[serde(default)]
    pub models: OrderedMap<C::Model>,
    /// Named env sets; each name is an env tag.
    #[serde(default)]
    pub envs: OrderedMap<EnvSet<C::Env>>,
    /// Named nodes of the per-step graph.
    pub nodes: OrderedMap<C::Node>,
    /// Directed edges `(from, to)` between node names.
    #[serde(default)]
    pub edges: Vec<(String, String)>,
    /// Write the batch every training node receives into this folder, one JSON file per
    /// node and step (`roll-flow run --dump-batches DIR` sets it).
    #[serde(default)]
    pub dump_batches: Option<PathBuf>,
}

impl<C: Catalog> Pipeline<C> {
    /// The same pipeline for another catalog of the same dialect (the same node, model and
    /// env types), e.g. one whose operators run on another backend.
    pub fn recast<D>(self) -> Pipeline<D>
    where
        D: Catalog<Node = C::Node, Model = C::Model, Env = C::Env>,
    {
        Pipeline {
            name: self.name,
            seed: self.seed,
            steps: self.steps,
            device: self.device,
            out_dir: self.out_dir,
            models: self.models,
            envs: self.envs,
            nodes: self.nodes,
            edges: self.edges,
            dump_batches: self.dump_batches,
        }
    }
}
