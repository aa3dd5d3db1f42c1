//! A worker's compute thread: where its operators are built and run.
//!
//! The worker's timely thread only moves data: when a node's inputs for a step are in, it
//! sends the node's job here and goes on stepping, and the finished job wakes the node's
//! timely operator again ([`super::node`]). So an operator may block in a collective call
//! ([`crate::collective`]) while its timely thread exchanges the data that call waits
//! for, and a broken connection to another process is noticed while an operator computes.
//! One compute thread per worker runs its nodes one at a time, in the order the jobs come
//! (their turns, `super::turns`); operators and their resources are built on it and never
//! leave it, so they need not be `Send`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use super::error::ExecError;
use super::node::{Done, Envelope, Job};
use crate::batch::Batch;
use crate::collective::Collective;
use crate::dialect::{Catalog, Pipeline};
use crate::graph::pipeline_graph::PipelineGraph;
use crate::node_spec::WorkerInfo;
use crate::operator::{Operator, OperatorError};

/// A compute thread building its worker's operators.
pub(crate) struct Building {
    jobs: Sender<Job>,
    thread: JoinHandle<()>,
    built: Receiver<Result<(), ExecError>>,
}

/// Starts the compute thread, which builds the worker's resources and every node's
/// operator (in graph order) before taking jobs; see [`Building::wait`].
pub(crate) fn spawn<C: Catalog>(
    pipeline: Arc<Pipeline<C>>,
    graph: Arc<PipelineGraph>,
    info: WorkerInfo,
    failed: Arc<AtomicBool>,
) -> Result<Building, ExecError> {
    let (jobs, queue) = crossbeam_channel::unbounded::<Job>();
    let (done, built) = crossbeam_channel::bounded(1);
    let thread = std::thread::Builder::new()
        .name(format!("roll-flow:compute-{}", info.index))
        .spawn(move || {
            let collective = info.collective.clone();
            let operators = match build::<C>(&pipeline, &graph, info) {
                Ok(operators) => {
                    let _ = done.send(Ok(()));
                    operators
                }
                Err(e) => {
                    let _ = done.send(Err(e));
                    return;
                }
            };
            serve(operators, &graph, &queue, &failed, &collective);
        })
        .map_err(|e| ExecError {
            node: None,
            step: None,
            message: format!("cannot start a compute thread: {e}"),
        })?;
    Ok(Building {
        jobs,
        thread,
        built,
    })
}

impl Building {
    /// Waits until the operators are built, calling `meanwhile` (the worker steps its
    /// timely dataflows, so its heartbeats go on while a model loads); returns the job
    /// queue and the thread.
    pub(crate) fn wait(
        self,
        mut meanwhile: impl FnMut(),
    ) -> Result<(Sender<Job>, JoinHandle<()>), ExecError> {
        let ready = loop {
            match self.built.try_recv() {
                Ok(ready) => break ready,
                Err(crossbeam_channel::TryRecvError::Empty) => meanwhile(),
                Err(crossbeam_channel::TryRecvError::Disconnected) => {
                    break Err(ExecError {
                        node: None,
                        step: None,
                        message: "the compute thread stopped while building the operators".into(),
                    })
                }
            }
        };
        match ready {
            Ok(()) => Ok((self.jobs, self.thread)),
            Err(e) => {
                let _ = self.thread.join();
                Err(e)
            }
        }
    }
}

fn build<C: Catalog>(
    pipeline: &Pipeline<C>,
    graph: &PipelineGraph,
    info: WorkerInfo,
) -> Result<Vec<Box<dyn Operator>>, ExecError> {
    let error = |node: Option<&str>, message| ExecError {
        node: node.map(String::from),
        step: None,
        message,
    };
    let mut resources = C::resources(pipeline, info).map_err(|m| error(None, m))?;
    let mut operators = Vec::with_capacity(graph.nodes.len());
    for node in &graph.nodes {
        let name = node.name.as_str();
        let spec = pipeline.nodes.get(name).ok_or_else(|| {
            error(
                Some(name),
                "node is in the graph but not in the pipeline".into(),
            )
        })?;
        let op =
            C::build(name, spec, pipeline, &mut resources).map_err(|m| error(Some(name), m))?;
        operators.push(op);
    }
    Ok(operators)
}

/// Runs jobs until the worker's nodes are gone. The first failure marks the run failed at
/// once (the jobs queued behind it do not run) and tells the other workers.
fn serve(
    mut operators: Vec<Box<dyn Operator>>,
    graph: &PipelineGraph,
    queue: &Receiver<Job>,
    failed: &AtomicBool,
    collective: &Collective,
) {
    for job in queue {
        let name = &graph.nodes[job.node].name;
        let (reply, wake) = (job.reply.clone(), job.wake.clone());
        let done = if failed.load(Ordering::SeqCst) {
            Done {
                ctx: job.ctx,
                result: None,
                seconds: 0.0,
            }
        } else {
            let before = collective.bytes_sent();
            let mut done = run(operators[job.node].as_mut(), name, job);
            if collective.peers() > 1 {
                // What this node's collective calls sent to the other workers.
                let sent = (collective.bytes_sent() - before) as f64;
                done.ctx.metrics.insert("sent_bytes".into(), sent);
            }
            done
        };
        if let Some(Err(_)) = &done.result {
            failed.store(true, Ordering::SeqCst);
            collective.stop(&format!("`{name}` failed at step {}", done.ctx.step));
        }
        if reply.send(done).is_ok() {
            let _ = wake.activate();
        }
    }
}

/// Runs one job; a panic inside the operator (its own code, a rayon task it awaited, a
/// library it called) fails it like an error does.
fn run(operator: &mut dyn Operator, name: &str, job: Job) -> Done {
    let Job {
        mut ctx,
        source,
        mut arrived,
        ..
    } = job;
    arrived.sort_by_key(|e| e.input);
    let input = if source {
        Ok(Batch::new())
    } else {
        merge_inputs(arrived)
    };
    let started = Instant::now();
    let result = input.and_then(|input| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            operator.process(&mut ctx, input)
        }))
        .unwrap_or_else(|panic| {
            Err(OperatorError(format!(
                "panicked: {}",
                panic_message(&*panic)
            )))
        })
        .map_err(|e| e.0)
    });
    let seconds = started.elapsed().as_secs_f64();
    crate::trace::span(name, name, ctx.step, started);
    Done {
        ctx,
        result: Some(result),
        seconds,
    }
}

fn merge_inputs(arrived: Vec<Envelope>) -> Result<Batch, String> {
    let mut batches = arrived.into_iter().map(|e| e.batch);
    let first = batches.next().unwrap_or_default();
    batches
        .try_fold(first, |acc, b| acc.merge(b))
        .map_err(|e| e.to_string())
}

/// The text a panic carried (`panic!`'s message), or a note that it carried none.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into())
}
