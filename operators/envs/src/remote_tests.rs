//! A `Remote` env against servers that misbehave: one that closes every session at its
//! first message, one that never replies. The healthy path and OpenEnv itself are tested
//! through the binary (tests/remote_envs.rs).

use std::io::{Read, Write};
use std::net::TcpListener;

use tungstenite::protocol::Role;
use tungstenite::WebSocket;

use super::*;

/// How the fake server treats a session after reading its first message.
#[derive(Clone, Copy)]
enum Fault {
    Close,
    Silent,
}

/// A server with no `/metadata` (404) whose sessions fail as `fault` says; its URL.
fn fake_server(fault: Fault) -> String {
    serving(fault, None)
}

/// A server whose `/metadata` replies `metadata` (404 without), sessions as `fault` says.
fn serving(fault: Fault, metadata: Option<&'static str>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_string();
                let key = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
                    .map(str::trim);
                let Some(key) = key else {
                    if let (Some(body), true) = (metadata, head.starts_with("GET /metadata")) {
                        let _ = write!(
                            stream,
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        return;
                    }
                    let _ = stream.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    return;
                };
                let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
                let _ = write!(
                    stream,
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                     Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
                );
                let mut socket = WebSocket::from_raw_socket(stream, Role::Server, None);
                let _ = socket.read();
                if let Fault::Silent = fault {
                    std::thread::sleep(Duration::from_secs(5));
                }
            });
        }
    });
    url
}

fn config(url: String, timeout_s: f64) -> RemoteEnvConfig {
    RemoteEnvConfig {
        url,
        timeout_s,
        max_failures: 2,
        ..RemoteEnvConfig::default()
    }
}

#[test]
fn a_session_that_breaks_loses_the_episode_until_max_failures_stop_the_run() {
    let config = config(fake_server(Fault::Close), 5.0);
    let mut env = config.build().unwrap();
    assert_eq!(env.name(), "Remote", "no /metadata: the generic name");
    let first = env.reset(1).unwrap_err();
    assert!(first.loses_only_the_episode(), "{first}");
    assert!(first.to_string().contains("reset (seed 1)"), "{first}");
    let second = env.reset(2).unwrap_err();
    assert!(!second.loses_only_the_episode());
    assert!(
        second
            .to_string()
            .contains("failed 2 calls in a row (the env's `max_failures`)"),
        "{second}"
    );
    // Given up is final: another instance of the entry fails at once.
    let mut other = config.build().unwrap();
    assert!(!other.reset(3).unwrap_err().loses_only_the_episode());
}

#[test]
fn a_server_that_does_not_reply_times_out() {
    let mut env = config(fake_server(Fault::Silent), 0.3).build().unwrap();
    let error = env.reset(1).unwrap_err().to_string();
    assert!(
        error.contains("no reply within 0.3 s (`timeout_s`)"),
        "{error}"
    );
}

#[test]
fn calls_in_flight_when_a_failure_is_counted_count_with_it() {
    let config = RemoteEnvConfig {
        max_failures: 3,
        ..config(fake_server(Fault::Close), 5.0)
    };
    let entry = Entry::get(&config).unwrap();
    let early = entry.tickets.fetch_add(1, Ordering::Relaxed);
    let late = entry.tickets.fetch_add(1, Ordering::Relaxed);
    assert!(entry.failed(late, "outage".into()).loses_only_the_episode());
    // `early` was in flight when `late` failed: the same outage, not a second failure.
    assert!(entry
        .failed(early, "outage".into())
        .loses_only_the_episode());
    assert_eq!(lock(&entry.failures).consecutive, 1);
    let after = entry.tickets.fetch_add(1, Ordering::Relaxed);
    entry.failed(after, "again".into());
    assert_eq!(lock(&entry.failures).consecutive, 2);
}

/// `/metadata` is checked as a handshake is: fields of the wrong kind, a turn limit of 0,
/// repeated actions, or something other than an object are refused naming what was there.
#[test]
fn bad_metadata_is_refused_naming_the_field() {
    let named = |metadata: &'static str| {
        let url = serving(Fault::Close, Some(metadata));
        match config(url, 5.0).build() {
            Ok(env) => Ok(env.name().to_string()),
            Err(e) => Err(e.to_string()),
        }
    };
    assert_eq!(named(r#"{"name": "Echo", "extra": 1}"#), Ok("Echo".into()));
    for (metadata, wanted) in [
        (
            r#"{"name": 5}"#,
            "/metadata does not fit: invalid type: integer `5`",
        ),
        (
            r#"{"max_turns": -3}"#,
            "/metadata does not fit: invalid value: integer `-3`",
        ),
        (r#"{"max_turns": 0}"#, "/metadata: `max_turns` is 0"),
        (
            r#"{"actions": ["a", "a"]}"#,
            "/metadata: `actions` lists \"a\" twice",
        ),
        ("[1, 2]", "/metadata is a list, expected an object"),
    ] {
        let err = named(metadata).unwrap_err();
        assert!(err.contains(wanted), "{metadata}: {err}");
    }
}
