//! `roll-flow import-roll CONFIG.yaml [-o pipeline.ron] [--strict]`: a ROLL agentic config
//! as a pipeline file ([`roll_flow::roll_import`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use roll_flow::engine::spec::{self, Diagnostic};
use roll_flow::engine::validate;
use roll_flow::operators::catalog::RollFlow;
use roll_flow::roll_import::{import_roll, ImportOptions};

use super::diagnostics::print_diagnostics;

#[derive(Args, Debug)]
pub struct ImportRollArgs {
    /// The ROLL config (its `defaults:` files are read from the same folder).
    config: PathBuf,
    /// Write the pipeline here instead of printing it.
    #[arg(short = 'o', long = "out", value_name = "PIPELINE.ron")]
    out: Option<PathBuf>,
    /// Refuse keys ROLL reads that the pipeline would not use (placement, strategies,
    /// LoRA, ...) instead of listing them in the report and the file's header.
    #[arg(long)]
    strict: bool,
}

pub fn run(args: &ImportRollArgs) -> anyhow::Result<ExitCode> {
    let options = ImportOptions {
        strict: args.strict,
    };
    let imported = match import_roll(&args.config, options) {
        Ok(imported) => imported,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    for notice in &imported.notices {
        eprintln!(
            "{}: {}: {}",
            notice.kind.label(),
            notice.key,
            notice.message
        );
    }
    match &args.out {
        Some(out) => {
            std::fs::write(out, &imported.ron)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", out.display()))?;
            eprintln!("wrote {}", out.display());
        }
        None => print!("{}", imported.ron),
    }
    // Values the config carries over as they are (`top_p: 2`, `max_steps: 0`) can make a
    // pipeline `run` refuses: said here, where the config is at hand.
    let shown = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("<stdout>"));
    let errors: Vec<Diagnostic> = match spec::load_text::<RollFlow>(&shown, &imported.ron, &[]) {
        Err(diagnostics) => diagnostics,
        Ok(loaded) => validate(&loaded).diagnostics,
    }
    .into_iter()
    .filter(Diagnostic::is_error)
    .collect();
    if errors.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    print_diagnostics(&errors);
    eprintln!(
        "error: the pipeline imported from {} is not valid; the comment above each entry \
         names the ROLL keys it came from: fix them in the config, or edit the pipeline",
        args.config.display()
    );
    Ok(ExitCode::FAILURE)
}
