//! `roll-flow export RUN_DIR --peft OUT_DIR`: a LoRA policy's adapters as a PEFT adapter
//! directory (`adapter_config.json` + `adapter_model.safetensors`) that
//! `peft.PeftModel.from_pretrained(base_model, OUT_DIR)` loads onto the base model the
//! pipeline named. Checkpoints of a policy with `lora:` hold that directory already
//! (`models/<name>/peft/`, [`crate::run_layout::PEFT_DIR`]); the export copies it with the
//! same guarantees as `--hf` (staged beside `OUT_DIR`, swapped in whole, never over a
//! directory holding anything else, never inside the run directory).

use std::path::Path;

use roll_flow_engine::Pipeline;
use roll_flow_model::hf::peft_adapter::{ADAPTER_CONFIG, ADAPTER_WEIGHTS};

use crate::catalog::RollFlow;
use crate::export::{check_out_dir, copy, model_spec, stage_and_swap};
use crate::run_layout::{step_dir, PEFT_DIR};

/// Writes the adapters of model `policy` at checkpoint `step` of the run in
/// `pipeline.out_dir` as a PEFT adapter directory `out`.
pub fn export_peft(
    pipeline: &Pipeline<RollFlow>,
    step: u64,
    policy: &str,
    out: &Path,
) -> Result<(), String> {
    if model_spec(pipeline, policy)?.lora.is_none() {
        return Err(format!(
            "model `{policy}` has no `lora:` in the run's `models:`, so it has no adapters; \
             export the whole model with --hf"
        ));
    }
    let adapter = step_dir(&pipeline.out_dir, step)
        .join("models")
        .join(policy)
        .join(PEFT_DIR);
    for file in [ADAPTER_CONFIG, ADAPTER_WEIGHTS] {
        if !adapter.join(file).is_file() {
            return Err(format!(
                "{} is missing; checkpoints of a LoRA policy hold its PEFT adapter there",
                adapter.join(file).display()
            ));
        }
    }
    check_out_dir(out, &[("the run directory", pipeline.out_dir.clone())])?;
    stage_and_swap(out, |staging| {
        for file in [ADAPTER_CONFIG, ADAPTER_WEIGHTS] {
            copy(&adapter.join(file), &staging.join(file))?;
        }
        Ok(())
    })
}
