//! [`ProcessEnvConfig`]: the `Process(...)` settings of an `envs:` entry, their checks and
//! the errors that name the server.

use serde::Deserialize;

use crate::error::EnvError;

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

    pub(crate) fn shown(&self) -> String {
        self.command.join(" ")
    }

    pub(crate) fn fault(&self, reason: String) -> EnvError {
        EnvError::ServerFault {
            command: self.shown(),
            reason,
        }
    }

    pub(crate) fn gave_up(&self, failures: usize, reason: String) -> EnvError {
        EnvError::ServerGaveUp {
            command: self.shown(),
            failures,
            reason,
        }
    }
}
