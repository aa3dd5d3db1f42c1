//! Where a run keeps its checkpoints: `out_dir/checkpoints/step_N/` (N = steps completed)
//! and the file names inside one. The `Checkpoint` node writes this layout, a resumed run
//! and `play --policy`/`export` read it.
//!
//! - `models/<name>/model.bin`, `optimizer.bin`: weights and AdamW state (burn records,
//!   full precision, parameter ids kept); `version`: the policy version; `hf/`: the same
//!   weights as a Hugging Face directory (config.json + model.safetensors); with `lora:`,
//!   `trained.safetensors` (the adapters) in place of `model.bin`, `peft/` (the same
//!   adapters as PEFT's), and of `hf/` only `config.json` (the architecture a resume
//!   checks); for a model no node trains (a reference), `trained.safetensors` holds only a
//!   fingerprint of its weights, and `hf/` only `config.json`;
//! - `critics/<name>/model.bin`, `optimizer.bin`;
//! - `<folder>/<node>.json`: the state a node keeps between steps (`adv/<node>.json`, the
//!   adaptive KL coefficient; `actor/<node>.json`, the adaptive entropy coefficient);
//! - `meta.json`: step, seed, pipeline name (written last).

use std::path::{Path, PathBuf};

use roll_flow_engine::spec::Diagnostic;

/// A trained model's weights in a checkpoint folder (a burn record).
pub const MODEL_FILE: &str = "model.bin";
/// A model with a frozen base (LoRA): its trained parameters alone, in place of
/// [`MODEL_FILE`] (`crate::runtime::trained_params`).
pub const TRAINED_FILE: &str = "trained.safetensors";
/// A trained model's optimizer state in a checkpoint folder (a burn record).
pub const OPTIMIZER_FILE: &str = "optimizer.bin";
/// A policy's version number in its checkpoint folder.
pub const VERSION_FILE: &str = "version";
/// A LoRA policy's adapters as a PEFT adapter directory, inside its model folder.
pub const PEFT_DIR: &str = "peft";

/// The file a checkpoint keeps node `node`'s state in (inside its folder).
pub fn state_file(node: &str) -> String {
    format!("{node}.json")
}

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

/// The copy of its pipeline a run keeps in its directory (`out_dir/pipeline.ron`, as it
/// ran, overrides applied), which `run --resume`, `play --policy` and `export` load; a
/// folder without one is not a run directory, and the error says so.
pub fn run_pipeline(run_dir: &Path) -> Result<PathBuf, Box<Diagnostic>> {
    let file = run_dir.join("pipeline.ron");
    if file.is_file() {
        return Ok(file);
    }
    Err(Box::new(Diagnostic::error(
        &file,
        format!("{} is not a run directory: it has no pipeline.ron", run_dir.display()),
    )
    .help("name the folder a run wrote into (its `out_dir`, or `run --out`), which holds pipeline.ron, metrics.jsonl and checkpoints/")))
}

/// Checks that the checkpoint folder `checkpoint` holds everything a resumed run restores:
/// `meta.json` (written last), the weights (`model.bin` or `trained.safetensors`),
/// `optimizer.bin` and `version` of every policy and `model.bin`, `optimizer.bin` of every
/// critic, and a folder for each of `models` (the
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
        if !policy.join(TRAINED_FILE).is_file() {
            need(policy.join(MODEL_FILE));
        }
        for file in [OPTIMIZER_FILE, VERSION_FILE] {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn saved_steps_are_listed_in_order() {
        let dir = tempfile::tempdir().unwrap();
        assert!(saved_steps(dir.path()).is_empty());
        for step in [10, 2, 4] {
            std::fs::create_dir_all(step_dir(dir.path(), step)).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("checkpoints/.staging_step_12")).unwrap();
        assert_eq!(saved_steps(dir.path()), vec![2, 4, 10]);
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
        // A LoRA policy's adapters stand in for the whole model.
        std::fs::rename(
            ckpt.join("models/policy/model.bin"),
            ckpt.join("models/policy/trained.safetensors"),
        )
        .unwrap();
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
