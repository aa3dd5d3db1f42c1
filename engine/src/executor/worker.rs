//! [`execute`]: one timely dataflow per worker, built from the validated graph; each
//! finished step's report handed to the caller in step order.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use timely::dataflow::operators::vec::Map;
use timely::dataflow::operators::{Concat, Concatenate, ConnectLoop, Feedback, Probe};
use timely::dataflow::{InputHandleVec, ProbeHandle, Stream};

use crate::dialect::{Catalog, Pipeline};
use crate::graph::pipeline_graph::PipelineGraph;
use crate::node_spec::WorkerInfo;
use crate::operator::Role;

use super::error::ExecError;
use super::node::{self, Envelope, StepReport, WorkerState};
use super::options::ExecutorOptions;

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
    let config = options.timely_config()?;
    let guards = timely::execute(config, move |worker| {
        run_worker::<C>(worker, &pipeline, &graph, &options, &on_step, &failed)
    })
    .map_err(|message| ExecError {
        node: None,
        step: None,
        message,
    })?;
    let mut first_error = None;
    for result in guards.join() {
        let outcome = result.unwrap_or_else(|panic| {
            Err(ExecError {
                node: None,
                step: None,
                message: format!("a worker panicked: {panic}"),
            })
        });
        if let Err(e) = outcome {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn run_worker<C: Catalog>(
    worker: &mut timely::worker::Worker,
    pipeline: &Arc<Pipeline<C>>,
    graph: &Arc<PipelineGraph>,
    options: &ExecutorOptions,
    on_step: &StepCallback,
    failed: &Arc<AtomicBool>,
) -> Result<(), ExecError> {
    let info = WorkerInfo {
        index: worker.index(),
        peers: worker.peers(),
        first_step: options.first_step,
    };
    let mut resources = C::resources(pipeline, info).map_err(|message| ExecError {
        node: None,
        step: None,
        message,
    })?;
    let mut operators = Vec::with_capacity(graph.nodes.len());
    for node in &graph.nodes {
        let name = node.name.as_str();
        let spec = pipeline.nodes.get(name).ok_or_else(|| ExecError {
            node: Some(name.to_string()),
            step: None,
            message: "node is in the graph but not in the pipeline".into(),
        })?;
        let op = C::build(name, spec, pipeline, &mut resources).map_err(|message| ExecError {
            node: Some(name.to_string()),
            step: None,
            message,
        })?;
        operators.push(Some(op));
    }
    let state = Rc::new(RefCell::new(WorkerState::default()));
    let mut versions_in = InputHandleVec::<u64, Envelope>::new();
    let probe = ProbeHandle::new();
    let staleness = options.staleness;
    worker.dataflow::<u64, _, _>(|scope| {
        let (feedback, fed_back) = scope.feedback::<Vec<Envelope>>(1 + staleness);
        let versions = versions_in.to_stream(scope).concat(fed_back);
        let mut outputs: Vec<Option<Stream<'_, u64, Vec<Envelope>>>> =
            vec![None; graph.nodes.len()];
        for &i in &graph.order {
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
                gives: spec.contract.gives.clone(),
                operator: operators[i].take().expect("one operator per node"),
                pipeline_seed: pipeline.seed,
                steps: options
                    .stop_after
                    .map_or(pipeline.steps, |s| s.min(pipeline.steps)),
                worker: info,
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
    while worker.step_or_park(None) {
        flush_reports(&probe, &state, &mut next_report, on_step, failed);
    }
    flush_reports(&probe, &state, &mut next_report, on_step, failed);
    let error = state.borrow_mut().error.take();
    error.map_or(Ok(()), Err)
}

/// Hands out the reports of every step the probe has passed, in step order; the first
/// report the callback refuses fails the run and ends the handing out.
fn flush_reports(
    probe: &ProbeHandle<u64>,
    state: &Rc<RefCell<WorkerState>>,
    next: &mut Option<u64>,
    on_step: &StepCallback,
    failed: &AtomicBool,
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
            state.borrow_mut().error.get_or_insert(ExecError {
                node: None,
                step: Some(step),
                message,
            });
            return;
        }
    }
}
