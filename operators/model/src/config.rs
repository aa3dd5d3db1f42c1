//! The Qwen2 architecture's hyper-parameters, read from a Hugging Face `config.json` or built
//! from the `Tiny` preset.
//!
//! Field names and meanings are Hugging Face's `Qwen2Config` (transformers
//! `models/qwen2/configuration_qwen2.py`), so a user's Qwen2/Qwen2.5 directory loads as is and a
//! checkpoint we save loads in transformers. The same struct reads Llama and Qwen3 configs
//! (`LlamaConfig`, `Qwen3Config`: the same names plus `attention_bias`), whose differences
//! are switches ([`crate::family`]). Features of those configs this implementation does not
//! have (rope scaling other than `llama3`, activations other than SiLU, MLP biases) are
//! refused with a clear error instead of being silently ignored.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::ModelError;
use super::family::Family;

/// Hyper-parameters of a Qwen2 decoder-only transformer (Hugging Face `Qwen2Config` names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Qwen2Config {
    /// Number of token ids (rows of the embedding matrix).
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Width of the SwiGLU MLP's hidden layer.
    pub intermediate_size: usize,
    /// Number of decoder layers.
    pub num_hidden_layers: usize,
    /// Number of query heads.
    pub num_attention_heads: usize,
    /// Number of key/value heads (grouped-query attention); defaults to `num_attention_heads`.
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    /// Per-head width; Qwen2 derives it as `hidden_size / num_attention_heads`.
    #[serde(default)]
    pub head_dim: Option<usize>,
    /// Longest position the model was trained for.
    #[serde(default = "default_max_positions")]
    pub max_position_embeddings: usize,
    /// Epsilon inside RMSNorm's square root.
    #[serde(default = "default_rms_norm_eps")]
    pub rms_norm_eps: f64,
    /// Base of the rotary embedding frequencies.
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    /// Whether the output projection reuses the token embedding matrix.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Standard deviation of the normal initialisation of fresh weights.
    #[serde(default = "default_initializer_range")]
    pub initializer_range: f64,
    /// MLP activation; only "silu" is implemented.
    #[serde(default = "default_hidden_act")]
    pub hidden_act: String,
    /// End-of-sequence token id(s) from config.json, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eos_token_id: Option<serde_json::Value>,
    /// Beginning-of-sequence token id from config.json, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bos_token_id: Option<serde_json::Value>,
    /// transformers >= 5 writes `{"rope_theta": .., "rope_type": "default"}` here instead of a
    /// top-level `rope_theta`; only the default rope type is implemented.
    #[serde(default, skip_serializing)]
    pub rope_parameters: Option<serde_json::Value>,
    /// Null, or Llama 3's frequency rescaling (`{"rope_type": "llama3", ..}`,
    /// [`crate::rope_scaling`]); other rope types are refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_scaling: Option<serde_json::Value>,
    /// Llama and Qwen3: biases on all four attention projections (Qwen2 has q/k/v biases
    /// always, none on the output projection; [`crate::family`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_bias: Option<bool>,
    /// Llama: biases on the MLP projections; only `false` is implemented.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlp_bias: Option<bool>,
    /// Sliding-window attention: layers `max_window_layers..` let each query see only its
    /// last `sliding_window` keys (transformers' `layer_types`, "sliding_attention").
    #[serde(default)]
    pub use_sliding_window: bool,
    /// Keys a query sees in a sliding-window layer, itself included.
    #[serde(default)]
    pub sliding_window: Option<usize>,
    /// Layers below this index keep full attention (transformers' default 28).
    #[serde(default = "default_max_window_layers")]
    pub max_window_layers: usize,
    /// transformers >= 4.53: each layer's "full_attention" or "sliding_attention"; when
    /// absent it follows from `use_sliding_window` and `max_window_layers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer_types: Option<Vec<String>>,
    /// Hugging Face's model family tag: "qwen2" (the default), "llama" or "qwen3".
    #[serde(default = "default_model_type")]
    pub model_type: String,
}

fn default_max_positions() -> usize {
    32768
}
fn default_rms_norm_eps() -> f64 {
    1e-6
}
fn default_rope_theta() -> f64 {
    10000.0
}
fn default_max_window_layers() -> usize {
    28
}
fn default_initializer_range() -> f64 {
    0.02
}
fn default_hidden_act() -> String {
    "silu".to_string()
}
fn default_model_type() -> String {
    "qwen2".to_string()
}

