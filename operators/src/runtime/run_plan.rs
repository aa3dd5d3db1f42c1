//! What a run's operators are told about the run, as plain data: its settings, the models
//! and env sets it declares, and how its nodes relate ([`Wiring`]). The registry derives it
//! from the pipeline file; nothing below the registry reads the file's nodes.

use std::collections::BTreeSet;
use std::path::PathBuf;

use roll_flow_engine::spec::{Device, OrderedMap};
use roll_flow_engine::EnvSet;
use roll_flow_envs::config::EnvConfig;
use roll_flow_model::spec::ModelSpec;

use crate::play_settings::PolicyPlay;
use crate::run_layout::step_dir;

/// Run-wide settings every operator may read.
#[derive(Clone, Debug)]
pub struct RunInfo {
    pub name: String,
    pub seed: u64,
    pub steps: u64,
    pub out_dir: PathBuf,
    /// The first step of this run (after a resumed checkpoint's step, else 0).
    pub first_step: u64,
    /// Where `--dump-batches` writes each step's batches, if asked.
    pub dump_dir: Option<PathBuf>,
}

impl RunInfo {
    /// The checkpoint a resumed run restores its state from.
    pub fn resume_dir(&self) -> Option<PathBuf> {
        (self.first_step > 0).then(|| step_dir(&self.out_dir, self.first_step))
    }
}

/// How the nodes of a pipeline relate, as the registry found it from their kinds.
#[derive(Clone, Debug, Default)]
pub struct Wiring {
    /// Models whose weights a node publishes to the inference copy (`ModelUpdate`); the
    /// node that trains such a model then leaves publishing to it.
    pub published_by_update: BTreeSet<String>,
    /// Models a node trains (`ActorStep`, `CriticStep`); any other causal LM (a reference)
    /// is frozen: no gradients, and checkpoints hold no copy of its weights.
    pub trained: BTreeSet<String>,
    /// The policies the `Rollout` nodes play and how, in file order.
    pub rollouts: Vec<PolicyPlay>,
}

impl Wiring {
    /// How the `Rollout` node that trains `policy` plays it, if there is one.
    pub fn rollout_for(&self, policy: &str) -> Option<&PolicyPlay> {
        self.rollouts.iter().find(|r| r.policy == policy)
    }

    /// The temperature the replies that `model` scores were sampled with: that of the
    /// `Rollout` node whose policy it is, else of the first `Rollout` node (a reference
    /// model scores the policy's samples), else 1.
    pub fn sampling_temperature(&self, model: &str) -> f32 {
        self.rollout_for(model)
            .or(self.rollouts.first())
            .map_or(1.0, PolicyPlay::sampling_temperature)
    }

    /// The policies some `Rollout` node plays.
    pub fn played_policies(&self) -> BTreeSet<&str> {
        self.rollouts.iter().map(|r| r.policy.as_str()).collect()
    }
}

/// Everything one worker's runtime is built from.
#[derive(Clone, Debug)]
pub struct RunPlan {
    /// The run's settings (`first_step` is each worker's own).
    pub run: RunInfo,
    pub device: Device,
    pub models: OrderedMap<ModelSpec>,
    pub envs: OrderedMap<EnvSet<EnvConfig>>,
    pub wiring: Wiring,
}
