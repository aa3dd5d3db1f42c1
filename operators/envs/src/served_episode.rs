//! [`ServedEpisode`]: what an env played through a server (`Process`, `Remote`) knows of
//! its current episode from the replies, and the rules both keep: no step before a reset,
//! none after the end, and a failed call (reset or step) leaves the episode unplayable
//! until the next reset.

use crate::env::{Reset, StepResult};
use crate::error::EnvError;
use crate::protocol::{ResetReply, StepReply};

#[derive(Default)]
pub(crate) struct ServedEpisode {
    observation: String,
    /// The state's actions, when the server lists them.
    valid_actions: Option<Vec<String>>,
    was_reset: bool,
    over: bool,
}

impl ServedEpisode {
    /// Records a reset's outcome; until it succeeds the episode cannot be stepped.
    pub fn reset(&mut self, reply: Result<ResetReply, EnvError>) -> Result<Reset, EnvError> {
        self.was_reset = true;
        self.over = true;
        let reply = reply?;
        self.observation = reply.reset.observation.clone();
        self.valid_actions = reply.valid_actions;
        self.over = false;
        Ok(reply.reset)
    }

    /// Refuses a step before the first reset or after the episode ended.
    pub fn check_step(&self, env: &'static str) -> Result<(), EnvError> {
        if !self.was_reset {
            return Err(EnvError::NotReset(env));
        }
        if self.over {
            return Err(EnvError::EpisodeOver(env));
        }
        Ok(())
    }

    /// Records a step's outcome.
    pub fn step(&mut self, reply: Result<StepReply, EnvError>) -> Result<StepResult, EnvError> {
        // A failed step leaves the episode unplayable until the next reset.
        self.over = !reply.as_ref().is_ok_and(|r| !r.result.done());
        let reply = reply?;
        self.observation = reply.result.observation.clone();
        self.valid_actions = reply.valid_actions;
        Ok(reply.result)
    }

    pub fn was_reset(&self) -> bool {
        self.was_reset
    }

    pub fn observation(&self) -> String {
        self.observation.clone()
    }

    /// The state's actions, or the env's fixed ones when the server lists none.
    pub fn valid_actions(&self, fixed: impl FnOnce() -> Vec<String>) -> Vec<String> {
        self.valid_actions.clone().unwrap_or_else(fixed)
    }
}

/// A served env's answer to a frame request: its observations are text only.
pub(crate) fn no_frames(kind: &str, env: &str) -> EnvError {
    EnvError::Render(format!(
        "a {kind} env ({env}) has text observations only; record without frames"
    ))
}
