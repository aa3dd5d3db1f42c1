//! Loading and saving a whole Hugging Face Qwen2 directory: `config.json`, the safetensors
//! weights and the tokenizer, as `from_pretrained`/`save_pretrained` do.

use std::path::Path;

use burn::tensor::backend::Backend;

use super::safetensors_load::SafetensorsSource;
use super::safetensors_save::save_model_dir;
use crate::config::Qwen2Config;
use crate::error::ModelError;
use crate::qwen2::Qwen2CausalLm;
use crate::tokenizer::TextTokenizer;
use crate::weights::TensorSink;

/// Reads and validates `dir/config.json`.
pub fn read_config(dir: &Path) -> Result<Qwen2Config, ModelError> {
    if !dir.is_dir() {
        return Err(ModelError::MissingDir {
            dir: dir.to_path_buf(),
            why: crate::error::missing_path(dir, false),
        });
    }
    let path = dir.join("config.json");
    if !path.is_file() {
        return Err(ModelError::MissingFile {
            dir: dir.to_path_buf(),
            file: "config.json".into(),
            why: format!("the model's architecture{}", gguf_hint(dir)),
        });
    }
    Qwen2Config::from_json_file(&path)
}

/// For a directory without config.json that holds GGUF files: the files to name instead
/// (a GGUF model is its file, not its folder); empty otherwise.
fn gguf_hint(dir: &Path) -> String {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.is_file() && path.extension().is_some_and(|e| e == "gguf"))
        .map(|path| path.display().to_string())
        .collect();
    files.sort();
    match files.len() {
        0 => String::new(),
        _ => format!(
            "; it holds GGUF files, and a GGUF model is named by its file (`Gguf(FILE)` in \
             a pipeline, `--model FILE`): {}",
            files.join(", ")
        ),
    }
}

/// The causal LM of `dir` (config.json + safetensors), weights converted to the backend's
/// float type.
pub fn load_causal_lm<B: Backend>(
    dir: &Path,
    device: &B::Device,
) -> Result<Qwen2CausalLm<B>, ModelError> {
    let config = read_config(dir)?;
    let mut source = SafetensorsSource::open(dir)?;
    if config.tie_word_embeddings {
        source.allow_unused("lm_head.weight");
    }
    let model = Qwen2CausalLm::load(&mut source, &config, device)?;
    source.finish()?;
    Ok(model)
}

/// The causal LM and the tokenizer of `dir`.
pub fn load_model_dir<B: Backend>(
    dir: &Path,
    device: &B::Device,
) -> Result<(Qwen2CausalLm<B>, TextTokenizer), ModelError> {
    let model = load_causal_lm(dir, device)?;
    let tokenizer = TextTokenizer::from_model_dir(dir)?;
    if tokenizer.vocab_size() > model.config.vocab_size {
        return Err(ModelError::Config {
            path: dir.join("tokenizer.json"),
            message: format!(
                "the tokenizer has {} tokens but the model's vocab_size is {}",
                tokenizer.vocab_size(),
                model.config.vocab_size
            ),
        });
    }
    Ok((model, tokenizer))
}

/// Writes the model as `dir/config.json` + `dir/model.safetensors`.
pub fn save_causal_lm<B: Backend>(model: &Qwen2CausalLm<B>, dir: &Path) -> Result<(), ModelError> {
    let mut sink = TensorSink::default();
    model.save(&mut sink);
    save_model_dir(dir, &model.config, &sink)
}
