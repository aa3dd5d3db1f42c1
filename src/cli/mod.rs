//! The subcommands; each file maps its arguments onto library calls.

mod export;
mod generate;
mod graph;
mod play;
mod progress;
mod report;
mod run;
mod validate;

use std::path::Path;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use roll_flow_engine::spec::{self, Diagnostic, Loaded};
use roll_flow_engine::{validate as validate_graph, PipelineGraph};
use roll_flow_operators::RollFlow;

/// Train LLM agents with reinforcement learning, from one RON pipeline file.
#[derive(Parser, Debug)]
#[command(name = "roll-flow", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run (train) a pipeline.
    Run(run::RunArgs),
    /// Check pipeline files without running them; exits 1 if any is invalid.
    Validate(validate::ValidateArgs),
    /// Print a pipeline's graph as Graphviz DOT, with each node's needs and gives.
    Graph(graph::GraphArgs),
    /// Play an env by hand in a terminal, or from a script (one action per line in, one
    /// JSON line per step out); or watch a run's trained policy play (`--policy RUN_DIR`).
    Play(play::PlayArgs),
    /// Complete a prompt with a model directory: the quick check before training on it.
    Generate(generate::GenerateArgs),
    /// Draw PNG charts of runs' metrics (success, score, KL, entropy, response length,
    /// grad norm against step and wall time); several runs share each chart.
    Report(report::ReportArgs),
    /// Write a run's trained policy as a Hugging Face model directory (config.json,
    /// model.safetensors, tokenizer files) that transformers loads as Qwen2.
    Export(export::ExportArgs),
}

pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Validate(args) => Ok(validate::validate(&args)),
        Command::Graph(args) => Ok(graph::graph(&args)),
        Command::Play(args) => play::run(&args),
        Command::Generate(args) => generate::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Report(args) => report::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Export(args) => export::run(&args),
    }
}

/// Loads and validates one file. Prints warnings; on errors prints them and returns None.
pub(crate) fn load_valid(
    path: &Path,
    overrides: &[String],
) -> Option<(Loaded<RollFlow>, PipelineGraph)> {
    let loaded = match spec::load::<RollFlow>(path, overrides) {
        Ok(loaded) => loaded,
        Err(diagnostics) => {
            print_diagnostics(&diagnostics);
            return None;
        }
    };
    let validation = validate_graph(&loaded);
    print_diagnostics(&validation.diagnostics);
    validation.graph.map(|graph| (loaded, graph))
}

/// The pipeline a run in `run_dir` ran (its `pipeline.ron` copy), writing into `run_dir`
/// wherever the run was started from: what `run --resume`, `play --policy` and `export`
/// load.
pub(crate) fn load_run(run_dir: &Path) -> Option<(Loaded<RollFlow>, PipelineGraph)> {
    load_valid(
        &run_dir.join("pipeline.ron"),
        &[format!("out_dir={run_dir:?}")],
    )
}

pub(crate) fn print_diagnostics(diagnostics: &[Diagnostic]) {
    for d in diagnostics {
        eprintln!("{d}");
    }
}
