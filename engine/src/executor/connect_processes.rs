//! Connecting the processes of a run, with a deadline.
//!
//! timely's own `create_sockets` retries a process that is not there once a second for
//! ever, printing a line each time: a process started by hand whose peers never come (a
//! wrong hostfile, a forgotten `-p 0`) waits until someone notices. This module makes the
//! same connections by timely's handshake, so the sockets go on to timely's
//! `initialize_networking_from_sockets` unchanged, but stops at a deadline with an error
//! that names the process it waited for, its address and what to do.
//!
//! The handshake (timely_communication 0.32, `networking.rs`): each process listens on its
//! own hostfile line (every whitespace-separated address on it), connects to every process
//! below it in turn and writes its index there as a big-endian u64, then accepts one
//! connection from every process above it, each of which opens with its index. Here the
//! listener is bound first, so a taken port fails at once rather than after the connects.
//!
//! A process that started some of its peers itself (`roll-flow run -n N` on one machine)
//! also stops as soon as one of them has exited ([`PeersGone`]), instead of waiting out the
//! deadline for a process that will never connect.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long to sleep between tries to reach a process not yet listening, and between polls
/// of the listener for a process not yet connected.
const RETRY_EVERY: Duration = Duration::from_millis(200);

/// Whether a peer this process started has exited, checked between tries while the
/// processes connect: `Some(why)` stops the wait with that reason. The default checks
/// nothing (peers started elsewhere).
#[derive(Clone, Default)]
pub struct PeersGone(Option<Arc<dyn Fn() -> Option<String> + Send + Sync>>);

impl PeersGone {
    /// A check that `gone` makes.
    pub fn new(gone: impl Fn() -> Option<String> + Send + Sync + 'static) -> Self {
        PeersGone(Some(Arc::new(gone)))
    }

    /// What the check says now: `Some(why)` once a peer has exited.
    pub fn check(&self) -> Option<String> {
        self.0.as_ref().and_then(|gone| gone())
    }
}

impl std::fmt::Debug for PeersGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "PeersGone(check)"
        } else {
            "PeersGone(none)"
        })
    }
}

impl PartialEq for PeersGone {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        }
    }
}

/// One socket per process of the run, in process order, `None` at `me`: what timely's
/// `initialize_networking_from_sockets` takes. Fails once `timeout` has passed without a
/// process answering, naming it, or as soon as `gone` says a peer has exited.
pub(crate) fn connect(
    addresses: &[String],
    me: usize,
    timeout: Duration,
    gone: &PeersGone,
) -> Result<Vec<Option<TcpStream>>, String> {
    let deadline = Instant::now() + timeout;
    let listeners = addresses[me]
        .split_whitespace()
        .map(|address| {
            let listener = TcpListener::bind(address).map_err(|e| {
                format!("process {me} cannot listen on {address} (its line of the hostfile): {e}")
            })?;
            listener
                .set_nonblocking(true)
                .map_err(|e| format!("process {me} cannot poll {address}: {e}"))?;
            Ok(listener)
        })
        .collect::<Result<Vec<_>, String>>()?;
    let wait = Wait {
        deadline,
        timeout,
        gone,
    };
    let mut sockets: Vec<Option<TcpStream>> = Vec::with_capacity(addresses.len());
    for (index, address) in addresses.iter().enumerate().take(me) {
        sockets.push(Some(connect_to(index, address, me, &wait)?));
    }
    sockets.push(None);
    sockets.extend(accept_from_above(&listeners, addresses, me, &wait)?);
    Ok(sockets)
}

/// How long the connects may take, and the check of the peers this process started.
struct Wait<'a> {
    deadline: Instant,
    timeout: Duration,
    gone: &'a PeersGone,
}

impl Wait<'_> {
    /// Sleeps before the next try, or says why there is no point: a peer has exited.
    fn before_next_try(&self, me: usize) -> Result<(), String> {
        if let Some(why) = self.gone.check() {
            return Err(format!(
                "process {me} stopped waiting for the others: {why}"
            ));
        }
        std::thread::sleep(RETRY_EVERY);
        Ok(())
    }
}

/// The socket to process `index` (below `me`), once it listens, with `me` sent.
fn connect_to(index: usize, address: &str, me: usize, wait: &Wait) -> Result<TcpStream, String> {
    let (deadline, timeout) = (wait.deadline, wait.timeout);
    loop {
        match TcpStream::connect(address) {
            Ok(mut stream) => {
                let sent = stream
                    .set_nodelay(true)
                    .and_then(|()| stream.write_all(&(me as u64).to_be_bytes()));
                return sent.map(|()| stream).map_err(|e| {
                    format!("process {me} reached process {index} at {address} but could not write to it: {e}")
                });
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(format!(
                    "process {me} could not reach process {index} at {address} within {:.0} s \
                     (last try: {e}): start process {index} of the run (`-p {index}` with \
                     the same --hostfile), check that line of the hostfile, or wait longer \
                     with --connect-timeout",
                    timeout.as_secs_f64()
                ))
            }
            Err(_) => wait.before_next_try(me)?,
        }
    }
}

/// The sockets from every process above `me`, in process order.
fn accept_from_above(
    listeners: &[TcpListener],
    addresses: &[String],
    me: usize,
    wait: &Wait,
) -> Result<Vec<Option<TcpStream>>, String> {
    let (deadline, timeout) = (wait.deadline, wait.timeout);
    let mut above: Vec<Option<TcpStream>> = (me + 1..addresses.len()).map(|_| None).collect();
    while above.iter().any(Option::is_none) {
        let mut accepted = false;
        for listener in listeners {
            match listener.accept() {
                Ok((stream, from)) => {
                    let index = read_index(&stream, deadline).map_err(|e| {
                        format!("process {me}: a connection from {from} sent no process index: {e}")
                    })?;
                    let slot = index
                        .checked_sub(me + 1)
                        .and_then(|slot| above.get_mut(slot))
                        .filter(|slot| slot.is_none())
                        .ok_or_else(|| {
                            format!(
                                "process {me}: a connection from {from} says it is process \
                                 {index}, not a process above {me} of this run's {} still \
                                 missing: is another run using the ports of this hostfile?",
                                addresses.len()
                            )
                        })?;
                    stream
                        .set_nodelay(true)
                        .map_err(|e| format!("process {me}: {e}"))?;
                    *slot = Some(stream);
                    accepted = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(format!("process {me} cannot accept a connection: {e}")),
            }
        }
        if accepted {
            continue;
        }
        if Instant::now() >= deadline {
            let missing = above.iter().position(Option::is_none).unwrap_or(0) + me + 1;
            return Err(format!(
                "process {me} heard nothing from process {missing} (at {}) within {:.0} s: \
                 start process {missing} of the run (`-p {missing}` with the same --hostfile), \
                 or wait longer with --connect-timeout",
                addresses[missing],
                timeout.as_secs_f64()
            ));
        }
        wait.before_next_try(me)?;
    }
    Ok(above)
}

/// The big-endian u64 a connecting process opens with, read before `deadline`.
fn read_index(mut stream: &TcpStream, deadline: Instant) -> std::io::Result<usize> {
    stream.set_nonblocking(false)?;
    let left = deadline.saturating_duration_since(Instant::now());
    stream.set_read_timeout(Some(left.max(Duration::from_secs(1))))?;
    let mut bytes = [0u8; 8];
    stream.read_exact(&mut bytes)?;
    stream.set_read_timeout(None)?;
    Ok(usize::try_from(u64::from_be_bytes(bytes)).unwrap_or(usize::MAX))
}

#[cfg(test)]
#[path = "connect_processes_tests.rs"]
mod tests;
