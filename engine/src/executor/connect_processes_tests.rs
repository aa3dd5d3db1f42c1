//! Tests of [`super::connect`]: three processes connect on loopback, each socket leading to
//! the process its position names; a process whose peer never comes stops at the deadline
//! naming it; a stray connection and a taken port are named; a process whose started peer
//! has exited stops at once.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::{connect, PeersGone};

/// Loopback addresses on ports free a moment ago.
fn free_addresses(n: usize) -> Vec<String> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().to_string())
        .collect()
}

#[test]
fn three_processes_connect_each_socket_to_the_process_at_its_position() {
    let addresses = free_addresses(3);
    let runs: Vec<_> = (0..3)
        .map(|me| {
            let addresses = addresses.clone();
            std::thread::spawn(move || {
                let mut sockets = connect(
                    &addresses,
                    me,
                    Duration::from_secs(20),
                    &PeersGone::default(),
                )
                .unwrap();
                assert_eq!(sockets.len(), 3);
                assert!(sockets[me].is_none());
                // Say who this is on every socket, then hear who is at the other end.
                for socket in sockets.iter_mut().flatten() {
                    socket.write_all(&[me as u8]).unwrap();
                }
                let mut heard = Vec::new();
                for socket in sockets.iter_mut() {
                    heard.push(socket.as_mut().map(|s| {
                        let mut byte = [0u8];
                        s.read_exact(&mut byte).unwrap();
                        byte[0] as usize
                    }));
                }
                heard
            })
        })
        .collect();
    for (me, run) in runs.into_iter().enumerate() {
        let expected: Vec<Option<usize>> = (0..3).map(|i| (i != me).then_some(i)).collect();
        assert_eq!(run.join().unwrap(), expected, "process {me}");
    }
}

#[test]
fn a_process_whose_lower_peer_never_listens_stops_at_the_deadline_naming_it() {
    let addresses = free_addresses(2);
    let began = Instant::now();
    let err = connect(
        &addresses,
        1,
        Duration::from_millis(600),
        &PeersGone::default(),
    )
    .unwrap_err();
    let waited = began.elapsed();
    assert!(
        waited >= Duration::from_millis(600) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    let expected = format!("process 1 could not reach process 0 at {}", addresses[0]);
    assert!(err.contains(&expected), "{err}");
    assert!(
        err.contains("`-p 0`") && err.contains("--connect-timeout"),
        "{err}"
    );
}

#[test]
fn a_process_whose_upper_peer_never_connects_stops_at_the_deadline_naming_it() {
    let addresses = free_addresses(3);
    // Process 1 comes; process 2 does not.
    let one = {
        let addresses = addresses.clone();
        std::thread::spawn(move || {
            connect(
                &addresses,
                1,
                Duration::from_millis(800),
                &PeersGone::default(),
            )
        })
    };
    let err = connect(
        &addresses,
        0,
        Duration::from_millis(800),
        &PeersGone::default(),
    )
    .unwrap_err();
    let expected = format!(
        "process 0 heard nothing from process 2 (at {})",
        addresses[2]
    );
    assert!(err.contains(&expected), "{err}");
    assert!(err.contains("`-p 2`"), "{err}");
    assert!(one.join().unwrap().unwrap_err().contains("process 2"));
}

#[test]
fn a_connection_with_an_index_outside_the_run_is_named() {
    let addresses = free_addresses(2);
    let stray = {
        let address = addresses[0].clone();
        std::thread::spawn(move || loop {
            if let Ok(mut stream) = TcpStream::connect(&address) {
                stream.write_all(&7u64.to_be_bytes()).unwrap();
                std::thread::sleep(Duration::from_millis(500));
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        })
    };
    let err = connect(
        &addresses,
        0,
        Duration::from_secs(10),
        &PeersGone::default(),
    )
    .unwrap_err();
    stray.join().unwrap();
    assert!(err.contains("says it is process 7"), "{err}");
    assert!(err.contains("another run"), "{err}");
}

#[test]
fn a_taken_port_is_named_at_once() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addresses = vec![
        taken.local_addr().unwrap().to_string(),
        "127.0.0.1:1".into(),
    ];
    let began = Instant::now();
    let err = connect(
        &addresses,
        0,
        Duration::from_secs(30),
        &PeersGone::default(),
    )
    .unwrap_err();
    assert!(began.elapsed() < Duration::from_secs(5));
    let expected = format!("process 0 cannot listen on {}", addresses[0]);
    assert!(err.contains(&expected), "{err}");
}

#[test]
fn a_process_whose_started_peer_has_exited_stops_at_once_with_the_reason() {
    // Process 0 waits for process 1, which a check says has exited: the wait ends on the
    // check, not at the ten-minute deadline; the check ran while it waited.
    let addresses = free_addresses(2);
    let checks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = checks.clone();
    let gone = PeersGone::new(move || {
        let n = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        (n >= 2).then(|| "process 1 of the run exited (exit status: 2)".to_string())
    });
    let began = Instant::now();
    let err = connect(&addresses, 0, Duration::from_secs(600), &gone).unwrap_err();
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(checks.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert_eq!(
        err,
        "process 0 stopped waiting for the others: process 1 of the run exited (exit status: 2)"
    );
    // Process 1 waiting to reach process 0 stops the same way.
    let err = connect(&addresses, 1, Duration::from_secs(600), &gone).unwrap_err();
    assert!(err.starts_with("process 1 stopped waiting"), "{err}");
}
