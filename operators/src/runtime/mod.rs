//! What the operators of one worker share: the loaded models (policy, reference, critic),
//! their optimizers and policy versions, the answer guides of the env tags, and the run's
//! settings (steps, seed, output directory, resume point).
//!
//! Operators of one worker run on that worker's timely thread, one after another, so they
//! share models through `Rc<RefCell<..>>`; weights never travel along graph edges. Models
//! are loaded on first use by a node, so a reference model costs nothing unless a node
//! names it. A resumed run restores every model from the checkpoint of the step it
//! resumes after (see [`crate::checkpoint`]).

pub mod lr_schedule;
pub mod models;
pub mod scoring;
pub mod trainable;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use burn::backend::Autodiff;
use roll_flow_engine::{Pipeline, WorkerInfo};

use crate::algo::AdvantageState;
use crate::catalog::RollFlow;
use crate::model::generate::AnswerChoices;
use crate::model::CpuBackend;
use crate::nodes::Node;

pub use models::{CriticModel, PolicyModel};

/// The backend models train on.
pub type TrainBackend = Autodiff<CpuBackend>;
/// The backend of the inference copy that generates.
pub type InferBackend = CpuBackend;

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
#[derive(Default)]
pub struct ModelTable {
    pub policies: BTreeMap<String, Rc<RefCell<PolicyModel>>>,
    pub critics: BTreeMap<String, Rc<RefCell<CriticModel>>>,
}

/// Per-worker shared state (the catalog's `Resources`).
pub struct Runtime {
    pub worker: WorkerInfo,
    pub run: RunInfo,
    pub pipeline: Arc<Pipeline<RollFlow>>,
    /// Shared with the checkpoint node, which saves whatever is loaded.
    pub models: Rc<RefCell<ModelTable>>,
    /// The answer guide of each env tag, when its rollout or eval constrains replies.
    pub guides: Rc<RefCell<BTreeMap<String, Arc<AnswerChoices>>>>,
    /// The state of each `adv` node, by node name (saved by the checkpoint node).
    pub adv_states: Rc<RefCell<BTreeMap<String, Rc<RefCell<AdvantageState>>>>>,
    /// Models that a `ModelUpdate` node publishes (the actor step then leaves it alone).
    published_by_update: BTreeSet<String>,
}

impl Runtime {
    pub fn new(pipeline: &Pipeline<RollFlow>, worker: WorkerInfo) -> Self {
        let published_by_update = pipeline
            .nodes
            .iter()
            .filter_map(|(_, node)| match node {
                Node::ModelUpdate(spec) => Some(spec.model.clone()),
                _ => None,
            })
            .collect();
        Runtime {
            run: RunInfo {
                name: pipeline.name.clone(),
                seed: pipeline.seed,
                steps: pipeline.steps,
                out_dir: pipeline.out_dir.clone(),
                first_step: worker.first_step,
                dump_dir: pipeline.dump_batches.clone(),
            },
            worker,
            pipeline: Arc::new(pipeline.clone()),
            models: Rc::default(),
            guides: Rc::default(),
            adv_states: Rc::default(),
            published_by_update,
        }
    }

    /// The causal LM `name` (loaded, or restored from the resume checkpoint, on first use).
    pub fn policy(&mut self, name: &str) -> Result<Rc<RefCell<PolicyModel>>, String> {
        if let Some(model) = self.models.borrow().policies.get(name) {
            return Ok(model.clone());
        }
        let spec = self.model_spec(name)?;
        let publish_on_train = !self.published_by_update.contains(name);
        let model = PolicyModel::build(name, spec, &self.run, publish_on_train)?;
        let model = Rc::new(RefCell::new(model));
        let mut table = self.models.borrow_mut();
        table.policies.insert(name.to_string(), model.clone());
        Ok(model)
    }

    /// The value model `name`.
    pub fn critic(&mut self, name: &str) -> Result<Rc<RefCell<CriticModel>>, String> {
        if let Some(model) = self.models.borrow().critics.get(name) {
            return Ok(model.clone());
        }
        let spec = self.model_spec(name)?;
        let model = Rc::new(RefCell::new(CriticModel::build(name, spec, &self.run)?));
        let mut table = self.models.borrow_mut();
        table.critics.insert(name.to_string(), model.clone());
        Ok(model)
    }

    /// The state of the `adv` node `node`: restored from the resume checkpoint's
    /// `adv/<node>.json` when there is one, else fresh.
    pub fn adv_state(&mut self, node: &str) -> Result<Rc<RefCell<AdvantageState>>, String> {
        let restored = match self.run.resume_dir() {
            Some(dir) => load_adv_state(&dir, node)?,
            None => AdvantageState::default(),
        };
        let state = Rc::new(RefCell::new(restored));
        self.adv_states
            .borrow_mut()
            .insert(node.to_string(), state.clone());
        Ok(state)
    }

    fn model_spec(&self, name: &str) -> Result<&crate::model::spec::ModelSpec, String> {
        self.pipeline
            .models
            .get(name)
            .ok_or_else(|| format!("no model `{name}` in `models:`"))
    }
}

/// Where a checkpoint keeps the `adv` node `node`'s state.
pub fn adv_state_file(node: &str) -> String {
    format!("{node}.json")
}

/// Reads `checkpoint/adv/<node>.json`; a checkpoint written before adv states were saved
/// has none, and then the state starts fresh.
fn load_adv_state(checkpoint: &std::path::Path, node: &str) -> Result<AdvantageState, String> {
    let (dir, file) = (checkpoint.join("adv"), adv_state_file(node));
    let path = dir.join(&file);
    if !path.exists() {
        return Ok(AdvantageState::default());
    }
    let text = trainable::read_text(&dir, &file)?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}
