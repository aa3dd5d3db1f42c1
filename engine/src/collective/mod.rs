//! Collective operations between a run's workers, over timely's exchange channels: the
//! gradient all-reduce of data-parallel training and the all-gathers around it.
//!
//! An operator runs on its worker's compute thread (the executor's) and calls a
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
//! forever; one that hangs without a word is noticed by its missing heartbeats
//! (`heartbeat`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use serde::de::DeserializeOwned;
use serde::Serialize;
use timely::scheduling::SyncActivator;

/// What a call answers when the worker's timely thread is gone.
const THREAD_STOPPED: &str = "the worker's timely thread has stopped";

/// What a call on a worker that stopped (its run failed) answers.
const STOPPED_HERE: &str = "this worker stopped after a failure";

/// The start of the error a worker gets when another stopped first: the other's own
/// error is the one to report.
pub const PEER_STOPPED: &str = "another worker stopped: ";

/// A worker's handle on the collective operations (cheap to clone; one call at a time).
#[derive(Clone)]
pub struct Collective {
    pub(crate) index: usize,
    pub(crate) peers: usize,
    pub(crate) link: Option<Arc<Link>>,
}

impl std::fmt::Debug for Collective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Collective(worker {} of {})", self.index, self.peers)
    }
}

pub(crate) struct Link {
    /// `None` only while the link is dropped.
    pub(crate) requests: Option<Sender<Request>>,
    pub(crate) replies: Mutex<Receiver<(u64, Result<Reply, String>)>>,
    /// Calls made so far: the time of the next one.
    pub(crate) calls: AtomicU64,
    /// This worker stopped: a later call fails at once.
    pub(crate) stopped: AtomicBool,
    pub(crate) wake: SyncActivator,
    pub(crate) bytes_sent: AtomicU64,
    /// The other workers' beats: a call stops waiting for one gone silent.
    pub(crate) heartbeats: Arc<Heartbeats>,
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
        let requests = (self.requests.as_ref()).ok_or_else(|| THREAD_STOPPED.to_string())?;
        requests
            .send(request)
            .map_err(|_| THREAD_STOPPED.to_string())?;
        self.wake.activate().map_err(|_| THREAD_STOPPED.to_string())
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // Closed first, then woken: the source must find the channel closed when it runs,
        // to release its capability.
        drop(self.requests.take());
        let _ = self.wake.activate();
        self.heartbeats.finish();
    }
}

pub(crate) enum Request {
    Sum(Vec<f32>),
    Gather(Vec<u8>),
    Stop(String),
}

pub(crate) enum Reply {
    Sum(Vec<f32>),
    Gather(Vec<Vec<u8>>),
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
                Err(RecvTimeoutError::Timeout) => match link.heartbeats.silent() {
                    Some(why) => return Err(why),
                    None => continue,
                },
                Err(RecvTimeoutError::Disconnected) => return Err(THREAD_STOPPED.into()),
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

pub(crate) mod dataflow;
pub(crate) mod heartbeat;

pub(crate) use heartbeat::Heartbeats;

#[cfg(test)]
mod tests {
    use super::*;

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
