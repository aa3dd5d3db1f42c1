//! Collective operations between a run's workers, over timely's exchange channels: the
//! gradient all-reduce of data-parallel training and the all-gathers around it.
//!
//! An operator runs on its worker's compute thread ([`super::compute`]) and calls a
//! [`Collective`] there, which blocks until every worker has made the same call; the
//! worker's timely thread, free meanwhile, moves the data through a small dataflow of its
//! own whose timestamps count the calls (every worker makes the same calls in the same
//! order):
//!
//! 1. `requests`, a source, cuts a sum's vector into one contiguous shard per worker and
//!    sends shard j to worker j (a gather's bytes go to every worker);
//! 2. `reduce`, once every worker's part of call t is in (the frontier passed t), adds the
//!    parts of its shard in worker order and sends the sum to every worker;
//! 3. `assemble` puts the summed shards (or the gathered bytes) together in worker order and
//!    hands them to the waiting operator.
//!
//! So a sum of n values sends and receives 2·(W−1)/W·n values per worker (reduce-scatter
//! then all-gather), not W copies, and every worker gets bit-identical sums. A worker that
//! stops (its run failed, or it was dropped) says why to the others and releases its
//! capability, so a worker waiting for it gets that reason as an error instead of waiting
//! forever.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::source;
use timely::dataflow::operators::{Capability, Operator};
use timely::dataflow::{Scope, Stream};
use timely::scheduling::SyncActivator;

/// What a call on a worker that stopped (its run failed) answers.
const STOPPED_HERE: &str = "this worker stopped after a failure";

/// The start of the error a worker gets when another stopped first: the other's own
/// error is the one to report.
pub const PEER_STOPPED: &str = "another worker stopped: ";

/// A worker's handle on the collective operations (cheap to clone; one call at a time).
#[derive(Clone)]
pub struct Collective {
    index: usize,
    peers: usize,
    link: Option<Arc<Link>>,
}

impl std::fmt::Debug for Collective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Collective(worker {} of {})", self.index, self.peers)
    }
}

struct Link {
    /// `None` only while the link is dropped.
    requests: Option<Sender<Request>>,
    replies: Mutex<Receiver<(u64, Result<Reply, String>)>>,
    /// Calls made so far: the time of the next one.
    calls: AtomicU64,
    /// This worker stopped: a later call fails at once.
    stopped: AtomicBool,
    wake: SyncActivator,
    bytes_sent: AtomicU64,
}

impl Link {
    fn stop(&self, why: &str) {
        if self.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = self.send(Request::Stop(why.to_string()));
    }

    /// Queues `request` for the `requests` source and wakes it.
    fn send(&self, request: Request) -> Result<(), String> {
        let stopped = || "the worker's timely thread has stopped".to_string();
        let requests = self.requests.as_ref().ok_or_else(stopped)?;
        requests.send(request).map_err(|_| stopped())?;
        self.wake.activate().map_err(|_| stopped())
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // Closed first, then woken: the source must find the channel closed when it runs,
        // to release its capability.
        drop(self.requests.take());
        let _ = self.wake.activate();
    }
}

enum Request {
    Sum(Vec<f32>),
    Gather(Vec<u8>),
    Stop(String),
}

enum Reply {
    Sum(Vec<f32>),
    Gather(Vec<Vec<u8>>),
}

/// What travels between workers.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum Part {
    /// Worker `from`'s values of shard `shard` (sent to the shard's owner).
    Shard {
        from: u32,
        shard: u32,
        values: Vec<f32>,
    },
    /// The sum of shard `shard` over every worker, for worker `to`.
    Summed {
        shard: u32,
        to: u32,
        values: Vec<f32>,
    },
    /// Worker `from`'s bytes, for worker `to`.
    Bytes { from: u32, to: u32, bytes: Vec<u8> },
    /// Worker `from` stopped and will make no further call.
    Stopped { from: u32, to: u32, why: String },
}

impl Part {
    fn route(&self) -> u64 {
        u64::from(match self {
            Part::Shard { shard, .. } => *shard,
            Part::Summed { to, .. } | Part::Bytes { to, .. } | Part::Stopped { to, .. } => *to,
        })
    }
}

impl Collective {
    /// The handle of a run with one worker: every operation is the identity.
    pub fn single() -> Collective {
        Collective {
            index: 0,
            peers: 1,
            link: None,
        }
    }

    pub fn index(&self) -> usize {
        self.index
    }

    pub fn peers(&self) -> usize {
        self.peers
    }

    /// Bytes this worker has sent to other workers so far.
    pub fn bytes_sent(&self) -> u64 {
        self.link
            .as_ref()
            .map_or(0, |l| l.bytes_sent.load(Ordering::Relaxed))
    }

    /// The element-wise sum of every worker's `values` (all the same length), added in
    /// worker order, so every worker gets the same bits.
    pub fn sum(&self, values: Vec<f32>) -> Result<Vec<f32>, String> {
        match self.call(Request::Sum(values))? {
            Reply::Sum(sum) => Ok(sum),
            Reply::Gather(_) => Err("a sum was answered with a gather".into()),
        }
    }

