//! The run as a library: what `roll-flow run` does, callable from a user's own program,
//! with the user's own environments.
//!
//! ```no_run
//! use roll_flow_operators::run::Run;
//! # fn maze(_: &ron::Value) -> Result<Box<dyn roll_flow_envs::env::Env>, roll_flow_envs::error::EnvError> { unimplemented!() }
//! let summary = Run::from_file("pipelines/frozen_lake_starpo.ron".as_ref(), &[])?
//!     .env("Maze", maze) // `env: Custom(name: "Maze", params: (..))` in the file
//!     .stop_after(100)
//!     .execute()?;
//! println!("{} steps in {:.0}s", summary.steps_done, summary.seconds);
//! # Ok::<(), roll_flow_operators::run::RunError>(())
//! ```
//!
//! A run validates the file, refuses before writing anything what cannot run (a backend
//! the build lacks, a custom env nobody registered, a run
//! that needs more memory than the machine has available, an output
//! directory that holds another run), readies the directory (a new run copies the
//! pipeline file into it; a resumed one checks its newest checkpoint and drops the metrics
//! of the steps it redoes), executes the graph on the backend the file's `device:` names
//! and appends each step's metrics to `metrics.jsonl` and the TensorBoard event file. The
//! plots of the run are drawn at the end, also after a failure.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use roll_flow_engine::metrics::{step_record, MetricsLog};
use roll_flow_engine::spec::{self, Diagnostic, Loaded};
use roll_flow_engine::{validate, ExecError, ExecutorOptions, PipelineGraph, StepReport};
use roll_flow_envs::preflight::start_servers;
use roll_flow_envs::registry::{register_env, EnvFactory};

use crate::catalog::RollFlow;
use crate::checkpoint_commits;
use crate::run_device::execute_on_device;
use crate::run_layout::run_pipeline;

mod prepare;

/// Why a run did not start or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The pipeline file has errors (every diagnostic is here, warnings too).
    #[error("the pipeline is invalid:\n{}", show(.0))]
    Invalid(Vec<Diagnostic>),
    /// Refused before anything was written, with what to change.
    #[error("{0}")]
    Refused(String),
    /// The run directory could not be written.
    #[error("{0}")]
    Io(String),
    /// A node failed while the run executed (the steps before it are in `metrics.jsonl`).
    #[error(transparent)]
    Failed(#[from] ExecError),
}

fn show(diagnostics: &[Diagnostic]) -> String {
    let shown: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
    shown.join("\n")
}

/// What a finished run did.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    pub out_dir: PathBuf,
    /// The first step this run executed (after the checkpoint it resumed from, else 0).
    pub first_step: u64,
    /// The steps it executed.
    pub steps_done: u64,
    pub seconds: f64,
}

/// Called after each step, on the worker that ran it, with the seconds since the start.
pub type StepObserver = Arc<dyn Fn(&StepReport, f64) + Send + Sync>;

/// Called with each notice a run gives (a directory moved aside, a resume point, where the
/// plots are); `roll-flow` prints them.
pub type NoticeSink = Arc<dyn Fn(&str) + Send + Sync>;

/// timely's worker and cluster options (`-w`, `-n`, `-p`, `--hostfile`) and how long
/// another worker may go unheard (`--peer-timeout`); the executor's defaults
/// ([`ExecutorOptions::default`]) when not given.
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    pub threads: usize,
    pub processes: usize,
    pub process: usize,
    pub hostfile: Option<PathBuf>,
    pub peer_timeout: std::time::Duration,
    pub connect_timeout: std::time::Duration,
    /// Whether a peer this process started has exited, checked while they connect.
    pub peers_gone: roll_flow_engine::executor::PeersGone,
}

/// A pipeline ready to run; see the module docs.
pub struct Run {
    loaded: Loaded<RollFlow>,
    graph: PipelineGraph,
    warnings: Vec<Diagnostic>,
    resume: bool,
    overwrite: bool,
    memory_check: bool,
    /// The executor's options but `first_step`, which the run directory decides.
    options: ExecutorOptions,
    envs: Vec<(String, EnvFactory)>,
    on_step: Option<StepObserver>,
    notices: NoticeSink,
}

impl Run {
    /// Loads and validates a pipeline file; `overrides` are `--set` edits (`KEY=VALUE`).
    pub fn from_file(path: &Path, overrides: &[String]) -> Result<Run, RunError> {
        let loaded = spec::load::<RollFlow>(path, overrides).map_err(RunError::Invalid)?;
        Run::validated(loaded, false)
    }

