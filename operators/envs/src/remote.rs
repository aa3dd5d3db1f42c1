//! `env: Remote(url: "http://HOST:PORT")`: an env served over the network by an
//! [OpenEnv](https://github.com/meta-pytorch/OpenEnv) server, unchanged, or by `roll-flow
//! env-server --listen`. Each env instance holds one OpenEnv session (a WebSocket to
//! `/ws`; the server makes an env per session), so `groups × group_size` envs need a
//! server that accepts that many sessions (OpenEnv's `max_concurrent_envs`).
//!
//! Before the first episode the entry reads `GET /metadata` (the env's `name`, and
//! roll-flow's `max_turns` and `actions` when the server gives them), so an unreachable
//! server fails the run when its nodes are built. A call that fails (no connection, no
//! reply within `timeout_s`, a reply that is not JSON, too large, misshapen, or OpenEnv's
//! `error`) is an [`EnvError::ServerFault`]: the rollout drops the episode's group, and
//! the session is reopened at the next reset. After `max_failures` failures in a row it
//! is an [`EnvError::ServerGaveUp`]; failures of calls already in flight when one was
//! counted (one server outage fails them all) count once.

mod config;
mod reply;
mod session;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{json, Value};

use crate::env::{Env, Reset, StepResult};
use crate::error::EnvError;
use crate::process::DEFAULT_MAX_TURNS;
use crate::render::frame::Frame;
use crate::served_episode::{no_frames, ServedEpisode};
pub use config::{Endpoint, RemoteEnvConfig};
use session::{Limits, Session};

static ENTRIES: Mutex<Vec<(String, Weak<Entry>)>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Default)]
struct Failures {
    consecutive: usize,
    /// The call ticket at the last counted failure: calls started before it fail with it.
    counted_at: u64,
    gave_up: Option<String>,
}

/// What the envs of one `Remote` entry share: the server's metadata and the failure count.
struct Entry {
    config: RemoteEnvConfig,
    endpoint: Endpoint,
    limits: Limits,
    name: &'static str,
    max_turns: Option<usize>,
    actions: Vec<String>,
    tickets: AtomicU64,
    failures: Mutex<Failures>,
}

impl Entry {
    fn get(config: &RemoteEnvConfig) -> Result<Arc<Entry>, EnvError> {
        let key = format!("{config:?}");
        let mut entries = lock(&ENTRIES);
        entries.retain(|(_, e)| e.strong_count() > 0);
        if let Some(entry) = entries
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, e)| e.upgrade())
        {
            return Ok(entry);
        }
        let entry = Arc::new(Entry::connect(config)?);
        entries.push((key, Arc::downgrade(&entry)));
        Ok(entry)
    }

    fn connect(config: &RemoteEnvConfig) -> Result<Entry, EnvError> {
        config.validate()?;
        let endpoint = config.endpoint()?;
        let limits = Limits {
            timeout: Duration::from_secs_f64(config.timeout_s),
            max_message_bytes: config.max_message_bytes,
        };
        let metadata = session::metadata(&endpoint, &limits)
            .map_err(|reason| EnvError::ServerUnreachable {
                server: config.url.clone(),
                reason,
            })?
            .unwrap_or(Value::Null);
        // Every field optional; others (OpenEnv's) pass.
        #[derive(serde::Deserialize)]
        struct Served {
            #[serde(default)]
            name: Option<String>,
            #[serde(default)]
            max_turns: Option<usize>,
            #[serde(default)]
            actions: Option<Vec<String>>,
        }
        let served: Served = match metadata {
            Value::Object(_) => serde_json::from_value(metadata)
                .map_err(|e| config.fault(format!("/metadata does not fit: {e}")))?,
            Value::Null => Served {
                name: None,
                max_turns: None,
                actions: None,
            },
            other => {
                let kind = crate::protocol::kind(&other);
                return Err(config.fault(format!("/metadata is {kind}, expected an object")));
            }
        };
        let actions = served.actions.unwrap_or_default();
        crate::protocol::check_served(served.max_turns, &actions)
            .map_err(|why| config.fault(format!("/metadata: {why}")))?;
        let name = served.name.unwrap_or_else(|| "Remote".into());
        Ok(Entry {
            name: Box::leak(name.into_boxed_str()),
            max_turns: served.max_turns,
            actions,
            config: config.clone(),
            endpoint,
            limits,
            tickets: AtomicU64::new(1),
            failures: Mutex::default(),
        })
    }

    /// Runs one call on `session` (opening it if needed) and checks the reply; counts the
    /// outcome. A failed call closes the session.
    fn call<T>(
        &self,
        session: &mut Option<Session>,
        message: &Value,
        what: impl Fn() -> String,
        check: impl FnOnce(&Value) -> Result<T, String>,
    ) -> Result<T, EnvError> {
        if let Some(why) = &lock(&self.failures).gave_up {
            return Err(self.config.gave_up(self.config.max_failures, why.clone()));
        }
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
        let outcome = (|| {
            if session.is_none() {
                *session = Some(Session::open(&self.endpoint, self.limits)?);
            }
            let open = session.as_mut().expect("opened above");
            check(&open.call(message)?)
        })();
        match outcome {
            Ok(value) => {
                lock(&self.failures).consecutive = 0;
                Ok(value)
            }
            Err(why) => {
                *session = None;
                Err(self.failed(ticket, format!("{}: {why}", what())))
            }
        }
    }

    fn failed(&self, ticket: u64, why: String) -> EnvError {
        let mut failures = lock(&self.failures);
        if ticket > failures.counted_at {
            failures.consecutive += 1;
            // The last ticket handed out: calls holding it or an earlier one were in flight.
            failures.counted_at = self.tickets.load(Ordering::Relaxed) - 1;
        }
        if failures.consecutive >= self.config.max_failures {
            failures.gave_up = Some(why.clone());
            return self.config.gave_up(failures.consecutive, why);
        }
        self.config.fault(why)
    }
}

