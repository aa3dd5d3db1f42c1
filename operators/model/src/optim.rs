//! A model's optimizer as written under `optim:` in `models:`, and its range checks.
//!
//! Optimizer settings are configuration data here; the training loop reads them. AdamW
//! defaults follow PyTorch/verl (`betas (0.9, 0.999)`, `eps 1e-8`, `weight_decay 0.01`,
//! gradient clipping at norm 1.0); the schedule default is ROLL's cosine decay with linear
//! warmup. [`OptimSpec::validate`] refuses settings that would silently break training (a
//! NaN or negative rate, a moment decay of 1, a negative clip that turns descent into
//! ascent); `roll-flow validate` and the trainer both run it.

use serde::Deserialize;

/// The optimizer.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum OptimSpec {
    /// AdamW (Loshchilov & Hutter 2019), decoupled weight decay.
    AdamW {
        /// Peak learning rate.
        #[serde(default = "default_lr")]
        lr: f64,
        /// Exponential decay rates of the first and second moment estimates.
        #[serde(default = "default_betas")]
        betas: (f64, f64),
        /// Added to the denominator for numerical stability.
        #[serde(default = "default_eps")]
        eps: f64,
        /// Decoupled weight decay coefficient.
        #[serde(default = "default_weight_decay")]
        weight_decay: f64,
        /// Steps of linear warmup from 0 to `lr`.
        #[serde(default)]
        warmup_steps: usize,
        /// Learning-rate schedule after warmup.
        #[serde(default)]
        schedule: LrSchedule,
        /// Final learning rate of the cosine schedule as a fraction of `lr`.
        #[serde(default)]
        min_lr_ratio: f64,
        /// Clip the global gradient norm to this value; `None` disables clipping.
        #[serde(default = "default_grad_clip")]
        grad_clip: Option<f64>,
        /// Non-finite updates in a row (each skipped, the weights kept) after which the
        /// run stops with an error. Default 3.
        #[serde(default = "default_max_nonfinite")]
        max_nonfinite: usize,
    },
}

fn default_lr() -> f64 {
    1e-6
}
fn default_betas() -> (f64, f64) {
    (0.9, 0.999)
}
fn default_eps() -> f64 {
    1e-8
}
fn default_weight_decay() -> f64 {
    0.01
}
fn default_grad_clip() -> Option<f64> {
    Some(1.0)
}
fn default_max_nonfinite() -> usize {
    3
}

impl Default for OptimSpec {
    fn default() -> Self {
        OptimSpec::AdamW {
            lr: default_lr(),
            betas: default_betas(),
            eps: default_eps(),
            weight_decay: default_weight_decay(),
            warmup_steps: 0,
            schedule: LrSchedule::default(),
            min_lr_ratio: 0.0,
            grad_clip: default_grad_clip(),
            max_nonfinite: default_max_nonfinite(),
        }
    }
}

/// How the learning rate evolves after warmup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum LrSchedule {
    /// Constant at `lr`.
    Constant,
    /// Cosine decay from `lr` to `min_lr_ratio * lr` over the run's steps (ROLL's default).
    #[default]
    Cosine,
}

/// An `optim:` setting outside its valid range.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("`{field}` {problem}")]
pub struct OptimRangeError {
    /// The offending field of `AdamW(..)`, as written in RON.
    pub field: &'static str,
    /// What is wrong and what the valid range is.
    pub problem: String,
}

fn out_of_range(field: &'static str, problem: String) -> Result<(), OptimRangeError> {
    Err(OptimRangeError { field, problem })
}

