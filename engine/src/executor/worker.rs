//! [`execute`]: one timely dataflow per worker, built from the validated graph; each
//! finished step's report handed to the caller in step order.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use timely::dataflow::operators::vec::Map;
use timely::dataflow::operators::{Concat, Concatenate, ConnectLoop, Feedback, Probe};
use timely::dataflow::{InputHandleVec, ProbeHandle, Stream};

use crate::dialect::{Catalog, Pipeline};
use crate::graph::pipeline_graph::PipelineGraph;
use crate::node_spec::WorkerInfo;
use crate::operator::Role;

use super::broken_connection;
use super::compute::{self, panic_message};
use super::error::ExecError;
use super::node::{self, Envelope, StepReport, WorkerState};
use super::options::ExecutorOptions;
use super::turns::Turns;
use crate::collective::heartbeat::BEAT_EVERY;
use crate::collective::{dataflow, Stopper, PEER_STOPPED};

/// Called with each finished step's report, from the worker that ran it. An error (the
/// step's record could not be written, say) stops the run as a failing node does: no
/// node starts another step, and the run ends with that error at that step.
pub type StepCallback = Arc<dyn Fn(StepReport) -> Result<(), String> + Send + Sync>;

/// Runs the pipeline to completion (or the first error).
pub fn execute<C: Catalog>(
    pipeline: Arc<Pipeline<C>>,
    graph: Arc<PipelineGraph>,
    options: ExecutorOptions,
    on_step: StepCallback,
) -> Result<(), ExecError> {
    let failed = Arc::new(AtomicBool::new(false));
    let (allocators, keep) = options.communication()?;
    if options.processes > 1 {
        broken_connection::install();
    }
    let threads = options.threads;
    let (results, outcomes) = crossbeam_channel::unbounded();
    let worker_config = timely::WorkerConfig::default();
    let guards = timely::execute::execute_from(allocators, keep, worker_config, move |worker| {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_worker::<C>(worker, &pipeline, &graph, &options, &on_step, &failed)
        }))
        .unwrap_or_else(|panic| Err(worker_panic(&*panic)));
        let _ = results.send(outcome);
    })
    .map_err(|message| ExecError {
        node: None,
        step: None,
        message,
    })?;
    let mut errors = Vec::new();
    for _ in 0..threads {
        match outcomes.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => errors.push(e),
            Err(_) => break,
        }
    }
    // A worker's own error, rather than another's report that it stopped.
    errors.sort_by_key(|e| e.message.starts_with(PEER_STOPPED));
    match errors.into_iter().next() {
        None => {
            for result in guards.join() {
                result.map_err(|panic| ExecError {
                    node: None,
                    step: None,
                    message: format!("a worker panicked: {panic}"),
                })?;
            }
            Ok(())
        }
        Some(error) => {
            // Joining would wait for threads that may never end (a compute thread inside
            // a long node, network threads to a dead process); the process ends soon.
            std::mem::forget(guards);
            Err(error)
        }
    }
}

/// The error of a worker thread that panicked: timely's own panics when a connection to
/// another process breaks say little, so say what happened and to which process.
fn worker_panic(panic: &(dyn std::any::Any + Send)) -> ExecError {
    let message = panic_message(panic);
    let message = if broken_connection::is_network_failure(&message) {
        let (process, cause) = match broken_connection::broken_connection() {
            Some((p, cause)) => (format!("process {p}"), cause),
            None => ("another process".to_string(), message),
        };
        format!(
            "the connection to {process} of the run broke: that process died, was killed or \
             lost its network ({cause})"
        )
    } else {
        format!("a worker panicked: {message}")
    };
    ExecError {
        node: None,
        step: None,
        message,
    }
}

