//! What a run checks and readies before its first step: the refusals that need no file
//! and the run directory (a new run's pipeline copy, a resumed run's checkpoint and
//! metrics).

use roll_flow_engine::atomic_file::write_atomic;
use roll_flow_envs::config::EnvConfig;
use roll_flow_envs::registry::registered_names;

use super::{Run, RunError};
use crate::catalog::RollFlow;
use crate::memory_estimate::{available_memory, check_fits, estimate_here};
use crate::run_device::missing_backend;
use crate::run_dir;

impl Run {
    /// Refusals that need no file: a backend this build lacks, a custom env nobody
    /// registered, more workers than a rollout has groups, a run that would not fit in
    /// memory.
    pub(super) fn refuse_what_cannot_run(&self) -> Result<(), RunError> {
        let pipeline = &self.loaded.pipeline;
        if let Some(problem) = missing_backend(pipeline.device) {
            return Err(RunError::Refused(problem));
        }
        let known = registered_names();
        for (tag, set) in pipeline.envs.iter() {
            if let EnvConfig::Custom(custom) = &set.env {
                if !known.contains(&custom.name) {
                    return Err(RunError::Refused(format!(
                        "env set `{tag}`: no custom env `{}` is registered (registered: {}); \
                         register it with `Run::env(\"{}\", factory)` in the program that runs \
                         the pipeline",
                        custom.name,
                        if known.is_empty() {
                            "none".into()
                        } else {
                            known.join(", ")
                        },
                        custom.name
                    )));
                }
            }
        }
        // Each worker holds its own models and plays its shard of every set's groups.
        let workers = self.options.threads.saturating_mul(self.options.processes);
        for node in pipeline.nodes.iter().filter_map(|(_, node)| node.plays()) {
            for tag in &node.envs {
                let Some(set) = pipeline.envs.get(tag) else {
                    continue;
                };
                if set.groups < workers {
                    return Err(RunError::Refused(format!(
                        "{workers} workers (-w × -n), but env set `{tag}` that the rollout \
                         plays has {} groups, and each worker plays whole groups: the others \
                         would hold a copy of every model and play nothing; use at most {} \
                         workers, or more `groups`",
                        set.groups, set.groups
                    )));
                }
            }
        }
        if let (true, Some(available)) = (self.memory_check, available_memory()) {
            let (estimate, _) = estimate_here(pipeline, self.options.threads);
            check_fits(&estimate, available).map_err(RunError::Refused)?;
        }
        Ok(())
    }

    /// Readies the run directory; returns the first step to run.
    pub(super) fn ready_directory(&self) -> Result<u64, RunError> {
        let pipeline = &self.loaded.pipeline;
        let out_dir = &pipeline.out_dir;
        if self.options.process != 0 {
            // Process 0 readies the directory; another reads where a resumed run starts.
            if !self.resume {
                return Ok(0);
            }
            let models = used_models(pipeline);
            let models: Vec<&str> = models.iter().map(String::as_str).collect();
            return run_dir::resume_step(out_dir, &models).map_err(RunError::Refused);
        }
        if self.resume {
            let models = used_models(pipeline);
            let models: Vec<&str> = models.iter().map(String::as_str).collect();
            let resume = run_dir::prepare_resume(out_dir, &models).map_err(RunError::Refused)?;
            if resume.from_start {
                (self.notices)(&format!(
                    "{} has no checkpoint yet (none in {}): starting the run again from step 0 in place",
                    out_dir.display(),
                    out_dir.join("checkpoints").display()
                ));
            }
            if let Some(before) = &resume.metrics_before {
                (self.notices)(&format!(
                    "resuming at step {}: metrics.jsonl keeps the steps before it; the whole file was copied to {}",
                    resume.first_step,
                    before.display()
                ));
            }
            if !resume.unreadable_lines.is_empty() {
                let lines: Vec<String> = resume
                    .unreadable_lines
                    .iter()
                    .map(usize::to_string)
                    .collect();
                (self.notices)(&format!(
                    "warning: dropped line(s) {} of {}: not a JSON record with a `step` (a line torn when the run stopped)",
                    lines.join(", "),
                    out_dir.join("metrics.jsonl").display()
                ));
            }
            return Ok(resume.first_step);
        }
        let aside = run_dir::prepare_new_run(out_dir, self.overwrite).map_err(RunError::Refused)?;
        if let Some(aside) = aside {
            (self.notices)(&format!(
                "moved the previous run in {} aside to {}",
                out_dir.display(),
                aside.display()
            ));
        }
        write_atomic(
            &out_dir.join("pipeline.ron"),
            self.loaded.source.text.as_bytes(),
        )
        .map_err(|e| {
            RunError::Io(format!(
                "cannot write the pipeline copy into {}: {e}",
                out_dir.display()
            ))
        })?;
        Ok(0)
    }
}

/// The models the nodes use: a resumed run restores each from the checkpoint, so each must
/// be in it.
fn used_models(pipeline: &roll_flow_engine::Pipeline<RollFlow>) -> Vec<String> {
    use roll_flow_engine::{NodeSpec, Reference};
    let used: std::collections::BTreeSet<String> = pipeline
        .nodes
        .iter()
        .flat_map(|(_, node)| node.references())
        .filter_map(|r| match r {
            Reference::Model { name, .. } => Some(name),
            Reference::Env { .. } => None,
        })
        .collect();
    used.into_iter().collect()
}
