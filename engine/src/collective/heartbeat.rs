//! Heartbeats between a run's workers, so that a process that hangs (stopped, frozen,
//! swapped out, cut off without its connections closing) is noticed: timely alone would
//! wait for it forever, since its connections stay open.
//!
//! Each worker's timely thread sends a beat to every other worker once a [`BEAT_EVERY`],
//! and notes when it last heard from each. The timely thread does no computing of its own
//! (operators run on the compute thread, `crate::executor`), so it beats while its worker
//! loads a model or trains a long micro-batch: a slow worker is not a silent one. A worker
//! whose operators are gone sends a last beat that says so; it is not waited for after that.
//!
//! A worker silent for longer than the run's peer timeout is named by
//! [`Heartbeats::silent`], which the collective calls and the worker's timely loop check.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::source;
use timely::dataflow::operators::Operator;
use timely::dataflow::{Scope, Stream};
use timely::scheduling::SyncActivator;

/// How often a worker's timely thread sends its beat.
pub const BEAT_EVERY: Duration = Duration::from_secs(1);

/// What `heard` holds for a worker that said it has finished.
const FINISHED: u64 = u64::MAX;

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Beat {
    from: u32,
    to: u32,
    /// The sender's operators are gone: it makes no further collective call.
    last: bool,
}

/// What one worker knows of the others' beats.
pub(crate) struct Heartbeats {
    index: usize,
    workers_per_process: usize,
    timeout: Duration,
    epoch: Instant,
    /// Per worker: milliseconds from `epoch` to its last beat (the start counts as one),
    /// or `FINISHED`.
    heard: Vec<AtomicU64>,
    /// This worker's operators are gone: its next beat is its last.
    finishing: AtomicBool,
    /// Milliseconds from `epoch` to this worker's timely thread's latest step: what it
    /// has heard is only as recent as that.
    stepped: AtomicU64,
    wake: Mutex<Option<SyncActivator>>,
}

impl Heartbeats {
    /// The first other worker not heard from for longer than the timeout, and what to say
    /// of it; `None` while every worker beats.
    pub(crate) fn silent(&self) -> Option<String> {
        let now = self.now();
        let limit = self.timeout.as_millis() as u64;
        // After a pause of this worker's own (the process was stopped, the machine
        // swapped), the beats that came meanwhile are not read yet: no verdict until its
        // timely thread has caught up.
        let stepped = self.stepped.load(Ordering::SeqCst);
        if now.saturating_sub(stepped) > 2 * BEAT_EVERY.as_millis() as u64 {
            return None;
        }
        let (worker, last) = (self.heard.iter().enumerate())
            .filter(|&(w, _)| w != self.index)
            .map(|(w, heard)| (w, heard.load(Ordering::SeqCst)))
            .find(|&(_, last)| last != FINISHED && now.saturating_sub(last) > limit)?;
        Some(format!(
            "worker {worker} (process {}) has not been heard from for {:.0} s (the peer \
             timeout is {:.0} s): its process hangs (stopped, frozen or swapped out) or its \
             machine cannot be reached",
            worker / self.workers_per_process,
            now.saturating_sub(last) as f64 / 1000.0,
            self.timeout.as_secs_f64()
        ))
    }

    /// Milliseconds from `epoch` to now.
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The worker's timely thread has just stepped (read what came in).
    pub(crate) fn stepped(&self) {
        let now = self.now();
        self.stepped.store(now, Ordering::SeqCst);
    }

    /// This worker's operators are gone: its next beat, sent at once, is its last.
    pub(crate) fn finish(&self) {
        self.finishing.store(true, Ordering::SeqCst);
        let wake = self.wake.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(wake) = wake.as_ref() {
            let _ = wake.activate();
        }
    }
}

/// Builds the heartbeat operators in `scope`: a source that beats and a sink that notes.
pub(crate) fn build(
    scope: Scope<'_, u64>,
    workers_per_process: usize,
    timeout: Duration,
) -> Arc<Heartbeats> {
    let (index, peers) = (scope.index(), scope.peers());
    let beats = Arc::new(Heartbeats {
        index,
        workers_per_process: workers_per_process.max(1),
        timeout,
        epoch: Instant::now(),
        heard: (0..peers).map(|_| AtomicU64::new(0)).collect(),
        finishing: AtomicBool::new(false),
        stepped: AtomicU64::new(0),
        wake: Mutex::new(None),
    });
    let sender = beats.clone();
    let sent: Stream<'_, u64, Vec<Beat>> =
        source::<_, CapacityContainerBuilder<Vec<Beat>>, _, _>(scope, "beat", |cap, info| {
            let again = scope.activator_for(info.address.clone());
            *sender.wake.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(scope.worker().sync_activator_for(info.address.to_vec()));
            let mut cap = Some(cap);
            let mut due = Instant::now();
            move |output| {
                let Some(held) = cap.as_mut() else { return };
                let last = sender.finishing.load(Ordering::SeqCst);
                let now = Instant::now();
                if !last && now < due {
                    again.activate_after(due - now);
                    return;
                }
                let mut session = output.session(held);
                for to in (0..peers as u32).filter(|&to| to as usize != index) {
                    let from = index as u32;
                    session.give(Beat { from, to, last });
                }
                drop(session);
                if last {
                    cap = None;
                } else {
                    let next = *held.time() + 1;
                    held.downgrade(&next);
                    due = Instant::now() + BEAT_EVERY;
                    again.activate_after(BEAT_EVERY);
                }
            }
        });
    let noted = beats.clone();
    let pact = Exchange::new(|beat: &Beat| u64::from(beat.to));
    sent.sink(pact, "heard", move |(input, _)| {
        input.for_each(|_, beats| {
            for beat in beats.drain(..) {
                let at = if beat.last { FINISHED } else { noted.now() };
                noted.heard[beat.from as usize].store(at, Ordering::SeqCst);
            }
        });
    });
    beats
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beats(heard: &[u64], timeout_ms: u64) -> Heartbeats {
        Heartbeats {
            index: 0,
            workers_per_process: 2,
            timeout: Duration::from_millis(timeout_ms),
            epoch: Instant::now() - Duration::from_millis(10_000),
            heard: heard.iter().map(|&h| AtomicU64::new(h)).collect(),
            finishing: AtomicBool::new(false),
            stepped: AtomicU64::new(10_000),
            wake: Mutex::new(None),
        }
    }

    #[test]
    fn a_worker_silent_past_the_timeout_is_named_with_its_process() {
        // 10 s since the epoch; worker 1 heard 1 s ago, worker 2 at 4 s (6 s ago), 3 finished.
        let b = beats(&[0, 9_000, 4_000, FINISHED], 5_000);
        let why = b.silent().expect("worker 2 is silent");
        assert!(why.starts_with("worker 2 (process 1) has not been heard from for 6 s"));
        // Itself (worker 0, never heard) and a finished worker are never silent.
        let b = beats(&[0, 9_000, 9_500, FINISHED], 5_000);
        assert_eq!(b.silent(), None);
        // A worker whose own thread has not stepped for 3 s judges no one.
        let b = beats(&[0, 9_000, 4_000, FINISHED], 5_000);
        b.stepped.store(7_000, Ordering::SeqCst);
        assert_eq!(b.silent(), None);
    }
}
