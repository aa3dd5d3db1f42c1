//! What the operators of one worker share: the loaded models (policy, reference, critic),
//! their optimizers and policy versions, the answer guides of the env tags, and the run's
//! settings (steps, seed, output directory, resume point).
//!
//! Operators of one worker run on that worker's timely thread, one after another, so they
//! share models through `Rc<RefCell<..>>`; weights never travel along graph edges. Models
//! are loaded on first use by a node, so a reference model costs nothing unless a node
//! names it. A resumed run restores every model from the checkpoint of the step it
//! resumes after (see [`crate::checkpoint`]).

pub mod backend;
pub mod lr_schedule;
pub mod models;
#[cfg(test)]
mod runtime_tests;
pub mod saved_architecture;
pub mod scoring;
#[cfg(test)]
mod scoring_tests;
pub mod trainable;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use burn::backend::Autodiff;
use roll_flow_engine::{Pipeline, WorkerInfo};

use crate::catalog::RollFlow;
use crate::model::generate::AnswerChoices;
use crate::model::CpuBackend;
use crate::nodes::Node;

pub use backend::RunBackend;
pub use models::{CriticModel, PolicyModel};

/// The backend models train on (autodiff over the run's backend, the CPU by default).
pub type TrainBackend<B = CpuBackend> = Autodiff<B>;
/// The backend of the inference copy that generates.
pub type InferBackend<B = CpuBackend> = B;

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
        (self.first_step > 0).then(|| crate::checkpoint::step_dir(&self.out_dir, self.first_step))
    }
}

/// The models one worker has loaded, by name.
pub struct ModelTable<B: RunBackend = CpuBackend> {
    pub policies: BTreeMap<String, Rc<RefCell<PolicyModel<B>>>>,
    pub critics: BTreeMap<String, Rc<RefCell<CriticModel<B>>>>,
}

impl<B: RunBackend> Default for ModelTable<B> {
    fn default() -> Self {
        ModelTable {
            policies: BTreeMap::new(),
            critics: BTreeMap::new(),
        }
    }
}

/// Per-worker shared state (the catalog's `Resources`), on backend `B`.
pub struct Runtime<B: RunBackend = CpuBackend> {
    pub worker: WorkerInfo,
    pub run: RunInfo,
    pub pipeline: Arc<Pipeline<RollFlow>>,
    /// Where models are built (the pipeline's `device:` on `B`).
    pub device: B::Device,
    /// Shared with the checkpoint node, which saves whatever is loaded.
    pub models: Rc<RefCell<ModelTable<B>>>,
    /// The answer guide of each env tag, when its rollout or eval constrains replies.
    pub guides: Rc<RefCell<BTreeMap<String, Arc<AnswerChoices>>>>,
    /// The state nodes keep between steps (an `adv` node's KL controller, an actor step's
    /// entropy controller), each as a way to write it as JSON, by (checkpoint folder,
    /// node name); the checkpoint node saves them all.
    pub saved_states: Rc<RefCell<SavedStates>>,
    /// Models that a `ModelUpdate` node publishes (the actor step then leaves it alone).
    published_by_update: BTreeSet<String>,
}

impl<B: RunBackend> Runtime<B> {
    /// The runtime of one worker; fails when `B` cannot serve the pipeline's `device:`.
    pub fn new(pipeline: Pipeline<RollFlow>, worker: WorkerInfo) -> Result<Self, String> {
        let device = B::device_for(pipeline.device)?;
        let published_by_update = pipeline
            .nodes
            .iter()
            .filter_map(|(_, node)| match node {
                Node::ModelUpdate(spec) => Some(spec.model.clone()),
                _ => None,
            })
            .collect();
        Ok(Runtime {
            run: RunInfo {
                name: pipeline.name.clone(),
                seed: pipeline.seed,
                steps: pipeline.steps,
                out_dir: pipeline.out_dir.clone(),
                first_step: worker.first_step,
                dump_dir: pipeline.dump_batches.clone(),
            },
            worker,
            pipeline: Arc::new(pipeline),
            device,
            models: Rc::default(),
            guides: Rc::default(),
            saved_states: Rc::default(),
            published_by_update,
        })
    }

