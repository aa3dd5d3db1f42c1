//! The decoder families one model code serves, and the switches they differ by.
//!
//! Qwen2, Llama and Qwen3 are the same pre-norm decoder (RMSNorm, rotary attention with
//! grouped key/value heads, SwiGLU MLP); transformers' `modeling_qwen2.py`,
//! `modeling_llama.py` and `modeling_qwen3.py` differ only in:
//!
//! | family | q/k/v bias | o bias | q/k RMSNorm per head | `model_type` |
//! |---|---|---|---|---|
//! | Qwen2 | always | never | no | `qwen2` |
//! | Llama | `attention_bias` | `attention_bias` | no | `llama` |
//! | Qwen3 | `attention_bias` | `attention_bias` | yes (`q_norm`, `k_norm`) | `qwen3` |
//!
//! plus the rotary frequencies (`rope_scaling` of type `llama3`, [`crate::rope_scaling`]),
//! which transformers applies to any family.

/// A decoder family, from config.json's `model_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Qwen2 and Qwen2.5 (`model_type: "qwen2"`).
    Qwen2,
    /// Llama 2/3, SmolLM, TinyLlama (`model_type: "llama"`).
    Llama,
    /// Qwen3 dense models (`model_type: "qwen3"`).
    Qwen3,
}

/// `model_type` values and their families.
const FAMILIES: [(&str, Family, &str); 3] = [
    ("qwen2", Family::Qwen2, "Qwen2ForCausalLM"),
    ("llama", Family::Llama, "LlamaForCausalLM"),
    ("qwen3", Family::Qwen3, "Qwen3ForCausalLM"),
];

impl Family {
    /// The family of a `model_type`; the error lists the supported ones.
    pub fn from_model_type(model_type: &str) -> Result<Self, String> {
        FAMILIES
            .iter()
            .find(|(name, _, _)| *name == model_type)
            .map(|&(_, family, _)| family)
            .ok_or_else(|| {
                format!(
                    "model_type is \"{model_type}\"; supported: \"qwen2\" (Qwen2, Qwen2.5), \
                     \"llama\" (Llama, SmolLM) and \"qwen3\" (Qwen3)"
                )
            })
    }

    /// transformers' class name for config.json's `architectures`.
    pub fn architecture(&self) -> &'static str {
        FAMILIES
            .iter()
            .find(|(_, family, _)| family == self)
            .map(|&(_, _, class)| class)
            .expect("every family is listed")
    }
}

impl Family {
    /// Whether the q, k and v projections have biases, given config.json's
    /// `attention_bias`.
    pub fn qkv_bias(self, attention_bias: Option<bool>) -> bool {
        match self {
            Family::Qwen2 => true,
            Family::Llama | Family::Qwen3 => attention_bias.unwrap_or(false),
        }
    }

    /// Whether the output projection of attention has a bias.
    pub fn o_bias(self, attention_bias: Option<bool>) -> bool {
        match self {
            Family::Qwen2 => false,
            Family::Llama | Family::Qwen3 => attention_bias.unwrap_or(false),
        }
    }

    /// Whether queries and keys are RMS-normalised per head before the rotation (Qwen3's
    /// `q_norm`/`k_norm`, weight `[head_dim]`).
    pub fn qk_norm(self) -> bool {
        self == Family::Qwen3
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Qwen2Config;

    fn config(model_type: &str, attention_bias: Option<bool>) -> Qwen2Config {
        let mut c = Qwen2Config::tiny(&Default::default(), 10);
        c.model_type = model_type.into();
        c.attention_bias = attention_bias;
        c
    }

    #[test]
    fn switches_per_family() {
        let switches = |c: &Qwen2Config| (c.qkv_bias(), c.o_bias(), c.qk_norm());
        assert_eq!(switches(&config("qwen2", None)), (true, false, false));
        assert_eq!(switches(&config("llama", None)), (false, false, false));
        assert_eq!(switches(&config("llama", Some(true))), (true, true, false));
        assert_eq!(
            switches(&config("qwen3", Some(false))),
            (false, false, true)
        );
        assert_eq!(
            config("qwen3", None).family().architecture(),
            "Qwen3ForCausalLM"
        );
        let err = Family::from_model_type("gpt2").unwrap_err();
        assert!(
            err.contains("\"gpt2\"") && err.contains("\"llama\""),
            "{err}"
        );
    }
}
