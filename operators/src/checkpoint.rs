//! `Checkpoint`: saves the run's state every `every` steps and after the last step, so
//! `roll-flow run --resume RUN_DIR` continues it exactly.
//!
//! Layout of `out_dir/checkpoints/step_N/` (N = steps completed):
//! - `models/<name>/model.bin`, `optimizer.bin`: weights and AdamW state (burn records,
//!   full precision, parameter ids kept); `version`: the policy version; `hf/`: the same
//!   weights as a Hugging Face directory (config.json + model.safetensors);
//! - `critics/<name>/model.bin`, `optimizer.bin`;
//! - `adv/<node>.json`: each `adv` node's state (the adaptive KL coefficient β);
//! - `actor/<node>.json`: each `ActorStep`'s adaptive entropy coefficient;
//! - `meta.json`: step, seed, pipeline name.
//!
//! There is no RNG state to save: every random stream (env seeds, sampling) is derived
//! from (pipeline seed, node, step, worker), so the step number restores it. A checkpoint
//! is written into a temporary folder and renamed into place, so a crash never leaves a
//! half-written `step_N`. `keep: N` removes all but the newest N.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use roll_flow_engine::{Batch, Operator, OperatorError, StepContext};

use crate::nodes::CheckpointSpec;
use crate::runtime::{ModelTable, RunBackend, RunInfo, Runtime, SavedStates};

/// `out_dir/checkpoints/step_N`.
pub fn step_dir(out_dir: &Path, step: u64) -> PathBuf {
    out_dir.join("checkpoints").join(format!("step_{step}"))
}

/// The completed-step counts of the checkpoints in `out_dir`, ascending.
pub fn saved_steps(out_dir: &Path) -> Vec<u64> {
    let mut steps: Vec<u64> = std::fs::read_dir(out_dir.join("checkpoints"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("step_")?.parse().ok())
        .collect();
    steps.sort_unstable();
    steps
}

pub struct CheckpointNode<B: RunBackend> {
    spec: CheckpointSpec,
    models: Rc<RefCell<ModelTable<B>>>,
    saved_states: Rc<RefCell<SavedStates>>,
    run: RunInfo,
}

impl<B: RunBackend> CheckpointNode<B> {
    pub fn build(spec: &CheckpointSpec, runtime: &mut Runtime<B>) -> Result<Self, String> {
        Ok(CheckpointNode {
            spec: spec.clone(),
            models: runtime.models.clone(),
            saved_states: runtime.saved_states.clone(),
            run: runtime.run.clone(),
        })
    }

    fn save(&self, completed: u64) -> Result<PathBuf, String> {
        let target = step_dir(&self.run.out_dir, completed);
        let staging = self
            .run
            .out_dir
            .join("checkpoints")
            .join(format!(".staging_step_{completed}"));
        let io = |e: std::io::Error, p: &Path| format!("checkpoint {}: {e}", p.display());
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(|e| io(e, &staging))?;
        }
        let table = self.models.borrow();
        for policy in table.policies.values() {
            policy.borrow().save(&staging)?;
        }
        for critic in table.critics.values() {
            critic.borrow().save(&staging)?;
        }
        for ((folder, node), to_json) in self.saved_states.borrow().iter() {
            crate::runtime::trainable::write_text(
                &staging.join(folder),
                &crate::runtime::state_file(node),
                &to_json()?,
            )?;
        }
        let meta = serde_json::json!({
            "step": completed,
            "seed": self.run.seed,
            "pipeline": self.run.name,
        });
        crate::runtime::trainable::write_text(&staging, "meta.json", &meta.to_string())?;
        if target.exists() {
            std::fs::remove_dir_all(&target).map_err(|e| io(e, &target))?;
        }
        std::fs::rename(&staging, &target).map_err(|e| io(e, &target))?;
        self.prune()?;
        Ok(target)
    }

    fn prune(&self) -> Result<(), String> {
        let Some(keep) = self.spec.keep else {
            return Ok(());
        };
        let steps = saved_steps(&self.run.out_dir);
        for &old in steps.iter().take(steps.len().saturating_sub(keep.max(1))) {
            let dir = step_dir(&self.run.out_dir, old);
            std::fs::remove_dir_all(&dir)
                .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
        }
        Ok(())
    }
}

impl<B: RunBackend> Operator for CheckpointNode<B> {
    fn process(&mut self, ctx: &mut StepContext, batch: Batch) -> Result<Batch, OperatorError> {
        let completed = ctx.step + 1;
        let due = completed.is_multiple_of(self.spec.every.max(1)) || completed == self.run.steps;
        if due && ctx.worker == 0 {
            self.save(completed).map_err(OperatorError)?;
            ctx.metrics.insert("saved_step".into(), completed as f64);
        }
        Ok(batch)
    }
}