    /// Every worker's `value`, in worker order.
    pub fn gather<T: Serialize + DeserializeOwned>(&self, value: &T) -> Result<Vec<T>, String> {
        let bytes = bincode::serialize(value).map_err(|e| format!("cannot encode: {e}"))?;
        let parts = match self.call(Request::Gather(bytes))? {
            Reply::Gather(parts) => parts,
            Reply::Sum(_) => return Err("a gather was answered with a sum".into()),
        };
        parts
            .iter()
            .map(|b| bincode::deserialize(b).map_err(|e| format!("cannot decode: {e}")))
            .collect()
    }

    /// Tells the other workers that this one stops (`why`), so that none waits for it.
    pub fn stop(&self, why: &str) {
        if let Some(link) = &self.link {
            link.stop(why);
        }
    }

    /// A handle that can [`Collective::stop`] this worker without keeping its link open
    /// (the collective dataflow ends once every `Collective` of the worker is dropped).
    pub(crate) fn stopper(&self) -> Stopper {
        Stopper(self.link.as_ref().map(Arc::downgrade))
    }

    fn call(&self, request: Request) -> Result<Reply, String> {
        let Some(link) = &self.link else {
            return Ok(match request {
                Request::Sum(values) => Reply::Sum(values),
                Request::Gather(bytes) => Reply::Gather(vec![bytes]),
                Request::Stop(_) => Reply::Gather(Vec::new()),
            });
        };
        let others = self.peers as u64 - 1;
        // A sum sends its shards out and the summed shard back: 2·(W−1)/W of the vector.
        let sent = match &request {
            Request::Sum(values) => 2 * others * values.len() as u64 * 4 / self.peers as u64,
            Request::Gather(bytes) => others * bytes.len() as u64,
            Request::Stop(_) => 0,
        };
        let stopped = || "the worker's timely thread has stopped".to_string();
        let replies = link.replies.lock().unwrap_or_else(|p| p.into_inner());
        if link.stopped.load(Ordering::SeqCst) {
            return Err(STOPPED_HERE.into());
        }
        let call = link.calls.fetch_add(1, Ordering::SeqCst);
        link.send(request)?;
        loop {
            // Rounds no call of this worker waits for (the others' last `Stopped`) answer
            // nobody: skip them.
            let (time, reply) = match replies.recv_timeout(Duration::from_millis(100)) {
                Ok(answer) => answer,
                Err(RecvTimeoutError::Timeout) if link.stopped.load(Ordering::SeqCst) => {
                    return Err(STOPPED_HERE.into());
                }
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Err(stopped()),
            };
            if time == call {
                link.bytes_sent.fetch_add(sent, Ordering::Relaxed);
                return reply;
            }
        }
    }
}

/// See [`Collective::stopper`].
pub(crate) struct Stopper(Option<std::sync::Weak<Link>>);

impl Stopper {
    pub(crate) fn stop(&self, why: &str) {
        if let Some(link) = self.0.as_ref().and_then(std::sync::Weak::upgrade) {
            link.stop(why);
        }
    }
}

/// Builds the collective dataflow in `scope`; returns this worker's handle.
pub(crate) fn build(scope: Scope<'_, u64>) -> Collective {
    let (index, peers) = (scope.index(), scope.peers());
    let (requests, incoming) = crossbeam_channel::unbounded::<Request>();
    let (answer, replies) = crossbeam_channel::unbounded();
    let mut wake = None;
    let parts: Stream<'_, u64, Vec<Part>> =
        source::<_, CapacityContainerBuilder<Vec<Part>>, _, _>(scope, "requests", |cap, info| {
            wake = Some(scope.worker().sync_activator_for(info.address.to_vec()));
            let mut cap = Some(cap);
            move |output| {
                while let Some(held) = cap.as_mut() {
                    let request = match incoming.try_recv() {
                        Ok(request) => request,
                        Err(TryRecvError::Empty) => return,
                        Err(TryRecvError::Disconnected) => Request::Stop("it finished".into()),
                    };
                    let mut session = output.session(held);
                    let mut give = |part| session.give(part);
                    let stop = matches!(request, Request::Stop(_));
                    split(request, index, peers, &mut give);
                    drop(session);
                    if stop {
                        cap = None;
                    } else {
                        let next = *held.time() + 1;
                        held.downgrade(&next);
                    }
                }
            }
        });
    let reduced = at_each_time(parts, "reduce", move |_, parts, give| {
        let mut shards: Vec<(u32, Vec<f32>)> = Vec::new();
        for part in parts {
            match part {
                Part::Shard { from, values, .. } => shards.push((from, values)),
                other => give(other),
            }
        }
        if shards.is_empty() {
            return;
        }
        shards.sort_by_key(|(from, _)| *from);
        let mut sum = shards[0].1.clone();
        for (_, values) in &shards[1..] {
            for (s, v) in sum.iter_mut().zip(values) {
                *s += v;
            }
        }
        if shards.len() < peers {
            // A stopped worker's part is missing: its `Stopped` says why, sent on already.
            return;
        }
        for to in 0..peers {
            give(Part::Summed {
                shard: index as u32,
                to: to as u32,
                values: sum.clone(),
            });
        }
    });
    let answer = Mutex::new(answer);
    at_each_time(reduced, "assemble", move |time, parts, _| {
        let reply = assemble(parts, peers);
        let _ = answer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send((time, reply));
    });
    Collective {
        index,
        peers,
        link: Some(Arc::new(Link {
            requests: Some(requests),
            replies: Mutex::new(replies),
            wake: wake.expect("the source's constructor ran"),
            bytes_sent: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        })),
    }
}