impl OptimSpec {
    /// Checks every setting's range for a run of `total_steps` training steps.
    pub fn validate(&self, total_steps: u64) -> Result<(), OptimRangeError> {
        let OptimSpec::AdamW {
            lr,
            betas,
            eps,
            weight_decay,
            warmup_steps,
            schedule: _,
            min_lr_ratio,
            grad_clip,
            max_nonfinite,
        } = self;
        if *max_nonfinite == 0 {
            return out_of_range("max_nonfinite", "must be at least 1".into());
        }
        if !(lr.is_finite() && *lr >= 0.0) {
            return out_of_range("lr", format!("must be a finite number >= 0, got {lr}"));
        }
        for beta in [betas.0, betas.1] {
            if !(0.0..1.0).contains(&beta) {
                return out_of_range(
                    "betas",
                    format!(
                        "must both be in [0, 1), got ({}, {}); PyTorch's default is (0.9, 0.999)",
                        betas.0, betas.1
                    ),
                );
            }
        }
        if !(eps.is_finite() && *eps > 0.0) {
            return out_of_range(
                "eps",
                format!("must be > 0, got {eps} (the default is 1e-8)"),
            );
        }
        if !(weight_decay.is_finite() && *weight_decay >= 0.0) {
            return out_of_range(
                "weight_decay",
                format!("must be a finite number >= 0, got {weight_decay}"),
            );
        }
        if !(0.0..=1.0).contains(min_lr_ratio) {
            return out_of_range(
                "min_lr_ratio",
                format!("must be in [0, 1] (a fraction of `lr`), got {min_lr_ratio}"),
            );
        }
        if *warmup_steps as u64 > total_steps {
            return out_of_range(
                "warmup_steps",
                format!(
                    "({warmup_steps}) exceeds the run's {total_steps} steps, so the learning rate \
                     would never reach `lr`; use at most {total_steps}"
                ),
            );
        }
        if let Some(clip) = grad_clip {
            if !(clip.is_finite() && *clip > 0.0) {
                return out_of_range(
                    "grad_clip",
                    format!(
                        "must be > 0, got {clip} (a negative norm reverses the update, 0 zeroes \
                         it); write `grad_clip: None` to turn clipping off"
                    ),
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default AdamW with one field changed, as RON would give it.
    fn adamw(settings: &str) -> OptimSpec {
        ron::Options::default()
            .with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME)
            .from_str(&format!("AdamW({settings})"))
            .unwrap()
    }

    fn problem(settings: &str, steps: u64) -> (&'static str, String) {
        let err = adamw(settings).validate(steps).unwrap_err();
        (err.field, err.to_string())
    }

    #[test]
    fn defaults_and_edges_of_the_ranges_pass() {
        assert_eq!(OptimSpec::default().validate(1), Ok(()));
        let edges = "lr: 0.0, betas: (0.0, 0.999999), weight_decay: 0.0, min_lr_ratio: 1.0, \
                     warmup_steps: 10, grad_clip: 1e-6";
        assert_eq!(adamw(edges).validate(10), Ok(()));
        assert_eq!(adamw("grad_clip: None").validate(10), Ok(()));
    }

    #[test]
    fn each_out_of_range_setting_is_named_with_its_range() {
        let cases: [(&str, &str, &str); 10] = [
            ("lr: NaN", "lr", "`lr` must be a finite number >= 0, got NaN"),
            ("lr: -1e-3", "lr", "`lr` must be a finite number >= 0, got -0.001"),
            (
                "betas: (0.9, 1.0)",
                "betas",
                "`betas` must both be in [0, 1), got (0.9, 1); PyTorch's default is (0.9, 0.999)",
            ),
            (
                "betas: (-0.1, 0.999)",
                "betas",
                "`betas` must both be in [0, 1), got (-0.1, 0.999); PyTorch's default is (0.9, 0.999)",
            ),
            ("eps: 0.0", "eps", "`eps` must be > 0, got 0 (the default is 1e-8)"),
            (
                "weight_decay: -0.01",
                "weight_decay",
                "`weight_decay` must be a finite number >= 0, got -0.01",
            ),
            (
                "min_lr_ratio: 1.5",
                "min_lr_ratio",
                "`min_lr_ratio` must be in [0, 1] (a fraction of `lr`), got 1.5",
            ),
            (
                "warmup_steps: 11",
                "warmup_steps",
                "`warmup_steps` (11) exceeds the run's 10 steps, so the learning rate would \
                 never reach `lr`; use at most 10",
            ),
            (
                "grad_clip: -1.0",
                "grad_clip",
                "`grad_clip` must be > 0, got -1 (a negative norm reverses the update, 0 \
                 zeroes it); write `grad_clip: None` to turn clipping off",
            ),
            (
                "grad_clip: 0.0",
                "grad_clip",
                "`grad_clip` must be > 0, got 0 (a negative norm reverses the update, 0 \
                 zeroes it); write `grad_clip: None` to turn clipping off",
            ),
        ];
        for (settings, field, message) in cases {
            assert_eq!(
                problem(settings, 10),
                (field, message.to_string()),
                "{settings}"
            );
        }
    }
}
