//! `roll-flow import-roll CONFIG.yaml [-o pipeline.ron] [--strict]`: a ROLL agentic config
//! as a pipeline file ([`roll_flow::roll_import`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use roll_flow::roll_import::{import_roll, ImportOptions};

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
    Ok(ExitCode::SUCCESS)
}
