//! `roll-flow report RUN_DIR... [--out DIR]`: PNG charts of one or several runs' metrics
//! (see `roll_flow::engine::metrics::plots`).

use std::path::PathBuf;

use clap::Args;
use roll_flow::engine::metrics::plots::report;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Run directories (a run's `out_dir`); several draw one line per run on each chart.
    #[arg(required = true, value_name = "RUN_DIR")]
    runs: Vec<PathBuf>,
    /// Where the PNGs go (default: RUN_DIR/plots for one run; required for several).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

pub fn run(args: &ReportArgs) -> anyhow::Result<()> {
    let out = match (&args.out, args.runs.as_slice()) {
        (Some(out), _) => out.clone(),
        (None, [one]) => one.join("plots"),
        (None, _) => {
            anyhow::bail!("with several run directories, say where the plots go: --out DIR")
        }
    };
    let written = report(&args.runs, &out)?;
    if written.is_empty() {
        eprintln!("no plotted metric (success, score, KL, entropy, response length, grad norm) in these runs yet");
    }
    for path in written {
        println!("{}", path.display());
    }
    Ok(())
}
