//! LoRA settings of a model, as written under `lora:` in `models:`:
//!
//! ```ron
//! "policy": (arch: Gguf("m/SmolLM2.gguf"), lora: (rank: 8, alpha: 16, targets: ["q_proj", "v_proj"])),
//! ```
//!
//! Low-rank adaptation (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language
//! Models"), with PEFT's conventions (`peft/tuners/lora/config.py`, `layer.py`): each
//! targeted linear layer `y = x W + b` becomes `y = x W + b + (alpha / rank) · (dropout(x)
//! A) B` with `A: [in, rank]` and `B: [rank, out]` (burn's `[in, out]` layout; PEFT's
//! `lora_A.weight` is `Aᵀ`, `lora_B.weight` is `Bᵀ`); only `A` and `B` train. Defaults are
//! PEFT's `LoraConfig`: rank 8, alpha 8, dropout 0, and for the Llama/Qwen families the
//! targets `["q_proj", "v_proj"]`.

use serde::Deserialize;

/// The linear layers of a decoder layer an adapter may target, by their Hugging Face
/// names (the last part of the module path, as PEFT's `target_modules` matches them).
pub const TARGET_NAMES: [&str; 7] = [
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
];

/// `lora: (rank, alpha, targets, dropout)`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoraSpec {
    /// Rank `r` of each adapter (PEFT's `r`); default 8.
    pub rank: usize,
    /// Scale numerator: the update is multiplied by `alpha / rank` (PEFT's `lora_alpha`);
    /// default 8.
    pub alpha: f64,
    /// Names of the linear layers that get adapters, among [`TARGET_NAMES`] (PEFT's
    /// `target_modules`); default `["q_proj", "v_proj"]`.
    pub targets: Vec<String>,
    /// Dropout probability on the adapter's input while training (PEFT's `lora_dropout`),
    /// masks drawn from the step's seed ([`crate::qwen2::dropout_masks`]); default 0.
    pub dropout: f64,
}

impl Default for LoraSpec {
    fn default() -> Self {
        LoraSpec {
            rank: 8,
            alpha: 8.0,
            targets: vec!["q_proj".into(), "v_proj".into()],
            dropout: 0.0,
        }
    }
}

/// A `lora:` setting out of its range: the field (as written in RON), what is wrong and
/// the fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("`{field}` {problem}")]
pub struct LoraSettingError {
    /// The offending field of `lora: (..)`.
    pub field: &'static str,
    /// What is wrong and how to fix it.
    pub problem: String,
}

impl LoraSpec {
    /// `alpha / rank`, the factor of every adapter's output.
    pub fn scale(&self) -> f64 {
        self.alpha / self.rank as f64
    }

    /// Whether the linear layer `name` (e.g. `q_proj`) gets an adapter.
    pub fn targets(&self, name: &str) -> bool {
        self.targets.iter().any(|t| t == name)
    }

    /// Whether `other` attaches the same adapters with the same scale and dropout: the
    /// targets compared as a set (adapters attach in the decoder's order whatever the
    /// list's), rank, alpha and dropout exactly.
    pub fn same_as(&self, other: &LoraSpec) -> bool {
        let mut mine: Vec<&String> = self.targets.iter().collect();
        let mut theirs: Vec<&String> = other.targets.iter().collect();
        mine.sort();
        theirs.sort();
        (self.rank, self.alpha, self.dropout) == (other.rank, other.alpha, other.dropout)
            && mine == theirs
    }

    /// Checks every field's range and the target names.
    pub fn validate(&self) -> Result<(), LoraSettingError> {
        let err = |field, problem: String| Err(LoraSettingError { field, problem });
        if self.rank == 0 {
            return err(
                "rank",
                "must be at least 1, got 0; PEFT's default is 8 (`rank: 8`)".into(),
            );
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return err(
                "alpha",
                format!(
                    "must be a finite number > 0, got {}; the update is scaled by alpha / rank \
                     (PEFT's default alpha is 8, often written as twice the rank)",
                    self.alpha
                ),
            );
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return err(
                "dropout",
                format!(
                    "must be in [0, 1), got {} (PEFT's default is 0.0)",
                    self.dropout
                ),
            );
        }
        if self.targets.is_empty() {
            return err(
                "targets",
                format!(
                    "is empty, so nothing would train; name some of {}",
                    TARGET_NAMES.join(", ")
                ),
            );
        }
        for (i, target) in self.targets.iter().enumerate() {
            if !TARGET_NAMES.contains(&target.as_str()) {
                return err(
                    "targets",
                    format!(
                        "has an unknown layer name \"{target}\"; the decoder's linear layers \
                         are {}",
                        TARGET_NAMES.join(", ")
                    ),
                );
            }
            if self.targets[..i].contains(target) {
                return err(
                    "targets",
                    format!("names \"{target}\" twice; write each layer once"),
                );
            }
        }
        Ok(())
    }
}

