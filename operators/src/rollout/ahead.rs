//! [`AheadRollout`]: a rollout that plays up to N steps ahead of training, on its own
//! thread with its own inference weights (ROLL's `async_generation_ratio`, AReaL's
//! `max_head_offpolicyness`), so the rollout of step t + 1 runs while step t trains.
//!
//! The rollout of step t plays with the weights step max(0, t − N) started from
//! ([`WeightVersions`]): the trainer publishes each step's starting weights when the step
//! starts, and the thread waits for exactly the step it needs. Everything else a rollout
//! depends on is a function of the step (the env groups' seeds, the sampling seed
//! `step_seed(pipeline seed, node, step)`), so the samples of step t are the same
//! in every run with the same seed and N, however the two threads interleave.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use roll_flow_engine::executor::step_seed;
use roll_flow_engine::{trace, Batch};
use roll_flow_envs::manager::{EnvManager, Shard};
use roll_flow_model::TextTokenizer;

use super::early_cut::CarriedGroup;
use super::env_player::{step_slots, Played};
use super::play::{play_episodes, StepKeys};
use super::samples;
use crate::play_settings::PlaySettings;
use crate::runtime::backend::RunBackend;
use crate::runtime::resources::Guides;
use crate::runtime::weight_versions::{StepWeights, WeightVersions};

/// What the thread needs to play any step on its own.
pub struct AheadSetup {
    pub node: String,
    pub pipeline_seed: u64,
    pub worker: usize,
    pub workers: usize,
    pub tags: Vec<String>,
    pub manager: EnvManager,
    pub settings: PlaySettings,
    pub tokenizer: Arc<TextTokenizer>,
    pub guides: Guides,
    /// The first step this run plays and the number of steps of the run.
    pub first: u64,
    pub steps: u64,
    /// N: how many steps the weights may lag.
    pub staleness: u64,
}

/// One step played ahead.
pub struct AheadStep {
    pub step: u64,
    /// The step whose starting weights played (max(0, step − N)) and their version.
    pub played_with: u64,
    pub version: u64,
    /// The episodes and the step's batch (with its `policy_lag` column).
    pub result: Result<(Played, Batch), String>,
    /// Seconds the thread played, and seconds it waited for the weights beforehand.
    pub play_seconds: f64,
    pub idle_seconds: f64,
}

/// The rollout thread and its two ends; see the module doc.
pub struct AheadRollout<B: RunBackend> {
    weights: Arc<WeightVersions<B>>,
    played: Receiver<AheadStep>,
    thread: Option<JoinHandle<()>>,
    staleness: u64,
}

impl<B: RunBackend> AheadRollout<B> {
    /// Starts the thread; it plays step `setup.first` once that step's weights (or those
    /// of the step N before) are published.
    pub fn start(setup: AheadSetup, weights: Arc<WeightVersions<B>>) -> Result<Self, String> {
        let (send, played) = channel();
        let staleness = setup.staleness;
        let store = weights.clone();
        let thread = std::thread::Builder::new()
            .name(format!("{}-ahead", setup.node))
            .spawn(move || play_ahead(setup, &store, send))
            .map_err(|e| format!("cannot start the rollout thread: {e}"))?;
        Ok(AheadRollout {
            weights,
            played,
            thread: Some(thread),
            staleness,
        })
    }

    /// Publishes the weights step `step` starts from and takes that step's rollout,
    /// waiting for it if the thread is still playing; also the seconds waited.
    pub fn take(
        &mut self,
        step: u64,
        starting: StepWeights<B>,
    ) -> Result<(AheadStep, f64), String> {
        self.weights.publish(step, starting);
        let waited = Instant::now();
        let played = self.played.recv().map_err(|_| {
            "the asynchronous rollout thread stopped before this step's rollout (it panicked; \
             the message is above)"
                .to_string()
        })?;
        if played.step != step {
            return Err(format!(
                "the asynchronous rollout gave step {} when step {step} was due",
                played.step
            ));
        }
        // The rollouts still to come play with the weights of step + 1 − N on.
        self.weights
            .drop_before((step + 1).saturating_sub(self.staleness));
        Ok((played, waited.elapsed().as_secs_f64()))
    }
}

impl<B: RunBackend> Drop for AheadRollout<B> {
    /// Stops the thread: no more weights come, and a step it is playing finishes first.
    fn drop(&mut self) {
        self.weights.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread's loop: each step from `first`, wait for its weights, play, send.
fn play_ahead<B: RunBackend>(
    setup: AheadSetup,
    weights: &WeightVersions<B>,
    send: Sender<AheadStep>,
) {
    let track = format!("{} (ahead)", setup.node);
    // The groups a partial rollout's last step did not keep.
    let mut carried = Vec::new();
    for step in setup.first..setup.steps {
        let played_with = step.saturating_sub(setup.staleness);
        let idle = Instant::now();
        let Some(starting) = weights.wait(played_with) else {
            return;
        };
        let idle_seconds = idle.elapsed().as_secs_f64();
        trace::span(&track, "wait for weights", step, idle);
        let playing = Instant::now();
        let result = play_step(&setup, step, played_with, &starting, &mut carried);
        trace::span(&track, "play", step, playing);
        let played = AheadStep {
            step,
            played_with,
            version: starting.version,
            result,
            play_seconds: playing.elapsed().as_secs_f64(),
            idle_seconds,
        };
        if send.send(played).is_err() {
            return; // the node is gone
        }
    }
}

/// Plays step `step` with `starting`'s weights (and the groups `carried` from the last
/// step, replaced by this step's) and builds its batch.
fn play_step<B: RunBackend>(
    setup: &AheadSetup,
    step: u64,
    played_with: u64,
    starting: &StepWeights<B>,
    carried: &mut Vec<CarriedGroup>,
) -> Result<(Played, Batch), String> {
    let seed = step_seed(setup.pipeline_seed, &setup.node, step);
    let shard = Shard {
        worker: setup.worker,
        workers: setup.workers,
    };
    let slots = step_slots(
        &setup.manager,
        &setup.tags,
        step,
        shard,
        &setup.settings,
        carried,
    )?;
    let played = play_episodes(
        &*starting.model,
        &setup.tokenizer,
        &setup.settings,
        &setup.manager,
        (slots, std::mem::take(carried)),
        &setup.guides,
        StepKeys {
            seed,
            version: starting.version,
            shard,
        },
    )?;
    let group_size = |tag: &str| setup.manager.group_size(tag).unwrap_or(1);
    let version = starting.version;
    let played = Played::new(played, version, carried);
    let mut batch = samples::batch(
        &setup.settings.samples,
        &played.episodes,
        group_size,
        version,
    )
    .map_err(|e| e.to_string())?;
    samples::set_policy_lag(&mut batch, step - played_with, version).map_err(|e| e.to_string())?;
    Ok((played, batch))
}
