//! The Rust server against the native env, request by request.

use serde_json::json;

use super::serve;
use crate::config::EnvConfig;
use crate::protocol::{hello, reset_reply, step_reply};

/// The Rust server answers each request with the native env's own results.
#[test]
fn the_rust_server_replays_the_native_env_exactly() {
    let config = EnvConfig::parse("Sokoban(dim_room: (6, 6), num_boxes: 1)").unwrap();
    let actions = [
        "<answer>Up</answer>",
        "Down",
        "<answer>Left</answer>",
        "<answer>Right</answer>",
    ];
    let mut input = vec![json!({"id": 0, "op": "handshake", "protocol": 1}).to_string()];
    input.push(json!({"id": 1, "op": "reset", "instance": 7, "seed": 11}).to_string());
    for (k, a) in actions.iter().enumerate() {
        input.push(json!({"id": 2 + k, "op": "step", "instance": 7, "action": a}).to_string());
    }
    input.push(json!({"id": 9, "op": "step", "instance": 8, "action": "Up"}).to_string());
    input.push("not json".into());
    input.push(json!({"id": 10, "op": "reset", "instance": 7, "seed": 1.5}).to_string());
    input.push(json!({"id": 11, "op": "handshake", "protocol": 99}).to_string());
    let mut out = Vec::new();
    serve(&config, input.join("\n").as_bytes(), &mut out).unwrap();
    let lines: Vec<serde_json::Value> = std::str::from_utf8(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let said = hello(&lines[0]).unwrap();
    let mut native = config.build().unwrap();
    assert_eq!(said.env, "Sokoban");
    assert_eq!(said.actions, native.action_names());
    assert_eq!(said.max_turns, Some(native.default_max_turns()));
    let reset = reset_reply(&lines[1]).unwrap();
    assert_eq!(reset.reset, native.reset(11).unwrap());
    for (k, a) in actions.iter().enumerate() {
        assert_eq!(lines[2 + k]["id"], 2 + k);
        assert_eq!(
            step_reply(&lines[2 + k]).unwrap().result,
            native.step(a).unwrap()
        );
    }
    assert_eq!(lines[6]["id"], 9);
    assert_eq!(
        lines[6]["error"],
        "bad request: instance 8 was never reset (send `reset` first)"
    );
    assert!(lines[7]["error"]
        .as_str()
        .unwrap()
        .starts_with("bad request"));
    // A field of the wrong kind is named, with the request's id.
    assert_eq!(lines[8]["id"], 10);
    assert_eq!(
        lines[8]["error"],
        "bad request: `seed` is 1.5; it must be a whole number from 0 to 2^64 - 1"
    );
    assert_eq!(
        lines[9]["error"],
        "bad request: this server speaks protocol 1, the client asked for 99"
    );
    assert_eq!(lines.len(), 10);
}
