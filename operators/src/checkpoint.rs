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
//! half-written `step_N`; a `step_N` already there is renamed aside first and deleted only
//! once the new one is in place. `keep: N` removes all but the newest N.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use roll_flow_engine::atomic_file::replace_dir;
use roll_flow_engine::{Batch, Operator, OperatorError, StepContext};

use crate::nodes::CheckpointSpec;
use crate::runtime::models::VERSION_FILE;
use crate::runtime::trainable::{MODEL_FILE, OPTIMIZER_FILE};
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

/// Puts the finished `staging` folder at `target`. A `target` already there is first
/// renamed to `.replaced_<name>` beside it and deleted after, so there is always a whole
/// checkpoint on disk (after a crash between the two renames, at `.replaced_<name>`).
fn move_into_place(staging: &Path, target: &Path) -> Result<(), String> {
    let name = target
        .file_name()
        .map_or_else(|| "step".into(), |n| n.to_string_lossy().into_owned());
    let aside = target.with_file_name(format!(".replaced_{name}"));
    let io = |e: std::io::Error| format!("checkpoint {}: {e}", aside.display());
    if aside.exists() {
        std::fs::remove_dir_all(&aside).map_err(io)?;
    }
    replace_dir(staging, target, &aside, "the checkpoint")?;
    if aside.exists() {
        std::fs::remove_dir_all(&aside).map_err(io)?;
    }
    Ok(())
}

/// Checks that the checkpoint folder `checkpoint` holds everything a resumed run restores:
/// `meta.json` (written last), `model.bin`, `optimizer.bin` and `version` of every policy
/// and `model.bin`, `optimizer.bin` of every critic, and a folder for each of `models` (the
/// models the pipeline's nodes use). Run before anything of the run is changed.
pub fn check_complete(checkpoint: &Path, models: &[&str]) -> Result<(), String> {
    let mut missing: Vec<PathBuf> = Vec::new();
    let mut need = |path: PathBuf| {
        if !path.is_file() {
            missing.push(path);
        }
    };
    need(checkpoint.join("meta.json"));
    let folders = |kind: &str| -> Vec<PathBuf> {
        let entries = std::fs::read_dir(checkpoint.join(kind))
            .into_iter()
            .flatten();
        entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect()
    };
    for policy in folders("models") {
        for file in [MODEL_FILE, OPTIMIZER_FILE, VERSION_FILE] {
            need(policy.join(file));
        }
    }
    for critic in folders("critics") {
        for file in [MODEL_FILE, OPTIMIZER_FILE] {
            need(critic.join(file));
        }
    }
    for model in models {
        let (policy, critic) = (
            checkpoint.join("models").join(model),
            checkpoint.join("critics").join(model),
        );
        if !policy.is_dir() && !critic.is_dir() {
            missing.push(policy);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = missing
        .iter()
        .map(|p| {
            p.strip_prefix(checkpoint)
                .unwrap_or(p)
                .display()
                .to_string()
        })
        .collect();
    Err(format!(
        "checkpoint {} is incomplete (missing {}), so the run cannot resume from it; \
         move that folder out of checkpoints/ to resume from the one before it",
        checkpoint.display(),
        listed.join(", ")
    ))
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
        move_into_place(&staging, &target)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_new_checkpoint_replaces_an_old_one_of_the_same_step() {
        let dir = tempfile::tempdir().unwrap();
        let (staging, target) = (dir.path().join(".staging_step_2"), step_dir(dir.path(), 2));
        write(&target.join("meta.json"), "old");
        write(&staging.join("meta.json"), "new");
        move_into_place(&staging, &target).unwrap();
        assert_eq!(
            std::fs::read_to_string(target.join("meta.json")).unwrap(),
            "new"
        );
        assert!(!staging.exists());
        assert!(!dir.path().join("checkpoints/.replaced_step_2").exists());
        assert_eq!(saved_steps(dir.path()), vec![2]);
    }

    #[test]
    fn a_complete_checkpoint_passes_and_a_missing_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = step_dir(dir.path(), 4);
        for file in [
            "meta.json",
            "models/policy/model.bin",
            "models/policy/optimizer.bin",
            "models/policy/version",
            "critics/critic/model.bin",
            "critics/critic/optimizer.bin",
        ] {
            write(&ckpt.join(file), "x");
        }
        assert_eq!(check_complete(&ckpt, &["policy", "critic"]), Ok(()));
        let err = check_complete(&ckpt, &["policy", "critic", "reference"]).unwrap_err();
        assert!(err.contains("(missing models/reference)"), "{err}");
        std::fs::remove_file(ckpt.join("models/policy/optimizer.bin")).unwrap();
        std::fs::remove_file(ckpt.join("meta.json")).unwrap();
        let err = check_complete(&ckpt, &["policy"]).unwrap_err();
        assert_eq!(
            err,
            format!(
                "checkpoint {} is incomplete (missing meta.json, models/policy/optimizer.bin), so \
                 the run cannot resume from it; move that folder out of checkpoints/ to resume \
                 from the one before it",
                ckpt.display()
            )
        );
    }
}
