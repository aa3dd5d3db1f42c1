//! One pipeline node as a timely operator.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::{Sender, TryRecvError};
use timely::dataflow::channels::pact::Pipeline as PipelinePact;
use timely::dataflow::operators::{Capability, Operator as TimelyOperator};
use timely::dataflow::Stream;
use timely::scheduling::SyncActivator;

use super::error::ExecError;
use super::turns::Turns;
use crate::batch::column::Column;
use crate::batch::Batch;
use crate::node_spec::WorkerInfo;
use crate::operator::{Role, StepContext};
use crate::stable_hash::{fnv1a, FNV_OFFSET};

/// What travels along a dataflow edge: a batch, the step it belongs to, the policy
/// version that generated it, and which of the receiver's inputs it arrived on.
#[derive(Clone, Debug)]
pub struct Envelope {
    pub step: u64,
    pub policy_version: u64,
    pub input: usize,
    pub batch: Batch,
}

impl Envelope {
    /// A bare policy version for step `step` (what sources receive).
    pub fn version(step: u64, policy_version: u64) -> Self {
        Envelope {
            step,
            policy_version,
            input: 0,
            batch: Batch::new(),
        }
    }
}

/// One node's step, for the compute thread.
pub(crate) struct Job {
    pub node: usize,
    pub ctx: StepContext,
    /// Sources get an empty batch; other nodes the merge of what arrived, in input order.
    pub source: bool,
    pub arrived: Vec<Envelope>,
    pub reply: Sender<Done>,
    pub wake: SyncActivator,
}

/// A finished job: the context (with the node's metrics) and what the operator returned;
/// `None` when it did not run because the run had failed meanwhile.
pub(crate) struct Done {
    pub ctx: StepContext,
    pub result: Option<Result<Batch, String>>,
    pub seconds: f64,
}

/// What one node did in one step.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeReport {
    pub name: String,
    pub kind: &'static str,
    pub seconds: f64,
    pub samples: usize,
    pub tokens: usize,
    pub metrics: BTreeMap<String, f64>,
}

/// Everything that ran in one step on one worker, in the order it ran.
#[derive(Clone, Debug, PartialEq)]
pub struct StepReport {
    pub step: u64,
    pub worker: usize,
    pub policy_version: u64,
    pub nodes: Vec<NodeReport>,
}

pub(crate) struct NodeRuntime {
    pub name: String,
    pub kind: &'static str,
    pub role: Role,
    /// The node's index in the graph (its operator's on the compute thread).
    pub node: usize,
    /// Its place in the graph's topological order: its turn within a step.
    pub position: usize,
    pub turns: Rc<RefCell<Turns>>,
    /// The columns the node's contract declares it gives (checked in debug builds).
    pub gives: Vec<Column>,
    pub jobs: Sender<Job>,
    pub pipeline_seed: u64,
    pub steps: u64,
    pub worker: WorkerInfo,
    pub state: Rc<RefCell<WorkerState>>,
    pub failed: Arc<AtomicBool>,
}

/// Wires `rt` as a timely operator reading `input`; returns its output stream. Once the
/// frontier has passed a step, what arrived for it goes to the compute thread as a job;
/// the operator keeps the step's capability until the job is done, then sends its batch
/// on. Steps go out one at a time, in order.
pub(crate) fn attach<'s>(
    input: Stream<'s, u64, Vec<Envelope>>,
    mut rt: NodeRuntime,
) -> Stream<'s, u64, Vec<Envelope>> {
    let name = rt.name.clone();
    let scope = input.scope();
    input.unary_frontier(PipelinePact, &name, move |_cap, info| {
        let wake = scope.worker().sync_activator_for(info.address.to_vec());
        let turn = scope.activator_for(info.address.clone());
        rt.turns.borrow_mut().register(rt.position, turn);
        let (reply, done) = crossbeam_channel::unbounded::<Done>();
        let mut stash: BTreeMap<u64, (Capability<u64>, Vec<Envelope>)> = BTreeMap::new();
        let mut running: Option<Capability<u64>> = None;
        move |(input, frontier), output| {
            input.for_each_stamp(|cap, data| {
                let Some(cap) = cap.retain_least(output.output_index()) else {
                    return;
                };
                let step = *cap.time();
                let entry = stash.entry(step).or_insert_with(|| (cap, Vec::new()));
                entry.1.extend(data.flat_map(std::mem::take));
            });
            loop {
                if let Some(cap) = &running {
                    let finished = match done.try_recv() {
                        Ok(finished) => rt.finish(finished),
                        Err(TryRecvError::Empty) => return,
                        Err(TryRecvError::Disconnected) => {
                            rt.fail(*cap.time(), "the compute thread stopped".into())
                        }
                    };
                    if let Some(out) = finished {
                        output.session(cap).give(out);
                    }
                    running = None;
                }
                let Some((&step, _)) = stash.first_key_value() else {
                    return;
                };
                if frontier.less_equal(&step) {
                    return;
                }
                // What will not run (after a failure, a source past the last step) waits
                // for no turn.
                let runs = rt.runs(step);
                if runs && !rt.turns.borrow().is_turn(step, rt.position) {
                    return;
                }
                let (cap, arrived) = stash.remove(&step).expect("present");
                if runs && rt.start(step, arrived, &reply, &wake) {
                    running = Some(cap);
                }
                if runs {
                    rt.turns.borrow_mut().advance();
                }
            }
        }
    })
}

