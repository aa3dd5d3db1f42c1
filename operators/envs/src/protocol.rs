//! The env-server protocol, version [`PROTOCOL_VERSION`]: JSON lines over a byte stream
//! (a server's stdin/stdout), one request per line, one reply per line, matched by `id`.
//! The full description for server authors is `docs/ENV_PROTOCOL.md`; this module holds
//! the message shapes both ends use and the checks a reply must pass.
//!
//! ```text
//! → {"id":0,"op":"handshake","protocol":1}
//! ← {"id":0,"protocol":1,"env":"FrozenLake","max_turns":100,"actions":["Left","Down","Right","Up"]}
//! → {"id":1,"op":"reset","instance":0,"seed":7}
//! ← {"id":1,"obs":"P_G\n...","instruction":"You are ..."}
//! → {"id":2,"op":"step","instance":0,"action":"<answer>Right</answer>"}
//! ← {"id":2,"obs":"...","reward":0.0,"terminated":false,"truncated":false,"info":{"success":false,...}}
//! → {"id":3,"op":"close","instance":0}
//! ← {"id":3}
//! ```
//!
//! Reset and step replies are `roll-flow play`'s JSON lines plus `id` (and, for envs whose
//! actions change with the state, `valid_actions`), so the two share one schema. A server
//! that cannot serve a request replies `{"id":N,"error":"..."}`. Replies may come in any
//! order. A server exits when its stdin closes.

use std::collections::BTreeSet;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::env::{EnvInfo, Reset, StepMetrics, StepResult};

/// The protocol version this build speaks; the handshake refuses any other.
pub const PROTOCOL_VERSION: u32 = 1;

/// A request, as the trainer sends it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// The first request on a connection.
    Handshake { id: u64, protocol: u32 },
    /// Starts a new episode of `instance` (created on its first reset).
    Reset { id: u64, instance: u64, seed: u64 },
    /// Plays the model's raw reply text in `instance`.
    Step {
        id: u64,
        instance: u64,
        action: String,
    },
    /// Forgets `instance`.
    Close { id: u64, instance: u64 },
}

/// The handshake reply: what the server serves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    /// The env's name (shown in errors and `roll-flow graph`).
    pub env: String,
    /// The env's own turn limit, used when the `envs:` entry sets no `max_turns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<usize>,
    /// The fixed action names, if the env has a finite action set (so `guide: Actions`
    /// works); empty for open-ended answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<String>,
}

/// A reset reply, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct ResetReply {
    pub reset: Reset,
    pub valid_actions: Option<Vec<String>>,
}

/// A step reply, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct StepReply {
    pub result: StepResult,
    pub valid_actions: Option<Vec<String>>,
}

/// Why a reply was refused; the message names the field and what was there.
pub type ReplyError = String;

pub(crate) fn field<'a>(
    reply: &'a Map<String, Value>,
    name: &str,
) -> Result<&'a Value, ReplyError> {
    reply
        .get(name)
        .ok_or_else(|| format!("the reply has no `{name}` field"))
}

pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn text(reply: &Map<String, Value>, name: &str) -> Result<String, ReplyError> {
    match field(reply, name)? {
        Value::String(s) => Ok(s.clone()),
        other => Err(format!("`{name}` is {}, expected a string", kind(other))),
    }
}

pub(crate) fn flag(
    reply: &Map<String, Value>,
    name: &str,
    default: bool,
) -> Result<bool, ReplyError> {
    match reply.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(format!(
            "`{name}` is {}, expected true or false",
            kind(other)
        )),
    }
}

pub(crate) fn number(value: &Value, name: &str) -> Result<f32, ReplyError> {
    let Value::Number(n) = value else {
        return Err(format!(
            "`{name}` is {}, expected a finite number",
            kind(value)
        ));
    };
    let v = n.as_f64().unwrap_or(f64::NAN) as f32;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("`{name}` is {n}, outside the finite f32 range"))
    }
}

pub(crate) fn valid_actions(reply: &Map<String, Value>) -> Result<Option<Vec<String>>, ReplyError> {
    match reply.get("valid_actions") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!(
                    "`valid_actions` holds {}, expected strings",
                    kind(other)
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(format!(
            "`valid_actions` is {}, expected a list of strings",
            kind(other)
        )),
    }
}

/// Most distinct metric names one process interns (they live as long as the process).
const MAX_METRIC_NAMES: usize = 256;

static METRIC_NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

/// `name` as a `'static` str, or `None` once [`MAX_METRIC_NAMES`] names are held (a
/// server that invents names without end cannot grow memory without end).
fn intern(name: &str) -> Option<&'static str> {
    let mut names = METRIC_NAMES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&known) = names.get(name) {
        return Some(known);
    }
    if names.len() >= MAX_METRIC_NAMES {
        return None;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(leaked);
    Some(leaked)
}

const INFO_FLAGS: [&str; 3] = ["success", "action_is_valid", "action_is_effective"];