    /// Validates pipeline `text` that a program wrote itself (`name` stands for its file in
    /// diagnostics); `overrides` as in [`Run::from_file`].
    pub fn from_text(name: &str, text: &str, overrides: &[String]) -> Result<Run, RunError> {
        let loaded = spec::load_text::<RollFlow>(Path::new(name), text, overrides)
            .map_err(RunError::Invalid)?;
        Run::validated(loaded, false)
    }

    /// Continues the run in `run_dir` from its newest checkpoint, with the pipeline it ran
    /// (its `pipeline.ron` copy) and `overrides` applied to it.
    pub fn resume(run_dir: &Path, overrides: &[String]) -> Result<Run, RunError> {
        let mut all = overrides.to_vec();
        all.push(format!("out_dir={run_dir:?}"));
        let file = run_pipeline(run_dir).map_err(|d| RunError::Invalid(vec![*d]))?;
        let loaded = spec::load::<RollFlow>(&file, &all).map_err(RunError::Invalid)?;
        Run::validated(loaded, true)
    }

    fn validated(loaded: Loaded<RollFlow>, resume: bool) -> Result<Run, RunError> {
        let validation = validate(&loaded);
        let Some(graph) = validation.graph else {
            return Err(RunError::Invalid(validation.diagnostics));
        };
        Ok(Run {
            loaded,
            graph,
            warnings: validation.diagnostics,
            resume,
            overwrite: false,
            memory_check: true,
            options: ExecutorOptions::default(),
            envs: Vec::new(),
            on_step: None,
            notices: Arc::new(|notice| tracing::info!("{notice}")),
        })
    }

    /// The validation's warnings (pitfalls that do not stop the run).
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// The validated pipeline.
    pub fn pipeline(&self) -> &roll_flow_engine::Pipeline<RollFlow> {
        &self.loaded.pipeline
    }

    /// Registers the custom env `name` that the file's `Custom(name: .., params: ..)`
    /// entries build (process-wide, so every worker thread sees it).
    pub fn env(mut self, name: &str, factory: EnvFactory) -> Run {
        self.envs.push((name.to_string(), factory));
        self
    }

    /// Stops after this many steps; schedules and the last checkpoint still span `steps`.
    pub fn stop_after(mut self, steps: u64) -> Run {
        self.options.stop_after = Some(steps);
        self
    }

    /// Moves an output directory that holds another run aside instead of refusing it.
    pub fn overwrite(mut self, overwrite: bool) -> Run {
        self.overwrite = overwrite;
        self
    }

    /// Whether a run whose memory floor exceeds the machine's available memory is refused
    /// before anything loads (default yes; [`crate::memory_estimate`]).
    pub fn memory_check(mut self, check: bool) -> Run {
        self.memory_check = check;
        self
    }

    /// Runs on timely's workers and processes (env groups are sharded across them).
    pub fn cluster(mut self, cluster: Cluster) -> Run {
        self.options.threads = cluster.threads;
        self.options.processes = cluster.processes;
        self.options.process = cluster.process;
        self.options.hostfile = cluster.hostfile;
        self.options.peer_timeout = cluster.peer_timeout;
        self.options.connect_timeout = cluster.connect_timeout;
        self.options.peers_gone = cluster.peers_gone;
        self
    }

    /// Calls `observer` after each step.
    pub fn on_step(mut self, observer: StepObserver) -> Run {
        self.on_step = Some(observer);
        self
    }

    /// Where notices go (default: `tracing`'s info level).
    pub fn notices(mut self, sink: NoticeSink) -> Run {
        self.notices = sink;
        self
    }

    /// The step this run stops before: `stop_after` or the pipeline's `steps`.
    pub fn last_step(&self) -> u64 {
        let steps = self.loaded.pipeline.steps;
        self.options.stop_after.map_or(steps, |s| s.min(steps))
    }

