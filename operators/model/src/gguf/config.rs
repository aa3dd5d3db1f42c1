//! The model config a GGUF file's metadata describes, in Hugging Face's names (as
//! transformers' `GGUF_CONFIG_MAPPING` reads it):
//!
//! | GGUF key (`{arch}.` prefix) | config.json |
//! |---|---|
//! | `general.architecture` (`llama`, `qwen2`, `qwen3`) | `model_type` |
//! | `block_count` | `num_hidden_layers` |
//! | `embedding_length` | `hidden_size` |
//! | `feed_forward_length` | `intermediate_size` |
//! | `attention.head_count`, `attention.head_count_kv` | `num_attention_heads`, `num_key_value_heads` |
//! | `attention.key_length` | `head_dim` |
//! | `attention.layer_norm_rms_epsilon` | `rms_norm_eps` |
//! | `rope.freq_base` | `rope_theta` |
//! | `context_length` | `max_position_embeddings` |
//! | `vocab_size`, else the rows of `token_embd.weight` | `vocab_size` |
//! | no `output.weight` tensor | `tie_word_embeddings` |
//! | a `blk.0.attn_q.bias` tensor (Llama, Qwen3) | `attention_bias` |
//!
//! Rotary variants GGUF expresses otherwise (`rope.scaling.type`, a `rope_freqs.weight`
//! tensor of per-frequency factors, a rotary width below the head's) are refused by name.

use std::collections::BTreeMap;

use super::metadata::Metadata;
use super::reader::TensorInfo;
use crate::config::{Qwen2Config, TinyArch};
use crate::family::Family;

/// The config of the file's model; the error names the key or tensor at fault.
pub fn config_from_metadata(
    meta: &Metadata,
    tensors: &BTreeMap<String, TensorInfo>,
) -> Result<Qwen2Config, String> {
    let arch = meta.str("general.architecture")?;
    let family = Family::from_model_type(arch).map_err(|_| {
        format!("metadata general.architecture is \"{arch}\"; supported: llama, qwen2, qwen3")
    })?;
    let key = |name: &str| format!("{arch}.{name}");
    let hidden = meta.usize(&key("embedding_length"))?;
    let heads = meta.usize(&key("attention.head_count"))?;
    let kv_heads = meta
        .opt_usize(&key("attention.head_count_kv"))?
        .unwrap_or(heads);
    let head_dim = meta.opt_usize(&key("attention.key_length"))?;
    if let (Some(k), Some(v)) = (head_dim, meta.opt_usize(&key("attention.value_length"))?) {
        if k != v {
            return Err(format!("{arch}.attention.key_length {k} differs from value_length {v}; only equal widths are supported"));
        }
    }
    // Checked here, by their GGUF keys, before the head width is derived from them.
    if heads == 0 {
        return Err(format!(
            "{arch}.attention.head_count is 0; it must be positive"
        ));
    }
    if head_dim.is_none() && hidden % heads != 0 {
        return Err(format!(
            "{arch}.embedding_length {hidden} is not divisible by {arch}.attention.head_count \
             {heads}, and no {arch}.attention.key_length gives the head width"
        ));
    }
    let width = head_dim.unwrap_or(hidden / heads);
    if let Some(rotary) = meta.opt_usize(&key("rope.dimension_count"))? {
        if rotary != width {
            return Err(format!(
                "{arch}.rope.dimension_count is {rotary} but heads are {width} wide; partial rotary embeddings are not supported"
            ));
        }
    }
    if let Some(kind) = meta.opt_str(&key("rope.scaling.type"))? {
        if kind != "none" {
            return Err(format!(
                "{arch}.rope.scaling.type \"{kind}\" is not supported"
            ));
        }
    }
    if tensors.contains_key("rope_freqs.weight") {
        return Err(
            "tensor rope_freqs.weight (Llama 3.1's rotary frequency factors) is not supported"
                .into(),
        );
    }
    let vocab = match meta.opt_usize(&key("vocab_size"))? {
        Some(v) => v,
        None => tensors
            .get("token_embd.weight")
            .and_then(|t| t.shape().first().copied())
            .ok_or("tensor token_embd.weight is missing")?,
    };
    let mut config = Qwen2Config::tiny(&TinyArch::default(), vocab);
    config.model_type = arch.to_string();
    config.hidden_size = hidden;
    config.num_hidden_layers = meta.usize(&key("block_count"))?;
    config.intermediate_size = meta.usize(&key("feed_forward_length"))?;
    config.num_attention_heads = heads;
    config.num_key_value_heads = Some(kv_heads);
    config.head_dim = head_dim.filter(|&d| d != hidden / heads);
    config.rms_norm_eps = meta
        .opt_f64(&key("attention.layer_norm_rms_epsilon"))?
        .ok_or_else(|| {
            format!("metadata key {arch}.attention.layer_norm_rms_epsilon is missing")
        })?;
    config.rope_theta = meta.opt_f64(&key("rope.freq_base"))?.unwrap_or(10000.0);
    if let Some(context) = meta.opt_usize(&key("context_length"))? {
        config.max_position_embeddings = context;
    }
    config.tie_word_embeddings = !tensors.contains_key("output.weight");
    if family != Family::Qwen2 {
        config.attention_bias = Some(tensors.contains_key("blk.0.attn_q.bias"));
    }
    let id = |name: &str| meta.opt_usize(&format!("tokenizer.ggml.{name}"));
    config.eos_token_id = id("eos_token_id")?.map(Into::into);
    config.bos_token_id = id("bos_token_id")?.map(Into::into);
    config.validate().map_err(|e| by_gguf_key(&e, arch))?;
    // A shape the tensors cannot back is refused before anything is allocated (a missing
    // tensor is reported by name at load; the slack keeps that the message for it).
    let held: u64 = tensors.values().map(|t| t.elements() as u64).sum();
    let needed = weight_count(&config);
    if needed > held.saturating_mul(2).saturating_add(1 << 20) {
        return Err(format!(
            "the metadata describes a model of at least {needed} weights, but the file's \
             tensors hold {held} values; its shape keys are wrong"
        ));
    }
    Ok(config)
}