fn run_worker<C: Catalog>(
    worker: &mut timely::worker::Worker,
    pipeline: &Arc<Pipeline<C>>,
    graph: &Arc<PipelineGraph>,
    options: &ExecutorOptions,
    on_step: &StepCallback,
    failed: &Arc<AtomicBool>,
) -> Result<(), ExecError> {
    let (collective, heartbeats) = worker.dataflow::<u64, _, _>(|scope| {
        dataflow::build(scope, options.threads, options.peer_timeout)
    });
    let info = WorkerInfo {
        index: worker.index(),
        peers: worker.peers(),
        first_step: options.first_step,
        collective,
    };
    let state = Rc::new(RefCell::new(WorkerState::default()));
    // A worker whose operators cannot be built still builds the dataflow (every worker
    // must), runs none of its nodes and tells the others it stopped.
    let building = compute::spawn::<C>(
        pipeline.clone(),
        graph.clone(),
        info.clone(),
        failed.clone(),
    );
    let built = building.and_then(|b| {
        b.wait(|| {
            worker.step_or_park(Some(Duration::from_millis(20)));
            heartbeats.stepped();
        })
    });
    let (jobs, compute) = match built {
        Ok((jobs, thread)) => (jobs, Some(thread)),
        Err(e) => {
            failed.store(true, Ordering::SeqCst);
            info.collective.stop(&format!(
                "worker {} could not build its operators",
                info.index
            ));
            state.borrow_mut().error = Some(e);
            (crossbeam_channel::unbounded().0, None)
        }
    };
    let mut versions_in = InputHandleVec::<u64, Envelope>::new();
    let probe = ProbeHandle::new();
    let staleness = options.staleness;
    let turns = Rc::new(RefCell::new(Turns::new(
        options.first_step,
        graph.order.len(),
    )));
    let positions = turn_positions(graph);
    worker.dataflow::<u64, _, _>(|scope| {
        let (feedback, fed_back) = scope.feedback::<Vec<Envelope>>(1 + staleness);
        let versions = versions_in.to_stream(scope).concat(fed_back);
        let mut outputs: Vec<Option<Stream<'_, u64, Vec<Envelope>>>> =
            vec![None; graph.nodes.len()];
        for &i in &graph.order {
            let position = positions[i];
            let spec = &graph.nodes[i];
            let input = match spec.role {
                Role::Source => versions.clone(),
                _ => scope.concatenate(spec.inputs.iter().enumerate().map(|(k, &j)| {
                    let upstream = outputs[j].clone().expect("topological order");
                    upstream.map(move |mut e: Envelope| {
                        e.input = k;
                        e
                    })
                })),
            };
            let ctx = node::NodeRuntime {
                name: spec.name.clone(),
                kind: spec.kind,
                role: spec.role,
                node: i,
                position,
                turns: turns.clone(),
                gives: spec.contract.gives.clone(),
                jobs: jobs.clone(),
                pipeline_seed: pipeline.seed,
                steps: options
                    .stop_after
                    .map_or(pipeline.steps, |s| s.min(pipeline.steps)),
                worker: info.clone(),
                state: state.clone(),
                failed: failed.clone(),
            };
            outputs[i] = Some(node::attach(input, ctx));
        }
        let published = graph.feedback_from.iter().map(|&i| {
            outputs[i]
                .clone()
                .expect("built")
                .map(|e: Envelope| Envelope::version(e.step, e.step + 1))
        });
        scope.concatenate(published).connect_loop(feedback);
        scope
            .concatenate(outputs.into_iter().flatten())
            .probe_with(&probe);
    });
    let stopper = info.collective.stopper();
    drop((jobs, info));
    // A resumed run starts at `first_step` with the policy version its checkpoint holds.
    let first = options.first_step;
    for step in first..=first + staleness {
        versions_in.advance_to(step);
        versions_in.send(Envelope::version(step, first));
    }
    drop(versions_in);

    // The next step to hand to `on_step`; `None` once it refused one (no later step is
    // handed out then, so the caller's record never skips a step).
    let mut next_report = Some(first);
    while worker.step_or_park(Some(BEAT_EVERY)) {
        heartbeats.stepped();
        flush_reports(&probe, &state, &mut next_report, on_step, failed, &stopper);
        if heartbeats.silent().is_some() {
            // Before judging anyone silent, read what came in while this thread parked.
            worker.step();
        }
        if let Some(why) = heartbeats.silent() {
            // The silent worker would keep this one's dataflows open for ever: stop, give
            // the others a moment to hear it, and leave.
            failed.store(true, Ordering::SeqCst);
            stopper.stop(&why);
            (state.borrow_mut().error).get_or_insert(ExecError {
                node: None,
                step: None,
                message: why,
            });
            let until = Instant::now() + Duration::from_secs(1);
            while Instant::now() < until && worker.step_or_park(Some(Duration::from_millis(50))) {}
            break;
        }
    }
    flush_reports(&probe, &state, &mut next_report, on_step, failed, &stopper);
    let error = state.borrow_mut().error.take();
    match error {
        Some(e) => Err(e),
        None => {
            if let Some(thread) = compute {
                thread.join().map_err(|panic| ExecError {
                    node: None,
                    step: None,
                    message: format!("the compute thread panicked: {}", panic_message(&*panic)),
                })?;
            }
            Ok(())
        }
    }
}

/// Each node's turn within a step (`super::turns`): the sources first (the rollout, then an
/// eval, both playing the weights the step starts from), then the other nodes in
/// topological order, ties in file order.
fn turn_positions(graph: &PipelineGraph) -> Vec<usize> {
    let (mut order, rest): (Vec<usize>, Vec<usize>) =
        (graph.order.iter()).partition(|&&i| graph.nodes[i].role == Role::Source);
    order.extend(rest);
    let mut positions = vec![0; graph.nodes.len()];
    for (position, &i) in order.iter().enumerate() {
        positions[i] = position;
    }
    positions
}

/// Hands out the reports of every step the probe has passed, in step order; the first
/// report the callback refuses fails the run and ends the handing out.
fn flush_reports(
    probe: &ProbeHandle<u64>,
    state: &Rc<RefCell<WorkerState>>,
    next: &mut Option<u64>,
    on_step: &StepCallback,
    failed: &AtomicBool,
    stopper: &Stopper,
) {
    while let Some(expected) = *next {
        let Some((&step, _)) = state.borrow().reports.first_key_value() else {
            return;
        };
        if probe.less_equal(&step) || step < expected {
            return;
        }
        let report = state.borrow_mut().reports.remove(&step).expect("present");
        *next = Some(step + 1);
        if let Err(message) = on_step(report) {
            *next = None;
            failed.store(true, Ordering::SeqCst);
            stopper.stop(&format!("its step {step} could not be recorded"));
            state.borrow_mut().error.get_or_insert(ExecError {
                node: None,
                step: Some(step),
                message,
            });
            return;
        }
    }
}
