//! The micro-batches of a mini-batch, trained concurrently on the CPU: one forward and
//! backward pass per lane (below), each part's gradients added to the sum in micro-batch
//! order as soon as it and the parts before it are done.
//! On a GPU backend the passes run one after another
//! ([`super::backend::RunBackend::CONCURRENT_PASSES`]).
//!
//! Why: on the CPU only the matrix products of a pass split over threads; burn's
//! elementwise ops and its autodiff bookkeeping run on one, so a second thread sped a
//! Tiny-model training step up by about 1.2× (PyTorch: about 1.65×). Two passes over two
//! halves of the batch at once keep both threads busy through the whole step
//! (`bench/model_throughput.rs`).
//!
//! Each pass runs on a copy of the module whose parameters are fresh autodiff leaves
//! ([`FreshLeaves`]: the same weights and parameter ids, new graph nodes). burn's autodiff
//! keeps one graph per set of connected nodes behind one lock; passes that shared the
//! parameter leaves would share that graph and run their backward passes one at a time.
//! The gradients come back keyed by parameter id, as the accumulator wants them.
//!
//! **Lanes, not rayon's threads.** Each pass runs in a lane: a thread of its own that
//! `install`s the pass into a rayon pool that lane alone uses. Passes must not share a
//! pool: burn's autodiff holds a graph's lock while it runs the graph's backward steps,
//! and those steps split work over rayon; a rayon thread waiting there for its split work
//! may take any job of its pool, and when that job was another pass, that pass's backward
//! ends by visiting every graph's lock (`cleanup_orphaned_entries`), the one its own
//! thread holds among them: a deadlock (it stopped an asynchronous GiGPO run after 107 to
//! 227 steps, every thread parked). In a pool of its own, a pass's threads only ever take
//! that pass's work.
//!
//! **One pass, too, runs on a lane's pool** (all the threads, one lane) rather than on the
//! calling thread, which is not a rayon thread: each split product of the pass then starts
//! on the thread already running it while the other threads join in, instead of being
//! handed to the pool while the caller sleeps until it is woken again. A one-pass step of
//! the dim-512 model switched threads about 4× less often (10.6k → 2.6k context switches
//! per run of `bench/model_throughput.rs -- medium`, two threads) and ran 3% faster in the
//! median of eight alternating runs.
//!
//! The result does not depend on the thread count: every pass computes exactly what it
//! would alone (the same weights, the same ops), and the gradients are summed in
//! micro-batch order.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex, PoisonError};

use burn::module::{AutodiffModule, ModuleMapper, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use rayon::ThreadPool;
use roll_flow_kernels::KernelBackend;
use roll_flow_model::qwen2::layer_checkpoints;

/// Maps every tracked parameter to a new autodiff leaf over the same values and id.
pub struct FreshLeaves;

impl<B: AutodiffBackend> ModuleMapper<B> for FreshLeaves {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        let fresh = if tensor.is_require_grad() {
            tensor.detach().require_grad()
        } else {
            tensor
        };
        Param::from_mapped_value(id, fresh, mapper)
    }
}

/// `f` of every item, in item order. When `concurrent`, items run at once in as many lanes
/// as the current rayon pool has threads (at most one per item), each lane with a pool of
/// its own holding its share of those threads (see the module doc), and a single item runs
/// in one lane's pool of all of them; otherwise one after another on the calling thread.
/// The first error, in item order, is returned. A concurrent item runs on a lane thread, so
/// thread-local scopes of the caller (e.g. `with_packed_weights`) do not reach it.
pub fn in_order<T, R, F>(items: Vec<T>, concurrent: bool, f: F) -> Result<Vec<R>, String>
where
    T: Send,
    R: Send,
    F: Fn(T) -> Result<R, String> + Sync,
{
    let mut results = Vec::with_capacity(items.len());
    each_in_order(items, concurrent, f, |r| results.push(r))?;
    Ok(results)
}

