//! [`ServerPool`]: the server processes of one `Process` env entry, shared by every env
//! instance built from it, with their instance ids and their failure count.
//!
//! Pools live in a process-wide table keyed by the entry's settings and held weakly: the
//! envs (and the env manager's probe env) keep a pool alive, and the last one dropped
//! stops its processes.

use std::collections::{BTreeSet, HashSet};
use std::io::Write;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{Map, Value};

use super::config::ProcessEnvConfig;
use super::connection::{Connection, Limits};
use crate::error::EnvError;
use crate::protocol::{self, Hello, PROTOCOL_VERSION};

static POOLS: Mutex<Vec<(String, Weak<ServerPool>)>> = Mutex::new(Vec::new());

struct Slot {
    connection: Arc<Connection>,
    /// Counts the processes this slot started; tells incidents apart.
    generation: u64,
}

#[derive(Default)]
struct Failures {
    consecutive: usize,
    /// Broken connections (slot, generation) already counted: one crash fails every
    /// request in flight, and counts once.
    counted: HashSet<(usize, u64)>,
    gave_up: Option<String>,
}

#[derive(Default)]
struct InstanceIds {
    free: BTreeSet<u64>,
    next: u64,
}

/// The server processes of one `Process` env entry.
pub struct ServerPool {
    config: ProcessEnvConfig,
    hello: Hello,
    name: &'static str,
    slots: Vec<Mutex<Slot>>,
    ids: Mutex<InstanceIds>,
    failures: Mutex<Failures>,
    trace: Option<Mutex<std::io::BufWriter<std::fs::File>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ServerPool {
    /// The pool for `config`, starting and handshaking its processes if none is running.
    pub fn get(config: &ProcessEnvConfig) -> Result<Arc<ServerPool>, EnvError> {
        let key = format!("{config:?}");
        let mut pools = lock(&POOLS);
        pools.retain(|(_, pool)| pool.strong_count() > 0);
        if let Some(pool) = pools
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, p)| p.upgrade())
        {
            return Ok(pool);
        }
        let pool = Arc::new(ServerPool::start(config)?);
        pools.push((key, Arc::downgrade(&pool)));
        Ok(pool)
    }

    fn start(config: &ProcessEnvConfig) -> Result<ServerPool, EnvError> {
        let mut slots = Vec::with_capacity(config.processes);
        let mut hello: Option<Hello> = None;
        for _ in 0..config.processes {
            let (connection, said) = handshake(config)?;
            if let Some(first) = &hello {
                if *first != said {
                    return Err(config.fault(format!(
                        "two processes of one entry said different things in the handshake: {first:?} and {said:?}"
                    )));
                }
            }
            hello = Some(said);
            slots.push(Mutex::new(Slot {
                connection: Arc::new(connection),
                generation: 0,
            }));
        }
        let hello = hello.expect("at least one process (validated)");
        let trace = match &config.trace {
            Some(path) => Some(Mutex::new(std::io::BufWriter::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| EnvError::InvalidConfig {
                        env: "Process",
                        field: "trace",
                        reason: format!("cannot open {path}: {e}"),
                    })?,
            ))),
            None => None,
        };
        Ok(ServerPool {
            name: Box::leak(hello.env.clone().into_boxed_str()),
            hello,
            config: config.clone(),
            slots,
            ids: Mutex::default(),
            failures: Mutex::default(),
            trace,
        })
    }

    /// What the servers said in the handshake.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// The env's name, from the handshake.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Appends one call to the `trace` file, if the entry keeps one. `line` makes the
    /// record (`instance`, `op`, `request`, `reply`: what roll-flow made of the reply); it
    /// runs only when tracing, so an entry without a trace pays nothing per step.
    pub fn trace(&self, line: impl FnOnce() -> Value) {
        if let Some(file) = &self.trace {
            let line = line();
            let mut file = lock(file);
            // A trace is a debugging aid: a failed write loses trace lines, not the run.
            let _ = writeln!(file, "{line}").and_then(|()| file.flush());
        }
    }

    /// A free instance id (the smallest, so ids stay compact across steps).
    pub fn acquire(&self) -> u64 {
        let mut ids = lock(&self.ids);
        if let Some(id) = ids.free.pop_first() {
            return id;
        }
        ids.next += 1;
        ids.next - 1
    }

    /// Gives `instance` back: the server forgets it, and the id is reused.
    pub fn release(&self, instance: u64, was_reset: bool) {
        if was_reset {
            let slot = self.slot_of(instance);
            let connection = lock(&self.slots[slot]).connection.clone();
            connection.notify(request("close", instance));
        }
        lock(&self.ids).free.insert(instance);
    }

    fn slot_of(&self, instance: u64) -> usize {
        (instance % self.slots.len() as u64) as usize
    }

    /// Sends `request` to the process serving `instance`, restarting it if it broke, and
    /// checks the reply with `check`. `what` names the request in errors (made only then).
    pub fn call<T>(
        &self,
        instance: u64,
        request: Map<String, Value>,
        what: impl Fn() -> String,
        check: impl FnOnce(&Value) -> Result<T, String>,
    ) -> Result<T, EnvError> {
        if let Some(why) = &lock(&self.failures).gave_up {
            return Err(self.config.gave_up(self.config.max_failures, why.clone()));
        }
        let slot = self.slot_of(instance);
        let (connection, generation) = match self.live_connection(slot) {
            Ok(live) => live,
            Err(why) => return Err(self.failed(None, format!("{}: {why}", what()))),
        };
        let outcome = connection.call(request).and_then(|reply| check(&reply));
        match outcome {
            Ok(value) => {
                let mut failures = lock(&self.failures);
                failures.consecutive = 0;
                failures.counted.clear();
                Ok(value)
            }
            Err(why) => {
                let incident = connection.is_broken().then_some((slot, generation));
                Err(self.failed(incident, format!("{}: {why}", what())))
            }
        }
    }

    /// The slot's connection, restarting the process if it broke.
    fn live_connection(&self, slot: usize) -> Result<(Arc<Connection>, u64), String> {
        let mut slot = lock(&self.slots[slot]);
        if slot.connection.is_broken() {
            let (connection, said) = handshake(&self.config).map_err(|e| e.to_string())?;
            if said != self.hello {
                return Err(format!(
                    "the restarted server said {said:?} in the handshake, the first said {:?}",
                    self.hello
                ));
            }
            slot.connection = Arc::new(connection);
            slot.generation += 1;
        }
        Ok((slot.connection.clone(), slot.generation))
    }

    /// Counts a failure (once per broken process) and says whether the run goes on.
    fn failed(&self, incident: Option<(usize, u64)>, why: String) -> EnvError {
        let mut failures = lock(&self.failures);
        let new = incident.is_none_or(|incident| failures.counted.insert(incident));
        if new {
            failures.consecutive += 1;
        }
        if failures.consecutive >= self.config.max_failures {
            failures.gave_up = Some(why.clone());
            return self.config.gave_up(failures.consecutive, why);
        }
        self.config.fault(why)
    }
}

/// A request to `instance` without its `id` (the connection adds it).
pub fn request(op: &str, instance: u64) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("op".into(), op.into());
    map.insert("instance".into(), instance.into());
    map
}

/// Starts one process and handshakes with it.
fn handshake(config: &ProcessEnvConfig) -> Result<(Connection, Hello), EnvError> {
    let limits = Limits {
        timeout: Duration::from_secs_f64(config.timeout_s),
        max_line_bytes: config.max_line_bytes,
    };
    let connection = Connection::start(&config.command, limits).map_err(|why| config.fault(why))?;
    let mut request = Map::new();
    request.insert("op".into(), "handshake".into());
    request.insert("protocol".into(), PROTOCOL_VERSION.into());
    let hello = connection
        .call(request)
        .and_then(|reply| protocol::hello(&reply))
        .map_err(|why| config.fault(format!("handshake: {why}")))?;
    Ok((connection, hello))
}
