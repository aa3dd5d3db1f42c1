//! `roll-flow env-server SPEC --listen ADDR`: serves a built-in env over the network as an
//! OpenEnv server does, so `env: Remote(url: ...)` (and OpenEnv's own clients) can use it
//! from other machines. One WebSocket session at `/ws` is one env instance; each
//! connection gets its own thread. `GET /health`, `/metadata` (with roll-flow's
//! `max_turns`, `actions` and `protocol`) and `/schema` answer as OpenEnv's.
//!
//! Session messages: `reset` (`data.seed`, 0 when absent or null; anything but a whole
//! number from 0 to 2^64 - 1 is refused), `step` (`data.message`: the
//! reply text), `state`, `close`; replies are `observation` (`{observation: {obs,
//! instruction | info, truncated, valid_actions?}, reward, done}`), `state` and `error`
//! (`{message, code}`, OpenEnv's codes).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tungstenite::protocol::{Role, WebSocketConfig};
use tungstenite::{Message, WebSocket};

use crate::config::EnvConfig;
use crate::env::Env;
use crate::protocol::{whole_number, PROTOCOL_VERSION};

/// The largest request head read before answering (a browser's is under 8 KiB).
const MAX_HEAD_BYTES: usize = 16 << 10;
/// The largest session message accepted.
const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// What every connection needs to know: the env, its name, turn limit and actions.
#[derive(Clone)]
struct Served {
    config: EnvConfig,
    metadata: Value,
    fixed_actions: Vec<String>,
}

/// Binds `address`, calls `bound` with the address it got (port 0 picks one), and serves
/// until the process ends.
pub fn listen(
    config: &EnvConfig,
    address: &str,
    bound: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let probe = config
        .build()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    let served = Served {
        config: config.clone(),
        metadata: json!({
            "name": probe.name(),
            "description": format!("roll-flow's {} env", probe.name()),
            "version": env!("CARGO_PKG_VERSION"),
            "protocol": PROTOCOL_VERSION,
            "max_turns": probe.default_max_turns(),
            "actions": probe.action_names(),
        }),
        fixed_actions: probe.action_names(),
    };
    let listener = TcpListener::bind(address)?;
    bound(listener.local_addr()?);
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let served = served.clone();
        std::thread::spawn(move || {
            // A client that goes away mid-request ends only its own connection.
            let _ = connection(stream, &served);
        });
    }
    Ok(())
}

/// Reads one request head; answers HTTP, or hands a WebSocket upgrade to [`session`].
fn connection(mut stream: TcpStream, served: &Served) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut head = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(at) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if head.len() > MAX_HEAD_BYTES {
            return respond(
                &mut stream,
                431,
                &json!({"detail": "request head too large"}),
            );
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&chunk[..n]);
    };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    if request.parse(&head[..end]).is_err() {
        return respond(&mut stream, 400, &json!({"detail": "malformed request"}));
    }
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
    };
    let path = request.path.unwrap_or("/").split('?').next().unwrap_or("/");
    let upgrade = header("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    match (request.method, path) {
        (Some("GET"), "/ws") if upgrade => {
            let Some(key) = header("sec-websocket-key") else {
                return respond(&mut stream, 400, &json!({"detail": "no Sec-WebSocket-Key"}));
            };
            let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
            write!(
                stream,
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                 Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
            )?;
            stream.set_read_timeout(None)?;
            stream.set_nodelay(true)?;
            let config = WebSocketConfig::default()
                .max_message_size(Some(MAX_MESSAGE_BYTES))
                .max_frame_size(Some(MAX_MESSAGE_BYTES));
            let leftover = head[end..].to_vec();
            let socket =
                WebSocket::from_partially_read(stream, leftover, Role::Server, Some(config));
            session(socket, served);
            Ok(())
        }
        (Some("GET"), "/health") => respond(&mut stream, 200, &json!({"status": "healthy"})),
        (Some("GET"), "/metadata") => respond(&mut stream, 200, &served.metadata),
        (Some("GET"), "/schema") => respond(&mut stream, 200, &schema()),
        _ => respond(&mut stream, 404, &json!({"detail": "Not Found"})),
    }
}

fn respond(stream: &mut TcpStream, status: u16, body: &Value) -> std::io::Result<()> {
    let body = body.to_string();
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Request Header Fields Too Large",
    };
    write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

/// The action and observation as JSON schemas, in the shape of OpenEnv's `/schema`.
fn schema() -> Value {
    let string = json!({"type": "string"});
    json!({
        "action": {"title": "Action", "type": "object",
                   "properties": {"message": string}, "required": ["message"]},
        "observation": {"title": "Observation", "type": "object", "properties": {
            "obs": string, "instruction": string, "truncated": {"type": "boolean"},
            "valid_actions": {"type": "array", "items": string},
            "info": {"type": "object"}}},
        "state": {"title": "State", "type": "object", "properties": {
            "episode_id": {"type": ["string", "null"]}, "step_count": {"type": "integer"}}},
    })
}