impl RemoteEnvConfig {
    /// Reads the server's metadata (once per entry) and makes a new instance; its session
    /// opens at the first reset.
    pub fn build(&self) -> Result<RemoteEnv, EnvError> {
        Ok(RemoteEnv {
            entry: Entry::get(self)?,
            session: None,
            episode: ServedEpisode::default(),
        })
    }
}

/// One env instance: one session on the server.
pub struct RemoteEnv {
    entry: Arc<Entry>,
    session: Option<Session>,
    episode: ServedEpisode,
}

impl Env for RemoteEnv {
    fn name(&self) -> &'static str {
        self.entry.name
    }

    fn reset(&mut self, seed: u64) -> Result<Reset, EnvError> {
        let message = json!({"type": "reset", "data": {"seed": seed}});
        let field = &self.entry.config.observation_field;
        let reply = self.entry.call(
            &mut self.session,
            &message,
            || format!("reset (seed {seed})"),
            |r| reply::reset(r, field),
        );
        self.episode.reset(reply)
    }

    fn step(&mut self, action_text: &str) -> Result<StepResult, EnvError> {
        self.episode.check_step(self.name())?;
        let config = &self.entry.config;
        let mut action = serde_json::Map::new();
        action.insert(config.action_field.clone(), action_text.into());
        let message = json!({"type": "step", "data": action});
        let reply = self.entry.call(
            &mut self.session,
            &message,
            || "step".to_string(),
            |r| reply::step(r, &config.observation_field),
        );
        self.episode.step(reply)
    }

    fn observation(&self) -> String {
        self.episode.observation()
    }

    fn render_frame(&self) -> Result<Frame, EnvError> {
        Err(no_frames("Remote", self.name()))
    }

    fn renders_frames(&self) -> bool {
        false
    }

    fn default_max_turns(&self) -> usize {
        self.entry.max_turns.unwrap_or(DEFAULT_MAX_TURNS)
    }

    fn action_names(&self) -> Vec<String> {
        self.entry.actions.clone()
    }

    fn valid_actions(&self) -> Vec<String> {
        self.episode.valid_actions(|| self.action_names())
    }
}

impl Drop for RemoteEnv {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            session.close();
        }
    }
}

#[cfg(test)]
#[path = "remote_tests.rs"]
mod tests;
