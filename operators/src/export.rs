//! `roll-flow export RUN_DIR --hf OUT_DIR`: a checkpoint's policy as a Hugging Face model
//! directory that transformers' `AutoModelForCausalLM.from_pretrained` loads as the model's
//! family (Qwen2, Llama or Qwen3).
//!
//! Checkpoints already hold the weights in HF form (`models/<name>/hf/`: `config.json`
//! with the family's `architectures` class, F32 `model.safetensors`), except for a model
//! with frozen weights: a LoRA policy's hold its adapters alone, a reference's nothing but
//! a fingerprint. The export then rebuilds the model the pipeline names and folds the
//! adapters into it (`merged_policy`). What a complete directory also
//! needs is the tokenizer. For the Tiny preset that is the built-in
//! byte-level BPE as `tokenizer.json` plus a `tokenizer_config.json` carrying the ChatML
//! template and special tokens; for a policy fine-tuned from an HF directory, the
//! tokenizer files of that directory are copied as they are; for one loaded from a GGUF
//! file, its tokenizer and chat template are written out as those two files.
//!
//! The directory is assembled in a staging folder beside `OUT_DIR` and renamed into place,
//! so `OUT_DIR` is either the previous export or the complete new one, never half written.
//! Only a missing or empty `OUT_DIR`, or one holding nothing but files an export writes,
//! is replaced; `OUT_DIR` may not be, or lie inside, the run directory or the directory
//! the policy was loaded from.

use std::path::{Component, Path, PathBuf};

use roll_flow_engine::atomic_file::replace_dir;
use roll_flow_engine::Pipeline;

use roll_flow_model::build::{tokenizer_source, TokenizerSource};
use roll_flow_model::gguf::GgufModel;
use roll_flow_model::hf::peft_adapter::{ADAPTER_CONFIG, ADAPTER_WEIGHTS};
use roll_flow_model::hf::safetensors_errors::describe;
use roll_flow_model::hf::{read_config, save_causal_lm};
use roll_flow_model::spec::{ArchSpec, ModelSpec};
use roll_flow_model::tokenizer::{BUILTIN_CHAT_TEMPLATE, BUILTIN_TOKENIZER};

use crate::catalog::RollFlow;
use crate::registry::run_plan;
use crate::run_layout::{step_dir, TRAINED_FILE};
use crate::runtime::models::merged_policy;

/// Files of an HF model directory that describe its tokenizer and generation defaults;
/// those present in the source directory are copied.
const TOKENIZER_FILES: [&str; 7] = [
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "generation_config.json",
];

/// The model an export takes by default: the policy the first `Rollout` trains.
pub fn default_policy(pipeline: &Pipeline<RollFlow>) -> Result<String, String> {
    pipeline
        .nodes
        .iter()
        .find_map(|(_, node)| node.plays())
        .map(|play| play.policy)
        .ok_or_else(|| "the run's pipeline has no Rollout node; name the model with --model".into())
}

/// The `models:` entry `policy` of the run's pipeline.
pub(crate) fn model_spec<'p>(
    pipeline: &'p Pipeline<RollFlow>,
    policy: &str,
) -> Result<&'p ModelSpec, String> {
    pipeline.models.get(policy).ok_or_else(|| {
        let known: Vec<&str> = pipeline.models.names().collect();
        format!(
            "no model `{policy}` in the run's `models:`; it has: {}",
            known.join(", ")
        )
    })
}

/// Writes model `policy` of checkpoint `step` of the run in `pipeline.out_dir` as an HF
/// directory `out`. Relative model paths in the pipeline resolve against the current
/// directory, as `roll-flow run` resolves them.
pub fn export_hf(
    pipeline: &Pipeline<RollFlow>,
    step: u64,
    policy: &str,
    out: &Path,
) -> Result<(), String> {
    let spec = model_spec(pipeline, policy)?;
    let folder = step_dir(&pipeline.out_dir, step)
        .join("models")
        .join(policy);
    let weights = folder.join("hf");
    let trained = run_plan(pipeline).wiring.trained.contains(policy);
    let merged = if folder.join(TRAINED_FILE).is_file() {
        Some(
            merged_policy(spec, pipeline.seed, trained, &folder)
                .map_err(|e| format!("model `{policy}`: {e}"))?,
        )
    } else {
        for file in WEIGHT_FILES {
            if !weights.join(file).is_file() {
                return Err(format!(
                    "{} is missing; checkpoints of causal LMs hold their HF weights there",
                    weights.join(file).display()
                ));
            }
        }
        None
    };
    let config = match &merged {
        Some(model) => model.config.clone(),
        None => read_config(&weights).map_err(|e| e.to_string())?,
    };
    let tokenizer_source = tokenizer_source(spec, Path::new("."));
    let mut protected = vec![("the run directory", pipeline.out_dir.clone())];
    if let ArchSpec::HfDir(dir) = &spec.arch {
        protected.push(("the model directory the policy was loaded from", dir.into()));
    }
    if let TokenizerSource::HfDir(dir) = &tokenizer_source {
        protected.push(("the policy's tokenizer directory", dir.clone()));
    }
    check_out_dir(out, &protected)?;
    stage_and_swap(out, |staging| {
        match &merged {
            Some(model) => save_causal_lm(model, staging).map_err(|e| e.to_string())?,
            None => {
                for file in WEIGHT_FILES {
                    copy(&weights.join(file), &staging.join(file))?;
                }
            }
        }
        match &tokenizer_source {
            TokenizerSource::Builtin => {
                write_builtin_tokenizer(staging, config.max_position_embeddings)
            }
            TokenizerSource::HfDir(dir) => copy_tokenizer_files(dir, staging),
            TokenizerSource::Gguf(file) => write_gguf_tokenizer(file, staging),
        }
    })
}