    /// Runs the pipeline to its last step (or `stop_after`).
    pub fn execute(self) -> Result<RunSummary, RunError> {
        for (name, factory) in &self.envs {
            register_env(name, *factory);
        }
        self.refuse_what_cannot_run()?;
        let pipeline = &self.loaded.pipeline;
        // Env servers answer before any model loads or any file is written, and stay up.
        let entries = pipeline.envs.iter().map(|(tag, set)| (tag, &set.env));
        let _servers = start_servers(entries).map_err(RunError::Refused)?;
        let out_dir = pipeline.out_dir.clone();
        let first_step = self.ready_directory()?;
        // Process 0 writes the run directory; the other processes of a cluster run only
        // read its checkpoints when they resume.
        let writer = self.options.process == 0;
        let log = writer
            .then(|| MetricsLog::open(&out_dir, first_step))
            .transpose()
            .map_err(|e| {
                RunError::Io(format!(
                    "cannot create metrics.jsonl and the TensorBoard event file in {}: {e}",
                    out_dir.display()
                ))
            })?;
        let last = self.last_step();
        (self.notices)(&format!(
            "run `{}`: steps {first_step}..{last} of {} into {}",
            pipeline.name,
            pipeline.steps,
            out_dir.display()
        ));
        let started = Instant::now();
        let on_step = self.step_sink(log, started);
        let options = ExecutorOptions {
            first_step,
            ..self.options.clone()
        };
        let result = execute_on_device(
            self.loaded.pipeline.clone(),
            Arc::new(self.graph.clone()),
            options,
            on_step,
        );
        if !writer {
            result?;
            return Ok(RunSummary {
                out_dir,
                first_step,
                steps_done: last.saturating_sub(first_step),
                seconds: started.elapsed().as_secs_f64(),
            });
        }
        // What a failed or stopped run staged stays a staging folder, never in place.
        checkpoint_commits::discard(&out_dir);
        self.write_plots(&out_dir);
        if result.is_err() {
            // Where a failed run can go on from: the newest complete checkpoint.
            let saved = crate::run_layout::saved_steps(&out_dir);
            let cluster = match (self.options.processes, self.options.threads) {
                (1, 1) => String::new(),
                (1, w) => format!(" -w {w}"),
                (n, 1) => format!(" -n {n}"),
                (n, w) => format!(" -w {w} -n {n}"),
            };
            let resume = format!("`roll-flow run --resume {}{cluster}`", out_dir.display());
            (self.notices)(&match saved.last() {
                // A resume that failed before its first new checkpoint may have failed on
                // this one (a damaged file): resuming from it again is not the only advice.
                Some(&step) if self.resume && step == first_step => format!(
                    "the run stopped before writing a checkpoint past {}; if the error names a \
                     file in it, move that folder out of checkpoints/ and {resume} goes on from \
                     the one before it, else {resume} tries it again",
                    crate::run_layout::step_dir(&out_dir, step).display(),
                ),
                Some(&step) => format!(
                    "the last checkpoint is {} ({step} steps done): {resume} continues from it",
                    crate::run_layout::step_dir(&out_dir, step).display(),
                ),
                None => "no checkpoint was written before the failure".to_string(),
            });
        }
        result?;
        Ok(RunSummary {
            out_dir,
            first_step,
            steps_done: last.saturating_sub(first_step),
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// The executor's step callback: worker 0's reports go to the metrics log (durably),
    /// then the checkpoints covering the step are put in place
    /// ([`crate::checkpoint_commits`]), then the report goes to the user's observer. A write
    /// that fails stops the run there, with the last checkpoint in place whole.
    fn step_sink(
        &self,
        log: Option<MetricsLog>,
        started: Instant,
    ) -> roll_flow_engine::executor::StepCallback {
        // Worker 0, the one whose reports are recorded, runs in process 0, the writer.
        let Some(log) = log else {
            return Arc::new(|_| Ok(()));
        };
        let log = Mutex::new(log);
        let observer = self.on_step.clone();
        let out_dir = self.loaded.pipeline.out_dir.clone();
        Arc::new(move |report: StepReport| {
            if report.worker != 0 {
                return Ok(());
            }
            let elapsed = started.elapsed().as_secs_f64();
            let record = step_record(&report, elapsed);
            let mut log = log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let written = log
                .append(&record)
                .map_err(|e| format!("cannot append to {}: {e}", log.path().display()));
            drop(log);
            written
                .and_then(|()| checkpoint_commits::commit_through(&out_dir, report.step))
                .map_err(|e| {
                    format!(
                        "{e}; the run stopped here, its last checkpoint in place is whole: \
                         free space or fix the directory, then `roll-flow run --resume {}`",
                        out_dir.display()
                    )
                })?;
            if let Some(observer) = &observer {
                observer(&report, elapsed);
            }
            Ok(())
        })
    }

    /// The plots of the run so far into `out_dir/plots`, also after a failed run (the
    /// curves up to a failure are what one looks at). A plot that cannot be drawn is
    /// reported but does not fail a run whose training went through.
    fn write_plots(&self, out_dir: &Path) {
        let plots = out_dir.join("plots");
        match roll_flow_engine::metrics::plots::report(&[out_dir.to_path_buf()], &plots) {
            Ok(report) if !report.written.is_empty() => {
                (self.notices)(&format!("plots in {}", plots.display()))
            }
            Ok(_) => {}
            Err(e) => (self.notices)(&format!("warning: no plots: {e}")),
        }
    }
}
