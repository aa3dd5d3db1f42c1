//! OpenEnv's session replies read as roll-flow's reset and step replies.
//!
//! ```text
//! → {"type":"reset","data":{"seed":7}}
//! ← {"type":"observation","data":{"observation":{"obs":"...","instruction":"..."},"reward":null,"done":false}}
//! → {"type":"step","data":{"message":"<answer>Right</answer>"}}
//! ← {"type":"observation","data":{"observation":{"obs":"...","info":{...},"truncated":false},"reward":0.0,"done":false}}
//! ← {"type":"error","data":{"message":"...","code":"EXECUTION_ERROR"}}
//! ```
//!
//! OpenEnv has one end flag, `done`; an observation's `truncated: true` (which `roll-flow
//! env-server` sends) makes the end a truncation. `instruction`, `valid_actions` and
//! `info` are read from the observation when present, as in the stdio protocol; a `null`
//! reward (OpenEnv's "not set") is 0.

use serde_json::{Map, Value};

use crate::env::{EnvInfo, Reset, StepResult};
use crate::protocol::{self, kind, ResetReply, StepReply};

/// The reply's `data`, after checking it is an observation and not an error.
fn data<'a>(reply: &'a Value, expected: &str) -> Result<&'a Map<String, Value>, String> {
    let Value::Object(map) = reply else {
        return Err(format!("the reply is {}, expected an object", kind(reply)));
    };
    let data = map.get("data");
    match map.get("type").and_then(Value::as_str) {
        Some("error") => {
            let field = |name| data.and_then(|d| d.get(name)).and_then(Value::as_str);
            let message = field("message").unwrap_or("(no message)");
            Err(match field("code") {
                Some(code) => format!("the server said {code}: {message}"),
                None => format!("the server said: {message}"),
            })
        }
        Some(t) if t == expected => match data {
            Some(Value::Object(d)) => Ok(d),
            Some(other) => Err(format!("`data` is {}, expected an object", kind(other))),
            None => Err("the reply has no `data`".into()),
        },
        Some(t) => Err(format!("the reply's type is `{t}`, expected `{expected}`")),
        None => Err("the reply has no `type`".into()),
    }
}

/// The observation object, its text (`field`, or all of it when `field` is empty).
fn observation<'a>(
    data: &'a Map<String, Value>,
    field: &str,
) -> Result<(&'a Map<String, Value>, String), String> {
    let observation = match protocol::field(data, "observation")? {
        Value::Object(o) => o,
        other => {
            return Err(format!(
                "`observation` is {}, expected an object",
                kind(other)
            ))
        }
    };
    let text = match field {
        "" => Value::Object(observation.clone()).to_string(),
        name => match observation.get(name) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => {
                let has: Vec<&str> = observation.keys().map(String::as_str).collect();
                return Err(format!(
                    "the observation has no `{name}` field (it has: {}); set the Remote \
                     env's `observation_field`",
                    has.join(", ")
                ));
            }
        },
    };
    Ok((observation, text))
}

/// Checks a reset reply.
pub fn reset(reply: &Value, field: &str) -> Result<ResetReply, String> {
    let data = data(reply, "observation")?;
    let (observation, text) = observation(data, field)?;
    Ok(ResetReply {
        reset: Reset {
            observation: text,
            instruction: match observation.get("instruction") {
                None | Some(Value::Null) => String::new(),
                Some(_) => protocol::text(observation, "instruction")?,
            },
        },
        valid_actions: protocol::valid_actions(observation)?,
    })
}

/// Checks a step reply: `reward` a finite number or null, `done` a boolean.
pub fn step(reply: &Value, field: &str) -> Result<StepReply, String> {
    let data = data(reply, "observation")?;
    let (observation, text) = observation(data, field)?;
    let done = match protocol::field(data, "done")? {
        Value::Bool(b) => *b,
        other => return Err(format!("`done` is {}, expected a boolean", kind(other))),
    };
    let reward = match data.get("reward") {
        None | Some(Value::Null) => 0.0,
        Some(r) => protocol::number(r, "reward")?,
    };
    let truncated = done && protocol::flag(observation, "truncated", false)?;
    let info: EnvInfo = protocol::info(observation.get("info"))?;
    Ok(StepReply {
        result: StepResult {
            observation: text,
            reward,
            terminated: done && !truncated,
            truncated,
            info,
        },
        valid_actions: protocol::valid_actions(observation)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_openenv_echo_reply_reads_with_its_own_field_and_a_null_reward_is_zero() {
        let reply = json!({"type": "observation", "data": {
            "observation": {"echoed_message": "hi", "message_length": 2},
            "reward": null, "done": false}});
        let step = step(&reply, "echoed_message").unwrap();
        assert_eq!(step.result.observation, "hi");
        assert_eq!(step.result.reward, 0.0);
        assert!(!step.result.done());
        let whole = reset(&reply, "").unwrap();
        assert_eq!(
            whole.reset.observation,
            r#"{"echoed_message":"hi","message_length":2}"#
        );
        let missing = reset(&reply, "obs").unwrap_err();
        assert!(missing.contains("has no `obs` field (it has: echoed_message, message_length)"));
    }

    #[test]
    fn roll_flow_fields_ride_in_the_observation() {
        let reply = json!({"type": "observation", "data": {
            "observation": {"obs": "S", "valid_actions": ["a"], "truncated": true,
                            "info": {"success": true, "distance": 3}},
            "reward": 1.5, "done": true}});
        let step = step(&reply, "obs").unwrap();
        assert_eq!(step.result.reward, 1.5);
        assert!(step.result.truncated && !step.result.terminated);
        assert!(step.result.info.success);
        assert_eq!(step.result.info.metrics.get("distance"), Some(3.0));
        assert_eq!(step.valid_actions, Some(vec!["a".to_string()]));
    }

    #[test]
    fn errors_and_bad_shapes_are_refused_with_the_reason() {
        let error = json!({"type": "error", "data": {"message": "Invalid message", "code": "VALIDATION_ERROR"}});
        assert_eq!(
            step(&error, "obs").unwrap_err(),
            "the server said VALIDATION_ERROR: Invalid message"
        );
        let bad_reward = json!({"type": "observation", "data": {"observation": {"obs": ""}, "reward": "1", "done": false}});
        assert!(step(&bad_reward, "obs")
            .unwrap_err()
            .contains("`reward` is a string"));
        let no_done = json!({"type": "observation", "data": {"observation": {"obs": ""}}});
        assert!(step(&no_done, "obs")
            .unwrap_err()
            .contains("no `done` field"));
        let state = json!({"type": "state", "data": {}});
        assert!(reset(&state, "obs")
            .unwrap_err()
            .contains("type is `state`"));
    }
}
