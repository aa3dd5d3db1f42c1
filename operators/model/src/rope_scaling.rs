//! Rotary frequencies: plain (`inv_freq_i = θ^(−2i/d)`) or rescaled by Llama 3's
//! `rope_scaling` (`rope_type: "llama3"`, transformers' `modeling_rope_utils.py`,
//! `_compute_llama3_parameters`):
//!
//! with `wavelen_i = 2π / inv_freq_i`, `low = original_max_position_embeddings /
//! low_freq_factor`, `high = original_max_position_embeddings / high_freq_factor`:
//! - `wavelen_i > low` (low frequencies): `inv_freq_i / factor`;
//! - `wavelen_i < high` (high frequencies): unchanged;
//! - otherwise, with `s = (original / wavelen_i − low_freq_factor) / (high_freq_factor −
//!   low_freq_factor)`: `(1 − s)·inv_freq_i / factor + s·inv_freq_i`.
//!
//! The attention scale is unchanged (`attention_factor` 1 for `llama3`).

use serde_json::Value;

use crate::config::Qwen2Config;

/// Llama 3's frequency rescaling.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Llama3Rope {
    /// `factor`: how much the low frequencies are slowed.
    pub factor: f64,
    /// `low_freq_factor`.
    pub low_freq_factor: f64,
    /// `high_freq_factor`.
    pub high_freq_factor: f64,
    /// `original_max_position_embeddings`: the context the model was pretrained at.
    pub original_max_position_embeddings: f64,
}

impl Qwen2Config {
    /// The rope scaling of `rope_parameters` (transformers >= 5) or `rope_scaling`: `None`
    /// for plain rotary embeddings; an error names an unsupported type or a missing field.
    pub fn llama3_rope(&self) -> Result<Option<Llama3Rope>, String> {
        let declared = [
            ("rope_parameters", &self.rope_parameters),
            ("rope_scaling", &self.rope_scaling),
        ];
        for (key, value) in declared {
            let Some(Value::Object(map)) = value else {
                if value.as_ref().is_some_and(|v| !v.is_null()) {
                    return Err(format!("{key} must be an object"));
                }
                continue;
            };
            let kind = map
                .get("rope_type")
                .or_else(|| map.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("default");
            match kind {
                "default" => continue,
                "llama3" => {}
                other => {
                    return Err(format!(
                        "{key}: rope type \"{other}\" is not supported; only \"default\" and \"llama3\""
                    ))
                }
            }
            let field = |name: &str| {
                map.get(name)
                    .and_then(Value::as_f64)
                    .filter(|v| v.is_finite() && *v > 0.0)
                    .ok_or_else(|| format!("{key}: llama3 rope needs a positive number `{name}`"))
            };
            let rope = Llama3Rope {
                factor: field("factor")?,
                low_freq_factor: field("low_freq_factor")?,
                high_freq_factor: field("high_freq_factor")?,
                original_max_position_embeddings: field("original_max_position_embeddings")?,
            };
            if rope.high_freq_factor <= rope.low_freq_factor {
                return Err(format!(
                    "{key}: high_freq_factor {} must be above low_freq_factor {}",
                    rope.high_freq_factor, rope.low_freq_factor
                ));
            }
            return Ok(Some(rope));
        }
        Ok(None)
    }

    /// The rotary frequencies `inv_freq` of one head (`head_dim / 2` values).
    pub fn rope_inv_freq(&self) -> Vec<f32> {
        let plain = plain_inv_freq(self.head_dim(), self.rope_theta);
        match self.llama3_rope() {
            Ok(Some(rope)) => rope.rescale(&plain),
            _ => plain,
        }
    }
}

/// `θ^(−2i/d)` for `i < d/2`, computed in f64 and rounded to f32.
pub fn plain_inv_freq(head_dim: usize, theta: f64) -> Vec<f32> {
    (0..head_dim / 2)
        .map(|i| (1.0 / theta.powf((2 * i) as f64 / head_dim as f64)) as f32)
        .collect()
}

impl Llama3Rope {
    /// The rescaled frequencies, in f32 in transformers' order of operations.
    pub fn rescale(&self, inv_freq: &[f32]) -> Vec<f32> {
        let factor = self.factor as f32;
        let (low, high) = (self.low_freq_factor as f32, self.high_freq_factor as f32);
        let original = self.original_max_position_embeddings as f32;
        let (low_wavelen, high_wavelen) = (original / low, original / high);
        inv_freq
            .iter()
            .map(|&f| {
                let wavelen = (2.0 * std::f64::consts::PI) as f32 / f;
                let scaled = if wavelen > low_wavelen { f / factor } else { f };
                if wavelen < high_wavelen || wavelen > low_wavelen {
                    return scaled;
                }
                let smooth = (original / wavelen - low) / (high - low);
                (1.0 - smooth) * scaled / factor + smooth * scaled
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Llama 3.1's settings (factor 8, 1, 4, 8192) on a hand-checked spread of wavelengths:
    /// short ones unchanged, long ones divided by 8, one in between interpolated.
    #[test]
    fn llama3_rescaling_by_hand() {
        let rope = Llama3Rope {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192.0,
        };
        let tau = std::f32::consts::TAU;
        // Wavelengths 1000 (< 2048: high), 20000 (> 8192: low) and 4096 (between).
        let freqs = [tau / 1000.0, tau / 20000.0, tau / 4096.0];
        let out = rope.rescale(&freqs);
        assert_eq!(out[0], freqs[0]);
        assert_eq!(out[1], freqs[1] / 8.0);
        // s = (8192 / 4096 - 1) / 3 = 1/3: (2/3)·f/8 + (1/3)·f = f·(1/12 + 1/3) = 5f/12.
        assert!(
            (out[2] / freqs[2] - 5.0 / 12.0).abs() < 1e-5,
            "{}",
            out[2] / freqs[2]
        );
    }

    #[test]
    fn rope_fields_are_read_from_either_key_and_checked() {
        let mut c = Qwen2Config::tiny(&Default::default(), 10);
        assert_eq!(c.llama3_rope(), Ok(None));
        c.rope_scaling = Some(serde_json::json!({"type": "llama3", "factor": 8.0,
            "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}));
        assert_eq!(c.llama3_rope().unwrap().unwrap().factor, 8.0);
        c.rope_scaling = None;
        c.rope_parameters = Some(serde_json::json!({"rope_type": "llama3", "factor": 8.0}));
        let err = c.llama3_rope().unwrap_err();
        assert!(err.contains("`low_freq_factor`"), "{err}");
        c.rope_parameters = Some(serde_json::json!({"rope_type": "yarn"}));
        let err = c.llama3_rope().unwrap_err();
        assert!(err.contains("\"yarn\" is not supported"), "{err}");
        c.rope_parameters = Some(serde_json::json!({"rope_type": "default", "rope_theta": 5.0}));
        assert_eq!(c.llama3_rope(), Ok(None));
    }
}
