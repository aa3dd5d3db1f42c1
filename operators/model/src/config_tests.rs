//! Which layers slide their attention window, read as transformers reads a Qwen2 config.

use super::*;

/// A small config.json with the given extra fields.
fn config(extra: serde_json::Value) -> Qwen2Config {
    let mut value = serde_json::json!({
        "vocab_size": 32, "hidden_size": 16, "intermediate_size": 32,
        "num_hidden_layers": 3, "num_attention_heads": 2,
    });
    let object = value.as_object_mut().unwrap();
    for (key, field) in extra.as_object().unwrap() {
        object.insert(key.clone(), field.clone());
    }
    serde_json::from_value(value).unwrap()
}

fn windows(config: &Qwen2Config) -> Vec<Option<usize>> {
    (0..config.num_hidden_layers)
        .map(|i| config.layer_window(i))
        .collect()
}

#[test]
fn qwen25_configs_name_a_window_but_do_not_use_it() {
    // Qwen2.5-0.5B-Instruct's config.json.
    let c = config(serde_json::json!({
        "use_sliding_window": false, "sliding_window": 32768, "max_window_layers": 21,
    }));
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(windows(&c), vec![None; 3]);
}

#[test]
fn layers_from_max_window_layers_on_slide() {
    let c = config(serde_json::json!({
        "use_sliding_window": true, "sliding_window": 8, "max_window_layers": 1,
    }));
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(windows(&c), vec![None, Some(8), Some(8)]);
    // transformers' default max_window_layers (28) leaves a 3-layer model unwindowed.
    let c = config(serde_json::json!({ "use_sliding_window": true, "sliding_window": 8 }));
    assert_eq!(windows(&c), vec![None; 3]);
}

#[test]
fn explicit_layer_types_win() {
    let c = config(serde_json::json!({
        "use_sliding_window": true, "sliding_window": 4, "max_window_layers": 0,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
    }));
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(windows(&c), vec![Some(4), None, Some(4)]);
}

#[test]
fn bad_window_fields_are_refused_with_the_fix() {
    let no_size = config(serde_json::json!({ "use_sliding_window": true, "sliding_window": null }));
    let err = no_size.validate().unwrap_err();
    assert!(
        err.contains("sliding_window is not a positive number"),
        "{err}"
    );
    let short = config(serde_json::json!({ "layer_types": ["full_attention"] }));
    let err = short.validate().unwrap_err();
    assert!(
        err.contains("layer_types has 1 entries for 3 layers"),
        "{err}"
    );
    let unknown = config(serde_json::json!({
        "layer_types": ["full_attention", "chunked_attention", "full_attention"],
    }));
    let err = unknown.validate().unwrap_err();
    assert!(
        err.contains("\"chunked_attention\" is not supported"),
        "{err}"
    );
}

#[test]
fn tiny_window_covers_every_layer_and_survives_config_json() {
    let preset = TinyArch {
        layers: 2,
        sliding_window: Some(40),
        ..TinyArch::default()
    };
    let c = Qwen2Config::tiny(&preset, 100);
    assert_eq!(windows(&c), vec![Some(40), Some(40)]);
    let reloaded: Qwen2Config = serde_json::from_str(&c.to_json_string()).unwrap();
    assert_eq!(windows(&reloaded), vec![Some(40), Some(40)]);
    let plain = Qwen2Config::tiny(&TinyArch::default(), 100);
    assert_eq!(windows(&plain), vec![None, None]);
}

#[test]
fn a_head_needs_at_least_one_rotary_pair() {
    // head_dim 0 would reach the rotary kernel with rows of 0 features.
    let zero = TinyArch {
        head_dim: Some(0),
        ..TinyArch::default()
    };
    let err = Qwen2Config::tiny(&zero, 100).validate().unwrap_err();
    assert_eq!(err, "head_dim must be positive");
    let odd = TinyArch {
        head_dim: Some(1),
        ..TinyArch::default()
    };
    let err = Qwen2Config::tiny(&odd, 100).validate().unwrap_err();
    assert_eq!(
        err,
        "head dimension 1 must be even (and at least 2) for rotary embeddings"
    );
    let pair = TinyArch {
        head_dim: Some(2),
        ..TinyArch::default()
    };
    assert_eq!(Qwen2Config::tiny(&pair, 100).validate(), Ok(()));
    // From config.json too: an explicit `"head_dim": 0`.
    let c = config(serde_json::json!({ "head_dim": 0 }));
    assert_eq!(c.validate(), Err("head_dim must be positive".to_string()));
}

/// A norm epsilon that is not a positive number made every RMSNorm non-finite, and a
/// context of 0 positions refused each request only when it came: both at load now.
#[test]
fn the_norm_epsilon_and_the_context_are_checked_at_load() {
    for eps in [-1.0, 0.0] {
        let c = config(serde_json::json!({ "rms_norm_eps": eps }));
        let err = c.validate().unwrap_err();
        assert!(err.starts_with("rms_norm_eps ") && err.contains("must be a positive number"));
    }
    let mut c = config(serde_json::json!({}));
    c.rms_norm_eps = f64::NAN;
    assert!(c.validate().unwrap_err().starts_with("rms_norm_eps NaN"));
    let c = config(serde_json::json!({ "max_position_embeddings": 0 }));
    assert_eq!(
        c.validate(),
        Err("max_position_embeddings must be positive".to_string())
    );
}
