//! Which process a broken connection led to.
//!
//! When a process of a run dies, timely's network threads to it (`timely:recv-P` and
//! `timely:send-P`, P that process's index) panic, and then every worker thread of this
//! process panics on the poisoned queue between them. The worker's error should name P and
//! say what happened once, not print a dozen backtraces first: a run of several processes
//! installs [`install`]'s panic hook, which notes P from the network thread's name and
//! keeps quiet about those panics (and the worker threads' that follow from them); every
//! other panic goes to the hook that was there before.

use std::sync::{Mutex, Once};

use super::compute::panic_message;

/// The first network thread's panic: its peer process and its message.
static BROKEN: Mutex<Option<(usize, String)>> = Mutex::new(None);
static INSTALL: Once = Once::new();

/// Installs the panic hook (once per process; later calls do nothing).
pub(crate) fn install() {
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current();
            let name = thread.name().unwrap_or("");
            let message = panic_message(info.payload());
            if let Some(process) = network_thread_peer(name) {
                let mut broken = BROKEN.lock().unwrap_or_else(|p| p.into_inner());
                broken.get_or_insert((process, message.clone()));
                drop(broken);
            }
            // A broken connection (and the poisoned queues it leaves) is said once, in the
            // run's error; any other panic, a network thread's too, is printed as usual.
            if is_network_failure(&message) {
                return;
            }
            previous(info)
        }));
    });
}

/// The process whose connection broke first and what its network thread said, once one
/// has.
pub(crate) fn broken_connection() -> Option<(usize, String)> {
    BROKEN.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Whether a worker thread's panic came from a broken connection.
pub(crate) fn is_network_failure(message: &str) -> bool {
    message.contains("MergeQueue poisoned") || message.contains("timely communication")
}

/// The remote process of a timely network thread, from its name.
fn network_thread_peer(name: &str) -> Option<usize> {
    (name.strip_prefix("timely:recv-"))
        .or_else(|| name.strip_prefix("timely:send-"))
        .and_then(|p| p.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_threads_name_their_peer() {
        assert_eq!(network_thread_peer("timely:recv-3"), Some(3));
        assert_eq!(network_thread_peer("timely:send-0"), Some(0));
        assert_eq!(network_thread_peer("timely:work-1"), None);
        assert_eq!(network_thread_peer("roll-flow:compute-1"), None);
    }
}