/// Copies a checkpoint's file into an export; a `.safetensors` file is checked first (its
/// header against its length), so a damaged checkpoint is refused instead of exported.
pub(crate) fn copy(from: &Path, to: &Path) -> Result<(), String> {
    let bytes = std::fs::read(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
    if from.extension().is_some_and(|e| e == "safetensors") {
        safetensors::SafeTensors::read_metadata(&bytes).map_err(|e| {
            format!(
                "{}: not a valid safetensors file: {}; the checkpoint is damaged: export an \
                 earlier one (`--checkpoint STEP`)",
                from.display(),
                describe(&e, &bytes)
            )
        })?;
    }
    std::fs::write(to, bytes).map_err(|e| format!("cannot write {}: {e}", to.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The Tiny preset's tokenizer as transformers reads it: the fast tokenizer's JSON, and
/// its config with the ChatML template and the special tokens the chat uses.
fn write_builtin_tokenizer(dir: &Path, context: usize) -> Result<(), String> {
    write(&dir.join("tokenizer.json"), BUILTIN_TOKENIZER)?;
    let config = serde_json::json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": BUILTIN_CHAT_TEMPLATE,
        "bos_token": null,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "add_bos_token": false,
        "add_eos_token": false,
        "clean_up_tokenization_spaces": false,
        "model_max_length": context,
    });
    let text = serde_json::to_string_pretty(&config).expect("a JSON literal prints");
    write(&dir.join("tokenizer_config.json"), &text)
}

/// The tokenizer of the GGUF file the policy was loaded from, as HF files.
fn write_gguf_tokenizer(file: &Path, dir: &Path) -> Result<(), String> {
    let gguf = GgufModel::open(file).map_err(|e| e.to_string())?;
    for (name, text) in gguf.hf_tokenizer_files().map_err(|e| e.to_string())? {
        write(&dir.join(name), &text)?;
    }
    Ok(())
}

fn copy_tokenizer_files(source: &Path, dir: &Path) -> Result<(), String> {
    if !source.join("tokenizer.json").is_file() {
        return Err(format!(
            "{} has no tokenizer.json to export with the weights",
            source.display()
        ));
    }
    for file in TOKENIZER_FILES {
        let from = source.join(file);
        if from.is_file() {
            copy(&from, &dir.join(file))?;
        }
    }
    Ok(())
}

/// The files of a checkpoint's `hf/` folder an export copies: the config and the weights.
const WEIGHT_FILES: [&str; 2] = ["config.json", "model.safetensors"];

/// Whether an export writes a file of this name.
fn is_export_file(name: &str) -> bool {
    WEIGHT_FILES.contains(&name)
        || TOKENIZER_FILES.contains(&name)
        || [ADAPTER_CONFIG, ADAPTER_WEIGHTS].contains(&name)
}

/// Refuses an `out` that is, or lies inside, one of the `protected` directories, and an
/// existing `out` holding anything but the files an export writes: replacing it would
/// delete what it holds.
pub(crate) fn check_out_dir(out: &Path, protected: &[(&str, PathBuf)]) -> Result<(), String> {
    let target = resolved(out);
    for (what, dir) in protected {
        if target.starts_with(resolved(dir)) {
            return Err(format!(
                "{} is or lies inside {what} ({}); export into a new directory elsewhere",
                out.display(),
                dir.display()
            ));
        }
    }
    if !out.exists() {
        return Ok(());
    }
    if !out.is_dir() {
        return Err(format!(
            "{} exists and is not a directory; export into a new directory",
            out.display()
        ));
    }
    let entries =
        std::fs::read_dir(out).map_err(|e| format!("cannot read {}: {e}", out.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", out.display()))?;
        let name = entry.file_name();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !is_file || !name.to_str().is_some_and(is_export_file) {
            return Err(format!(
                "{} already holds {}, which is not part of an export; export into a new or \
                 empty directory (only a previous export is replaced)",
                out.display(),
                entry.path().display()
            ));
        }
    }
    Ok(())
}

/// `path` made absolute with symbolic links resolved, also when its last components do not
/// exist yet (those are appended as written, `..` and `.` applied lexically).
fn resolved(path: &Path) -> PathBuf {
    let mut head = path.to_path_buf();
    let mut tail = Vec::new();
    let mut real = loop {
        let probe = if head.as_os_str().is_empty() {
            Path::new(".")
        } else {
            head.as_path()
        };
        if let Ok(real) = probe.canonicalize() {
            break real;
        }
        match head.components().next_back() {
            Some(last) => tail.push(last.as_os_str().to_owned()),
            None => return path.to_path_buf(),
        }
        head.pop();
    };
    for part in tail.iter().rev() {
        match Path::new(part).components().next() {
            Some(Component::ParentDir) => {
                real.pop();
            }
            Some(Component::CurDir) | None => {}
            Some(_) => real.push(part),
        }
    }
    real
}

/// Fills a fresh staging folder beside `out` with `fill`, then puts it in place of `out`
/// (the previous `out`, if any, is moved aside first and removed after; if the new one
/// cannot be moved in, the previous one is moved back).
pub(crate) fn stage_and_swap(
    out: &Path,
    fill: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<(), String> {
    let name = out
        .file_name()
        .ok_or_else(|| format!("{} names no directory", out.display()))?
        .to_string_lossy()
        .into_owned();
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)
        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    let sibling =
        |what: &str| -> PathBuf { parent.join(format!(".{name}.{what}-{}", std::process::id())) };
    let (staging, previous) = (sibling("staging"), sibling("previous"));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir(&staging)
        .map_err(|e| format!("cannot create {}: {e}", staging.display()))?;
    let result = fill(&staging).and_then(|()| replace_dir(&staging, out, &previous, "the export"));
    let _ = std::fs::remove_dir_all(&staging);
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&previous);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_replaces_an_old_export_and_leaves_nothing_behind() {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("export");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("stale.txt"), "old").unwrap();
        stage_and_swap(&out, |dir| write(&dir.join("new.txt"), "new")).unwrap();
        let names = |dir: &Path| -> Vec<String> {
            let mut n: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            n.sort();
            n
        };
        assert_eq!(names(&out), ["new.txt"]);
        assert_eq!(names(root.path()), ["export"]);
    }

    #[test]
    fn a_failed_fill_keeps_the_old_export() {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("export");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("config.json"), "{}").unwrap();
        let err = stage_and_swap(&out, |_| Err("tokenizer missing".into())).unwrap_err();
        assert_eq!(err, "tokenizer missing");
        assert!(out.join("config.json").is_file());
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 1);
    }

    #[test]
    fn only_a_missing_empty_or_previous_export_dir_is_replaced() {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("export");
        check_out_dir(&out, &[]).unwrap();
        std::fs::create_dir(&out).unwrap();
        check_out_dir(&out, &[]).unwrap();
        for file in [
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "merges.txt",
        ] {
            std::fs::write(out.join(file), "x").unwrap();
        }
        check_out_dir(&out, &[]).unwrap();
        std::fs::write(out.join("notes.txt"), "mine").unwrap();
        let err = check_out_dir(&out, &[]).unwrap_err();
        assert!(
            err.contains("notes.txt") && err.contains("new or empty directory"),
            "{err}"
        );
        std::fs::remove_file(out.join("notes.txt")).unwrap();
        std::fs::create_dir(out.join("checkpoints")).unwrap();
        let err = check_out_dir(&out, &[]).unwrap_err();
        assert!(err.contains("checkpoints"), "{err}");
        let file = root.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let err = check_out_dir(&file, &[]).unwrap_err();
        assert!(err.contains("not a directory"), "{err}");
    }

    #[test]
    fn an_out_dir_in_a_protected_dir_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let run = root.path().join("run");
        std::fs::create_dir(&run).unwrap();
        let protected = [("the run directory", run.clone())];
        for out in [
            run.clone(),
            run.join("hf"),
            run.join("a/../hf"),
            run.join("."),
        ] {
            let err = check_out_dir(&out, &protected).unwrap_err();
            assert!(err.contains("lies inside the run directory"), "{err}");
        }
        std::os::unix::fs::symlink(&run, root.path().join("link")).unwrap();
        assert!(check_out_dir(&root.path().join("link/hf"), &protected).is_err());
        for out in [root.path().join("run2"), run.join("../hf")] {
            check_out_dir(&out, &protected).unwrap();
        }
    }

    #[test]
    fn the_builtin_tokenizer_config_loads_back_with_its_chat_template() {
        let dir = tempfile::tempdir().unwrap();
        write_builtin_tokenizer(dir.path(), 4096).unwrap();
        let tokenizer = roll_flow_model::TextTokenizer::from_model_dir(dir.path()).unwrap();
        let builtin = roll_flow_model::TextTokenizer::builtin();
        assert_eq!(tokenizer.stop_tokens(), builtin.stop_tokens());
        let chat = [roll_flow_model::ChatMessage::new("user", "hi")];
        assert_eq!(
            tokenizer.apply_chat_template(&chat, true).unwrap(),
            builtin.apply_chat_template(&chat, true).unwrap()
        );
    }
}