impl Qwen2Config {
    /// Reads and validates `config.json`.
    pub fn from_json_file(path: &Path) -> Result<Self, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
        let mut config: Qwen2Config =
            serde_json::from_str(&text).map_err(|source| ModelError::Json {
                path: path.to_path_buf(),
                source,
            })?;
        config.absorb_rope_parameters();
        config.validate().map_err(|message| ModelError::Config {
            path: path.to_path_buf(),
            message,
        })?;
        Ok(config)
    }

    /// Takes `rope_theta` from transformers 5's `rope_parameters` when present.
    fn absorb_rope_parameters(&mut self) {
        let theta = self
            .rope_parameters
            .as_ref()
            .and_then(|p| p.get("rope_theta"))
            .and_then(|t| t.as_f64());
        if let Some(theta) = theta {
            self.rope_theta = theta;
        }
    }

    /// Writes `config.json` in Hugging Face's layout (loadable by transformers).
    pub fn to_json_string(&self) -> String {
        let mut value = serde_json::to_value(self).expect("config serializes");
        let object = value.as_object_mut().expect("config is an object");
        object.insert("num_key_value_heads".into(), self.kv_heads().into());
        object.insert(
            "architectures".into(),
            serde_json::json!([self.family().architecture()]),
        );
        if self.rope_scaling.is_none() && matches!(self.llama3_rope(), Ok(Some(_))) {
            // transformers 5 reads the legacy key too; `rope_parameters` is not written.
            object.insert("rope_scaling".into(), self.rope_parameters.clone().into());
        }
        object.insert("torch_dtype".into(), "float32".into());
        object.insert("use_cache".into(), true.into());
        if self.head_dim.is_none() {
            object.remove("head_dim");
        }
        serde_json::to_string_pretty(&value).expect("json value prints")
    }

    /// Checks the invariants the model code relies on; the message says what to fix.
    pub fn validate(&self) -> Result<(), String> {
        Family::from_model_type(&self.model_type)?;
        if self.mlp_bias == Some(true) {
            return Err("mlp_bias is true; only MLPs without biases are supported".into());
        }
        let positive = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.kv_heads()),
            ("head_dim", self.head_dim()),
            ("max_position_embeddings", self.max_position_embeddings),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{name} must be positive"));
        }
        if self.head_dim.is_none() && !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(format!(
                "hidden_size {} is not divisible by num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        // Rotary embeddings rotate pairs of features: a head needs at least one pair.
        if !self.head_dim().is_multiple_of(2) {
            return Err(format!(
                "head dimension {} must be even (and at least 2) for rotary embeddings",
                self.head_dim()
            ));
        }
        if !self.num_attention_heads.is_multiple_of(self.kv_heads()) {
            return Err(format!(
                "num_attention_heads {} is not a multiple of num_key_value_heads {}",
                self.num_attention_heads,
                self.kv_heads()
            ));
        }
        if !(self.rope_theta.is_finite() && self.rope_theta > 0.0) {
            return Err(format!(
                "rope_theta {} must be a positive number (Qwen2.5 uses 1000000.0)",
                self.rope_theta
            ));
        }
        if !(self.rms_norm_eps.is_finite() && self.rms_norm_eps > 0.0) {
            return Err(format!(
                "rms_norm_eps {} must be a positive number (Qwen2.5 uses 1e-6)",
                self.rms_norm_eps
            ));
        }
        if self.hidden_act != "silu" {
            return Err(format!(
                "hidden_act \"{}\" is not supported; Qwen2 uses \"silu\"",
                self.hidden_act
            ));
        }
        self.llama3_rope()?;
        if let Some(types) = &self.layer_types {
            let known = ["full_attention", "sliding_attention"];
            if types.len() != self.num_hidden_layers {
                return Err(format!(
                    "layer_types has {} entries for {} layers",
                    types.len(),
                    self.num_hidden_layers
                ));
            }
            if let Some(t) = types.iter().find(|t| !known.contains(&t.as_str())) {
                return Err(format!(
                    "layer_types entry \"{t}\" is not supported; use \"full_attention\" or \"sliding_attention\""
                ));
            }
        }
        if self.use_sliding_window && self.sliding_window.is_none_or(|w| w == 0) {
            return Err(
                "use_sliding_window is true but sliding_window is not a positive number of keys"
                    .into(),
            );
        }
        Ok(())
    }

    /// The attention window of decoder layer `layer`: `Some(keys)` for a sliding-window
    /// layer, `None` for full causal attention (transformers' `layer_types` rule).
    pub fn layer_window(&self, layer: usize) -> Option<usize> {
        let sliding = match &self.layer_types {
            Some(types) => types.get(layer).is_some_and(|t| t == "sliding_attention"),
            None => layer >= self.max_window_layers,
        };
        self.sliding_window
            .filter(|_| sliding && self.use_sliding_window)
    }

    /// The family of `model_type` (a validated config names a supported one; anything else
    /// reads as Qwen2, whose switches were the only ones before families existed).
    pub fn family(&self) -> Family {
        Family::from_model_type(&self.model_type).unwrap_or(Family::Qwen2)
    }

    /// Whether the q, k and v projections have biases ([`Family::qkv_bias`]).
    pub fn qkv_bias(&self) -> bool {
        self.family().qkv_bias(self.attention_bias)
    }

    /// Whether attention's output projection has a bias ([`Family::o_bias`]).
    pub fn o_bias(&self) -> bool {
        self.family().o_bias(self.attention_bias)
    }

    /// Whether queries and keys are RMS-normalised per head ([`Family::qk_norm`]).
    pub fn qk_norm(&self) -> bool {
        self.family().qk_norm()
    }

    /// Number of key/value heads.
    pub fn kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads.max(1))
    }

    /// End-of-sequence ids declared in config.json (one id or a list).
    pub fn eos_token_ids(&self) -> Vec<u32> {
        match &self.eos_token_id {
            Some(serde_json::Value::Number(n)) => {
                n.as_u64().map(|v| v as u32).into_iter().collect()
            }
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .filter_map(|v| v.as_u64().map(|v| v as u32))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The `Tiny` preset: a small Qwen2 for training from scratch on CPU.
    pub fn tiny(preset: &TinyArch, vocab_size: usize) -> Self {
        Qwen2Config {
            vocab_size,
            hidden_size: preset.dim,
            intermediate_size: preset.ffn_dim.unwrap_or(preset.dim * 4),
            num_hidden_layers: preset.layers,
            num_attention_heads: preset.heads,
            num_key_value_heads: Some(preset.kv_heads.unwrap_or(preset.heads)),
            head_dim: preset.head_dim,
            max_position_embeddings: preset.max_positions,
            rms_norm_eps: default_rms_norm_eps(),
            rope_theta: preset.rope_theta,
            tie_word_embeddings: preset.tie_embeddings,
            initializer_range: default_initializer_range(),
            hidden_act: default_hidden_act(),
            eos_token_id: None,
            bos_token_id: None,
            rope_parameters: None,
            rope_scaling: None,
            attention_bias: None,
            mlp_bias: None,
            use_sliding_window: preset.sliding_window.is_some(),
            sliding_window: preset.sliding_window,
            max_window_layers: 0,
            layer_types: None,
            model_type: default_model_type(),
        }
    }
}

/// The `Tiny(...)` architecture as written in a pipeline's `models:` section: a Qwen2 of
/// this shape with seeded random weights (`arch: Tiny(layers: 2, dim: 64, heads: 8)`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TinyArch {
    /// Number of decoder layers (default 2).
    pub layers: usize,
    /// Width of the residual stream, `hidden_size` (default 128).
    pub dim: usize,
    /// Number of query heads, `num_attention_heads` (default 4); `dim` must be divisible by
    /// it unless `head_dim` is set.
    pub heads: usize,
    /// Number of key/value heads (grouped-query attention); default `heads`.
    pub kv_heads: Option<usize>,
    /// Width of one head (`head_dim` in config.json); default `dim / heads`. A wider head
    /// has more rotary frequency pairs; on FrozenLake, width 16 learned the holes sooner
    /// with supervised labels but not with StarPO (bench/history/learning_curve.md).
    pub head_dim: Option<usize>,
    /// MLP hidden width, `intermediate_size`; default `4 * dim`.
    pub ffn_dim: Option<usize>,
    /// Rows of the embedding and output matrices, `vocab_size`; default the tokenizer's.
    /// A larger one is a real model's shape (Qwen2.5's 151,936) over a smaller tokenizer.
    pub vocab: Option<usize>,
    /// Longest sequence (prompt + response) the model handles (default 4096).
    pub max_positions: usize,
    /// Base of the rotary position embedding (`rope_theta` in config.json); default
    /// 10000. A small model reading a grid from scratch learns faster with a small base
    /// (e.g. 10), whose rotations tell apart the short offsets between neighbouring
    /// cells; Qwen2.5's 1e6 is for long contexts.
    pub rope_theta: f64,
    /// Reuse the embedding matrix as the output projection, as Qwen2.5-0.5B does (default
    /// true).
    pub tie_embeddings: bool,
    /// Qwen2's sliding-window attention in every layer: each query sees only its last
    /// this many keys (`use_sliding_window`, `sliding_window`, `max_window_layers: 0` in
    /// config.json); default off. In a trajectory-wise chat a window of about one turn
    /// keeps the policy reading the current observation, not the earlier ones: on
    /// FrozenLake the supervised probe with seven earlier turns reached 0.61 after
    /// 25,600 labelled states with a window against 0.50 without; StarPO with a window
    /// and GiGPO's settings left its 0.77 plateau, slowly
    /// (bench/history/learning_curve_frozen_lake_starpo.md).
    pub sliding_window: Option<usize>,
}

impl Default for TinyArch {
    fn default() -> Self {
        TinyArch {
            layers: 2,
            dim: 128,
            heads: 4,
            kv_heads: None,
            head_dim: None,
            ffn_dim: None,
            vocab: None,
            max_positions: 4096,
            rope_theta: default_rope_theta(),
            tie_embeddings: true,
            sliding_window: None,
        }
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
