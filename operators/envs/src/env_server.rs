//! `roll-flow env-server SPEC`: serves a built-in env over the protocol
//! ([`crate::protocol`]), many instances per process, so the protocol path can be checked
//! against the native path and other trainers can drive roll-flow's envs.

mod listen;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};

use serde::Serialize;
use serde_json::Value;

use crate::config::EnvConfig;
use crate::env::{Env, StepResult};
use crate::protocol::{whole_number, Hello, Request, PROTOCOL_VERSION};
pub use listen::listen;

#[derive(Serialize)]
struct ResetLine<'a> {
    id: u64,
    obs: &'a str,
    instruction: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    valid_actions: Option<Vec<String>>,
}

#[derive(Serialize)]
struct StepLine<'a> {
    id: u64,
    #[serde(flatten)]
    result: &'a StepResult,
    #[serde(skip_serializing_if = "Option::is_none")]
    valid_actions: Option<Vec<String>>,
}

/// The env instances one server holds.
struct Instances {
    config: EnvConfig,
    envs: HashMap<u64, Box<dyn Env>>,
    /// The env's fixed action names; `valid_actions` is sent only when it differs.
    fixed_actions: Vec<String>,
}

impl Instances {
    fn state_actions(&self, env: &dyn Env) -> Option<Vec<String>> {
        let valid = env.valid_actions();
        (valid != self.fixed_actions).then_some(valid)
    }

    /// The reply line to `request`; an error is the message of the `error` reply: the env's
    /// own, or `bad request: ...` where the request itself cannot be served.
    fn reply(&mut self, request: Request) -> Result<String, String> {
        Ok(match request {
            Request::Handshake { id, protocol } => {
                if protocol != PROTOCOL_VERSION {
                    return Err(format!(
                        "bad request: this server speaks protocol {PROTOCOL_VERSION}, the \
                         client asked for {protocol}"
                    ));
                }
                let probe = self.config.build().map_err(|e| e.to_string())?;
                with_id(
                    id,
                    &Hello {
                        protocol: PROTOCOL_VERSION,
                        env: probe.name().to_string(),
                        max_turns: Some(probe.default_max_turns()),
                        actions: probe.action_names(),
                    },
                )
            }
            Request::Reset { id, instance, seed } => {
                if !self.envs.contains_key(&instance) {
                    let env = self.config.build().map_err(|e| e.to_string())?;
                    self.envs.insert(instance, env);
                }
                let env = self.envs.get_mut(&instance).expect("inserted above");
                let reset = env.reset(seed).map_err(|e| e.to_string())?;
                let valid_actions = {
                    let env = self.envs[&instance].as_ref();
                    self.state_actions(env)
                };
                to_line(&ResetLine {
                    id,
                    obs: &reset.observation,
                    instruction: &reset.instruction,
                    valid_actions,
                })
            }
            Request::Step {
                id,
                instance,
                action,
            } => {
                let env = self.envs.get_mut(&instance).ok_or_else(|| {
                    format!("bad request: instance {instance} was never reset (send `reset` first)")
                })?;
                let result = env.step(&action).map_err(|e| e.to_string())?;
                let valid_actions = self.state_actions(self.envs[&instance].as_ref());
                to_line(&StepLine {
                    id,
                    result: &result,
                    valid_actions,
                })
            }
            Request::Close { id, instance } => {
                self.envs.remove(&instance);
                with_id(id, &serde_json::Map::new())
            }
        })
    }
}

/// `payload`'s fields after `id`, as one line.
fn with_id<P: Serialize>(id: u64, payload: &P) -> String {
    let mut map = serde_json::Map::new();
    map.insert("id".into(), Value::from(id));
    if let Ok(Value::Object(fields)) = serde_json::to_value(payload) {
        map.extend(fields);
    }
    Value::Object(map).to_string()
}

fn to_line<T: Serialize>(line: &T) -> String {
    serde_json::to_string(line).expect("reply lines serialise")
}

fn error_line(id: Option<u64>, message: &str) -> String {
    serde_json::json!({ "id": id, "error": message }).to_string()
}

/// Serves `config` on `input`/`output` until `input` closes. A request that cannot be
/// served gets an `error` reply; only I/O failures end the loop with an error.
pub fn serve(
    config: &EnvConfig,
    input: impl Read,
    mut output: impl Write,
) -> Result<(), std::io::Error> {
    let mut input = BufReader::with_capacity(1 << 16, input);
    let probe = config
        .build()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    let mut instances = Instances {
        config: config.clone(),
        envs: HashMap::new(),
        fixed_actions: probe.action_names(),
    };
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let reply = match serde_json::from_slice::<Request>(&line) {
            Ok(request) => {
                let id = request_id(&request);
                match instances.reply(request) {
                    Ok(line) => line,
                    Err(message) => error_line(Some(id), &message),
                }
            }
            Err(e) => {
                let value = serde_json::from_slice::<Value>(&line).ok();
                let id = value
                    .as_ref()
                    .and_then(|v| v.get("id").and_then(Value::as_u64));
                let why = value.as_ref().and_then(misfit_number);
                error_line(
                    id,
                    &format!("bad request: {}", why.unwrap_or(e.to_string())),
                )
            }
        };
        output.write_all(reply.as_bytes())?;
        output.write_all(b"\n")?;
        // Requests already read are answered before flushing: a client that sends many
        // at once gets their replies in few writes.
        if input.buffer().is_empty() {
            output.flush()?;
        }
    }
    output.flush()?;
    Ok(())
}

/// The first of a request's whole-number fields whose value is not one, named (serde's
/// message names only the value: "invalid type: floating point `1.5`, expected u64").
fn misfit_number(request: &Value) -> Option<String> {
    ["id", "instance", "seed", "protocol"]
        .iter()
        .find_map(|&field| whole_number(field, request.get(field)?).err())
}

fn request_id(request: &Request) -> u64 {
    match request {
        Request::Handshake { id, .. }
        | Request::Reset { id, .. }
        | Request::Step { id, .. }
        | Request::Close { id, .. } => *id,
    }
}

#[cfg(test)]
#[path = "env_server_tests.rs"]
mod tests;
