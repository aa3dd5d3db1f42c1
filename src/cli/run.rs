//! `roll-flow run FILE` / `roll-flow run --resume RUN_DIR`: validate, prepare the run
//! directory, execute, show progress.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use roll_flow_engine::atomic_file::write_atomic;
use roll_flow_engine::executor::StepCallback;
use roll_flow_engine::metrics::{step_record, MetricsLog};
use roll_flow_engine::spec::Device;
use roll_flow_engine::{execute, ExecutorOptions, NodeSpec, Pipeline, PipelineGraph, Reference};
use roll_flow_operators::model::CpuBackend;
use roll_flow_operators::run_dir;
#[cfg(feature = "cuda")]
use roll_flow_operators::runtime::backend::CudaBackend;
#[cfg(feature = "wgpu")]
use roll_flow_operators::runtime::backend::WgpuBackend;
use roll_flow_operators::runtime::RunBackend;
use roll_flow_operators::training::refuse_multi_worker_training;
use roll_flow_operators::RollFlow;

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
    /// docs of `roll_flow_engine::batch::dump`).
    #[arg(long, value_name = "DIR")]
    dump_batches: Option<PathBuf>,
    /// Override any field: `--set envs.train.groups=2 --set nodes.rollout.temperature=0.7`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Worker threads in this process (timely `-w`); env groups are sharded across them.
    #[arg(short = 'w', long, default_value_t = 1)]
    workers: usize,
    /// Number of processes in a cluster run (timely `-n`).
    #[arg(short = 'n', long, default_value_t = 1)]
    processes: usize,
    /// This process's index in a cluster run, 0-based (timely `-p`).
    #[arg(short = 'p', long, default_value_t = 0)]
    process: usize,
    /// File with one `host:port` per process (timely `-h`).
    #[arg(long)]
    hostfile: Option<PathBuf>,
}

impl RunArgs {
    /// `--steps`, `--out` and `--dump-batches` are sugar for `--set`; they apply last. A
    /// resumed run writes into its own directory.
    fn overrides(&self) -> Vec<String> {
        let mut all = self.set.clone();
        all.extend(self.steps.map(|s| format!("steps={s}")));
        let out = self.resume.as_ref().or(self.out.as_ref());
        all.extend(out.map(|o| format!("out_dir={o:?}")));
        all.extend(
            self.dump_batches
                .as_ref()
                .map(|d| format!("dump_batches={d:?}")),
        );
        all
    }

    fn pipeline_file(&self) -> PathBuf {
        match (&self.resume, &self.file) {
            (Some(dir), _) => dir.join("pipeline.ron"),
            (None, Some(file)) => file.clone(),
            (None, None) => unreachable!("clap requires FILE unless --resume"),
        }
    }
}

/// The backend a pipeline's `device` needs, when this binary was built without it.
fn missing_backend(device: Device) -> Option<String> {
    let (feature, built) = match device {
        Device::Cpu => return None,
        Device::Wgpu => ("wgpu", cfg!(feature = "wgpu")),
        Device::Cuda(_) => ("cuda", cfg!(feature = "cuda")),
    };
    (!built).then(|| {
        format!(
            "the pipeline asks for `device: {device:?}`, but this roll-flow was built without the `{feature}` feature; \
             rebuild with `cargo build --release --features {feature}`, or run with `--set device=Cpu`"
        )
    })
}

/// Runs the pipeline's graph on the backend its `device:` names (`missing_backend` has
/// already refused one this binary was built without).
fn execute_on_device(
    pipeline: Pipeline<RollFlow>,
    graph: Arc<PipelineGraph>,
    options: ExecutorOptions,
    on_step: StepCallback,
) -> anyhow::Result<()> {
    fn on<B: RunBackend>(
        pipeline: Pipeline<RollFlow>,
        graph: Arc<PipelineGraph>,
        options: ExecutorOptions,
        on_step: StepCallback,
    ) -> anyhow::Result<()> {
        let pipeline = Arc::new(pipeline.recast::<RollFlow<B>>());
        Ok(execute::<RollFlow<B>>(pipeline, graph, options, on_step)?)
    }
    match pipeline.device {
        #[cfg(feature = "wgpu")]
        Device::Wgpu => on::<WgpuBackend>(pipeline, graph, options, on_step),
        #[cfg(feature = "cuda")]
        Device::Cuda(_) => on::<CudaBackend>(pipeline, graph, options, on_step),
        _ => on::<CpuBackend>(pipeline, graph, options, on_step),
    }
}

