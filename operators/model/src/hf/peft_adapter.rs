//! Writing a model's LoRA adapters as a PEFT adapter directory: `adapter_config.json` and
//! `adapter_model.safetensors`, which `peft.PeftModel.from_pretrained(base, dir)` loads onto
//! the base model (PEFT's `save_pretrained` layout, `peft/utils/save_and_load.py`: tensor
//! names without the adapter name, `lora_A.weight` `[rank, in]`, `lora_B.weight` `[out,
//! rank]`, F32).

use std::path::Path;

use burn::tensor::backend::Backend;

use super::safetensors_save::{write_file, write_safetensors};
use crate::error::ModelError;
use crate::lora::adapter_tensors;
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
