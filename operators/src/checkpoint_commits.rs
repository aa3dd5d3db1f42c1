//! Checkpoints written but not yet put in place, so that a checkpoint never covers a step
//! whose metrics line is not on disk.
//!
//! The `Checkpoint` node writes a step's checkpoint into a staging folder while the step
//! runs, but the step's metrics line is appended only after every node of the step is
//! done. Were the checkpoint renamed into place at once, a kill between the two would
//! leave a checkpoint after the last metrics line, and `--resume` would start after a step
//! that `metrics.jsonl` lacks. So the node [`stage`]s the rename, and the run's metrics
//! sink, once the line of step s is written and fsynced, [`commit_through`]s s: every
//! staged checkpoint covering steps up to s is put in place, in step order. A run that
//! fails or is killed leaves its staged checkpoints uncommitted; the next save of that step
//! removes the staging folder.
//!
//! Staged commits are kept per run directory in this process (the node and the sink run
//! in the process of worker 0, which alone writes metrics and checkpoints).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What puts one checkpoint in place (rename, then pruning).
pub type Commit = Box<dyn FnOnce() -> Result<(), String> + Send>;

struct Staged {
    out_dir: PathBuf,
    /// The last step the checkpoint covers (its completed-step count − 1).
    covers: u64,
    commit: Commit,
}

static STAGED: Mutex<Vec<Staged>> = Mutex::new(Vec::new());

fn staged() -> std::sync::MutexGuard<'static, Vec<Staged>> {
    STAGED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Holds `commit` of the checkpoint of run `out_dir` that covers steps up to `covers`
/// until [`commit_through`] reaches that step. A checkpoint staged again for the same
/// step replaces the earlier commit.
pub fn stage(out_dir: &Path, covers: u64, commit: Commit) {
    let mut staged = staged();
    staged.retain(|s| !(s.out_dir == out_dir && s.covers == covers));
    staged.push(Staged {
        out_dir: out_dir.to_path_buf(),
        covers,
        commit,
    });
}

/// Puts in place, in step order, every staged checkpoint of `out_dir` covering steps up
/// to `step` (whose metrics are durable); returns the steps they cover. The first failure
/// stops there and is returned; the checkpoints after it stay staged.
pub fn commit_through(out_dir: &Path, step: u64) -> Result<Vec<u64>, String> {
    let mut due: Vec<Staged> = {
        let mut staged = staged();
        let (due, kept): (Vec<Staged>, Vec<Staged>) = staged
            .drain(..)
            .partition(|s| s.out_dir == out_dir && s.covers <= step);
        *staged = kept;
        due
    };
    due.sort_by_key(|s| s.covers);
    let mut done = Vec::new();
    let mut due = due.into_iter();
    for s in due.by_ref() {
        let covers = s.covers;
        if let Err(e) = (s.commit)() {
            let mut staged = staged();
            staged.extend(due);
            return Err(e);
        }
        done.push(covers);
    }
    Ok(done)
}

/// Forgets the staged checkpoints of `out_dir` (a run that stopped: what it staged stays
/// on disk as staging folders, never in place).
pub fn discard(out_dir: &Path) {
    staged().retain(|s| s.out_dir != out_dir);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn recorder(log: &Arc<Mutex<Vec<u64>>>, step: u64) -> Commit {
        let log = log.clone();
        Box::new(move || {
            log.lock().unwrap().push(step);
            Ok(())
        })
    }

    #[test]
    fn a_checkpoint_is_committed_only_once_its_steps_metrics_are() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let log = Arc::new(Mutex::new(Vec::new()));
        stage(out, 4, recorder(&log, 4));
        stage(out, 2, recorder(&log, 2));
        assert_eq!(commit_through(out, 1).unwrap(), Vec::<u64>::new());
        assert_eq!(commit_through(out, 3).unwrap(), vec![2]);
        assert_eq!(commit_through(out, 4).unwrap(), vec![4]);
        assert_eq!(*log.lock().unwrap(), vec![2, 4]);
        assert_eq!(commit_through(out, 9).unwrap(), Vec::<u64>::new());
    }

    #[test]
    fn runs_do_not_commit_each_others_checkpoints_and_a_failure_keeps_the_rest() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        stage(a.path(), 1, Box::new(|| Err("disk full".into())));
        stage(a.path(), 2, recorder(&log, 2));
        stage(b.path(), 1, recorder(&log, 1));
        assert_eq!(commit_through(a.path(), 5).unwrap_err(), "disk full");
        assert!(log.lock().unwrap().is_empty(), "b's and the later one wait");
        assert_eq!(commit_through(a.path(), 5).unwrap(), vec![2]);
        assert_eq!(commit_through(b.path(), 1).unwrap(), vec![1]);
        discard(a.path());
    }
}