impl NodeRuntime {
    /// Whether the node runs at `step`: not after a failure, and a source not past the
    /// last step.
    fn runs(&self, step: u64) -> bool {
        let past_last = self.role == Role::Source && step >= self.steps;
        !(self.failed.load(Ordering::SeqCst) || past_last)
    }

    /// Sends the job of `step` to the compute thread; `false` when the compute thread is
    /// gone.
    fn start(
        &mut self,
        step: u64,
        arrived: Vec<Envelope>,
        reply: &Sender<Done>,
        wake: &SyncActivator,
    ) -> bool {
        let policy_version = arrived.iter().map(|e| e.policy_version).max().unwrap_or(0);
        let ctx = StepContext {
            step,
            policy_version,
            // The same on every worker: randomness that must differ between workers keys
            // on what the worker holds (a rollout's slots), so a run's result does not
            // depend on how many workers share it.
            seed: step_seed(self.pipeline_seed, &self.name, step),
            worker: self.worker.index,
            workers: self.worker.peers,
            metrics: BTreeMap::new(),
        };
        let job = Job {
            node: self.node,
            ctx,
            source: self.role == Role::Source,
            arrived,
            reply: reply.clone(),
            wake: wake.clone(),
        };
        if self.jobs.send(job).is_err() {
            self.fail(step, "the compute thread stopped".into());
            return false;
        }
        true
    }

    /// What a finished job sends on: its batch, or `None` when it failed.
    fn finish(&mut self, done: Done) -> Option<Envelope> {
        let Done {
            ctx,
            result,
            seconds,
        } = done;
        let step = ctx.step;
        match result? {
            Ok(batch) => {
                if let Some(message) = self.missing_gives(&batch) {
                    return self.fail(step, message);
                }
                // A source may report an older version than the step's: an asynchronous
                // rollout plays with weights up to N steps old.
                let policy_version = ctx.policy_version;
                self.record(step, policy_version, seconds, &batch, ctx.metrics);
                Some(Envelope {
                    step,
                    policy_version,
                    input: 0,
                    batch,
                })
            }
            Err(message) => self.fail(step, message),
        }
    }

    fn record(
        &self,
        step: u64,
        version: u64,
        seconds: f64,
        batch: &Batch,
        metrics: BTreeMap<String, f64>,
    ) {
        let mut state = self.state.borrow_mut();
        let report = state.reports.entry(step).or_insert_with(|| StepReport {
            step,
            worker: self.worker.index,
            policy_version: version,
            nodes: Vec::new(),
        });
        report.nodes.push(NodeReport {
            name: self.name.clone(),
            kind: self.kind,
            seconds,
            samples: batch.num_samples(),
            tokens: batch.num_tokens(),
            metrics,
        });
    }

    /// In debug builds (the test suites), a non-empty batch must hold every column the
    /// node's contract says it gives: graph validation trusted the contract, so an
    /// operator that breaks it is a bug to report where it happens, not downstream.
    fn missing_gives(&self, batch: &Batch) -> Option<String> {
        if !cfg!(debug_assertions) || batch.num_samples() == 0 {
            return None;
        }
        let missing: Vec<String> = self
            .gives
            .iter()
            .filter(|c| !batch.has(c))
            .map(|c| format!("`{c}`"))
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "{} gave no {} column although its contract declares it (a bug in the operator)",
                self.kind,
                missing.join(", ")
            )
        })
    }

    fn fail(&self, step: u64, message: String) -> Option<Envelope> {
        self.failed.store(true, Ordering::SeqCst);
        // No other worker waits for this one in a collective call any more.
        self.worker
            .collective
            .stop(&format!("`{}` failed at step {step}", self.name));
        let mut state = self.state.borrow_mut();
        state.error.get_or_insert(ExecError {
            node: Some(self.name.clone()),
            step: Some(step),
            message,
        });
        None
    }
}

/// A deterministic seed for (pipeline seed, node, step), the same on every worker:
/// FNV-1a over the parts, finished with splitmix64, stable across platforms and Rust
/// versions. (The eight zero bytes last once held a worker index; kept, so that seeds stay
/// what they were.)
pub fn step_seed(seed: u64, node: &str, step: u64) -> u64 {
    let parts = [
        &seed.to_le_bytes()[..],
        node.as_bytes(),
        &step.to_le_bytes(),
        &0u64.to_le_bytes(),
    ];
    let mut h = (parts.iter()).fold(FNV_OFFSET, |h, part| fnv1a(h, part));
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// Per-worker state shared by the node operators of one dataflow.
#[derive(Default)]
pub(crate) struct WorkerState {
    pub reports: BTreeMap<u64, StepReport>,
    pub error: Option<ExecError>,
}
