//! `roll-flow export RUN_DIR [--checkpoint N] [--model NAME] --hf OUT_DIR`: a checkpoint's
//! policy as a Hugging Face directory (see `roll_flow::operators::export`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use roll_flow::operators::export::{default_policy, export_hf};
use roll_flow::operators::watch::checkpoint_step;

#[derive(Args, Debug)]
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
    hf: PathBuf,
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
    export_hf(pipeline, step, &model, &args.hf).map_err(anyhow::Error::msg)?;
    eprintln!(
        "exported model `{model}` of checkpoint step {step} to {}",
        args.hf.display()
    );
    Ok(ExitCode::SUCCESS)
}
