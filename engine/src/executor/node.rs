//! One pipeline node as a timely operator.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use timely::dataflow::channels::pact::Pipeline as PipelinePact;
use timely::dataflow::operators::{Capability, Operator as TimelyOperator};
use timely::dataflow::Stream;

use super::error::ExecError;
use crate::batch::column::Column;
use crate::batch::Batch;
use crate::node_spec::WorkerInfo;
use crate::operator::{Operator, OperatorError, Role, StepContext};

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
    /// The columns the node's contract declares it gives (checked in debug builds).
    pub gives: Vec<Column>,
    pub operator: Box<dyn Operator>,
    pub pipeline_seed: u64,
    pub steps: u64,
    pub worker: WorkerInfo,
    pub state: Rc<RefCell<WorkerState>>,
    pub failed: Arc<AtomicBool>,
}

/// Wires `rt` as a timely operator reading `input`; returns its output stream.
pub(crate) fn attach<'s>(
    input: Stream<'s, u64, Vec<Envelope>>,
    mut rt: NodeRuntime,
) -> Stream<'s, u64, Vec<Envelope>> {
    let name = rt.name.clone();
    input.unary_frontier(PipelinePact, &name, move |_cap, _info| {
        let mut stash: BTreeMap<u64, (Capability<u64>, Vec<Envelope>)> = BTreeMap::new();
        move |(input, frontier), output| {
            input.for_each_stamp(|cap, data| {
                let Some(cap) = cap.retain_least(output.output_index()) else {
                    return;
                };
                let step = *cap.time();
                let entry = stash.entry(step).or_insert_with(|| (cap, Vec::new()));
                entry.1.extend(data.flat_map(std::mem::take));
            });
            while let Some((&step, _)) = stash.first_key_value() {
                if frontier.less_equal(&step) {
                    break;
                }
                let (cap, arrived) = stash.remove(&step).expect("present");
                if let Some(out) = rt.run(step, arrived) {
                    output.session(&cap).give(out);
                }
            }
        }
    })
}

impl NodeRuntime {
    /// Runs the operator for `step` on what arrived; `None` when nothing is to be sent on.
    fn run(&mut self, step: u64, mut arrived: Vec<Envelope>) -> Option<Envelope> {
        if self.failed.load(Ordering::SeqCst) || arrived.is_empty() {
            return None;
        }
        if self.role == Role::Source && step >= self.steps {
            return None;
        }
        arrived.sort_by_key(|e| e.input);
        let policy_version = arrived.iter().map(|e| e.policy_version).max().unwrap_or(0);
        let input = match self.role {
            Role::Source => Batch::new(),
            _ => match merge_inputs(arrived) {
                Ok(b) => b,
                Err(message) => return self.fail(step, message),
            },
        };
        let mut ctx = StepContext {
            step,
            policy_version,
            seed: step_seed(self.pipeline_seed, &self.name, step, self.worker.index),
            worker: self.worker.index,
            workers: self.worker.peers,
            metrics: BTreeMap::new(),
        };
        let started = Instant::now();
        // A panic inside an operator (its own code, a rayon task it awaited, a library it
        // called) fails the run at this node and step like an error does.
        let operator = &mut self.operator;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            operator.process(&mut ctx, input)
        }))
        .unwrap_or_else(|panic| {
            Err(OperatorError(format!(
                "panicked: {}",
                panic_message(&*panic)
            )))
        });
        let seconds = started.elapsed().as_secs_f64();
        crate::trace::span(&self.name, &self.name, step, started);
        match result {
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
            Err(e) => self.fail(step, e.0),
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
        let mut state = self.state.borrow_mut();
        state.error.get_or_insert(ExecError {
            node: Some(self.name.clone()),
            step: Some(step),
            message,
        });
        None
    }
}

/// The text a panic carried (`panic!`'s message), or a note that it carried none.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into())
}

fn merge_inputs(arrived: Vec<Envelope>) -> Result<Batch, String> {
    let mut batches = arrived.into_iter().map(|e| e.batch);
    let first = batches.next().unwrap_or_default();
    batches
        .try_fold(first, |acc, b| acc.merge(b))
        .map_err(|e| e.to_string())
}

/// A deterministic seed for (pipeline seed, node, step, worker): FNV-1a over the parts,
/// finished with splitmix64, stable across platforms and Rust versions.
pub fn step_seed(seed: u64, node: &str, step: u64, worker: usize) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let parts = [
        &seed.to_le_bytes()[..],
        node.as_bytes(),
        &step.to_le_bytes(),
        &(worker as u64).to_le_bytes(),
    ];
    for byte in parts.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(*byte);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
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
