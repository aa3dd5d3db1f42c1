//! Loading a pipeline for a subcommand and printing its diagnostics.

use std::path::Path;

use roll_flow::engine::spec::{self, Diagnostic, Loaded};
use roll_flow::engine::{validate as validate_graph, PipelineGraph};
use roll_flow::operators::catalog::RollFlow;
use roll_flow::operators::run_layout::run_pipeline;

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
    match run_pipeline(run_dir) {
        Ok(file) => load_valid(&file, &[format!("out_dir={run_dir:?}")]),
        Err(not_a_run) => {
            print_diagnostics(&[*not_a_run]);
            None
        }
    }
}

pub(crate) fn print_diagnostics(diagnostics: &[Diagnostic]) {
    for d in diagnostics {
        eprintln!("{d}");
    }
}
