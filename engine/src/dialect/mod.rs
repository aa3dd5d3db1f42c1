//! A pipeline dialect and a file in it.
//!
//! The engine knows no concrete operator. A [`Catalog`] supplies the serde types of the
//! `models:`, `envs:` and `nodes:` sections and builds operators from them; a [`Pipeline`]
//! is one file of that dialect. The operators crate provides the real catalog (whose node
//! registry lists each node kind on one line); tests provide tiny ones.

use std::fmt::Debug;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::node_spec::{NodeSpec, SettingProblem, WorkerInfo};
use crate::operator::Operator;
pub mod env_set;
pub mod ordered_map;

use env_set::EnvSet;
use ordered_map::OrderedMap;

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
    /// f32 matrix products on TF32 tensor cores where the device has them (CUDA from
    /// Ampere on): about 7× the f32 rate at ~1e-3 relative error a product, PyTorch's
    /// `allow_tf32`. Off by default (PyTorch's default); the CPU ignores it.
    #[serde(default)]
    pub tf32: bool,
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
            tf32: self.tf32,
            out_dir: self.out_dir,
            models: self.models,
            envs: self.envs,
            nodes: self.nodes,
            edges: self.edges,
            dump_batches: self.dump_batches,
        }
    }
}