/// The step a resumed run starts at, once its newest checkpoint is found complete and
/// the metrics of the steps it redoes are dropped.
fn prepare_resume(pipeline: &Pipeline<RollFlow>) -> anyhow::Result<u64> {
    // The models the nodes use: each is restored from the checkpoint, so must be in it.
    let used: std::collections::BTreeSet<String> = pipeline
        .nodes
        .iter()
        .flat_map(|(_, node)| node.references())
        .filter_map(|r| match r {
            Reference::Model { name, .. } => Some(name),
            Reference::Env { .. } => None,
        })
        .collect();
    let models: Vec<&str> = used.iter().map(String::as_str).collect();
    let resume = run_dir::prepare_resume(&pipeline.out_dir, &models).map_err(anyhow::Error::msg)?;
    if let Some(before) = &resume.metrics_before {
        eprintln!(
            "resuming at step {}: metrics.jsonl keeps the steps before it; the whole file was copied to {}",
            resume.first_step,
            before.display()
        );
    }
    if !resume.unreadable_lines.is_empty() {
        let lines: Vec<String> = resume
            .unreadable_lines
            .iter()
            .map(usize::to_string)
            .collect();
        eprintln!(
            "warning: dropped line(s) {} of {}: not a JSON record with a `step` (a line torn when the run stopped)",
            lines.join(", "),
            pipeline.out_dir.join("metrics.jsonl").display()
        );
    }
    Ok(resume.first_step)
}

/// The plots of the run so far into `out_dir/plots`, also after a failed run (the curves
/// up to a failure are what one looks at). A plot that cannot be drawn is reported but
/// does not fail a run whose training went through.
fn write_run_plots(out_dir: &Path) {
    let plots = out_dir.join("plots");
    match roll_flow_engine::metrics::plots::report(&[out_dir.to_path_buf()], &plots) {
        Ok(written) if !written.is_empty() => eprintln!("plots in {}", plots.display()),
        Ok(_) => {}
        Err(e) => eprintln!("warning: no plots: {e}"),
    }
}

pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let Some((loaded, graph)) = super::load_valid(&args.pipeline_file(), &args.overrides()) else {
        return Ok(ExitCode::FAILURE);
    };
    if let Some(problem) = missing_backend(loaded.pipeline.device) {
        eprintln!("error: {problem}");
        return Ok(ExitCode::FAILURE);
    }
    // Before anything is written: the operators refuse too, but only once the run
    // directory exists.
    let workers = args.workers.saturating_mul(args.processes);
    refuse_multi_worker_training(loaded.pipeline.nodes.iter(), workers)
        .map_err(anyhow::Error::msg)?;
    let out_dir = loaded.pipeline.out_dir.clone();
    let first_step = match &args.resume {
        Some(_) => prepare_resume(&loaded.pipeline)?,
        None => {
            // Process 0 readies the directory: on a shared file system the others would
            // find its fresh files and refuse.
            if args.process == 0 {
                let aside = run_dir::prepare_new_run(&out_dir, args.overwrite)
                    .map_err(anyhow::Error::msg)?;
                if let Some(aside) = aside {
                    eprintln!(
                        "moved the previous run in {} aside to {}",
                        out_dir.display(),
                        aside.display()
                    );
                }
            }
            write_atomic(&out_dir.join("pipeline.ron"), loaded.source.text.as_bytes())
                .with_context(|| {
                    format!("cannot write the pipeline copy into {}", out_dir.display())
                })?;
            0
        }
    };
    let log = MetricsLog::open(&out_dir, first_step).with_context(|| {
        format!(
            "cannot create metrics.jsonl and the TensorBoard event file in {}",
            out_dir.display()
        )
    })?;
    let steps = loaded.pipeline.steps;
    let last = args.stop_after.map_or(steps, |s| s.min(steps));
    eprintln!(
        "run `{}`: steps {first_step}..{last} of {steps} into {}",
        loaded.pipeline.name,
        out_dir.display()
    );

    let started = Instant::now();
    let log = Arc::new(Mutex::new(log));
    let progress = Arc::new(Progress::new(first_step, last));
    let sink = log.clone();
    let shown = progress.clone();
    let on_step = Arc::new(move |report: roll_flow_engine::StepReport| {
        if report.worker != 0 {
            return;
        }
        let record = step_record(&report, started.elapsed().as_secs_f64());
        let mut log = sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(e) = log.append(&record) {
            tracing::error!("cannot append to {}: {e}", log.path().display());
        }
        shown.step_done(&report);
    });
    let options = ExecutorOptions {
        threads: args.workers,
        processes: args.processes,
        process: args.process,
        hostfile: args.hostfile.clone(),
        staleness: 0,
        first_step,
        stop_after: args.stop_after,
    };
    let result = execute_on_device(loaded.pipeline, Arc::new(graph), options, on_step);
    progress.finish();
    if args.process == 0 {
        write_run_plots(&out_dir);
    }
    result?;
    eprintln!(
        "finished in {:.1}s; metrics in {}",
        started.elapsed().as_secs_f64(),
        out_dir.join("metrics.jsonl").display()
    );
    Ok(ExitCode::SUCCESS)
}
