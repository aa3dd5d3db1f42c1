//! Writing a model's LoRA adapters as a PEFT adapter directory: `adapter_config.json` and
//! `adapter_model.safetensors`, which `peft.PeftModel.from_pretrained(base, dir)` loads onto
//! the base model (PEFT's `save_pretrained` layout, `peft/utils/save_and_load.py`: tensor
//! names without the adapter name, `lora_A.weight` `[rank, in]`, `lora_B.weight` `[out,
//! rank]`, F32); and reading back the `lora:` settings such a directory was written with.

use std::path::Path;

use burn::tensor::backend::Backend;

use super::safetensors_save::{write_file, write_safetensors};
use crate::error::ModelError;
use crate::lora::adapter_tensors;
use crate::lora_spec::LoraSpec;
use crate::qwen2::Qwen2CausalLm;

/// PEFT's adapter weights file.
pub const ADAPTER_WEIGHTS: &str = "adapter_model.safetensors";
/// PEFT's adapter settings file.
pub const ADAPTER_CONFIG: &str = "adapter_config.json";

/// Writes the adapters of `model` (attached with `lora:`) into `dir`, each file atomically;
/// `base_model` is what the config names as the base (`base_model_name_or_path`: the model
/// directory or GGUF file the policy was loaded from). Fails for a model without adapters.
pub fn save_peft_adapter<B: Backend>(
    model: &Qwen2CausalLm<B>,
    dir: &Path,
    base_model: &str,
) -> Result<(), ModelError> {
    let Some(lora) = &model.lora else {
        return Err(ModelError::Config {
            path: dir.to_path_buf(),
            message: "the model has no LoRA adapters (no `lora:` in its `models:` entry), so \
                      there is no PEFT adapter to write; export the whole model with --hf"
                .into(),
        });
    };
    std::fs::create_dir_all(dir).map_err(|e| ModelError::io(dir, e))?;
    write_safetensors(&dir.join(ADAPTER_WEIGHTS), &adapter_tensors(model))?;
    let config = serde_json::json!({
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": lora.rank,
        "lora_alpha": lora.alpha,
        "lora_dropout": lora.dropout,
        "target_modules": lora.targets,
        "bias": "none",
        "fan_in_fan_out": false,
        "inference_mode": true,
        "init_lora_weights": true,
        "modules_to_save": null,
        "use_rslora": false,
        "use_dora": false,
    });
    let text = serde_json::to_string_pretty(&config).expect("a JSON literal prints");
    write_file(&dir.join(ADAPTER_CONFIG), text.as_bytes())
}

/// The `lora:` settings a PEFT adapter directory `dir` was written with (`r`,
/// `lora_alpha`, `target_modules`, `lora_dropout` of its `adapter_config.json`), or `None`
/// when `dir` holds no such file.
pub fn read_peft_settings(dir: &Path) -> Result<Option<LoraSpec>, ModelError> {
    let path = dir.join(ADAPTER_CONFIG);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ModelError::io(path, e)),
    };
    #[derive(serde::Deserialize)]
    struct Settings {
        r: usize,
        lora_alpha: f64,
        lora_dropout: f64,
        target_modules: Vec<String>,
    }
    let read: Settings = serde_json::from_str(&text).map_err(|source| ModelError::Json {
        path: path.clone(),
        source,
    })?;
    Ok(Some(LoraSpec {
        rank: read.r,
        alpha: read.lora_alpha,
        targets: read.target_modules,
        dropout: read.lora_dropout,
    }))
}
