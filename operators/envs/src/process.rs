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

mod connection;
mod pool;
mod spawn;

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::env::{Env, Reset, StepResult};
use crate::error::EnvError;
use crate::protocol;
use crate::render::frame::Frame;
use pool::ServerPool;

/// The `Process(...)` settings of an `envs:` entry.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProcessEnvConfig {
    /// The server's program and arguments: `["python3", "-m", "roll_flow_env.gem",
    /// "game:GuessTheNumber-v0-easy"]`.
    pub command: Vec<String>,
    /// Server processes for the entry; instance `i` is served by process `i mod
    /// processes`. Default 1.
    pub processes: usize,
    /// Seconds to wait for one reply before the call fails and the process is restarted.
    /// Default 60.
    pub timeout_s: f64,
    /// Failed calls in a row after which the run stops. Default 3.
    pub max_failures: usize,
    /// The longest reply line accepted, in bytes. Default 16 MiB.
    pub max_line_bytes: usize,
    /// A file to append every call to, as roll-flow understood it: one JSON line
    /// `{"instance", "request", "reply"}` per reset or step (the reply in `roll-flow
    /// play`'s shape), for debugging a server or replaying its episodes. Default none.
    pub trace: Option<String>,
}

impl Default for ProcessEnvConfig {
    fn default() -> Self {
        ProcessEnvConfig {
            command: Vec::new(),
            processes: 1,
            timeout_s: 60.0,
            max_failures: 3,
            max_line_bytes: 16 << 20,
            trace: None,
        }
    }
}

fn invalid(field: &'static str, reason: &str) -> EnvError {
    EnvError::InvalidConfig {
        env: "Process",
        field,
        reason: reason.to_string(),
    }
}

impl ProcessEnvConfig {
    /// Checks the settings without starting anything.
    pub fn validate(&self) -> Result<(), EnvError> {
        if self.command.first().is_none_or(|p| p.trim().is_empty()) {
            return Err(invalid(
                "command",
                "give the server's program and arguments, e.g. `command: [\"python3\", \"my_env.py\"]`",
            ));
        }
        if self.processes == 0 {
            return Err(invalid("processes", "must be ≥ 1"));
        }
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0) {
            return Err(invalid("timeout_s", "must be a positive number of seconds"));
        }
        if self.max_failures == 0 {
            return Err(invalid("max_failures", "must be ≥ 1"));
        }
        if self.max_line_bytes < 1024 {
            return Err(invalid("max_line_bytes", "must be ≥ 1024"));
        }
        Ok(())
    }

    /// Starts (or joins) the entry's servers and makes a new instance.
    pub fn build(&self) -> Result<ProcessEnv, EnvError> {
        self.validate()?;
        let pool = ServerPool::get(self)?;
        Ok(ProcessEnv {
            instance: pool.acquire(),
            pool,
            observation: String::new(),
            valid_actions: None,
            was_reset: false,
            over: false,
        })
    }

    fn shown(&self) -> String {
        self.command.join(" ")
    }

    fn fault(&self, reason: String) -> EnvError {
        EnvError::ServerFault {
            command: self.shown(),
            reason,
        }
    }

    fn gave_up(&self, failures: usize, reason: String) -> EnvError {
        EnvError::ServerGaveUp {
            command: self.shown(),
            failures,
            reason,
        }
    }
}

/// One env instance on a server.
pub struct ProcessEnv {
    pool: Arc<ServerPool>,
    instance: u64,
    observation: String,
    /// The state's actions, when the server lists them.
    valid_actions: Option<Vec<String>>,
    was_reset: bool,
    over: bool,
}

fn request(op: &str, instance: u64) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("op".into(), op.into());
    map.insert("instance".into(), instance.into());
    map
}

impl Env for ProcessEnv {
    fn name(&self) -> &'static str {
        self.pool.name()
    }

    fn reset(&mut self, seed: u64) -> Result<Reset, EnvError> {
        let mut call = request("reset", self.instance);
        call.insert("seed".into(), seed.into());
        self.was_reset = true;
        let what = format!("reset of instance {} (seed {seed})", self.instance);
        let reply = self
            .pool
            .call(self.instance, call, &what, protocol::reset_reply)?;
        self.pool.trace(
            self.instance,
            "reset",
            &Value::from(seed),
            &serde_json::json!({"obs": reply.reset.observation, "instruction": reply.reset.instruction}),
        );
        self.observation = reply.reset.observation.clone();
        self.valid_actions = reply.valid_actions;
        self.over = false;
        Ok(reply.reset)
    }

    fn step(&mut self, action_text: &str) -> Result<StepResult, EnvError> {
        if !self.was_reset {
            return Err(EnvError::NotReset(self.name()));
        }
        if self.over {
            return Err(EnvError::EpisodeOver(self.name()));
        }
        let mut call = request("step", self.instance);
        call.insert("action".into(), action_text.into());
        let what = format!("step of instance {}", self.instance);
        let reply = self
            .pool
            .call(self.instance, call, &what, protocol::step_reply);
        // A failed step leaves the episode unplayable until the next reset.
        self.over = !reply.as_ref().is_ok_and(|r| !r.result.done());
        let reply = reply?;
        self.pool.trace(
            self.instance,
            "step",
            &Value::from(action_text),
            &serde_json::to_value(&reply.result).unwrap_or_default(),
        );
        self.observation = reply.result.observation.clone();
        self.valid_actions = reply.valid_actions;
        Ok(reply.result)
    }

    fn observation(&self) -> String {
        self.observation.clone()
    }

    fn render_frame(&self) -> Result<Frame, EnvError> {
        Err(EnvError::Render(format!(
            "a Process env ({}) has text observations only; record without frames",
            self.name()
        )))
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
        self.valid_actions
            .clone()
            .unwrap_or_else(|| self.action_names())
    }
}

/// The turn limit of a server that names none in its handshake (and an `envs:` entry
/// that sets no `max_turns`).
pub const DEFAULT_MAX_TURNS: usize = 100;

impl Drop for ProcessEnv {
    fn drop(&mut self) {
        self.pool.release(self.instance, self.was_reset);
    }
}
