//! The subcommands; each file maps its arguments onto library calls ([`roll_flow`]).

mod diagnostics;
mod env_server;
mod export;
mod generate;
mod graph;
mod import_roll;
mod launch;
mod play;
mod progress;
mod report;
mod run;
mod validate;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    /// Serve an env over the env-server protocol on stdin/stdout (docs/ENV_PROTOCOL.md),
    /// for a pipeline's `env: Process(command: [...])` or another trainer; with `--listen
    /// ADDR`, as an OpenEnv server on the network, for `env: Remote(url: ...)`.
    EnvServer(env_server::EnvServerArgs),
    /// Complete a prompt with a model directory: the quick check before training on it.
    Generate(generate::GenerateArgs),
    /// Draw PNG charts of runs' metrics (success, score, KL, entropy, response length,
    /// grad norm against step and wall time); several runs share each chart.
    Report(report::ReportArgs),
    /// Write a run's trained policy as a Hugging Face model directory (config.json,
    /// model.safetensors, tokenizer files) that transformers loads as the model's family
    /// (Qwen2, Llama or Qwen3).
    Export(export::ExportArgs),
    /// Write a ROLL agentic config (YAML) as a pipeline file, reporting the keys it does not
    /// carry over.
    ImportRoll(import_roll::ImportRollArgs),
}

pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Validate(args) => Ok(validate::validate(&args)),
        Command::Graph(args) => Ok(graph::graph(&args)),
        Command::Play(args) => play::run(&args),
        Command::EnvServer(args) => env_server::run(&args),
        Command::Generate(args) => generate::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Report(args) => report::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Export(args) => export::run(&args),
        Command::ImportRoll(args) => import_roll::run(&args),
    }
}
