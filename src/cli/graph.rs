//! `roll-flow graph FILE [--set KEY=VALUE ...]`: the validated graph as Graphviz DOT on stdout, or with
//! `--png OUT` drawn by Graphviz into a PNG.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use roll_flow::engine::graph::graphviz::write_png;
use roll_flow::engine::graph::to_dot;

#[derive(Args, Debug)]
pub struct GraphArgs {
    /// The pipeline file.
    file: PathBuf,
    /// `key=value` overrides, applied as `roll-flow run --set` would.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Draw the graph into this PNG file with Graphviz's `dot` instead of printing DOT.
    #[arg(long, value_name = "OUT")]
    png: Option<PathBuf>,
}

pub fn graph(args: &GraphArgs) -> ExitCode {
    match super::diagnostics::load_valid(&args.file, &args.set) {
        Some((loaded, graph)) => {
            let dot = to_dot(&graph, &loaded.pipeline.name);
            let Some(out) = &args.png else {
                print!("{dot}");
                return ExitCode::SUCCESS;
            };
            match write_png(&dot, out) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        None => ExitCode::FAILURE,
    }
}
