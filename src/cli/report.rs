//! `roll-flow report RUN_DIR... [--out DIR]`: PNG charts of one or several runs' metrics
//! (see `roll_flow::engine::metrics::plots`); `roll-flow report --trace FILE`: a run's
//! timeline (`run --trace`) as a PNG (`roll_flow::engine::trace_chart`).

use std::path::PathBuf;

use clap::Args;
use roll_flow::engine::metrics::plots::report;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Run directories (a run's `out_dir`); several draw one line per run on each chart.
    #[arg(required_unless_present = "trace", value_name = "RUN_DIR")]
    runs: Vec<PathBuf>,
    /// Where the PNGs go (default: RUN_DIR/plots for one run; required for several; the
    /// trace's folder for --trace).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Draw the timeline a run wrote with `run --trace FILE` (timeline.png): one row per
    /// node and rollout thread.
    #[arg(long, value_name = "FILE", conflicts_with = "runs")]
    trace: Option<PathBuf>,
    /// The first step the timeline shows.
    #[arg(long, default_value_t = 1, requires = "trace")]
    from_step: u64,
    /// How many steps the timeline shows.
    #[arg(long, default_value_t = 3, requires = "trace")]
    steps: u64,
}

pub fn run(args: &ReportArgs) -> anyhow::Result<()> {
    if let Some(trace) = &args.trace {
        let out = match &args.out {
            Some(out) => out.clone(),
            None => trace.parent().map(PathBuf::from).unwrap_or_default(),
        };
        let steps = args.from_step..args.from_step.saturating_add(args.steps.max(1));
        let path = roll_flow::engine::trace_chart::draw(trace, &out, steps)
            .map_err(|e| anyhow::anyhow!(e))?;
        println!("{}", path.display());
        return Ok(());
    }
    let out = match (&args.out, args.runs.as_slice()) {
        (Some(out), _) => out.clone(),
        (None, [one]) => one.join("plots"),
        (None, _) => {
            anyhow::bail!("with several run directories, say where the plots go: --out DIR")
        }
    };
    let report = report(&args.runs, &out)?;
    for note in &report.notes {
        eprintln!("note: {note}");
    }
    let written = report.written;
    if written.is_empty() {
        eprintln!("no plotted metric (success, score, KL, entropy, response length, grad norm) in these runs yet");
    }
    for path in written {
        println!("{}", path.display());
    }
    Ok(())
}