/// The weights of the matrices a config implies (norms and biases left out), saturating:
/// a lower bound on what the file must hold, checked before anything is allocated.
fn weight_count(c: &Qwen2Config) -> u64 {
    let [d, f, v, layers] = [
        c.hidden_size,
        c.intermediate_size,
        c.vocab_size,
        c.num_hidden_layers,
    ]
    .map(|n| n as u64);
    let q = (c.num_attention_heads as u64).saturating_mul(c.head_dim() as u64);
    let kv = (c.kv_heads() as u64).saturating_mul(c.head_dim() as u64);
    let layer = [
        d.saturating_mul(q),
        d.saturating_mul(kv),
        d.saturating_mul(kv),
        q.saturating_mul(d),
    ]
    .into_iter()
    .chain(std::iter::repeat_n(d.saturating_mul(f), 3))
    .fold(0u64, u64::saturating_add);
    layers
        .saturating_mul(layer)
        .saturating_add(v.saturating_mul(d))
}

/// A config check's message with the config.json field it opens with replaced by the
/// metadata key the value came from (`num_hidden_layers` → `llama.block_count`).
fn by_gguf_key(message: &str, arch: &str) -> String {
    const KEYS: [(&str, &str); 8] = [
        ("num_hidden_layers", "block_count"),
        ("intermediate_size", "feed_forward_length"),
        ("hidden_size", "embedding_length"),
        ("num_key_value_heads", "attention.head_count_kv"),
        ("num_attention_heads", "attention.head_count"),
        ("rms_norm_eps", "attention.layer_norm_rms_epsilon"),
        ("rope_theta", "rope.freq_base"),
        ("max_position_embeddings", "context_length"),
    ];
    (KEYS.iter())
        .find_map(|(field, key)| Some(format!("{arch}.{key}{}", message.strip_prefix(field)?)))
        .unwrap_or_else(|| message.to_string())
}
