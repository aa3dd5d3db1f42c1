//! The env pool: a bounded number of threads play every env of a step. An env's work
//! between two replies (reset, prompt, parse, step) is a task; each finished reply makes
//! its env's next task, so `env_threads` threads serve any number of envs (the Qwen2.5 file
//! plays 1,024 at once), where a thread per env put 83 threads in the run queue of a 2-core
//! machine.
//!
//! The pool changes no number: the inference loop admits requests in env order after
//! waiting for exactly the envs it answered ([`super::inference`]), so which thread played
//! a task, and when, is never seen.

use std::panic::AssertUnwindSafe;
use std::sync::{Mutex, PoisonError};

use crossbeam_channel::{Receiver, Sender};
use roll_flow_model::generate::GenerationOutput;

use super::early_cut::EarlyCut;
use super::episode::{EnvMessage, Episode, EpisodeJob, INFERENCE_STOPPED};
use super::episode_run::{EpisodeOutcome, EpisodeRun, Stop, Unfinished};

/// A task: the env (its index in the pool) and the reply it waited for (`None`: start).
pub(super) type EnvTask = (usize, Option<GenerationOutput>);

/// How an env enters the step: a fresh episode, or one a partial rollout carried over
/// from the last step ([`super::early_cut`]), between two turns or already finished.
pub(super) enum Start {
    Fresh(EpisodeJob),
    Resumed(Box<EpisodeRun>),
    Finished(Box<Episode>),
}

/// Where one env is.
enum Slot {
    /// Not reset yet.
    Ready(EpisodeJob),
    /// Carried over between two turns: its next request comes first.
    Resumed(Box<EpisodeRun>),
    /// Carried over finished (its group was not): it has nothing to ask.
    Finished {
        index: usize,
        episode: Box<Episode>,
    },
    /// Waiting for the reply to its request.
    Asked(Box<EpisodeRun>),
    Done(Result<EpisodeOutcome, String>),
    /// A thread is playing it.
    Playing,
}

/// Every env of a step, each known to the inference loop that serves it.
pub(super) struct EnvPool<'a> {
    slots: Vec<Mutex<Slot>>,
    /// Each env's inference loop (the loop's requests channel).
    loop_of: Vec<usize>,
    calls: Vec<Sender<EnvMessage>>,
    /// A partial rollout's cut, which drops the envs of a tag that has its groups.
    cut: Option<&'a EarlyCut>,
}

impl<'a> EnvPool<'a> {
    /// `envs` (in slot order) with the inference loop of each (an index into `calls`) and
    /// their index within it.
    pub(super) fn new(
        envs: Vec<(usize, usize, Start)>,
        calls: Vec<Sender<EnvMessage>>,
        cut: Option<&'a EarlyCut>,
    ) -> Self {
        let (loop_of, slots) = envs
            .into_iter()
            .map(|(l, index, start)| {
                let slot = match start {
                    Start::Fresh(mut job) => {
                        job.index = index;
                        Slot::Ready(job)
                    }
                    Start::Resumed(mut run) => {
                        run.set_index(index);
                        Slot::Resumed(run)
                    }
                    Start::Finished(episode) => Slot::Finished { index, episode },
                };
                (l, Mutex::new(slot))
            })
            .unzip();
        EnvPool {
            slots,
            loop_of,
            calls,
            cut,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Plays tasks until the task channel closes.
    pub(super) fn work(&self, tasks: &Receiver<EnvTask>) {
        for (env, reply) in tasks.iter() {
            let mut slot = self.slots[env]
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let state = std::mem::replace(&mut *slot, Slot::Playing);
            let local = match &state {
                Slot::Ready(job) => job.index,
                Slot::Resumed(run) | Slot::Asked(run) => run.index(),
                Slot::Finished { index, .. } => *index,
                _ => unreachable!("a task for an env that asked for nothing"),
            };
            let cut = self.cut.is_some_and(|cut| cut.is_cut(env));
            let (next, message) =
                std::panic::catch_unwind(AssertUnwindSafe(|| advance(state, reply, cut)))
                    .unwrap_or_else(|payload| {
                        (Slot::Done(Err(panicked("an env loop", payload))), None)
                    });
            let continues_chat = matches!(&next, Slot::Asked(run) if run.continues_chat());
            if let (Slot::Done(outcome), Some(cut)) = (&next, self.cut) {
                match outcome {
                    Ok(EpisodeOutcome::Unfinished(_)) => {}
                    Ok(EpisodeOutcome::Played(_)) => cut.env_finished(env, false),
                    Ok(EpisodeOutcome::Lost { .. }) | Err(_) => cut.env_finished(env, true),
                }
            }
            *slot = next;
            drop(slot);
            // A loop that stopped has its own error, which the step reports.
            let _ = self.calls[self.loop_of[env]].send(EnvMessage {
                env: local,
                request: message,
                continues_chat,
            });
        }
    }

    /// Every env's outcome in pool order, with the loop that served it; an env left
    /// waiting lost its inference loop.
    pub(super) fn outcomes(self) -> Vec<(usize, Result<EpisodeOutcome, String>)> {
        self.slots
            .into_iter()
            .zip(self.loop_of)
            .map(|(slot, l)| {
                let outcome = match slot.into_inner().unwrap_or_else(PoisonError::into_inner) {
                    Slot::Done(outcome) => outcome,
                    _ => Err(INFERENCE_STOPPED.to_string()),
                };
                (l, outcome)
            })
            .collect()
    }
}

/// Plays an env from its last reply (or its start) to its next request or its end. In a
/// tag a partial rollout `cut`, the reply it waited for is still played (its turn was
/// generated already), then the episode stops where it stands, unfinished.
fn advance(
    state: Slot,
    reply: Option<GenerationOutput>,
    cut: bool,
) -> (Slot, Option<roll_flow_model::generate::GenerationRequest>) {
    let unfinished = |u| (Slot::Done(Ok(EpisodeOutcome::Unfinished(u))), None);
    let (slot, run) = match (state, reply) {
        (Slot::Ready(job), None) if cut => return unfinished(Unfinished::Unstarted(job)),
        (Slot::Ready(job), None) => (job.slot.clone(), EpisodeRun::start(job).map(Box::new)),
        (Slot::Resumed(run), None) => (run.slot().clone(), Ok(run)),
        (Slot::Finished { episode, .. }, None) => {
            return (Slot::Done(Ok(EpisodeOutcome::Played(episode))), None)
        }
        (Slot::Asked(mut run), Some(output)) => {
            let slot = run.slot().clone();
            match run.take_reply(output) {
                Ok(true) => (slot, Ok(run)),
                Ok(false) => return (played(run), None),
                Err(stop) => (slot, Err(stop)),
            }
        }
        _ => unreachable!("a reply for an env that asked for nothing, or none for one that did"),
    };
    let stopped = |stop: Stop| (Slot::Done(stop.outcome(slot.clone())), None);
    match run {
        Ok(run) if cut => unfinished(Unfinished::Running(run)),
        Ok(mut run) => match run.next_request() {
            Ok(Some(request)) => (Slot::Asked(run), Some(request)),
            Ok(None) => (played(run), None),
            Err(stop) => stopped(stop),
        },
        Err(stop) => stopped(stop),
    }
}

fn played(run: Box<EpisodeRun>) -> Slot {
    Slot::Done(Ok(EpisodeOutcome::Played(Box::new(run.finish()))))
}

/// A thread's panic as an error: `who` and the panic's message.
pub(super) fn panicked(who: &str, payload: Box<dyn std::any::Any + Send>) -> String {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into());
    format!("{who} panicked: {message}")
}
