//! What the operators of one worker share ([`Runtime`]): the loaded models (policy,
//! reference, critic), their optimizers and policy versions, the answer guides of the env
//! tags, the state nodes keep between steps, and the run's plan.
//!
//! Operators of one worker run on that worker's timely thread, one after another, so they
//! share models through `Rc<RefCell<..>>`; weights never travel along graph edges. Models
//! are loaded on first use by a node, so a reference model costs nothing unless a node
//! names it. A resumed run restores every model from the checkpoint of the step it
//! resumes after (`crate::run_layout`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use roll_flow_engine::WorkerInfo;
use roll_flow_model::generate::AnswerChoices;
use roll_flow_model::spec::ModelSpec;
use roll_flow_model::CpuBackend;

use super::backend::RunBackend;
use super::models::{check_critic_vocab, CriticModel, PolicyModel};
use super::record_files::read_text;
use super::run_plan::{RunInfo, RunPlan};
use crate::run_layout::state_file;

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

/// Writes one node's state as JSON.
pub type StateJson = Rc<dyn Fn() -> Result<String, String>>;

/// Every node's saved state, by (checkpoint folder, node name).
pub type SavedStates = BTreeMap<(String, String), StateJson>;

/// The answer guide of each env tag whose rollout or eval constrains replies.
pub type Guides = BTreeMap<String, Arc<AnswerChoices>>;

/// No answer guides: what a free player samples with and a free-target update scores with.
pub static NO_GUIDES: Guides = Guides::new();

/// Per-worker shared state (the catalog's `Resources`), on backend `B`.
pub struct Runtime<B: RunBackend = CpuBackend> {
    pub worker: WorkerInfo,
    pub run: RunInfo,
    pub plan: Arc<RunPlan>,
    /// Where models are built (the pipeline's `device:` on `B`).
    pub device: B::Device,
    /// Shared with the checkpoint node, which saves whatever is loaded.
    pub models: Rc<RefCell<ModelTable<B>>>,
    pub guides: Rc<RefCell<Guides>>,
    /// The state nodes keep between steps (an `adv` node's KL controller, an actor step's
    /// entropy controller), each as a way to write it as JSON, by (checkpoint folder,
    /// node name); the checkpoint node saves them all.
    pub saved_states: Rc<RefCell<SavedStates>>,
}

impl<B: RunBackend> Runtime<B> {
    /// The runtime of one worker; fails when `B` cannot serve the plan's `device:`.
    pub fn new(plan: Arc<RunPlan>, worker: WorkerInfo) -> Result<Self, String> {
        let device = B::device_for(plan.device)?;
        Ok(Runtime {
            run: RunInfo {
                first_step: worker.first_step,
                ..plan.run.clone()
            },
            plan,
            worker,
            device,
            models: Rc::default(),
            guides: Rc::default(),
            saved_states: Rc::default(),
        })
    }

    /// The causal LM `name` (loaded, or restored from the resume checkpoint, on first use).
    pub fn policy(&mut self, name: &str) -> Result<Rc<RefCell<PolicyModel<B>>>, String> {
        if let Some(model) = self.models.borrow().policies.get(name) {
            return Ok(model.clone());
        }
        let spec = self.model_spec(name)?;
        let wiring = &self.plan.wiring;
        let publish_on_train = !wiring.published_by_update.contains(name);
        let trained = wiring.trained.contains(name);
        let mut model = PolicyModel::build(
            name,
            spec,
            &self.run,
            &self.device,
            publish_on_train,
            trained,
        )?;
        model.train.share_gradients(self.worker.collective.clone());
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
        let mut critic = CriticModel::build(name, spec, &self.run, &self.device)?;
        critic.train.share_gradients(self.worker.collective.clone());
        let plan = self.plan.clone();
        for policy in plan.wiring.played_policies() {
            check_critic_vocab(&critic, &self.policy(policy)?.borrow())?;
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

    fn model_spec(&self, name: &str) -> Result<&ModelSpec, String> {
        self.plan
            .models
            .get(name)
            .ok_or_else(|| format!("no model `{name}` in `models:`"))
    }
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
    let text = read_text(folder, &file)?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}
