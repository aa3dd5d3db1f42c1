//! One OpenEnv session: a WebSocket to the server's `/ws`, one env instance on the server,
//! one request and one reply at a time (as OpenEnv's own `EnvClient`), with a reply
//! timeout and a size limit. Also the plain-HTTP `GET /metadata`.

use std::io::ErrorKind;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::Value;
use tungstenite::protocol::WebSocketConfig;
use tungstenite::{Message, WebSocket};

use super::config::Endpoint;

/// How long to wait and how much to accept.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub timeout: Duration,
    pub max_message_bytes: usize,
}

/// An open session.
pub struct Session {
    socket: WebSocket<TcpStream>,
    limits: Limits,
}

fn io_reason(e: &std::io::Error, limits: &Limits) -> String {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => format!(
            "no reply within {:.1} s (`timeout_s`)",
            limits.timeout.as_secs_f64()
        ),
        _ => e.to_string(),
    }
}

fn ws_reason(e: tungstenite::Error, limits: &Limits) -> String {
    match e {
        tungstenite::Error::Io(e) => io_reason(&e, limits),
        tungstenite::Error::Capacity(e) => {
            format!("{e} (`max_message_bytes` is {})", limits.max_message_bytes)
        }
        tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed => {
            "the server closed the session".into()
        }
        other => other.to_string(),
    }
}

/// A TCP connection to `authority` within the timeout, reads and writes timed too.
fn connect(authority: &str, limits: &Limits) -> Result<TcpStream, String> {
    let addresses = authority
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {authority}: {e}"))?;
    let mut last = format!("{authority} resolves to no address");
    for address in addresses {
        match TcpStream::connect_timeout(&address, limits.timeout) {
            Ok(stream) => {
                let timeout = Some(limits.timeout);
                stream
                    .set_read_timeout(timeout)
                    .and_then(|()| stream.set_write_timeout(timeout))
                    .and_then(|()| stream.set_nodelay(true))
                    .map_err(|e| e.to_string())?;
                return Ok(stream);
            }
            Err(e) => last = format!("cannot connect to {address}: {}", io_reason(&e, limits)),
        }
    }
    Err(last)
}

impl Session {
    /// Opens a session (the server makes a fresh env for it).
    pub fn open(endpoint: &Endpoint, limits: Limits) -> Result<Session, String> {
        let stream = connect(&endpoint.authority, &limits)?;
        let config = WebSocketConfig::default()
            .max_message_size(Some(limits.max_message_bytes))
            .max_frame_size(Some(limits.max_message_bytes));
        let (socket, _) =
            tungstenite::client::client_with_config(endpoint.ws.as_str(), stream, Some(config))
                .map_err(|e| match e {
                    tungstenite::HandshakeError::Failure(e) => {
                        format!(
                            "WebSocket handshake with {}: {}",
                            endpoint.ws,
                            ws_reason(e, &limits)
                        )
                    }
                    tungstenite::HandshakeError::Interrupted(_) => {
                        format!("WebSocket handshake with {} timed out", endpoint.ws)
                    }
                })?;
        Ok(Session { socket, limits })
    }

    /// Sends `message` and waits for the reply, skipping pings.
    pub fn call(&mut self, message: &Value) -> Result<Value, String> {
        let limits = self.limits;
        self.socket
            .send(Message::text(message.to_string()))
            .map_err(|e| ws_reason(e, &limits))?;
        loop {
            let reply = self.socket.read().map_err(|e| ws_reason(e, &limits))?;
            let bytes = match reply {
                Message::Text(text) => text.as_bytes().to_vec(),
                Message::Binary(bytes) => bytes.to_vec(),
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
                Message::Close(frame) => {
                    return Err(match frame {
                        Some(f) => {
                            format!("the server closed the session: {} {}", f.code, f.reason)
                        }
                        None => "the server closed the session".into(),
                    })
                }
            };
            return serde_json::from_slice(&bytes).map_err(|e| match std::str::from_utf8(&bytes) {
                Ok(_) => format!("the reply is not JSON: {e}"),
                Err(_) => "the reply is not UTF-8".into(),
            });
        }
    }

    /// Says goodbye (OpenEnv's `close`), best effort: the server frees the session.
    pub fn close(mut self) {
        let _ = self.socket.send(Message::text(r#"{"type":"close"}"#));
        let _ = self.socket.close(None);
        let _ = self.socket.flush();
    }
}

/// `GET {http}/metadata` as JSON, or `None` when the server has no such route (404).
pub fn metadata(endpoint: &Endpoint, limits: &Limits) -> Result<Option<Value>, String> {
    let agent = ureq::AgentBuilder::new().timeout(limits.timeout).build();
    let url = format!("{}/metadata", endpoint.http);
    match agent.get(&url).call() {
        Ok(response) => {
            let mut body = Vec::new();
            std::io::Read::read_to_end(
                &mut std::io::Read::take(response.into_reader(), limits.max_message_bytes as u64),
                &mut body,
            )
            .map_err(|e| format!("reading {url}: {e}"))?;
            serde_json::from_slice(&body)
                .map(Some)
                .map_err(|e| format!("{url} is not JSON: {e}"))
        }
        Err(ureq::Error::Status(404, _)) => Ok(None),
        Err(ureq::Error::Status(code, _)) => Err(format!("{url} answered HTTP {code}")),
        Err(ureq::Error::Transport(t)) => Err(t.to_string()),
    }
}