/// [`in_order`] handing each result to `sink` on the calling thread, in item order, as soon
/// as it and every earlier one are done, rather than keeping them all to the end: only the
/// results that finished ahead of an earlier item wait (at most about one per lane while
/// the items take alike), so items with large results (a micro-batch's gradients, a whole
/// model's worth) cost the memory of a few, not of all. After the first error (in item
/// order) no further result reaches `sink` and no lane starts another item; the error is
/// returned.
pub fn each_in_order<T, R, F>(
    items: Vec<T>,
    concurrent: bool,
    f: F,
    mut sink: impl FnMut(R),
) -> Result<(), String>
where
    T: Send,
    R: Send,
    F: Fn(T) -> Result<R, String> + Sync,
{
    let threads = rayon::current_num_threads();
    let lanes = threads.min(items.len());
    if !concurrent || threads <= 1 || items.is_empty() {
        for item in items {
            sink(f(item)?);
        }
        return Ok(());
    }
    if lanes <= 1 {
        let pools = lane_pools(1, threads)?;
        for item in items {
            sink(pools[0].install(|| f(item))?);
        }
        return Ok(());
    }
    let pools = lane_pools(lanes, threads / lanes)?;
    let queue = Mutex::new(items.into_iter().enumerate());
    let failed = AtomicBool::new(false);
    let (done, arrivals) = mpsc::channel::<(usize, Result<R, String>)>();
    std::thread::scope(|scope| {
        let lanes: Vec<_> = (pools.iter())
            .map(|pool| {
                let (queue, f, failed, done) = (&queue, &f, &failed, done.clone());
                scope.spawn(move || loop {
                    if failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let next = queue.lock().unwrap_or_else(PoisonError::into_inner).next();
                    let Some((i, item)) = next else { break };
                    if done.send((i, pool.install(|| f(item)))).is_err() {
                        break;
                    }
                })
            })
            .collect();
        drop(done);
        // Items are taken in order, so every item before a failed one has started and
        // its result still arrives: the first error in item order is found.
        let (mut waiting, mut next, mut first_error) = (BTreeMap::new(), 0, None);
        for (i, result) in arrivals {
            waiting.insert(i, result);
            while let Some(result) = waiting.remove(&next) {
                next += 1;
                match (result, first_error.is_some()) {
                    (Ok(r), false) => sink(r),
                    (Err(e), false) => {
                        failed.store(true, Ordering::Relaxed);
                        first_error = Some(e);
                    }
                    (_, true) => {}
                }
            }
        }
        for lane in lanes {
            lane.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        }
        first_error.map_or(Ok(()), Err)
    })
}

/// `lanes` rayon pools of `threads` threads each, for one caller at a time: taken from the
/// idle sets of that shape (made when none is idle) and put back when the caller is done,
/// so two callers at once (the compute threads of a `-w 2` run) never share a lane's pool.
fn lane_pools(lanes: usize, threads: usize) -> Result<LanePools, String> {
    let shape = (lanes, threads);
    let idle = IDLE_LANES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_mut(&shape)
        .and_then(Vec::pop);
    let pools = match idle {
        Some(pools) => pools,
        None => (0..lanes)
            .map(|lane| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads.max(1))
                    .thread_name(move |i| format!("roll-flow:lane-{lane}.{i}"))
                    .build()
                    .map_err(|e| format!("cannot start the threads of a training lane: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    Ok(LanePools { shape, pools })
}

/// Idle lane pools by shape (lanes, threads per lane), kept for the process: a training
/// step asks for the same shape at every mini-batch.
static IDLE_LANES: Mutex<IdleLanes> = Mutex::new(BTreeMap::new());

/// Sets of lane pools (one pool per lane) by shape.
type IdleLanes = BTreeMap<(usize, usize), Vec<Vec<ThreadPool>>>;

/// One caller's lane pools; back to the idle sets when dropped.
struct LanePools {
    shape: (usize, usize),
    pools: Vec<ThreadPool>,
}

impl std::ops::Deref for LanePools {
    type Target = [ThreadPool];
    fn deref(&self) -> &[ThreadPool] {
        &self.pools
    }
}

impl Drop for LanePools {
    fn drop(&mut self) {
        let pools = std::mem::take(&mut self.pools);
        let mut idle = IDLE_LANES.lock().unwrap_or_else(PoisonError::into_inner);
        idle.entry(self.shape).or_default().push(pools);
    }
}

/// The gradients of `scale[i] · loss(part[i])` for every part, computed concurrently when
/// `concurrent` (each on its own [`FreshLeaves`] copy of `module`), handed to `sink` with
/// what `loss` reported, in part order, as they are done ([`each_in_order`]: the caller
/// adds each to its sum and drops it, so a step of many micro-batches holds a few parts'
/// gradients at a time, not one copy of the model's gradients per micro-batch). The first
/// error, in part order, is returned; `sink` has then seen the parts before it.
pub fn part_gradients<B, M, P, S>(
    module: &M,
    parts: &[P],
    scales: &[f32],
    concurrent: bool,
    loss: impl Fn(&M, &P) -> Result<(Tensor<B, 1>, S), String> + Sync,
    sink: impl FnMut((GradientsParams, S)),
) -> Result<(), String>
where
    B: AutodiffBackend + KernelBackend,
    M: AutodiffModule<B> + Sync,
    P: Sync,
    S: Send,
{
    assert_eq!(parts.len(), scales.len(), "one scale per part");
    let work: Vec<(&P, f32)> = parts.iter().zip(scales.iter().copied()).collect();
    let gradients = |(part, scale): (&P, f32)| {
        let copy = module.clone().map(&mut FreshLeaves);
        layer_checkpoints::discard_pending();
        let (value, report) = loss(&copy, part)?;
        let grads = layer_checkpoints::backward(value.mul_scalar(scale), &copy);
        Ok((grads, report))
    };
    each_in_order(work, concurrent, gradients, sink)
}

#[cfg(test)]
#[path = "concurrent_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "concurrent_scheduling_tests.rs"]
mod scheduling_tests;
