//! `roll-flow run FILE` / `roll-flow run --resume RUN_DIR`: validate, prepare the run
//! directory, execute, show progress.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use roll_flow::engine::executor::options::{CONNECT_TIMEOUT, PEER_TIMEOUT};
use roll_flow::run::{Cluster, Run, RunError};

use super::diagnostics::print_diagnostics;
use super::launch::LocalCluster;
use super::progress::Progress;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The pipeline file (not with --resume).
    #[arg(required_unless_present = "resume", conflicts_with = "resume")]
    file: Option<PathBuf>,
    /// Continue the run in RUN_DIR from its newest checkpoint (reads RUN_DIR/pipeline.ron).
    #[arg(long, value_name = "RUN_DIR")]
    resume: Option<PathBuf>,
    /// Override the number of training steps.
    #[arg(long)]
    steps: Option<u64>,
    /// Stop after this many steps; schedules and the last checkpoint still span `steps`.
    #[arg(long, value_name = "N")]
    stop_after: Option<u64>,
    /// Override the output directory (a resumed run writes into RUN_DIR).
    #[arg(long, conflicts_with = "resume")]
    out: Option<PathBuf>,
    /// When the output directory already holds a run, move it aside to
    /// `<out_dir>.previous-<unix time>` (kept, not deleted) and start afresh; without
    /// this flag such a directory is refused.
    #[arg(long, conflicts_with = "resume")]
    overwrite: bool,
    /// Write the batch each training node received, per step, into DIR (JSON; see
    /// docs of `roll_flow::engine::batch_dump`); an `ActorStep` also writes what its loss
    /// made of each token, `<node>.loss.json` (`roll_flow::operators::training::loss_dump`).
    #[arg(long, value_name = "DIR")]
    dump_batches: Option<PathBuf>,
    /// Override any field: `--set envs.train.groups=2 --set nodes.rollout.temperature=0.7`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Worker threads in this process (timely `-w`); env groups are sharded across them.
    #[arg(short = 'w', long, default_value_t = 1)]
    workers: usize,
    /// Number of processes in a cluster run (timely `-n`); without `-p`, this command
    /// starts the other processes on this machine itself.
    #[arg(short = 'n', long, default_value_t = 1)]
    processes: usize,
    /// This process's index in a cluster run, 0-based (timely `-p`): each process of a run
    /// across machines is started with its own.
    #[arg(short = 'p', long)]
    process: Option<usize>,
    /// File with one `host:port` per process (timely `-h`), the same for every process;
    /// with `-p` only (`-n N` alone writes its own for the processes it starts).
    #[arg(long, requires = "process")]
    hostfile: Option<PathBuf>,
    /// In a run of several processes, stop with an error naming a process not heard from
    /// (no heartbeat) for this many seconds, at least 2: it hangs or cannot be reached.
    #[arg(long, value_name = "SECONDS", default_value_t = PEER_TIMEOUT.as_secs_f64(),
          value_parser = positive_seconds)]
    peer_timeout: f64,
    /// In a run of several processes, stop with an error naming a process that has not
    /// connected after this many seconds at the start (a process not started, a wrong
    /// hostfile line).
    #[arg(long, value_name = "SECONDS", default_value_t = CONNECT_TIMEOUT.as_secs_f64(),
          value_parser = positive_seconds)]
    connect_timeout: f64,
    /// Start even when the least memory the run holds (estimated from the file before any
    /// model loads) exceeds what the machine has available.
    #[arg(long)]
    no_memory_check: bool,
    /// Write a timeline of the run to FILE (Chrome trace JSON; open it in ui.perfetto.dev):
    /// one track per node and per asynchronous rollout thread.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
}

impl RunArgs {
    /// `--steps`, `--out` and `--dump-batches` are sugar for `--set`; they apply last. A
    /// resumed run writes into its own directory ([`Run::resume`] sets it).
    fn overrides(&self) -> Vec<String> {
        let mut all = self.set.clone();
        all.extend(self.steps.map(|s| format!("steps={s}")));
        all.extend(self.out.as_ref().map(|o| format!("out_dir={o:?}")));
        all.extend(
            self.dump_batches
                .as_ref()
                .map(|d| format!("dump_batches={d:?}")),
        );
        all
    }
}

pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let loaded = match (&args.resume, &args.file) {
        (Some(dir), _) => Run::resume(dir, &args.overrides()),
        (None, Some(file)) => Run::from_file(file, &args.overrides()),
        (None, None) => unreachable!("clap requires FILE unless --resume"),
    };
    let run = match loaded {
        Ok(run) => run,
        Err(RunError::Invalid(diagnostics)) => {
            print_diagnostics(&diagnostics);
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => return Err(e.into()),
    };
    print_diagnostics(run.warnings());
    // `-n N` alone: the other processes start here, on loopback.
    let local = match (args.processes, args.process) {
        (n, None) if n > 1 => Some(LocalCluster::start(n)?),
        _ => None,
    };
    let hostfile = local.as_ref().map(|l| l.hostfile.clone());
    let mut run = run
        .overwrite(args.overwrite)
        .memory_check(!args.no_memory_check)
        .cluster(Cluster {
            threads: args.workers,
            processes: args.processes,
            process: args.process.unwrap_or(0),
            hostfile: hostfile.or_else(|| args.hostfile.clone()),
            peer_timeout: Duration::from_secs_f64(args.peer_timeout),
            connect_timeout: Duration::from_secs_f64(args.connect_timeout),
            peers_gone: local
                .as_ref()
                .map(LocalCluster::peers_gone)
                .unwrap_or_default(),
        })
        .notices(Arc::new(|notice| eprintln!("{notice}")));
    if let Some(n) = args.stop_after {
        run = run.stop_after(n);
    }
    let progress = Arc::new(Progress::new(run.last_step()));
    let shown = progress.clone();
    let run = run.on_step(Arc::new(move |report, _| shown.step_done(report)));
    if let Some(file) = &args.trace {
        // Checked before the run, not after hours of it.
        let folder = match file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => std::path::Path::new("."),
        };
        if !folder.is_dir() {
            anyhow::bail!(
                "cannot write the trace {}: {} is not a directory; give --trace a file in an \
                 existing folder",
                file.display(),
                folder.display()
            );
        }
        roll_flow::engine::trace::start();
    }
    let result = run.execute();
    progress.finish();
    if let Some(file) = &args.trace {
        roll_flow::engine::trace::write(file)
            .map_err(|e| anyhow::anyhow!("cannot write the trace {}: {e}", file.display()))?;
        eprintln!(
            "timeline in {} (open it in ui.perfetto.dev)",
            file.display()
        );
    }
    if let Some(local) = local {
        local.finish(result.is_err())?;
    }
    let summary = result?;
    eprintln!(
        "finished in {:.1}s; metrics in {}",
        summary.seconds,
        summary.out_dir.join("metrics.jsonl").display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `--peer-timeout` and `--connect-timeout`: a finite number of seconds, at least 2 (two
/// heartbeats, the shortest peer timeout).
fn positive_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && (2.0..1e9).contains(&s) => Ok(s),
        _ => Err(format!(
            "`{text}` is not a number of seconds of at least 2 (e.g. 60)"
        )),
    }
}