    /// The causal LM `name` (loaded, or restored from the resume checkpoint, on first use).
    pub fn policy(&mut self, name: &str) -> Result<Rc<RefCell<PolicyModel<B>>>, String> {
        if let Some(model) = self.models.borrow().policies.get(name) {
            return Ok(model.clone());
        }
        let spec = self.model_spec(name)?;
        let publish_on_train = !self.published_by_update.contains(name);
        let model = PolicyModel::build(name, spec, &self.run, &self.device, publish_on_train)?;
        let model = Rc::new(RefCell::new(model));
        let mut table = self.models.borrow_mut();
        table.policies.insert(name.to_string(), model.clone());
        Ok(model)
    }

    /// The value model `name`. It scores the samples of every `Rollout` policy, so its
    /// vocabulary must hold each policy tokenizer's ids.
    pub fn critic(&mut self, name: &str) -> Result<Rc<RefCell<CriticModel<B>>>, String> {
        if let Some(model) = self.models.borrow().critics.get(name) {
            return Ok(model.clone());
        }
        let spec = self.model_spec(name)?;
        let critic = CriticModel::build(name, spec, &self.run, &self.device)?;
        let pipeline = self.pipeline.clone();
        let policies: BTreeSet<&str> = crate::rollout::rollouts(&pipeline)
            .map(|r| r.policy.as_str())
            .collect();
        for policy in policies {
            models::check_critic_vocab(&critic, &self.policy(policy)?.borrow())?;
        }
        let model = Rc::new(RefCell::new(critic));
        let mut table = self.models.borrow_mut();
        table.critics.insert(name.to_string(), model.clone());
        Ok(model)
    }

    /// The state node `node` keeps between steps, saved by checkpoints as
    /// `<folder>/<node>.json`: restored from the resume checkpoint when it has that file,
    /// else fresh (`T::default()`).
    pub fn saved_state<T>(&mut self, folder: &str, node: &str) -> Result<Rc<RefCell<T>>, String>
    where
        T: Default + serde::Serialize + serde::de::DeserializeOwned + 'static,
    {
        let restored = match self.run.resume_dir() {
            Some(dir) => load_state(&dir.join(folder), node)?,
            None => T::default(),
        };
        let state = Rc::new(RefCell::new(restored));
        let saved = state.clone();
        let to_json: StateJson =
            Rc::new(move || serde_json::to_string(&*saved.borrow()).map_err(|e| e.to_string()));
        self.saved_states
            .borrow_mut()
            .insert((folder.to_string(), node.to_string()), to_json);
        Ok(state)
    }

    fn model_spec(&self, name: &str) -> Result<&crate::model::spec::ModelSpec, String> {
        self.pipeline
            .models
            .get(name)
            .ok_or_else(|| format!("no model `{name}` in `models:`"))
    }
}

/// Writes one node's state as JSON.
pub type StateJson = Rc<dyn Fn() -> Result<String, String>>;

/// Every node's saved state, by (checkpoint folder, node name).
pub type SavedStates = BTreeMap<(String, String), StateJson>;

/// The file a checkpoint keeps node `node`'s state in (inside its folder).
pub fn state_file(node: &str) -> String {
    format!("{node}.json")
}

/// Reads `folder/<node>.json`; a checkpoint written before the node kept state has none,
/// and then the state starts fresh.
fn load_state<T>(folder: &std::path::Path, node: &str) -> Result<T, String>
where
    T: Default + serde::de::DeserializeOwned,
{
    let file = state_file(node);
    let path = folder.join(&file);
    if !path.exists() {
        return Ok(T::default());
    }
    let text = trainable::read_text(folder, &file)?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}
