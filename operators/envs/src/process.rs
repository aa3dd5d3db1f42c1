//! `env: Process(command: ["python3", "my_env.py"])`: an env served by processes
//! roll-flow starts itself and talks to over stdin/stdout in the env-server protocol
//! ([`crate::protocol`], `docs/ENV_PROTOCOL.md`). One process serves many env instances;
//! `processes: N` starts N of them and spreads the instances over them.
//!
//! A call that fails (the server crashed, hung past `timeout_s`, or wrote a reply that is
//! not JSON, is over `max_line_bytes`, lacks a field, or has a reward that is not a finite
//! number) is an [`EnvError::ServerFault`]: the rollout drops that episode's group and
//! counts it, and the process is restarted on the next call. After `max_failures` failed
//! calls in a row (a crash counts once however many calls it fails) it is an
//! [`EnvError::ServerGaveUp`], which stops the run.

mod config;
mod connection;
mod pool;
mod spawn;

use std::sync::Arc;

use serde_json::json;

use crate::env::{Env, Reset, StepResult};
use crate::error::EnvError;
use crate::protocol;
use crate::render::frame::Frame;
use crate::served_episode::{no_frames, ServedEpisode};
pub use config::ProcessEnvConfig;
use pool::{request, ServerPool};

impl ProcessEnvConfig {
    /// Starts (or joins) the entry's servers and makes a new instance.
    pub fn build(&self) -> Result<ProcessEnv, EnvError> {
        self.validate()?;
        let pool = ServerPool::get(self)?;
        Ok(ProcessEnv {
            instance: pool.acquire(),
            pool,
            episode: ServedEpisode::default(),
        })
    }
}

/// One env instance on a server.
pub struct ProcessEnv {
    pool: Arc<ServerPool>,
    instance: u64,
    episode: ServedEpisode,
}

impl Env for ProcessEnv {
    fn name(&self) -> &'static str {
        self.pool.name()
    }

    fn reset(&mut self, seed: u64) -> Result<Reset, EnvError> {
        let mut call = request("reset", self.instance);
        call.insert("seed".into(), seed.into());
        let instance = self.instance;
        let what = || format!("reset of instance {instance} (seed {seed})");
        let reply = self.pool.call(instance, call, what, protocol::reset_reply);
        let reset = self.episode.reset(reply)?;
        self.pool.trace(|| {
            json!({"instance": instance, "op": "reset", "request": seed,
                   "reply": {"obs": reset.observation, "instruction": reset.instruction}})
        });
        Ok(reset)
    }

    fn step(&mut self, action_text: &str) -> Result<StepResult, EnvError> {
        self.episode.check_step(self.name())?;
        let mut call = request("step", self.instance);
        call.insert("action".into(), action_text.into());
        let instance = self.instance;
        let what = || format!("step of instance {instance}");
        let reply = self.pool.call(instance, call, what, protocol::step_reply);
        let result = self.episode.step(reply)?;
        self.pool.trace(|| {
            json!({"instance": instance, "op": "step", "request": action_text,
                   "reply": result})
        });
        Ok(result)
    }

    fn observation(&self) -> String {
        self.episode.observation()
    }

    fn render_frame(&self) -> Result<Frame, EnvError> {
        Err(no_frames("Process", self.name()))
    }

    fn renders_frames(&self) -> bool {
        false
    }

    fn default_max_turns(&self) -> usize {
        self.pool.hello().max_turns.unwrap_or(DEFAULT_MAX_TURNS)
    }

    fn action_names(&self) -> Vec<String> {
        self.pool.hello().actions.clone()
    }

    fn valid_actions(&self) -> Vec<String> {
        self.episode.valid_actions(|| self.action_names())
    }
}

/// The turn limit of a server that names none in its handshake (and an `envs:` entry
/// that sets no `max_turns`).
pub const DEFAULT_MAX_TURNS: usize = 100;

impl Drop for ProcessEnv {
    fn drop(&mut self) {
        self.pool.release(self.instance, self.episode.was_reset());
    }
}