/// A step's `info`: the standard flags (`success` false, `action_is_valid` and
/// `action_is_effective` true when absent), `format_penalty`, and every other numeric
/// field, top-level or inside `metrics`, as a step metric (the first
/// [`crate::env::STEP_METRICS`] of them). Other fields are the server's own business.
pub(crate) fn info(value: Option<&Value>) -> Result<EnvInfo, ReplyError> {
    let empty = Map::new();
    let info = match value {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(map)) => map,
        Some(other) => return Err(format!("`info` is {}, expected an object", kind(other))),
    };
    let mut parsed = EnvInfo {
        success: flag(info, "success", false)?,
        action_is_valid: flag(info, "action_is_valid", true)?,
        action_is_effective: flag(info, "action_is_effective", true)?,
        format_penalty: match info.get("format_penalty") {
            None | Some(Value::Null) => 0.0,
            Some(v) => number(v, "info.format_penalty")?,
        },
        metrics: StepMetrics::default(),
    };
    let nested = match info.get("metrics") {
        Some(Value::Object(map)) => Some(map),
        _ => None,
    };
    let top = info
        .iter()
        .filter(|(k, _)| !INFO_FLAGS.contains(&k.as_str()) && *k != "format_penalty");
    for (name, value) in top.chain(nested.into_iter().flatten()) {
        if let Value::Number(_) = value {
            let v = number(value, &format!("info.{name}"))?;
            if let Some(name) = intern(name) {
                parsed.metrics.push(name, v);
            }
        }
    }
    Ok(parsed)
}

fn object(reply: &Value) -> Result<&Map<String, Value>, ReplyError> {
    match reply {
        Value::Object(map) => match map.get("error") {
            Some(Value::String(e)) => Err(format!("the server said: {e}")),
            Some(other) => Err(format!("the server said: {other}")),
            None => Ok(map),
        },
        other => Err(format!("the reply is {}, expected an object", kind(other))),
    }
}

/// Checks a handshake reply.
pub fn hello(reply: &Value) -> Result<Hello, ReplyError> {
    let map = object(reply)?;
    let hello: Hello = serde_json::from_value(Value::Object(map.clone()))
        .map_err(|e| format!("the handshake reply does not fit: {e}"))?;
    if hello.protocol != PROTOCOL_VERSION {
        return Err(format!(
            "the server speaks protocol {}, this roll-flow speaks {PROTOCOL_VERSION}",
            hello.protocol
        ));
    }
    check_served(hello.max_turns, &hello.actions)?;
    Ok(hello)
}

/// Checks what a server says it serves, in a handshake or an HTTP server's `/metadata`: a
/// turn limit of at least one, and action names that are not empty and each listed once
/// (guided choice needs them distinct).
pub fn check_served(max_turns: Option<usize>, actions: &[String]) -> Result<(), ReplyError> {
    if max_turns == Some(0) {
        return Err(
            "`max_turns` is 0; an episode plays at least one turn (or leave it out \
                    for the envs: entry's)"
                .into(),
        );
    }
    for (i, action) in actions.iter().enumerate() {
        if action.trim().is_empty() {
            return Err(format!("`actions` entry {i} is empty; name each action"));
        }
        if actions[..i].contains(action) {
            return Err(format!(
                "`actions` lists {action:?} twice; list each action once"
            ));
        }
    }
    Ok(())
}

/// `value` of request field `field` as a whole number, or what is wrong with it (serde's
/// message names only the value); what both env servers refuse a bad `seed` or `id` with.
pub fn whole_number(field: &str, value: &Value) -> Result<u64, String> {
    value.as_u64().ok_or_else(|| {
        format!("`{field}` is {value}; it must be a whole number from 0 to 2^64 - 1")
    })
}

/// Checks a reset reply.
pub fn reset_reply(reply: &Value) -> Result<ResetReply, ReplyError> {
    let map = object(reply)?;
    Ok(ResetReply {
        reset: Reset {
            observation: text(map, "obs")?,
            instruction: match map.get("instruction") {
                None | Some(Value::Null) => String::new(),
                Some(_) => text(map, "instruction")?,
            },
        },
        valid_actions: valid_actions(map)?,
    })
}

/// Checks a step reply: `reward` must be a finite number, the flags booleans.
pub fn step_reply(reply: &Value) -> Result<StepReply, ReplyError> {
    let map = object(reply)?;
    let terminated = field(map, "terminated")?;
    let truncated = field(map, "truncated")?;
    let (Value::Bool(terminated), Value::Bool(truncated)) = (terminated, truncated) else {
        return Err(format!(
            "`terminated` is {} and `truncated` is {}, expected booleans",
            kind(terminated),
            kind(truncated)
        ));
    };
    Ok(StepReply {
        result: StepResult {
            observation: text(map, "obs")?,
            reward: number(field(map, "reward")?, "reward")?,
            terminated: *terminated,
            truncated: *truncated,
            info: info(map.get("info"))?,
        },
        valid_actions: valid_actions(map)?,
    })
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
