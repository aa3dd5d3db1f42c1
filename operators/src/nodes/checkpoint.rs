//! `Checkpoint`: saves the run's state every `every` steps and after the last step, so
//! `roll-flow run --resume RUN_DIR` continues it exactly. The folder layout is
//! [`crate::run_layout`]'s.
//!
//! There is no RNG state to save: every random stream (env seeds, sampling) is derived
//! from (pipeline seed, node, step, worker), so the step number restores it. A checkpoint
//! is written into a staging folder and renamed into place once the metrics line of the
//! step it covers is on disk ([`crate::checkpoint_commits`]), so a crash never leaves a
//! half-written `step_N` nor a checkpoint ahead of `metrics.jsonl`; a `step_N` already
//! there is renamed aside first and deleted only once the new one is in place. `keep: N`
//! removes all but the newest N as each is put in place.
//!
//! RON: `"checkpoint": Checkpoint(every: 50, keep: 3)`.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use roll_flow_engine::atomic_file::replace_dir;
use roll_flow_engine::collective::Collective;
use roll_flow_engine::{Batch, Column, Contract, Operator, OperatorError, StepContext};
use serde::Deserialize;

use super::kind::{at_least_one, NodeKind};
use crate::checkpoint_commits;
use crate::run_layout::{saved_steps, state_file, step_dir};
use crate::runtime::backend::RunBackend;
use crate::runtime::record_files::write_text;
use crate::runtime::resources::{ModelTable, Runtime, SavedStates};
use crate::runtime::run_plan::RunInfo;

/// `Checkpoint`'s settings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckpointSpec {
    /// Save every `every` steps and at the last step (default 50).
    pub every: u64,
    /// Keep only the newest `keep` checkpoints (default: all).
    pub keep: Option<usize>,
}

impl Default for CheckpointSpec {
    fn default() -> Self {
        CheckpointSpec {
            every: 50,
            keep: None,
        }
    }
}

impl NodeKind for CheckpointSpec {
    fn contract(&self) -> Contract {
        Contract::default()
    }

    fn may_give() -> Vec<Column> {
        Vec::new()
    }

    fn check(&self) -> Result<(), String> {
        at_least_one("every", self.every)?;
        at_least_one("keep", self.keep.unwrap_or(1) as u64)
    }

    fn build<B: RunBackend>(
        &self,
        _name: &str,
        runtime: &mut Runtime<B>,
    ) -> Result<Box<dyn Operator>, String> {
        Ok(Box::new(CheckpointNode {
            spec: self.clone(),
            collective: runtime.worker.collective.clone(),
            models: runtime.models.clone(),
            saved_states: runtime.saved_states.clone(),
            run: runtime.run.clone(),
        }))
    }
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

struct CheckpointNode<B: RunBackend> {
    spec: CheckpointSpec,
    /// The workers whose weights must be the same at each checkpoint.
    collective: Collective,
    models: Rc<RefCell<ModelTable<B>>>,
    saved_states: Rc<RefCell<SavedStates>>,
    run: RunInfo,
}

impl<B: RunBackend> CheckpointNode<B> {
    /// Writes the checkpoint of `completed` steps into its staging folder and stages its
    /// move into place (with pruning) until the last step's metrics are durable.
    fn save(&self, completed: u64) -> Result<(), String> {
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
            write_text(&staging.join(folder), &state_file(node), &to_json()?)?;
        }
        let meta = serde_json::json!({
            "step": completed,
            "seed": self.run.seed,
            "pipeline": self.run.name,
        });
        write_text(&staging, "meta.json", &meta.to_string())?;
        let (out_dir, keep) = (self.run.out_dir.clone(), self.spec.keep);
        let commit = move || {
            move_into_place(&staging, &target)?;
            prune(&out_dir, keep)
        };
        checkpoint_commits::stage(&self.run.out_dir, completed - 1, Box::new(commit));
        Ok(())
    }
}

impl<B: RunBackend> CheckpointNode<B> {
    /// Compares every trained model's weights ([`Trainable::fingerprint`]) across the
    /// workers, which apply the same updates: a difference is a bug, reported before the
    /// checkpoint is written rather than trained on.
    ///
    /// [`Trainable::fingerprint`]: crate::runtime::trainable::Trainable::fingerprint
    fn check_same_weights(&self, completed: u64) -> Result<(), String> {
        let table = self.models.borrow();
        let mut prints: Vec<(String, u64)> = (table.policies.iter())
            .map(|(name, p)| (name.clone(), p.borrow().train.fingerprint()))
            .collect();
        prints.extend(
            (table.critics.iter()).map(|(name, c)| (name.clone(), c.borrow().train.fingerprint())),
        );
        let all = self.collective.gather(&prints)?;
        for (worker, theirs) in all.iter().enumerate() {
            for ((name, mine), (_, other)) in all[0].iter().zip(theirs) {
                if mine != other {
                    return Err(format!(
                        "after step {completed}, worker {worker}'s weights of model `{name}` \
                         differ from worker 0's (fingerprint {other:016x} against {mine:016x}): \
                         the workers diverged, which is a bug; no checkpoint was written for \
                         this step, and `--resume` continues from the one before"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Removes all but the newest `keep` checkpoints of `out_dir`.
fn prune(out_dir: &Path, keep: Option<usize>) -> Result<(), String> {
    let Some(keep) = keep else {
        return Ok(());
    };
    let steps = saved_steps(out_dir);
    for &old in steps.iter().take(steps.len().saturating_sub(keep.max(1))) {
        let dir = step_dir(out_dir, old);
        std::fs::remove_dir_all(&dir)
            .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
    }
    Ok(())
}

impl<B: RunBackend> Operator for CheckpointNode<B> {
    fn process(&mut self, ctx: &mut StepContext, batch: Batch) -> Result<Batch, OperatorError> {
        let completed = ctx.step + 1;
        let due = completed.is_multiple_of(self.spec.every.max(1)) || completed == self.run.steps;
        if due && ctx.workers > 1 {
            self.check_same_weights(completed).map_err(OperatorError)?;
        }
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
}
