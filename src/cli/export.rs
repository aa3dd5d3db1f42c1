//! `roll-flow export RUN_DIR [--checkpoint N] [--model NAME] --hf OUT_DIR --peft OUT_DIR`: a
//! checkpoint's policy as a Hugging Face directory (LoRA adapters merged; see
//! `roll_flow::operators::export`) and/or, for a policy trained with `lora:`, its adapters
//! as a PEFT adapter directory (`roll_flow::operators::export_peft`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use roll_flow::operators::export::{default_policy, export_hf};
use roll_flow::operators::export_peft::export_peft;
use roll_flow::operators::watch::checkpoint_step;

#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("format").required(true).multiple(true).args(["hf", "peft"]))]
pub struct ExportArgs {
    /// The run directory (a run's `out_dir`, holding pipeline.ron and checkpoints/).
    #[arg(value_name = "RUN_DIR")]
    run: PathBuf,
    /// The checkpoint (steps completed) to export; default the newest.
    #[arg(long, value_name = "N")]
    checkpoint: Option<u64>,
    /// The model to export; default the policy the pipeline's Rollout trains.
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// The Hugging Face directory to write: a new or empty directory, or a previous export
    /// (replaced atomically); not the run directory or the policy's source directory.
    #[arg(long, value_name = "OUT_DIR")]
    hf: Option<PathBuf>,
    /// The PEFT adapter directory to write (adapter_config.json, adapter_model.safetensors)
    /// for a policy trained with `lora:`; same rules as --hf.
    #[arg(long, value_name = "OUT_DIR")]
    peft: Option<PathBuf>,
}

pub fn run(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    let Some((loaded, _)) = super::diagnostics::load_run(&args.run) else {
        return Ok(ExitCode::FAILURE);
    };
    let pipeline = &loaded.pipeline;
    let step = checkpoint_step(&args.run, args.checkpoint).map_err(anyhow::Error::msg)?;
    let model = match &args.model {
        Some(name) => name.clone(),
        None => default_policy(pipeline).map_err(anyhow::Error::msg)?,
    };
    if let Some(out) = &args.hf {
        export_hf(pipeline, step, &model, out).map_err(anyhow::Error::msg)?;
        eprintln!(
            "exported model `{model}` of checkpoint step {step} to {}",
            out.display()
        );
    }
    if let Some(out) = &args.peft {
        export_peft(pipeline, step, &model, out).map_err(anyhow::Error::msg)?;
        eprintln!(
            "exported the LoRA adapters of model `{model}` of checkpoint step {step} to {} \
             (PEFT)",
            out.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
