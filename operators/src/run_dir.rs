//! The run directory (`out_dir`) before a run writes into it.
//!
//! - A new run refuses a directory that already holds a run's results: its `metrics.jsonl` would be
//!   truncated, its `pipeline.ron` replaced, and its `checkpoints/step_N` mixed with the
//!   new run's (pruning could then keep the old ones, and `--resume`, `export` and
//!   `play --policy` load them). With `overwrite` the old run is moved aside, never
//!   deleted.
//! - A resumed run checks that its newest checkpoint is complete before it drops the
//!   metrics of the steps it will redo, and keeps every line it cannot read but the
//!   unreadable ones.

use std::path::{Path, PathBuf};

use crate::run_layout::{check_complete, saved_steps, step_dir};

/// What a run that finished a step leaves in its directory: a `metrics.jsonl` with a
/// line in it, or a checkpoint. A directory left by a run that stopped before its first
/// step (its `pipeline.ron` and an empty `metrics.jsonl`, say after a model failed to
/// load) holds nothing to lose, so a retry may reuse it without `--overwrite`.
pub const RUN_MARKERS: [&str; 2] = ["metrics.jsonl", "checkpoints"];

fn holds_results(path: &Path) -> bool {
    if path.is_dir() {
        std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_some())
    } else {
        std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
    }
}

/// Makes `out_dir` ready for a new run. A directory holding a run's results is refused, or
/// with `overwrite` renamed to `<out_dir>.previous-<unix seconds>`, which is returned.
pub fn prepare_new_run(out_dir: &Path, overwrite: bool) -> Result<Option<PathBuf>, String> {
    let found: Vec<&str> = RUN_MARKERS
        .into_iter()
        .filter(|m| holds_results(&out_dir.join(m)))
        .collect();
    if found.is_empty() {
        return Ok(None);
    }
    let shown = out_dir.display();
    if !overwrite {
        return Err(format!(
            "{shown} already holds a run ({}); a new run there would mix with it. \
             Continue that run with `roll-flow run --resume {shown}`, write this one elsewhere \
             with `--out DIR`, or add `--overwrite` to move the old run aside \
             (to {shown}.previous-<unix time>) and start afresh",
            found.join(", ")
        ));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let aside = aside_path(out_dir, now)?;
    std::fs::rename(out_dir, &aside).map_err(|e| {
        format!(
            "cannot move the old run in {shown} aside to {}: {e}",
            aside.display()
        )
    })?;
    Ok(Some(aside))
}

/// `<out_dir>.previous-<now>`, with `-2`, `-3`, ... when that is taken.
fn aside_path(out_dir: &Path, now: u64) -> Result<PathBuf, String> {
    let name = out_dir.file_name().ok_or_else(|| {
        format!(
            "cannot move {} aside (it has no folder name); write the run elsewhere with `--out DIR`",
            out_dir.display()
        )
    })?;
    let base = format!("{}.previous-{now}", name.to_string_lossy());
    (1..)
        .map(|n| match n {
            1 => out_dir.with_file_name(&base),
            n => out_dir.with_file_name(format!("{base}-{n}")),
        })
        .find(|p| !p.exists())
        .ok_or_else(|| "no free name to move the old run to".into())
}

/// Where a resumed run starts, and what was dropped from its `metrics.jsonl`.
#[derive(Debug, PartialEq)]
pub struct Resume {
    /// The step the run continues at (its newest checkpoint's completed-step count; 0 when
    /// it has none yet).
    pub first_step: u64,
    /// The run had no checkpoint yet, so it starts again from step 0 in place.
    pub from_start: bool,
    /// 1-based numbers of the lines of `metrics.jsonl` that were not a JSON record with a
    /// `step` (a line torn when the run stopped) and were dropped.
    pub unreadable_lines: Vec<usize>,
    /// Where the whole `metrics.jsonl` was copied before lines were dropped from it
    /// (`metrics.jsonl.before-resume-<first_step>`), so a resume that then fails to load its
    /// checkpoint loses no history; `None` when nothing was dropped.
    pub metrics_before: Option<PathBuf>,
}

/// Readies `out_dir` for `run --resume`: finds the newest checkpoint, checks it holds what
/// a resume restores (`models` are the models the pipeline's nodes use), then drops the
/// metrics of the steps that will be redone (after copying the file aside). A run killed
/// before its first checkpoint starts again from step 0 in place (`from_start`), its
/// metrics copied aside the same way. Nothing is changed when a check fails.
pub fn prepare_resume(out_dir: &Path, models: &[&str]) -> Result<Resume, String> {
    let newest = saved_steps(out_dir).last().copied();
    let first_step = resume_step(out_dir, models)?;
    let (unreadable_lines, metrics_before) =
        keep_metrics_before(&out_dir.join("metrics.jsonl"), first_step)?;
    Ok(Resume {
        first_step,
        from_start: newest.is_none(),
        unreadable_lines,
        metrics_before,
    })
}

/// The step a resumed run starts at (its newest checkpoint's, 0 without one), checked
/// complete; reads only (what the processes of a cluster run other than 0 call).
pub fn resume_step(out_dir: &Path, models: &[&str]) -> Result<u64, String> {
    let newest = saved_steps(out_dir).last().copied();
    if let Some(step) = newest {
        check_complete(&step_dir(out_dir, step), models)?;
    }
    Ok(newest.unwrap_or(0))
}

/// Rewrites `path` (atomically) with only the records of steps before `first_step`, when
/// anything is to be dropped, after copying it whole to `<path>.before-resume-<first_step>`;
/// returns the numbers of the lines that were not records and the copy's path. A missing
/// file is left missing (the run creates it).
fn keep_metrics_before(
    path: &Path,
    first_step: u64,
) -> Result<(Vec<usize>, Option<PathBuf>), String> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), None)),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut kept = Vec::with_capacity(bytes.len());
    let (mut unreadable, mut dropped) = (Vec::new(), false);
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let step = serde_json::from_slice::<serde_json::Value>(line)
            .ok()
            .and_then(|v| v.get("step")?.as_u64());
        match step {
            Some(step) if step < first_step => {
                kept.extend_from_slice(line);
                kept.push(b'\n');
            }
            Some(_) => dropped = true,
            None => unreadable.push(i + 1),
        }
    }
    if !dropped && unreadable.is_empty() {
        return Ok((unreadable, None));
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".before-resume-{first_step}"));
    let before = path.with_file_name(name);
    roll_flow_engine::atomic_file::write_atomic(&before, &bytes).map_err(|e| {
        format!(
            "cannot copy {} to {}: {e}",
            path.display(),
            before.display()
        )
    })?;
    roll_flow_engine::atomic_file::write_atomic(path, &kept)
        .map_err(|e| format!("cannot rewrite {}: {e}", path.display()))?;
    Ok((unreadable, Some(before)))
}

#[cfg(test)]
#[path = "run_dir_tests.rs"]
mod tests;
