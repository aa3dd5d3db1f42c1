//! Reply checks: hand-written replies, good and bad.

use serde_json::json;

use super::{hello, reset_reply, step_reply, PROTOCOL_VERSION};

#[test]
fn a_step_reply_with_play_shaped_info_and_extra_numbers_parses() {
    let reply = json!({"id": 4, "obs": "s", "reward": 0.5, "terminated": true, "truncated": false,
        "info": {"success": true, "action_is_valid": false, "format_penalty": -0.1,
                 "metrics": {"r_att": 0.25}, "turn": 3, "note": "text is ignored"}});
    let step = step_reply(&reply).unwrap();
    assert_eq!(step.result.observation, "s");
    assert_eq!(step.result.reward, 0.5);
    assert!(step.result.terminated && !step.result.truncated);
    let info = step.result.info;
    assert!(info.success && !info.action_is_valid && info.action_is_effective);
    assert_eq!(info.format_penalty, -0.1);
    assert_eq!(info.metrics.get("r_att"), Some(0.25));
    assert_eq!(info.metrics.get("turn"), Some(3.0));
    assert_eq!(info.metrics.get("note"), None);
    assert_eq!(step.valid_actions, None);
}

#[test]
fn bad_replies_name_the_field_and_what_was_there() {
    let base = json!({"obs": "s", "reward": 1.0, "terminated": false, "truncated": false});
    let with = |key: &str, value: serde_json::Value| {
        let mut r = base.clone();
        r[key] = value;
        step_reply(&r).unwrap_err()
    };
    assert_eq!(
        with("reward", json!("1.0")),
        "`reward` is a string, expected a finite number"
    );
    assert!(with("reward", json!(1e300)).contains("outside the finite f32 range"));
    assert!(with("obs", json!(3)).contains("`obs` is a number, expected a string"));
    assert!(with("terminated", json!(null)).contains("expected booleans"));
    let mut missing = base.clone();
    missing.as_object_mut().unwrap().remove("reward");
    assert_eq!(
        step_reply(&missing).unwrap_err(),
        "the reply has no `reward` field"
    );
    assert_eq!(
        step_reply(&json!({"id": 1, "error": "boom"})).unwrap_err(),
        "the server said: boom"
    );
    assert!(reset_reply(&json!({"instruction": "i"}))
        .unwrap_err()
        .contains("`obs`"));
    let old = json!({"protocol": PROTOCOL_VERSION + 1, "env": "X"});
    assert!(hello(&old).unwrap_err().contains("speaks protocol"));
}

/// A handshake whose turn limit is 0, or whose actions repeat or are empty, is refused
/// there, not when guided choice or the first episode trips on it.
#[test]
fn a_handshake_serving_no_turns_or_repeated_actions_is_refused() {
    let said = |extra: serde_json::Value| {
        let mut reply = json!({"protocol": PROTOCOL_VERSION, "env": "X"});
        for (k, v) in extra.as_object().unwrap() {
            reply[k] = v.clone();
        }
        hello(&reply)
    };
    assert!(said(json!({"max_turns": 3, "actions": ["Left", "Right"]})).is_ok());
    assert_eq!(
        said(json!({"actions": ["Left", "Left"]})).unwrap_err(),
        "`actions` lists \"Left\" twice; list each action once"
    );
    assert_eq!(
        said(json!({"actions": ["Left", " "]})).unwrap_err(),
        "`actions` entry 1 is empty; name each action"
    );
    assert!(said(json!({"max_turns": 0}))
        .unwrap_err()
        .starts_with("`max_turns` is 0"));
}
