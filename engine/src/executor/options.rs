//! Executor options: worker threads, timely cluster settings, staleness, timeouts.

use std::any::Any;
use std::path::PathBuf;
use std::time::Duration;

use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
use timely::communication::allocator::ProcessBuilder;
use timely::communication::{AllocatorBuilder, Hooks};
use timely::CommunicationConfig;

use super::connect_processes::{self, PeersGone};
use super::error::ExecError;

/// How to run a pipeline's dataflow.
#[derive(Clone, Debug, PartialEq)]
pub struct ExecutorOptions {
    /// Worker threads in this process (timely's `-w`).
    pub threads: usize,
    /// Number of processes (timely's `-n`); 1 runs in this process only.
    pub processes: usize,
    /// This process's index, 0-based (timely's `-p`).
    pub process: usize,
    /// `host:port` per line, one per process (timely's `-h`); default localhost:2101+.
    pub hostfile: Option<PathBuf>,
    /// How many steps rollout may run ahead of training (0 = synchronous).
    pub staleness: u64,
    /// The first step to run (a resumed run starts after its checkpoint's step).
    pub first_step: u64,
    /// Stop once this many steps are done, although the pipeline (its schedules, its last
    /// checkpoint) spans `steps`; resume later with the checkpoint.
    pub stop_after: Option<u64>,
    /// How long another worker may go unheard (no heartbeat, `crate::collective`) before
    /// the run stops with an error naming it.
    pub peer_timeout: Duration,
    /// How long a process of a run of several waits for the others to connect at the start
    /// before it stops with an error naming the one missing.
    pub connect_timeout: Duration,
    /// Whether a peer this process started has exited, checked while the processes
    /// connect (a local `-n N` run's children); by default nothing is checked.
    pub peers_gone: PeersGone,
}

/// [`ExecutorOptions::peer_timeout`]'s default: a minute, well above any pause a loaded
/// machine gives a thread that only moves data, and below what a user waits for a hung run.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(60);

/// [`ExecutorOptions::connect_timeout`]'s default: ten minutes, room for processes that a
/// scheduler or a person starts one after another on several machines.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(600);

impl Default for ExecutorOptions {
    fn default() -> Self {
        ExecutorOptions {
            threads: 1,
            processes: 1,
            process: 0,
            hostfile: None,
            staleness: 0,
            first_step: 0,
            stop_after: None,
            peer_timeout: PEER_TIMEOUT,
            connect_timeout: CONNECT_TIMEOUT,
            peers_gone: PeersGone::default(),
        }
    }
}

impl ExecutorOptions {
    /// timely's allocators for this process's workers, and what must live as long as they
    /// do. A run of several processes connects to the others first
    /// ([`connect_processes`]), stopping after [`ExecutorOptions::connect_timeout`].
    pub(crate) fn communication(
        &self,
    ) -> Result<(Vec<AllocatorBuilder>, Box<dyn Any + Send>), ExecError> {
        let err = |message: String| ExecError {
            node: None,
            step: None,
            message,
        };
        if self.threads == 0 || self.processes == 0 {
            return Err(err("workers and processes must be at least 1".into()));
        }
        let shortest = 2 * crate::collective::heartbeat::BEAT_EVERY;
        if self.peer_timeout < shortest {
            return Err(err(format!(
                "the peer timeout is {:.1} s; it must be at least {} s, two heartbeats",
                self.peer_timeout.as_secs_f64(),
                shortest.as_secs()
            )));
        }
        if self.process >= self.processes {
            return Err(err(format!(
                "process index {} is not below the process count {}",
                self.process, self.processes
            )));
        }
        if self.processes == 1 {
            let local = match self.threads {
                1 => CommunicationConfig::Thread,
                n => CommunicationConfig::Process(n),
            };
            return local.try_build().map_err(err);
        }
        let addresses = self.addresses(self.processes).map_err(err)?;
        let sockets = connect_processes::connect(
            &addresses,
            self.process,
            self.connect_timeout,
            &self.peers_gone,
        )
        .map_err(err)?;
        let hooks = Hooks::default();
        let process_allocators = ProcessBuilder::new_typed_vector(
            self.threads,
            hooks.refill.clone(),
            hooks.spill.clone(),
        );
        let (builders, guard) = initialize_networking_from_sockets(
            process_allocators,
            sockets,
            self.process,
            self.threads,
            hooks,
        )
        .map_err(|e| {
            err(format!(
                "cannot start the connections between processes: {e}"
            ))
        })?;
        let builders = builders.into_iter().map(AllocatorBuilder::Tcp).collect();
        Ok((builders, Box::new(guard)))
    }

    fn addresses(&self, processes: usize) -> Result<Vec<String>, String> {
        let Some(path) = &self.hostfile else {
            return Ok((0..processes)
                .map(|i| format!("localhost:{}", 2101 + i))
                .collect());
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read hostfile {}: {e}", path.display()))?;
        let hosts: Vec<String> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect();
        if hosts.len() < processes {
            return Err(format!(
                "hostfile {} lists {} hosts for {processes} processes",
                path.display(),
                hosts.len()
            ));
        }
        Ok(hosts.into_iter().take(processes).collect())
    }
}
