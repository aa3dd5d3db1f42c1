//! `roll-flow run FILE`: validate, prepare the run directory, execute.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use roll_flow_engine::atomic_file::write_atomic;
use roll_flow_engine::metrics::{step_record, MetricsLog};
use roll_flow_engine::spec::Device;
use roll_flow_engine::{execute, ExecutorOptions};
use roll_flow_operators::RollFlow;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The pipeline file.
    file: PathBuf,
    /// Override the number of training steps.
    #[arg(long)]
    steps: Option<u64>,
    /// Override the output directory.
    #[arg(long)]
    out: Option<PathBuf>,
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
    /// `--steps` and `--out` are sugar for `--set`; they apply last.
    fn overrides(&self) -> Vec<String> {
        let mut all = self.set.clone();
        all.extend(self.steps.map(|s| format!("steps={s}")));
        all.extend(self.out.as_ref().map(|o| format!("out_dir={o:?}")));
        all
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

pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let Some((loaded, graph)) = super::load_valid(&args.file, &args.overrides()) else {
        return Ok(ExitCode::FAILURE);
    };
    if let Some(problem) = missing_backend(loaded.pipeline.device) {
        eprintln!("error: {problem}");
        return Ok(ExitCode::FAILURE);
    }
    let out_dir = loaded.pipeline.out_dir.clone();
    write_atomic(&out_dir.join("pipeline.ron"), loaded.source.text.as_bytes())
        .with_context(|| format!("cannot write the pipeline copy into {}", out_dir.display()))?;
    let log = MetricsLog::open(&out_dir, false)
        .with_context(|| format!("cannot create {}/metrics.jsonl", out_dir.display()))?;
    eprintln!(
        "run `{}`: {} steps into {}",
        loaded.pipeline.name,
        loaded.pipeline.steps,
        out_dir.display()
    );

    let started = Instant::now();
    let log = Arc::new(Mutex::new(log));
    let sink = log.clone();
    let on_step = Arc::new(move |report: roll_flow_engine::StepReport| {
        if report.worker != 0 {
            return;
        }
        let record = step_record(&report, started.elapsed().as_secs_f64());
        let mut log = sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(e) = log.append(&record) {
            tracing::error!("cannot append to {}: {e}", log.path().display());
        }
        eprintln!(
            "step {} done ({:.1}s)",
            report.step,
            started.elapsed().as_secs_f64()
        );
    });
    let options = ExecutorOptions {
        threads: args.workers,
        processes: args.processes,
        process: args.process,
        hostfile: args.hostfile.clone(),
        staleness: 0,
    };
    execute::<RollFlow>(Arc::new(loaded.pipeline), Arc::new(graph), options, on_step)?;
    eprintln!(
        "finished in {:.1}s; metrics in {}",
        started.elapsed().as_secs_f64(),
        out_dir.join("metrics.jsonl").display()
    );
    Ok(ExitCode::SUCCESS)
}