/// As written in a pipeline file: `(rank: 8, alpha: 16, targets: ["q_proj", "v_proj"],
/// dropout: 0)`.
impl std::fmt::Display for LoraSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let targets: Vec<String> = self.targets.iter().map(|t| format!("{t:?}")).collect();
        write!(
            f,
            "(rank: {}, alpha: {}, targets: [{}], dropout: {})",
            self.rank,
            self.alpha,
            targets.join(", "),
            self.dropout
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> LoraSpec {
        roll_flow_engine::spec::ron_options()
            .from_str(text)
            .unwrap()
    }

    #[test]
    fn defaults_are_peft_defaults() {
        let spec = parse("()");
        assert_eq!(spec, LoraSpec::default());
        assert_eq!((spec.rank, spec.alpha, spec.dropout), (8, 8.0, 0.0));
        assert_eq!(spec.targets, ["q_proj", "v_proj"]);
        assert_eq!(spec.scale(), 1.0);
        assert_eq!(spec.validate(), Ok(()));
        let spec = parse("(rank: 4, alpha: 16, targets: [\"down_proj\"])");
        assert_eq!(spec.scale(), 4.0);
        assert!(spec.targets("down_proj") && !spec.targets("q_proj"));
    }

    #[test]
    fn settings_compare_targets_as_a_set_and_print_as_written() {
        let spec = parse("(rank: 4, alpha: 16, targets: [\"q_proj\", \"v_proj\"])");
        assert!(spec.same_as(&parse(
            "(rank: 4, alpha: 16, targets: [\"v_proj\", \"q_proj\"])"
        )));
        for other in [
            "(rank: 4, alpha: 16, targets: [\"k_proj\", \"o_proj\"])",
            "(rank: 4, alpha: 16, targets: [\"q_proj\"])",
            "(rank: 4, alpha: 64, targets: [\"q_proj\", \"v_proj\"])",
            "(rank: 2, alpha: 16, targets: [\"q_proj\", \"v_proj\"])",
            "(rank: 4, alpha: 16, targets: [\"q_proj\", \"v_proj\"], dropout: 0.1)",
        ] {
            assert!(!spec.same_as(&parse(other)), "{other}");
        }
        assert_eq!(
            spec.to_string(),
            "(rank: 4, alpha: 16, targets: [\"q_proj\", \"v_proj\"], dropout: 0)"
        );
        assert!(parse(&spec.to_string()).same_as(&spec));
    }

    #[test]
    fn bad_settings_name_the_field_and_the_fix() {
        let cases = [
            (
                "(rank: 0)",
                "rank",
                "`rank` must be at least 1, got 0; PEFT's default is 8 (`rank: 8`)",
            ),
            (
                "(alpha: 0.0)",
                "alpha",
                "`alpha` must be a finite number > 0, got 0; the update is scaled by alpha / \
                 rank (PEFT's default alpha is 8, often written as twice the rank)",
            ),
            (
                "(dropout: 1.0)",
                "dropout",
                "`dropout` must be in [0, 1), got 1 (PEFT's default is 0.0)",
            ),
            (
                "(targets: [\"q_proj\", \"qproj\"])",
                "targets",
                "`targets` has an unknown layer name \"qproj\"; the decoder's linear layers \
                 are q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj",
            ),
            (
                "(targets: [])",
                "targets",
                "`targets` is empty, so nothing would train; name some of q_proj, k_proj, \
                 v_proj, o_proj, gate_proj, up_proj, down_proj",
            ),
            (
                "(targets: [\"v_proj\", \"v_proj\"])",
                "targets",
                "`targets` names \"v_proj\" twice; write each layer once",
            ),
        ];
        for (text, field, message) in cases {
            let err = parse(text).validate().unwrap_err();
            assert_eq!(
                (err.field, err.to_string()),
                (field, message.into()),
                "{text}"
            );
        }
    }
}
