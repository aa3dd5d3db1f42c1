//! `roll-flow graph FILE`: the validated graph as Graphviz DOT on stdout.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use roll_flow_engine::graph::to_dot;

#[derive(Args, Debug)]
pub struct GraphArgs {
    /// The pipeline file.
    file: PathBuf,
    /// `key=value` overrides, applied as `roll-flow run --set` would.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

pub fn graph(args: &GraphArgs) -> ExitCode {
    match super::load_valid(&args.file, &args.set) {
        Some((loaded, graph)) => {
            print!("{}", to_dot(&graph, &loaded.pipeline.name));
            ExitCode::SUCCESS
        }
        None => ExitCode::FAILURE,
    }
}