/// A request's parts: a sum's shards to their owners, a gather's or a stop's copies to
/// every worker.
fn split(request: Request, index: usize, peers: usize, give: &mut dyn FnMut(Part)) {
    let from = index as u32;
    match request {
        Request::Sum(values) => {
            for shard in 0..peers {
                let range = shard_range(values.len(), shard, peers);
                let values = values[range].to_vec();
                give(Part::Shard {
                    from,
                    shard: shard as u32,
                    values,
                });
            }
        }
        Request::Gather(bytes) => {
            for to in 0..peers as u32 {
                let bytes = bytes.clone();
                give(Part::Bytes { from, to, bytes });
            }
        }
        Request::Stop(why) => {
            for to in 0..peers as u32 {
                let why = why.clone();
                give(Part::Stopped { from, to, why });
            }
        }
    }
}

/// The values of shard `shard` of `peers` in a vector of `n`: contiguous, sizes differing
/// by at most one.
fn shard_range(n: usize, shard: usize, peers: usize) -> std::ops::Range<usize> {
    (n * shard / peers)..(n * (shard + 1) / peers)
}

/// One call's reply from what arrived for it: the summed shards in shard order, or the
/// gathered bytes in worker order; a stopped worker's reason when a part is missing.
fn assemble(parts: Vec<Part>, peers: usize) -> Result<Reply, String> {
    let mut summed = BTreeMap::new();
    let mut gathered = BTreeMap::new();
    let mut stopped = Vec::new();
    for part in parts {
        match part {
            Part::Summed { shard, values, .. } => {
                summed.insert(shard, values);
            }
            Part::Bytes { from, bytes, .. } => {
                gathered.insert(from, bytes);
            }
            Part::Stopped { from, why, .. } => {
                stopped.push(format!("worker {from} stopped ({why})"))
            }
            Part::Shard { .. } => {}
        }
    }
    if !stopped.is_empty() && (summed.len() < peers && gathered.len() < peers) {
        return Err(format!("{PEER_STOPPED}{}", stopped.join("; ")));
    }
    if summed.len() == peers {
        return Ok(Reply::Sum(summed.into_values().flatten().collect()));
    }
    if gathered.len() == peers {
        return Ok(Reply::Gather(gathered.into_values().collect()));
    }
    Err(format!(
        "a collective call got {} of {peers} workers' parts",
        summed.len().max(gathered.len())
    ))
}

/// An operator that routes each part to its worker and, once the frontier has passed a
/// time, calls `logic` with everything that arrived for it (and a way to send parts on).
fn at_each_time<'s>(
    parts: Stream<'s, u64, Vec<Part>>,
    name: &str,
    mut logic: impl FnMut(u64, Vec<Part>, &mut dyn FnMut(Part)) + 'static,
) -> Stream<'s, u64, Vec<Part>> {
    let pact = Exchange::new(|part: &Part| part.route());
    parts.unary_frontier(pact, name, move |_cap, _info| {
        let mut stash: BTreeMap<u64, (Capability<u64>, Vec<Part>)> = BTreeMap::new();
        move |(input, frontier), output| {
            input.for_each_stamp(|cap, data| {
                let Some(cap) = cap.retain_least(output.output_index()) else {
                    return;
                };
                let entry = stash
                    .entry(*cap.time())
                    .or_insert_with(|| (cap, Vec::new()));
                entry.1.extend(data.flat_map(std::mem::take));
            });
            while let Some((&time, _)) = stash.first_key_value() {
                if frontier.less_equal(&time) {
                    break;
                }
                let (cap, arrived) = stash.remove(&time).expect("present");
                let mut session = output.session(&cap);
                logic(time, arrived, &mut |part| session.give(part));
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_the_vector_in_order() {
        let ranges: Vec<_> = (0..3).map(|s| shard_range(10, s, 3)).collect();
        assert_eq!(ranges, vec![0..3, 3..6, 6..10]);
        assert_eq!(shard_range(1, 0, 2), 0..0);
        assert_eq!(shard_range(1, 1, 2), 0..1);
    }

    #[test]
    fn one_worker_calls_are_the_identity() {
        let c = Collective::single();
        assert_eq!(c.sum(vec![1.0, 2.5]).unwrap(), vec![1.0, 2.5]);
        assert_eq!(
            c.gather(&(3u8, "a".to_string())).unwrap(),
            vec![(3u8, "a".to_string())]
        );
        assert_eq!(c.bytes_sent(), 0);
    }
}