fn error(message: &str, code: &str) -> Value {
    json!({"type": "error", "data": {"message": message, "code": code}})
}

/// Plays one env instance for one connection until it closes.
fn session(mut socket: WebSocket<TcpStream>, served: &Served) {
    let mut env: Option<Box<dyn Env>> = None;
    let mut steps = 0u64;
    loop {
        let text = match socket.read() {
            Ok(Message::Text(text)) => text.to_string(),
            Ok(Message::Binary(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(Message::Close(_)) | Err(_) => return,
            Ok(_) => continue,
        };
        let reply = match serde_json::from_str::<Value>(&text) {
            Err(e) => error(&format!("Invalid JSON: {e}"), "INVALID_JSON"),
            Ok(message) => {
                let kind = message.get("type").and_then(Value::as_str).unwrap_or("");
                let data = message.get("data").unwrap_or(&Value::Null);
                match kind {
                    "reset" => {
                        steps = 0;
                        reset(&mut env, data, served)
                    }
                    "step" => {
                        steps += 1;
                        step(env.as_deref_mut(), data, served)
                    }
                    "state" => json!({"type": "state",
                                      "data": {"episode_id": null, "step_count": steps}}),
                    "close" => {
                        let _ = socket.close(None);
                        let _ = socket.flush();
                        return;
                    }
                    other => error(&format!("Unknown message type: {other}"), "UNKNOWN_TYPE"),
                }
            }
        };
        if socket.send(Message::text(reply.to_string())).is_err() {
            return;
        }
    }
}

fn actions_if_changed(env: &dyn Env, served: &Served, observation: &mut Map<String, Value>) {
    let valid = env.valid_actions();
    if valid != served.fixed_actions {
        observation.insert("valid_actions".into(), valid.into());
    }
}

fn reset(env: &mut Option<Box<dyn Env>>, data: &Value, served: &Served) -> Value {
    let seed = match data.get("seed") {
        None | Some(Value::Null) => 0,
        Some(value) => match whole_number("seed", value) {
            Ok(seed) => seed,
            Err(why) => {
                let message = format!("Invalid message: {why}, or left out for 0");
                return error(&message, "VALIDATION_ERROR");
            }
        },
    };
    if env.is_none() {
        match served.config.build() {
            Ok(built) => *env = Some(built),
            Err(e) => return error(&e.to_string(), "FACTORY_ERROR"),
        }
    }
    let env = env.as_deref_mut().expect("built above");
    match env.reset(seed) {
        Ok(reset) => {
            let mut observation = Map::new();
            observation.insert("obs".into(), reset.observation.into());
            observation.insert("instruction".into(), reset.instruction.into());
            actions_if_changed(env, served, &mut observation);
            json!({"type": "observation",
                   "data": {"observation": observation, "reward": null, "done": false}})
        }
        Err(e) => error(&e.to_string(), "EXECUTION_ERROR"),
    }
}

fn step(env: Option<&mut (dyn Env + '_)>, data: &Value, served: &Served) -> Value {
    let Some(env) = env else {
        return error("step before reset", "EXECUTION_ERROR");
    };
    let Some(action) = data.get("message").and_then(Value::as_str) else {
        return error(
            "Invalid message: the action needs a string `message`",
            "VALIDATION_ERROR",
        );
    };
    match env.step(action) {
        Ok(result) => {
            let mut observation = Map::new();
            observation.insert("obs".into(), result.observation.clone().into());
            observation.insert("truncated".into(), result.truncated.into());
            observation.insert(
                "info".into(),
                serde_json::to_value(result.info).unwrap_or(Value::Null),
            );
            actions_if_changed(env, served, &mut observation);
            json!({"type": "observation", "data": {"observation": observation,
                   "reward": result.reward, "done": result.done()}})
        }
        Err(e) => error(&e.to_string(), "EXECUTION_ERROR"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seed that is not an unsigned integer is refused, not played as seed 0.
    #[test]
    fn reset_refuses_a_seed_that_is_not_an_unsigned_integer() {
        let served = Served {
            config: EnvConfig::parse("FrozenLake(size: 4)").unwrap(),
            metadata: Value::Null,
            fixed_actions: Vec::new(),
        };
        let mut env = None;
        for bad in [json!("x"), json!(-1), json!(1e30), json!(1.5)] {
            let reply = reset(&mut env, &json!({ "seed": bad }), &served);
            assert_eq!(reply["type"], "error", "{bad}");
            assert_eq!(reply["data"]["code"], "VALIDATION_ERROR");
            let message = reply["data"]["message"].as_str().unwrap();
            assert!(message.contains(&format!("`seed` is {bad}")), "{message}");
        }
        let played = |data: Value| reset(&mut None, &data, &served)["data"]["observation"].clone();
        assert_eq!(played(json!({})), played(json!({ "seed": 0 })));
        assert_eq!(
            played(json!({ "seed": null })),
            played(json!({ "seed": 0 }))
        );
        assert_ne!(played(json!({ "seed": 3 })), Value::Null);
    }
}
